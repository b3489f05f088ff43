"""Traces on or off for this process (S26.1): the OpenTelemetry SDK, set up once, shut down at close.

`start` reads kernel.yaml's `telemetry:` section, or without one the
standard `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
variables, and makes a TracerProvider of our own (never the global one, so
a host application's stays its own) with a BatchSpanProcessor feeding the
OTLP exporter, HTTP/protobuf or gRPC; spans.py asks `active()` for it.
Without either, nothing is imported: the OpenTelemetry packages cost tens
of milliseconds to import, and a process that traces nothing pays nothing.
Each process sets up its own (`serve --workers N` runs N); `start` and
`close` are counted, so two kernels of one process share one exporter and
the last to close flushes it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentkernel.config.telemetry import TelemetrySettings
from agentkernel.util.lazy_log import LazyLogger

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

log = LazyLogger("agentkernel.telemetry")

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
DEFAULT_SERVICE = "agentkernel"
HTTP_TRACES_PATH = "/v1/traces"
SCOPE = "agentkernel"


@dataclass
class Tracing:
    """The process's tracing: its provider, its tracer, and what spans may carry."""

    provider: TracerProvider
    tracer: Tracer
    capture_content: bool
    record_user_ids: bool
    api: Api
    users: int = 1  # the kernels (servers) that started it and have not closed it yet


@dataclass(frozen=True)
class Api:
    """The few OpenTelemetry functions a span needs, looked up once (spans.py makes one a block)."""

    attach: Callable[[Any], Any]
    detach: Callable[[Any], None]
    in_context: Callable[[Any], Any]
    internal: Any
    client: Any


_lock = threading.Lock()
_active: Tracing | None = None


def active() -> Tracing | None:
    """This process's tracing, or None when traces are off (the usual case: one read)."""
    return _active


def wanted(settings: TelemetrySettings, environ: Mapping[str, str] | None = None) -> bool:
    """Whether traces are on: the section says so, or it is absent and an OTEL_* endpoint is set."""
    if settings.present:
        return settings.enabled
    env = os.environ if environ is None else environ
    return any(env.get(name) for name in ENDPOINT_VARIABLES)


def protocol(settings: TelemetrySettings, environ: Mapping[str, str] | None = None) -> str:
    """`http/protobuf` or `grpc`: the section's, else OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL's, else HTTP."""
    env = os.environ if environ is None else environ
    chosen = settings.protocol or next((env[n] for n in PROTOCOL_VARIABLES if env.get(n)), None)
    return "grpc" if chosen == "grpc" else "http/protobuf"


def start(settings: TelemetrySettings, environ: Mapping[str, str] | None = None) -> bool:
    """Set tracing up for this process when `wanted` (once; a second start only counts); whether it is on.

    A broken exporter set-up (a bad OTEL_* variable) is logged and leaves
    traces off: telemetry must never stop a server from starting.
    """
    global _active
    if not wanted(settings, environ):
        return _active is not None
    with _lock:
        if _active is not None:
            _active.users += 1
            return True
        try:
            _active = _made(settings, environ)
        except Exception:
            log.exception("traces are off: the OpenTelemetry exporter could not be set up")
            return False
    log.info("traces exported over OTLP (%s)", protocol(settings, environ))
    return True


def close() -> None:
    """One user of tracing done; the last flushes the spans still queued and shuts the exporter down."""
    global _active
    with _lock:
        if _active is None:
            return
        _active.users -= 1
        if _active.users > 0:
            return
        ending, _active = _active, None
    try:
        ending.provider.shutdown()  # the batch processor exports what it holds first
    except Exception:
        log.exception("flushing the last spans failed")


def flush(timeout_secs: float = 5.0) -> bool:
    """Export the spans queued now (a test's or a benchmark's wait); True when there were none left."""
    tracing = _active
    return True if tracing is None else tracing.provider.force_flush(int(timeout_secs * 1000))


def _made(settings: TelemetrySettings, environ: Mapping[str, str] | None) -> Tracing:
    """The provider and tracer; the SDK is imported here, and only here."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    env = os.environ if environ is None else environ
    service = settings.service_name or env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(_exporter(settings, environ)))
    from opentelemetry import context, trace

    api = Api(
        context.attach,
        context.detach,
        trace.set_span_in_context,
        trace.SpanKind.INTERNAL,
        trace.SpanKind.CLIENT,
    )
    return Tracing(
        provider,
        provider.get_tracer(SCOPE),
        capture_content=settings.capture_content,
        record_user_ids=settings.record_user_ids,
        api=api,
    )


def _exporter(settings: TelemetrySettings, environ: Mapping[str, str] | None) -> Any:
    """The OTLP span exporter: to the section's `endpoint`, else where the OTEL_* variables say."""
    endpoint = settings.endpoint
    if protocol(settings, environ) == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

        if endpoint is None:
            return Grpc()
        return Grpc(endpoint=endpoint, insecure=endpoint.startswith("http://"))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    if endpoint is None:
        return Http()
    return Http(endpoint=http_traces_url(endpoint))


def http_traces_url(endpoint: str) -> str:
    """The URL spans are posted to: `endpoint` as OTEL_EXPORTER_OTLP_ENDPOINT reads it, `/v1/traces` added."""
    base = endpoint.rstrip("/")
    return base if base.endswith(HTTP_TRACES_PATH) else base + HTTP_TRACES_PATH


__all__ = ["Api", "Tracing", "active", "close", "flush", "http_traces_url", "protocol", "start", "wanted"]
