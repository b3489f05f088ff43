"""A scripted OpenAI-compatible chat-completions server for tests: the project's and users' own.

`FakeLLMServer` is a real HTTP server on 127.0.0.1 (a free port, a background
thread), so the kernel talks to it through its real provider and real
sockets. A test appends the turns it expects, in order:

    with FakeLLMServer() as server:
        server.add(Reply(tool_calls=(FakeToolCall("wordcount", '{"text": "hi"}'),)))
        server.add(HttpError(429, retry_after="0.01"), Reply(text="done"))
        ...  # run the kernel against server.base_url
        assert server.bodies[1]["messages"][-1]["role"] == "tool"

Each request takes the next turn; with none left it asks `respond_with`'s
callback, and with neither it answers HTTP 500 saying the script is empty,
so an unexpected call fails loudly (`rules.RuleBook` is such a callback,
answering by rules: `server.respond_with(book)`). A `Reply` is streamed as server-sent
events when the request asks for `stream`. `GET /v1/models` is answered
apart from the script, listing `models` (none by default); with `api_key`
set, a request without `Authorization: Bearer <api_key>` gets OpenAI's 401;
any other path gets a 404. Everything is bounded: delays are capped and cut
short by `stop()`, idle connections time out, and past `max_requests` every
request gets a 500, so a runaway retry loop ends.
"""

from __future__ import annotations

