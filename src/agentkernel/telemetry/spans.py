"""Spans as the kernel's parts make them (S26.1): a context manager that costs one read when traces are off.

`span(name, attributes)` opens a span as the current one (so whatever runs
inside, on this task or on a worker the pool hands the context to, is its
child) and yields a `Traced` to add attributes and events to; with traces
off it yields `OFF`, whose methods do nothing, and nothing is imported.
Attributes are plain values (None ones are dropped); an exception leaving
the block marks the span failed with its type (`error.type`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agentkernel.telemetry.tracing import Tracing, active

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span

Value = str | bool | int | float | Sequence[str] | Sequence[int] | None
SpanBlock = AbstractContextManager["Traced", None]
"""What `span` returns: a block that opens a span (or, traces off, does nothing)."""


class Traced:
    """One span being made, or none (`OFF`): what the code inside the span tells it."""

    __slots__ = ("_span",)

    def __init__(self, span: Span | None) -> None:
        self._span = span

    @property
    def recording(self) -> bool:
        """Whether anything said is kept (traces on, the span sampled): worth building attributes for."""
        return self._span is not None and self._span.is_recording()

    def set(self, attributes: Mapping[str, Value]) -> None:
        if self._span is not None:
            self._span.set_attributes(_kept(attributes))

    def event(self, name: str, attributes: Mapping[str, Value] | None = None) -> None:
        if self._span is not None:
            self._span.add_event(name, _kept(attributes or {}))

    def fail(self, error_type: str, description: str | None = None) -> None:
        """The operation failed: `error.type` set and the span's status an error (`description` said)."""
        if self._span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", error_type)
        self._span.set_status(Status(StatusCode.ERROR, description))


OFF = Traced(None)


class _Off:
    """The span of a process that traces nothing: enters as OFF, leaves as it came."""

    def __enter__(self) -> Traced:
        return OFF

    def __exit__(self, *exc: object) -> None:
        return None


NO_SPAN = _Off()


class _Live:
    """A span opened as the current one (OpenTelemetry's context), ended when the block ends.

    `start_span` and the context attached by hand, not `start_as_current_span`:
    its two layers of generator context managers cost more than the span.
    """

    __slots__ = ("_api", "_span", "_token")

    def __init__(
        self,
        tracing: Tracing,
        name: str,
        attributes: Mapping[str, Value],
        client: bool,
        parent: Context | None,
    ) -> None:
        api = self._api = tracing.api
        kind = api.client if client else api.internal
        self._span: Span = tracing.tracer.start_span(
            name, context=parent, kind=kind, attributes=_kept(attributes), record_exception=False
        )
        self._token: object = None

    def __enter__(self) -> Traced:
        self._token = self._api.attach(self._api.in_context(self._span))
        return Traced(self._span)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None:  # its type only: an exception's text may quote what a span must not carry
            from opentelemetry.trace import Status, StatusCode

            self._span.set_attribute("error.type", kind.__name__)
            self._span.set_status(Status(StatusCode.ERROR))
        self._span.end()
        self._api.detach(self._token)


def span(
    name: str,
    attributes: Mapping[str, Value] | None = None,
    *,
    client: bool = False,
    parent: Context | None = None,
) -> SpanBlock:
    """A span named `name` around a block (`with span(...) as traced:`); `client`: a call to another
    service (an LLM); `parent`: a context to hang it under instead of the current one (a stored
    traceparent, context.py)."""
    tracing = active()
    if tracing is None:
        return NO_SPAN
    return _Live(tracing, name, attributes or {}, client, parent)


def current() -> Traced:
    """The span the code runs in now (OFF when traces are off): to add an event to it from below."""
    if active() is None:
        return OFF
    from opentelemetry import trace

    return Traced(trace.get_current_span())


def _kept(attributes: Mapping[str, Value]) -> dict[str, Any]:
    """The attributes OpenTelemetry can carry: None values left out, sequences as lists."""
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in attributes.items()
        if value is not None
    }


__all__ = ["NO_SPAN", "OFF", "SpanBlock", "Traced", "Value", "current", "span"]
