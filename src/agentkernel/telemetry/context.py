"""W3C trace context in and out (S26.1): a caller's `traceparent` continued, ours sent on, a run's kept.

Only `traceparent` and `tracestate` cross (the W3C Trace Context
propagator): baggage a caller sends is neither read nor passed on, so
nothing of a request reaches an LLM server's logs through us. With traces
off every function here returns at once, imports nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from agentkernel.telemetry.tracing import active

if TYPE_CHECKING:
    from opentelemetry.context import Context

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current span's `traceparent` (and `tracestate`) to outgoing `headers`; nothing when off."""
    if active() is None:
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    TraceContextTextMapPropagator().inject(headers)


def current_traceparent() -> str | None:
    """The current span as a `traceparent` value (kept with a run to join its trace later), or None."""
    if active() is None:
        return None
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get(TRACEPARENT)


def remote(traceparent: str | None, tracestate: str | None = None) -> Context | None:
    """The context a received (or stored) `traceparent` names, to hang spans under; None when off, when
    there is none, or when it is malformed (then spans start a trace of their own)."""
    if active() is None or not traceparent:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {TRACEPARENT: traceparent}
    if tracestate:
        carrier[TRACESTATE] = tracestate
    context = TraceContextTextMapPropagator().extract(carrier)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


@contextmanager
def continued(headers: Mapping[str, str]) -> Iterator[None]:
    """Within the block, spans started are children of the `traceparent` in `headers` (a request's)."""
    context = remote(headers.get(TRACEPARENT), headers.get(TRACESTATE))
    if context is None:
        yield
        return
    from opentelemetry import context as otel_context

    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)


__all__ = ["TRACEPARENT", "continued", "current_traceparent", "inject", "remote"]
