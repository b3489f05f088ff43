"""A real OTLP trace receiver on loopback: HTTP/protobuf (`POST /v1/traces`) or gRPC, spans decoded.

The exporter under test sends `ExportTraceServiceRequest`s exactly as it
would to a collector; the receiver decodes them with `opentelemetry-proto`
and keeps every span, flattened (`Span`: name, ids, parent, attributes,
events, resource). A test waits for the spans it expects (`wait_for`),
never for a time.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

WAIT_SECS = 60.0  # an upper bound for spans to arrive, never a measured time
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Span:
    """One received span, its ids as hex (as a `traceparent` writes them)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    events: tuple[tuple[str, dict[str, Any]], ...]
    resource: dict[str, Any]
    status_code: int = 0

    def event(self, name: str) -> dict[str, Any] | None:
        return next((attrs for found, attrs in self.events if found == name), None)


@dataclass
class Received:
    """The spans received so far, and a condition to wait on for more."""

    spans: list[Span] = field(default_factory=list)
    requests: int = 0
    headers: list[dict[str, str]] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def take(self, request: ExportTraceServiceRequest, headers: dict[str, str]) -> None:
        found = list(_spans(request))
        with self._changed:
            self.spans.extend(found)
            self.requests += 1
            self.headers.append(headers)
            self._changed.notify_all()

    def wait_for(self, check: Callable[[list[Span]], bool], what: str) -> list[Span]:
        """The spans once `check` holds for them; AssertionError naming `what` if it never does."""
        with self._changed:
            held = self._changed.wait_for(lambda: check(list(self.spans)), timeout=WAIT_SECS)
            assert held, f"gave up waiting for {what}; received: {[s.name for s in self.spans]}"
            return list(self.spans)

    def named(self, name: str) -> list[Span]:
        with self._changed:
            return [s for s in self.spans if s.name == name]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return None if kind is None else getattr(value, kind)


def _spans(request: ExportTraceServiceRequest) -> Iterator[Span]:
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield Span(
                    span.name,
                    span.trace_id.hex(),
                    span.span_id.hex(),
                    span.parent_span_id.hex(),
                    span.kind,
                    {kv.key: _value(kv.value) for kv in span.attributes},
                    tuple((e.name, {kv.key: _value(kv.value) for kv in e.attributes}) for e in span.events),
                    resource,
                    span.status.code,
                )


@contextmanager
def http_receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/HTTP receiver: its endpoint (`http://127.0.0.1:PORT`) and what it received."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            received.take(request, {k.lower(): v for k, v in self.headers.items()})
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def grpc_receiver() -> Iterator[tuple[str, Received]]:
    """An OTLP/gRPC receiver (insecure, loopback): its endpoint and what it received.

    The gRPC server runs in a child process (otlp_grpc.py) relaying each
    export to an HTTP receiver here: gRPC's threads in the test process
    would break every later fork of it (a server started with `preexec_fn`).
    """
    with http_receiver() as (http_endpoint, received):
        relay = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.otlp_grpc", http_endpoint],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert relay.stdout is not None and relay.stdin is not None
            port = relay.stdout.readline().strip()
            assert port.isdigit(), port
            yield f"http://127.0.0.1:{port}", received
        finally:
            if relay.stdin is not None:
                relay.stdin.close()
            try:
                relay.wait(timeout=WAIT_SECS)
            finally:
                if relay.poll() is None:
                    relay.kill()
                    relay.wait()


def by_id(spans: list[Span]) -> dict[str, Span]:
    return {span.span_id: span for span in spans}


def children(spans: list[Span], parent: Span) -> list[Span]:
    return [span for span in spans if span.parent_id == parent.span_id]


__all__ = ["Received", "Span", "by_id", "children", "grpc_receiver", "http_receiver"]
