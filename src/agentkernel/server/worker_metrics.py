"""A worker's metrics page (S26.2): `agentkernel worker --metrics-port` serves `GET /metrics` as serve does.

A worker has no HTTP API, yet its turns, LLM and tool calls, hooks and cron
runs happen there, so it counts them and serves the same page
(telemetry/metrics.py) on a port of its own, for a scraper. The same rule
as serve's `/metrics`: a valid bearer token of `server.tokens` unless
`telemetry.metrics_public: true`; with no tokens configured, only loopback
callers (and the page binds to 127.0.0.1 unless told otherwise); a token's
user is held to `server.requests_per_user_per_sec` (request_rates.py, the
page's own buckets), so a flood of scrapes costs the worker its refusals,
not a page made for each. Served by the standard library's threading HTTP
server: a scrape is one small page now and then, never on the worker's
event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from agentkernel.config.server import ServerSettings
from agentkernel.config.telemetry import TelemetrySettings
from agentkernel.errors import AgentKernelError
from agentkernel.server.identity import is_loopback, token_user
from agentkernel.server.request_rates import retry_after, user_rates
from agentkernel.telemetry import metrics

READ_TIMEOUT_SECS = 10.0


class MetricsPage:
    """The page on (host, port) in a thread of its own, until `close`."""

    def __init__(
        self,
        host: str,
        port: int,
        server: ServerSettings,
        telemetry: TelemetrySettings,
        pending: Callable[[], int],
        read_timeout_secs: float = READ_TIMEOUT_SECS,
    ) -> None:
        metrics.start()  # this process counts from now
        handler = _handler(server, telemetry, pending, read_timeout_secs)
        try:
            self._http = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise AgentKernelError(
                f"--metrics-port {port}: cannot serve the metrics on {host}: {exc}"
            ) from exc
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, name="metrics page", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/metrics"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()


def _handler(
    server: ServerSettings, telemetry: TelemetrySettings, pending: Callable[[], int], read_timeout_secs: float
) -> type[BaseHTTPRequestHandler]:
    rates = user_rates(server)  # one bucket per user of the tokens, for every request of the page

    class Handler(BaseHTTPRequestHandler):
        timeout = read_timeout_secs  # a caller that holds its connection open and sends nothing is dropped

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self._answer(HTTPStatus.NOT_FOUND, b"only /metrics is served here\n", "text/plain")
                return
            refusal = None if telemetry.metrics_public else self._refusal()
            if refusal is not None:
                self._answer(refusal, f"{refusal.phrase}\n".encode(), "text/plain")
                return
            if self._held():
                return
            body, content_type = metrics.page(pending(), self.headers.get("Accept", ""))
            self._answer(HTTPStatus.OK, body, content_type)

        def _refusal(self) -> HTTPStatus | None:
            if not server.tokens:
                return None if is_loopback(self.client_address[0]) else HTTPStatus.FORBIDDEN
            if token_user(self.headers.get("Authorization"), server) is not None:
                return None
            return HTTPStatus.UNAUTHORIZED

        def _held(self) -> bool:
            """True when the caller's token names a user past server.requests_per_user_per_sec, answered
            429 with `Retry-After` (as serve's rate_limit.py answers)."""
            user = token_user(self.headers.get("Authorization"), server)
            if rates is None or user is None:
                return False
            wait = rates.wait(user)
            if wait:
                text = f"{rates.refusal(user, wait)}\n".encode()
                self._answer(HTTPStatus.TOO_MANY_REQUESTS, text, "text/plain", retry_after(wait))
            return wait > 0

        def _answer(
            self, status: HTTPStatus, body: bytes, content_type: str, retry: int | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if status == HTTPStatus.UNAUTHORIZED:
                self.send_header("WWW-Authenticate", "Bearer")
            if retry is not None:
                self.send_header("Retry-After", str(retry))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Scrapes are not logged."""

    return Handler


__all__ = ["MetricsPage"]
