"""A webhook receiver on 127.0.0.1: keeps every JSON body POSTed to it, and lets a test wait for them.

`status` is what it answers (200 by default; a test sets 500 to see
retries), once the answers `script` lists are given, one a POST, in order;
`wait_for(n)` returns once `n` bodies have arrived, `wait_until(check)` once
`check` holds for them: on a condition, never by polling.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class _Handler(BaseHTTPRequestHandler):
    server: WebhookReceiver

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the tests assert on the bodies."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status = self.server.next_status()
        self.server.keep(json.loads(body), dict(self.headers), status)
        if self.server.hold is not None:  # answer only once the test lets it (a call held mid-way)
            self.server.hold.wait(60)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


class WebhookReceiver(ThreadingHTTPServer):
    """`with WebhookReceiver() as hook:` … `hook.url`, `hook.bodies`, `hook.wait_for(n)`."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status = 200
        self.script: list[int] = []  # the next answers, in order, before `status`
        self.hold: threading.Event | None = None  # set: each POST is kept, then answered once it is set
        self.bodies: list[dict[str, Any]] = []  # the accepted ones (2xx)
        self.attempts: list[dict[str, Any]] = []  # every POST, refused ones too
        self.headers: list[dict[str, str]] = []
        self._arrived = threading.Condition()
        self._thread = threading.Thread(target=self.serve_forever, name="webhook", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"

    def next_status(self) -> int:
        with self._arrived:
            return self.script.pop(0) if self.script else self.status

    def keep(self, body: dict[str, Any], headers: dict[str, str], status: int) -> None:
        with self._arrived:
            self.attempts.append(body)
            self.headers.append(headers)
            if 200 <= status < 300:
                self.bodies.append(body)
            self._arrived.notify_all()

    def wait_for(self, count: int, *, attempts: bool = False, timeout: float = 60.0) -> list[dict[str, Any]]:
        """The first `count` bodies (accepted, or every attempt); AssertionError if they do not come."""
        with self._arrived:
            seen = self.attempts if attempts else self.bodies
            assert self._arrived.wait_for(lambda: len(seen) >= count, timeout), (
                f"waited for {count} webhook calls, got {len(seen)}"
            )
            return list(seen[:count])

    def wait_until(
        self, check: Callable[[list[dict[str, Any]]], bool], what: str, timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """The accepted bodies once `check` holds for them; AssertionError naming `what` if it never does."""
        with self._arrived:
            assert self._arrived.wait_for(lambda: check(self.bodies), timeout), (
                f"waited for {what}, got {self.bodies}"
            )
            return list(self.bodies)

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()
        self.server_close()
