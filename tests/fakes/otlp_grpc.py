"""An OTLP/gRPC receiver in a process of its own, relaying each export to an OTLP/HTTP receiver.

    python -m tests.fakes.otlp_grpc http://127.0.0.1:PORT

It prints the port it listens on (127.0.0.1, insecure), then serves until
its stdin closes. gRPC runs here, never in the test process: a process
with gRPC's threads running must not fork, and the tests start servers
with fork-then-exec (`preexec_fn`).
"""

from __future__ import annotations

import sys
import urllib.request
from concurrent import futures
from typing import Any

import grpc  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def main(http_endpoint: str) -> None:
    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: ExportTraceServiceRequest, context: Any) -> ExportTraceServiceResponse:
            relayed = urllib.request.Request(
                http_endpoint + "/v1/traces",
                data=request.SerializeToString(),
                headers={"Content-Type": "application/x-protobuf", "X-Received-Over": "grpc"},
            )
            with urllib.request.urlopen(relayed, timeout=30) as answer:
                answer.read()
            return ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()  # until the test closes it
    server.stop(None)


if __name__ == "__main__":
    main(sys.argv[1])
