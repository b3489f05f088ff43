"""Helper calls inside scripts as child spans (S26.1), and the W3C trace context sent on `http_*`.

The helper table (helpers/table.py) asks `helper_span` for a span around a
call of a traced helper; the helper modules give its attributes as plain
values. A helper's span is made only below a span that records — the tool
call's or the hook's — so with telemetry off (no TracerProvider, every span
a no-op), or a trace sampled out, `helper_span` answers None after one
context lookup and no attribute is built. A span is the current one while
the helper runs, so what the helper starts (an LLM call's `chat`, a nested
tool call, an HTTP request's `traceparent`) is its child.

Secrets never reach a span: the helper modules give no header, query string,
argument list or environment; every string attribute is also cleaned of the
environment's values (`secrets`: util/environment.py `Environment.values`),
so a token a script read with `env_var` and put in a URL path is `[REDACTED]`.
An exception's text is never recorded, only its type (`error.type`): a
helper's error message may quote what the script sent.

A process that never imported OpenTelemetry's API (no tracing of ours
started, no host application's) can have no span current: this module
looks for the API among the imported modules and imports nothing itself
until one records, so a command that traces nothing never loads it.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from contextvars import Token
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agentkernel.telemetry.tracing import active

if TYPE_CHECKING:
    from opentelemetry import context
    from opentelemetry.trace import Span, Tracer, TracerProvider

TRACER_NAME = "agentkernel"
REDACTED = "[REDACTED]"
TRACE_HEADERS = ("traceparent", "tracestate")

AttributeValue = str | bool | int | float
Attributes = Mapping[str, AttributeValue]

_content = [False]  # telemetry.capture_content, process-wide as the TracerProvider is
_tracer_of: list[tuple[TracerProvider, Tracer]] = []  # the last provider's, one at a time


def _trace_api() -> Any:
    """`opentelemetry.trace` when this process has imported it; None: then no span is current."""
    return sys.modules.get("opentelemetry.trace")


@functools.cache
def _w3c() -> Any:
    """traceparent and tracestate only: no baggage to outside hosts."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def capture_content(on: bool) -> None:
    """Set whether spans may carry contents (`telemetry.capture_content`): a helper's SQL text."""
    _content[0] = on


def content_captured() -> bool:
    """`telemetry.capture_content`: the running tracing's (tracing.py), else as the kernel last set it
    (False by default)."""
    tracing = active()
    return tracing.capture_content if tracing is not None else _content[0]


class HelperSpan:
    """One helper call's span: current while the helper runs, ended on leaving, never failing the call."""

    __slots__ = ("_secrets", "_span", "_token")

    def __init__(self, span: Span, secrets: Callable[[], Iterable[str]]) -> None:
        self._span = span
        self._secrets = secrets
        self._token: Token[context.Context] | None = None

    def set(self, attributes: Attributes | None) -> None:
        """Add `attributes`, each string cleaned of the secrets; an `error.type` marks the call failed."""
        if not attributes:
            return
        hidden: list[str] | None = None
        for key, value in attributes.items():
            if isinstance(value, str) and value:
                if hidden is None:
                    hidden = sorted(self._secrets(), key=len, reverse=True)
                value = redacted(value, hidden)
            self._span.set_attribute(key, value)
        if "error.type" in attributes:
            from opentelemetry.trace import Status, StatusCode

            self._span.set_status(Status(StatusCode.ERROR))

    def __enter__(self) -> HelperSpan:
        from opentelemetry import context, trace

        self._token = context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if kind is not None:
                self.set({"error.type": kind.__name__})  # the type alone: the message may quote a secret
        finally:
            if self._token is not None:
                from opentelemetry import context

                context.detach(self._token)
            self._span.end()


def helper_span(name: str, *, client: bool, secrets: Callable[[], Iterable[str]]) -> HelperSpan | None:
    """A span named `name` (the helper), child of the current span; None unless both record.

    `client`: the call leaves the process (an HTTP request, a database
    file), SpanKind CLIENT; else INTERNAL. `secrets` gives the values no
    attribute may hold, asked for once, at the first string attribute.
    """
    trace = _trace_api()
    if trace is None or not trace.get_current_span().is_recording():  # off, sampled out, or outside a trace
        return None
    from opentelemetry.trace import SpanKind

    tracing = active()  # the kernel's own provider (tracing.py), else a host application's global one
    tracer = tracing.tracer if tracing is not None else _tracer(trace.get_tracer_provider())
    span = tracer.start_span(
        name,
        kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
        attributes={"agentkernel.helper": name},
        record_exception=False,
    )
    if not span.is_recording():
        return None
    return HelperSpan(span, secrets)


def _tracer(provider: TracerProvider) -> Tracer:
    """The kernel's tracer of `provider`, made once per provider (a test may set another)."""
    known = _tracer_of[0] if _tracer_of else None
    if known is None or known[0] is not provider:
        known = (provider, provider.get_tracer(TRACER_NAME))
        _tracer_of[:] = [known]
    return known[1]


def redacted(text: str, secrets: Iterable[str]) -> str:
    """`text` with every one of `secrets` in it replaced by `[REDACTED]` (give the longest first)."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def add_trace_context(headers: MutableMapping[str, str]) -> None:
    """Add W3C `traceparent` (and `tracestate`) of the current span to an outgoing request's headers.

    Headers a script gave itself win: when either name is there already (in
    any case), nothing is added, so a script relaying another trace keeps it.
    Without a valid current span (telemetry off) nothing is added.
    """
    trace = _trace_api()
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return
    if any(name.lower() in TRACE_HEADERS for name in headers):
        return
    _w3c().inject(headers)


__all__ = [
    "REDACTED",
    "TRACER_NAME",
    "AttributeValue",
    "Attributes",
    "HelperSpan",
    "add_trace_context",
    "capture_content",
    "content_captured",
    "helper_span",
    "redacted",
]
