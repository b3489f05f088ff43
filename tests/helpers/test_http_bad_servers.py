"""Issue 9 item 10: a server's malformed answer is one clean failure and one log line, never a traceback.

A real server on 127.0.0.1 writes raw bytes no well-behaved server would:
a `Location` that is no URL (a port past 2^64, an IDNA label the codec
refuses), a bad `Content-Length`, a broken chunk, a body that does not
decompress, a `Set-Cookie` date that trips the standard library's cookie
parser, a status line that is not one. Each call, from a JavaScript and a
Rhai tool, ends as `{status: 0, error}` with a reason (S8.2); the kernel
log gets one line for it and no traceback, and no warning is printed.
"""

from __future__ import annotations

import logging
import socket
import threading
import warnings
from collections.abc import Callable, Iterator

import pytest

from agentkernel.types import JSONValue
from tests.conftest import ToolFactory
from tests.helpers.http_kernels import Kernels, probe

HEAD_END = b"\r\n\r\n"


class RawServer:
    """Answers `GET /N` with the N-th raw response, byte for byte, then closes the connection."""

    def __init__(self, responses: list[bytes]) -> None:
        self.responses = responses
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self.base = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RawServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._socket.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(5)
            request = b""
            while HEAD_END not in request:
                chunk = connection.recv(4096)
                if not chunk:
                    return
                request += chunk
            index = int(request.split(b" ", 2)[1].strip(b"/") or b"0")
            connection.sendall(self.responses[index])


def redirect(location: bytes) -> bytes:
    return b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\nContent-Length: 0\r\n\r\n"


def answer(headers: bytes, body: bytes = b"ok") -> bytes:
    return b"HTTP/1.1 200 OK\r\n" + headers + b"\r\n\r\n" + body


# (what the server does wrong, its raw answer, the start of the script's `error` after `METHOD URL: `)
BAD_ANSWERS = [
    ("location port past 2^64", redirect(b"http://a:99999999999999999999/"),
     "redirect to http://a:99999999999999999999/: port 99999999999999999999 is out of range (1 to 65535)"),
    ("location port negative", redirect(b"http://a:-1/"),
     "redirect to http://a:-1/: port -1 is out of range"),
    ("location IPv6 unclosed", redirect(b"http://[::1"), "bad response: Invalid URL in location header"),
    ("location empty IDNA label", redirect(b"http://a..b/"), "redirect to http://a..b/: bad URL: "),
    ("location bad punycode", redirect(b"http://xn--a/"), "bad URL: "),
    ("content-length not a number", answer(b"Content-Length: abc"), "bad response: bad Content-Length"),
    ("content-length twice", answer(b"Content-Length: 2\r\nContent-Length: 3"),
     "bad response: conflicting Content-Length headers"),
    ("content-length too long", answer(b"Content-Length: 50"),
     "bad response: peer closed connection without sending complete message body"),
    ("chunk size not hex", answer(b"Transfer-Encoding: chunked", b"zz\r\nhello\r\n0\r\n\r\n"),
     "bad response: illegal chunk header"),
    ("chunked body cut", answer(b"Transfer-Encoding: chunked", b"5\r\nhel"), "bad response: peer closed"),
    ("gzip that is not", answer(b"Content-Encoding: gzip\r\nContent-Length: 5", b"hello"),
     "cannot decode the body: Error -3 while decompressing data"),
    ("unknown encoding", answer(b"Content-Encoding: br\r\nContent-Length: 2"),
     "cannot decode the body: unsupported Content-Encoding 'br'"),
    ("cookie with bytes", answer(b"Set-Cookie: \xff\xfe=\x00\r\nContent-Length: 2"),
     "bad response: illegal header"),
    ("status line", b"HTTP/1.1 abc OK\r\nContent-Length: 2\r\n\r\nok", "bad response: illegal status line"),
]  # fmt: skip

# Served fine, but they once printed a traceback: http.cookiejar's "bug!" warning for a bad date.
ODD_BUT_FINE = [
    ("cookie date out of this world",
     answer(b"Set-Cookie: a=b; Expires=Mon, 99 Foo 2020 99:99:99 GMT\r\nContent-Length: 2")),
    ("cookie max-age huge", answer(b"Set-Cookie: a=b; Max-Age=99999999999999999999999\r\nContent-Length: 2")),
    ("header value not ASCII", answer(b"X-Odd: \xff\xfe\r\nContent-Length: 2")),
]  # fmt: skip


@pytest.fixture(scope="module")
def raw_server() -> Iterator[RawServer]:
    with RawServer([raw for _, raw, _ in BAD_ANSWERS] + [raw for _, raw in ODD_BUT_FINE]) as running:
        yield running


@pytest.fixture
def log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """The kernel's log of the test; no Python warning may be printed meanwhile."""
    caplog.set_level(logging.DEBUG, logger="agentkernel")
    with warnings.catch_warnings(record=True) as printed:
        warnings.simplefilter("always")
        yield caplog
    assert [str(w.message) for w in printed] == []


def no_tracebacks(log: pytest.LogCaptureFixture) -> None:
    noisy = [
        r for r in log.records if r.levelno > logging.DEBUG and (r.exc_info or "Traceback" in r.getMessage())
    ]
    assert noisy == [], [r.getMessage() for r in noisy]


Fetch = Callable[[int], dict[str, JSONValue]]


@pytest.fixture
def fetch(kernels: Kernels, make_tool: ToolFactory, engine: str, raw_server: RawServer) -> Fetch:
    """`http_get` of the server's N-th answer from a tool of `engine`: `{status, body, error}`."""
    kernel = kernels.build()
    return lambda index: probe(kernel, make_tool, engine, f'http_get(u + "/{index}")', raw_server.base)


@pytest.mark.parametrize(
    ("index", "expected"), list(enumerate(e for _, _, e in BAD_ANSWERS)), ids=[n for n, _, _ in BAD_ANSWERS]
)
def test_a_malformed_answer_is_a_clean_failure_and_one_log_line(
    fetch: Fetch, raw_server: RawServer, log: pytest.LogCaptureFixture, index: int, expected: str
) -> None:
    result = fetch(index)
    prefix = f"http_get: GET {raw_server.base}/{index}: "
    assert result["status"] == 0 and result["body"] == "", result
    assert str(result["error"]).startswith(prefix + expected), result["error"]
    no_tracebacks(log)
    failures = [r for r in log.records if r.name == "agentkernel.http" and r.levelno >= logging.INFO]
    assert len(failures) == 1 and "\n" not in failures[0].getMessage()
    assert failures[0].getMessage().startswith(f"GET {raw_server.base}/{index} failed: ")


@pytest.mark.parametrize("index", range(len(ODD_BUT_FINE)), ids=[n for n, _ in ODD_BUT_FINE])
def test_odd_headers_pass_without_noise(fetch: Fetch, log: pytest.LogCaptureFixture, index: int) -> None:
    assert fetch(len(BAD_ANSWERS) + index) == {"status": 200, "body": "ok", "error": ""}
    no_tracebacks(log)


def test_a_script_given_a_port_out_of_range_is_told_so(
    kernels: Kernels, make_tool: ToolFactory, engine: str, log: pytest.LogCaptureFixture
) -> None:
    kernel = kernels.build()
    result = probe(kernel, make_tool, engine, 'http_get("http://127.0.0.1:70000/")', "")
    assert (
        result["error"] == "http_get: url 'http://127.0.0.1:70000/': port 70000 is out of range (1 to 65535)"
    )
    no_tracebacks(log)