import collections
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Protocol, TypeAlias

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it; `body` is parsed JSON (raw text if not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def wants_stream(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True


class Exchange:
    """One request being answered: the handler's socket plus the server's stop signal.

    `finishing()` runs just before the last bytes go out: the request stops
    counting as in flight before the client can see the answer end and send
    its next request, so `max_in_flight` never counts one request twice.
    """

    def __init__(
        self,
        handler: BaseHTTPRequestHandler,
        request: RecordedRequest,
        stop: threading.Event,
        finishing: Callable[[], None],
    ) -> None:
        self.handler = handler
        self.request = request
        self._stop = stop
        self.finishing = finishing

    def sleep(self, secs: float) -> None:
        """Wait, but never past the server's stop (or 10 s)."""
        if secs > 0:
            self._stop.wait(min(secs, 10.0))

    def send(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.finishing()
        self.handler.send_response(status)
        self.handler.send_header("Content-Type", content_type)
        self.handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.handler.send_header(name, value)
        self.handler.end_headers()
        self.handler.wfile.write(body)

    def send_json(self, status: int, data: object, headers: dict[str, str] | None = None) -> None:
        self.send(status, json.dumps(data).encode("utf-8"), "application/json", headers)

    def start_events(self) -> None:
        self.handler.send_response(200)
        self.handler.send_header("Content-Type", "text/event-stream")
        self.handler.send_header("Transfer-Encoding", "chunked")
        self.handler.end_headers()

    def event(self, data: str) -> None:
        payload = f"data: {data}\n\n".encode()
        self.handler.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")

    def end_events(self) -> None:
        self.finishing()
        self.handler.wfile.write(b"0\r\n\r\n")

    def drop(self) -> None:
        """Close the connection with nothing more written (a crash, a proxy cut)."""
        self.finishing()
        self.handler.close_connection = True


class Turn(Protocol):
    """One scripted answer; it writes itself to the exchange."""

    def answer(self, exchange: Exchange) -> None: ...


@dataclass(frozen=True)
class FakeToolCall:
    """A tool call to answer with; `arguments` is raw text, malformed on purpose if you like."""

    name: str
    arguments: str = "{}"
    id: str | None = None


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


@dataclass(frozen=True)
class Reply:
    """A successful answer: text and/or tool calls with usage; streamed when asked.

    `usage=False` leaves usage out (some servers never send it);
    `drop_after_chunks` cuts a stream after that many events;
    `stall_after_chunks` stops sending after that many events until the
    server stops (at most 10 s), like a model that hangs mid-answer.
    """

    text: str | None = None
    tool_calls: tuple[FakeToolCall, ...] = ()
    prompt_tokens: int = 10
    completion_tokens: int = 5
    usage: bool = True
    finish_reason: str | None = None
    delay: float = 0.0
    chunk_chars: int = 3
    chunk_delay: float = 0.0
    drop_after_chunks: int | None = None
    stall_after_chunks: int | None = None
    model: str = "fake-model"

    def answer(self, exchange: Exchange) -> None:
        exchange.sleep(self.delay)
        if exchange.request.wants_stream:
            self._stream(exchange)
        else:
            exchange.send_json(200, self.completion())

    @property
    def finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")

    def _usage(self) -> dict[str, int]:
        total = self.prompt_tokens + self.completion_tokens
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": total,
        }

    def _call_id(self, index: int) -> str:
        return self.tool_calls[index].id or f"call_fake_{index}"

    def completion(self) -> dict[str, Any]:
        """The non-streamed body, as OpenAI sends it."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": self._call_id(i),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for i, c in enumerate(self.tool_calls)
            ]
        body: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
        }
        if self.usage:
            body["usage"] = self._usage()
        return body

    def chunks(self, include_usage: bool) -> list[dict[str, Any]]:
        """The stream's chunks: role, text pieces, tool calls by index, finish, usage."""
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"content": piece} for piece in _pieces(self.text or "", self.chunk_chars)]
        for i, call in enumerate(self.tool_calls):
            head = {"index": i, "id": self._call_id(i), "type": "function"}
            deltas.append({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]})
            for piece in _pieces(call.arguments, self.chunk_chars):
                deltas.append({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
        choices: list[list[dict[str, Any]]] = [
            [{"index": 0, "delta": d, "finish_reason": None}] for d in deltas
        ]
        choices.append([{"index": 0, "delta": {}, "finish_reason": self.finish}])
        head = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": self.model}
        chunks = [{**head, "choices": c} for c in choices]
        if include_usage and self.usage:
            chunks.append({**head, "choices": [], "usage": self._usage()})
        return chunks

    def _stream(self, exchange: Exchange) -> None:
        options = exchange.request.body.get("stream_options") or {}
        exchange.start_events()
        for number, chunk in enumerate(self.chunks(bool(options.get("include_usage")))):
            if number == self.drop_after_chunks:
                exchange.drop()
                return
            if number == self.stall_after_chunks:
                exchange.sleep(10.0)
            exchange.event(json.dumps(chunk))
            exchange.sleep(self.chunk_delay)
        exchange.finishing()  # a client may stop reading at [DONE]
        exchange.event("[DONE]")
        exchange.end_events()


@dataclass(frozen=True)
class HttpError:
    """An HTTP error answer: OpenAI's `{"error": {message, type, code}}` unless `body` is given."""

    status: int
    message: str = "scripted error"
    retry_after: str | None = None
    body: str | None = None
    delay: float = 0.0

    def answer(self, exchange: Exchange) -> None:
        exchange.sleep(self.delay)
        headers = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
        if self.body is not None:
            exchange.send(self.status, self.body.encode("utf-8"), "text/plain", headers)
            return
        error = {"message": self.message, "type": "fake_error", "code": self.status}
        exchange.send_json(self.status, {"error": error}, headers)


@dataclass(frozen=True)
class Drop:
    """Close the connection without answering, after `delay`."""

    delay: float = 0.0

    def answer(self, exchange: Exchange) -> None:
        exchange.sleep(self.delay)
        exchange.drop()


@dataclass(frozen=True)
class RawResponse:
    """Any body with any status, e.g. malformed JSON with a 200."""

    body: str
    status: int = 200
    content_type: str = "application/json"
    delay: float = 0.0

    def answer(self, exchange: Exchange) -> None:
        exchange.sleep(self.delay)
        exchange.send(self.status, self.body.encode("utf-8"), self.content_type)


@dataclass(frozen=True)
class ModelList:
    """`GET /v1/models` as OpenAI answers it."""

    models: tuple[str, ...]

    def answer(self, exchange: Exchange) -> None:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
        exchange.send_json(200, {"object": "list", "data": data})


Responder: TypeAlias = Callable[[RecordedRequest], Turn]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as real servers do
    # an idle kept-alive connection ends by itself; later than the client lets one idle (httpx: 5 s),
    # so a client never sends on a connection being closed under it
    timeout = 30
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # as real servers do: a reused connection's small writes go at once, not after a delayed ACK
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake.connected()

    def do_POST(self) -> None:
        self.server.fake.handle(self)

    do_GET = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests read `requests`, not stderr


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver listens with a backlog of 5: a hundred clients connecting at once overflowed it, and a
    # connection the kernel saw as open was reset under its first request (ReadError)
    request_queue_size = 1024

    def __init__(self, fake: FakeLLMServer) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", fake.port), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up (timeouts, drops) is part of the script


@dataclass
class _State:
    turns: collections.deque[Turn] = field(default_factory=collections.deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    responder: Responder | None = None
    in_flight: int = 0
    max_in_flight: int = 0
    unexpected: int = 0
    connections: int = 0


class FakeLLMServer:
    """The scripted server; use as a context manager (or `start()` / `stop()`)."""

    def __init__(
        self,
        *,
        max_requests: int = 500,
        models: tuple[str, ...] = (),
        api_key: str | None = None,
        port: int = 0,
    ) -> None:
        self.max_requests = max_requests
        self.port = port  # 0: a free port, chosen when it starts
        self.models = models
        self.api_key = api_key
        self._lock = threading.Lock()
        self._state = _State()
        self._stop = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> FakeLLMServer:
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True, name="fake-llm"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "FakeLLMServer is not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- the script --

    def add(self, *turns: Turn) -> FakeLLMServer:
        """Append turns; each request takes the next one."""
        with self._lock:
            self._state.turns.extend(turns)
        return self

    def clear(self) -> int:
        """Drop the scripted turns not yet used; how many there were (a test that ends early)."""
        with self._lock:
            left = len(self._state.turns)
            self._state.turns.clear()
            return left

    def respond_with(self, responder: Responder | None) -> None:
        """Answer with `responder(request)` once the scripted turns run out (e.g. concurrency tests)."""
        with self._lock:
            self._state.responder = responder

    # -- what happened --

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._state.requests)

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    @property
    def remaining(self) -> int:
        """Scripted turns not yet used; 0 at the end of a test that went as planned."""
        with self._lock:
            return len(self._state.turns)

    def connected(self) -> None:
        with self._lock:
            self._state.connections += 1

    @property
    def connections(self) -> int:
        """The TCP connections clients opened (kept-alive ones are reused, not counted again)."""
        with self._lock:
            return self._state.connections

    @property
    def max_in_flight(self) -> int:
        """The most requests ever being answered at once."""
        with self._lock:
            return self._state.max_in_flight

    @property
    def unexpected(self) -> int:
        """Requests that found the script empty (each got a 500)."""
        with self._lock:
            return self._state.unexpected

    # -- serving --

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        request = _read_request(handler)
        turn = self._admit(request)
        finished = threading.Event()

        def finishing() -> None:
            with self._lock:
                if not finished.is_set():
                    finished.set()
                    self._state.in_flight -= 1

        try:
            turn.answer(Exchange(handler, request, self._stop, finishing))
        except (ConnectionError, TimeoutError):
            handler.close_connection = True  # the client gave up (its timeout) or hung up
        finally:
            finishing()

    def _refusal(self, request: RecordedRequest) -> HttpError | None:
        """OpenAI's 401 when a key is required and not sent; a wrong key is echoed, as some servers do."""
        if self.api_key is None:
            return None
        sent = request.headers.get("authorization", "").removeprefix("Bearer ")
        if not sent:
            return HttpError(401, "You didn't provide an API key.")
        return None if sent == self.api_key else HttpError(401, f"Incorrect API key provided: {sent}")

    def _admit(self, request: RecordedRequest) -> Turn:
        with self._lock:
            state = self._state
            state.requests.append(request)
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
            number = len(state.requests)
            if number > self.max_requests:
                return HttpError(500, f"fake LLM server: request limit of {self.max_requests} reached")
            refusal = self._refusal(request)
            if refusal is not None:
                return refusal
            if (request.method, request.path) == ("GET", MODELS_PATH):
                return ModelList(self.models)
            if request.path != CHAT_PATH:
                return HttpError(404, f"fake LLM server: no route {request.method} {request.path}")
            if state.turns:
                return state.turns.popleft()
            responder = state.responder
            if responder is None:
                state.unexpected += 1
                return HttpError(500, f"fake LLM server: script is empty, request #{number} was not expected")
        try:
            return responder(request)
        except Exception as exc:
            return HttpError(500, f"fake LLM server: responder raised {exc!r}")


def _read_request(handler: BaseHTTPRequestHandler) -> RecordedRequest:
    length = int(handler.headers.get("Content-Length") or 0)
    raw = handler.rfile.read(length).decode("utf-8", "replace") if length else ""
    try:
        body: Any = json.loads(raw) if raw else None
    except ValueError:
        body = raw
    headers = {name.lower(): value for name, value in handler.headers.items()}
    return RecordedRequest(handler.command, handler.path, headers, body)


__all__ = [
    "CHAT_PATH",
    "MODELS_PATH",
    "Drop",
    "FakeLLMServer",
    "FakeToolCall",
    "HttpError",
    "ModelList",
    "RawResponse",
    "RecordedRequest",
    "Reply",
    "Responder",
    "Turn",
]
