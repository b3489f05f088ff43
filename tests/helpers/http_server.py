"""A real HTTP server on 127.0.0.1 with the routes the HTTP helper tests need.

Every route is something a hostile or broken server does to a client:

    /echo            200, JSON of what arrived: method, path, headers, body, content type, client port
    /status/N        status N, body "status N"
    /slow?secs=S     answers after S seconds
    /drip?n=N        promises N bytes, then sends one every 0.1 s (per-read timeouts never fire)
                     (both note their request in `answered` once they have sent it all)
    /redirect?to=U&code=C   C (default 302) to U
    /redirect-big?to=U      302 to U that also promises a 1 GiB body
    /loop            302 to itself, forever
    /huge[?declared=1]      streams up to 1 GiB (with a Content-Length saying so when declared)
    /gzip?mb=N       N MiB of zeros, gzip-encoded (a decompression bomb); /gzip?text=T: T gzipped
    /deflate-raw?text=T     T as raw deflate, as some servers send "deflate"
    /encoded?as=E    a body claiming Content-Encoding E
    /reset           reads the request, then resets the connection (RST)
    /bad-utf8        bytes that are not UTF-8
    /set-cookie      sets a cookie

Waits are cut short by `stop()`, and the threads are daemons, so a test
never waits on the server. `requests` counts what arrived; `huge_sent`
counts the bytes /huge managed to push before the client hung up; `answered`
tells whether /slow or /drip had finished a request (by its path and query)
when a client came back, which is how a test sees that a timeout fired early
without reading a clock.
"""

from __future__ import annotations

import gzip
import json
import socket
import struct
import threading
import zlib
from collections.abc import Callable
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

GiB = 1 << 30
CHUNK = b"x" * 65536


@cache
def gzip_bomb(mebibytes: int) -> bytes:
    return gzip.compress(b"\0" * (mebibytes << 20), compresslevel=9)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall
    server: LocalHTTPServer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the tests assert on results, not on the server's log."""

    def _route(self) -> None:
        parts = urlsplit(self.path)
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.count(parts.path)
        route = parts.path.strip("/").split("/")[0].replace("-", "_") or "echo"
        handler: Callable[[str, dict[str, str], bytes], None] | None = getattr(self, f"r_{route}", None)
        if handler is None:
            self.reply(404, b"no such route")
        else:
            handler(parts.path, query, body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_HEAD = _route

    def reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def r_echo(self, path: str, query: dict[str, str], body: bytes) -> None:
        seen = {
            "method": self.command,
            "path": self.path,
            "headers": {name.lower(): value for name, value in self.headers.items()},
            "body": body.decode("utf-8", errors="replace"),
            "content_type": self.headers.get("Content-Type"),
            "client_port": self.client_address[1],
        }
        self.reply(200, json.dumps(seen).encode(), {"Content-Type": "application/json"})

    def r_status(self, path: str, query: dict[str, str], body: bytes) -> None:
        code = int(path.rsplit("/", 1)[1])
        self.reply(code, f"status {code}".encode())

    def r_slow(self, path: str, query: dict[str, str], body: bytes) -> None:
        self.server.stopping.wait(float(query.get("secs", "5")))
        self.server.mark_answered(self.path)
        self.reply(200, b"slow done")

    def r_drip(self, path: str, query: dict[str, str], body: bytes) -> None:
        count = int(query.get("n", "100"))
        self.send_response(200)
        self.send_header("Content-Length", str(count))
        self.end_headers()
        for _ in range(count):
            if self.server.stopping.wait(0.1):
                return
            self.wfile.write(b".")
            self.wfile.flush()
        self.server.mark_answered(self.path)

    def r_redirect(self, path: str, query: dict[str, str], body: bytes) -> None:
        self.reply(int(query.get("code", "302")), b"moving", {"Location": query["to"]})

    def r_redirect_big(self, path: str, query: dict[str, str], body: bytes) -> None:
        self.send_response(302)
        self.send_header("Location", query["to"])
        self.send_header("Content-Length", str(GiB))
        self.end_headers()
        self._stream(GiB)

    def r_loop(self, path: str, query: dict[str, str], body: bytes) -> None:
        self.reply(302, b"again", {"Location": "/loop"})

    def r_huge(self, path: str, query: dict[str, str], body: bytes) -> None:
        self.send_response(200)
        if query.get("declared"):
            self.send_header("Content-Length", str(GiB))
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self._stream(GiB)

    def _stream(self, total: int) -> None:
        sent = 0
        try:
            while sent < total and not self.server.stopping.is_set():
                self.wfile.write(CHUNK)
                sent += len(CHUNK)
                self.server.add_sent(len(CHUNK))
        except OSError:
            self.close_connection = True  # the client hung up: what the cap is meant to do

    def r_gzip(self, path: str, query: dict[str, str], body: bytes) -> None:
        if "text" in query:
            data = gzip.compress(query["text"].encode())
        else:
            data = gzip_bomb(int(query.get("mb", "20")))
        self.reply(200, data, {"Content-Encoding": "gzip"})

    def r_deflate_raw(self, path: str, query: dict[str, str], body: bytes) -> None:
        squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        data = squeeze.compress(query["text"].encode()) + squeeze.flush()
        self.reply(200, data, {"Content-Encoding": "deflate"})

    def r_encoded(self, path: str, query: dict[str, str], body: bytes) -> None:
        self.reply(200, b"\x8b\x00\x80garbage", {"Content-Encoding": query["as"]})

    def r_reset(self, path: str, query: dict[str, str], body: bytes) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def r_bad_utf8(self, path: str, query: dict[str, str], body: bytes) -> None:
        self.reply(200, b"ok \xff\xfe end")

    def r_set_cookie(self, path: str, query: dict[str, str], body: bytes) -> None:
        self.reply(200, b"cookie set", {"Set-Cookie": "session=secret-of-another-script; Path=/"})


class LocalHTTPServer(ThreadingHTTPServer):
    """The server; use as a context manager, `base` is `http://127.0.0.1:PORT` (`http://[::1]:PORT`)."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, host: str = "127.0.0.1") -> None:
        """`host` is 127.0.0.1 or, for the IPv6 tests, ::1."""
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, 0), _Handler)
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self.requests: dict[str, int] = {}
        self.huge_sent = 0
        self._answered: set[str] = set()
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def handle_error(self, request: object, client_address: object) -> None:
        """A client hanging up mid-answer is what half of these routes are for: not an error."""

    @property
    def base(self) -> str:
        host = str(self.server_address[0])
        return f"http://{f'[{host}]' if ':' in host else host}:{self.server_address[1]}"

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def count(self, path: str) -> None:
        with self._lock:
            self.requests[path] = self.requests.get(path, 0) + 1

    def add_sent(self, size: int) -> None:
        with self._lock:
            self.huge_sent += size

    def mark_answered(self, path: str) -> None:
        with self._lock:
            self._answered.add(path)

    def answered(self, path: str) -> bool:
        """Whether /slow or /drip had sent all of its answer to the request for `path` (with query)."""
        with self._lock:
            return path in self._answered

    def total_requests(self) -> int:
        with self._lock:
            return sum(self.requests.values())

    def __enter__(self) -> LocalHTTPServer:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)
