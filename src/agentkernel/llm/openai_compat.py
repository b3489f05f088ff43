"""An LLM provider speaking the OpenAI chat-completions API over HTTP (S23.4).

One wire format serves OpenAI, vLLM, llama.cpp's server and Ollama, so one
provider covers them all. It is lenient where those servers differ (content
as a list of parts, tool-call arguments as an object, a stream chunk without
`index`, a missing usage report) and strict where a difference would lose
data (a response without `choices`, a tool call without a name).

Retry semantics, in one place:
- retried, with exponential backoff and jitter: HTTP 408, 429, every 5xx but 501,
  connection failures, dropped connections and timeouts; a `Retry-After`
  (or `retry-after-ms`) header replaces the backoff, capped at
  `max_backoff_secs`. `max_retries=3` means at most 4 requests.
- not retried: any other 4xx (the request itself is wrong; the server's
  message is in the error), and a 2xx response that is not a valid
  completion (malformed JSON, missing fields). The server did answer, the
  tokens are spent, and a server that answers in the wrong shape (wrong
  `base_url`, a proxy's HTML page) answers so every time.
- a stream is retried only while nothing has been yielded to the consumer;
  after the first event, a failure is raised as it is, since a retry would
  repeat text the user has already seen.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from agentkernel.llm.base import (
    ChatMessage,
    Completion,
    CompletionRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSchema,
    Usage,
)
from agentkernel.llm.connections import ClientStack
from agentkernel.telemetry.context import inject
from agentkernel.util.short_text import clip

if TYPE_CHECKING:
    import ssl

T = TypeVar("T")

_MAX_SERVER_MESSAGE = 500
USER_AGENT = "agentkernel/0.1"


class _WireError(ValueError):
    """A response that is not a chat completion; the text says what is missing."""


# -- request: our values → the wire ------------------------------------------------------------------


def encode_request(
    request: CompletionRequest, default_model: str, *, stream: bool, strict_schema: bool = False
) -> dict[str, Any]:
    """The JSON body of POST /chat/completions for `request`."""
    body: dict[str, Any] = {
        "model": request.model or default_model,
        "messages": [encode_message(m) for m in request.messages],
    }
    if request.tools:
        body["tools"] = [encode_tool(t) for t in request.tools]
    if request.json_schema is not None:
        body["response_format"] = encode_response_format(request.json_schema, strict_schema)
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def encode_message(message: ChatMessage) -> dict[str, Any]:
    """One message; `content` stays null on an assistant message that only calls tools."""
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        wire["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        wire["name"] = message.name
    return wire


def encode_tool(tool: ToolSchema) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def encode_response_format(schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    """`response_format` for a JSON schema.

    `strict` defaults to false: OpenAI's strict mode refuses any schema with
    optional properties or open objects, while the kernel validates the answer
    itself (S9.3), so best-effort constraint plus validation works everywhere.
    """
    title = schema.get("title")
    name = "".join(ch for ch in title if ch.isalnum() or ch in "_-")[:64] if isinstance(title, str) else ""
    return {
        "type": "json_schema",
        "json_schema": {"name": name or "output", "schema": schema, "strict": strict},
    }


# -- response: the wire → our values -----------------------------------------------------------------


def _mapping(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _WireError(f"{what}: expected an object, got {type(value).__name__}")
    return value


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def decode_usage(raw: object) -> Usage:
    """Token counts; anything missing or odd counts as 0 rather than failing the answer."""
    if not isinstance(raw, dict):
        return Usage()
    return Usage(_count(raw.get("prompt_tokens")), _count(raw.get("completion_tokens")))


def _text(content: object, what: str) -> str | None:
    """Message content: a string, null, or (some servers) a list of `{type: text, text}` parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise _WireError(f"{what}: expected text, got {type(content).__name__}")


def _arguments_text(arguments: object) -> str:
    """The raw arguments text; servers that send an object get it re-encoded."""
    if isinstance(arguments, str):
        return arguments
    return "{}" if arguments is None else json.dumps(arguments, ensure_ascii=False)


def _decode_tool_call(raw: object, position: int) -> ToolCall:
    call = _mapping(raw, f"tool_calls[{position}]")
    function = _mapping(call.get("function"), f"tool_calls[{position}].function")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise _WireError(f"tool_calls[{position}].function.name: missing")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = f"call_{position}"
    return ToolCall(call_id, name, _arguments_text(function.get("arguments")))


def server_error_message(body: dict[str, Any]) -> str | None:
    """The message of an `{"error": …}` body (OpenAI, vLLM, llama.cpp, Ollama shapes)."""
    error = body.get("error")
    if isinstance(error, dict):
        message = error.get("message")
        return str(message) if message is not None else json.dumps(error)
    if error is not None:
        return str(error)
    detail = body.get("detail", body.get("message"))
    return str(detail) if detail is not None else None


def decode_completion(data: object) -> Completion:
    """A non-streamed chat completion; raises `_WireError` naming what is missing."""
    body = _mapping(data, "response")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        said = server_error_message(body)
        raise _WireError(f"error in a successful response: {said}" if said else "no `choices` in response")
    message = _mapping(_mapping(choices[0], "choices[0]").get("message"), "choices[0].message")
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise _WireError("choices[0].message.tool_calls: expected a list")
    finish = choices[0].get("finish_reason")
    model = body.get("model")
    return Completion(
        text=_text(message.get("content"), "choices[0].message.content"),
        tool_calls=tuple(_decode_tool_call(c, i) for i, c in enumerate(raw_calls)),
        usage=decode_usage(body.get("usage")),
        finish_reason=finish if isinstance(finish, str) else None,
        model=model if isinstance(model, str) else None,
    )


# -- streaming: chunks → one completion --------------------------------------------------------------


@dataclass
class _ToolCallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamAssembler:
    """Folds stream chunks into one Completion: text appended, tool calls joined by index."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _ToolCallParts] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str | None = None
    done: bool = False  # `data: [DONE]` seen

    def feed(self, chunk: dict[str, Any]) -> str:
        """Take one chunk; returns the text it adds ("" when none)."""
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = decode_usage(chunk["usage"])
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise _WireError("stream chunk: `choices` is not a list")
        added = []
        for choice in choices:
            added.append(self._feed_choice(_mapping(choice, "stream chunk choice")))
        return "".join(added)

    def _feed_choice(self, choice: dict[str, Any]) -> str:
        if choice.get("index", 0) != 0:
            return ""  # we ask for one choice; ignore any other
        if isinstance(choice.get("finish_reason"), str):
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta") or {}
        for raw in _mapping(delta, "stream chunk delta").get("tool_calls") or []:
            self._feed_tool_call(_mapping(raw, "stream chunk tool call"))
        content = _text(delta.get("content"), "stream chunk content") or ""
        self.text.append(content)
        return content

    def _feed_tool_call(self, raw: dict[str, Any]) -> None:
        parts = self.calls.setdefault(self._slot(raw), _ToolCallParts())
        function = raw.get("function") or {}
        if isinstance(raw.get("id"), str) and not parts.id:
            parts.id = raw["id"]
        if isinstance(function.get("name"), str) and not parts.name:
            parts.name = function["name"]
        arguments = function.get("arguments")
        if arguments is not None:
            parts.arguments.append(_arguments_text(arguments))

    def _slot(self, raw: dict[str, Any]) -> int:
        """The call's index; servers that omit it (old Ollama) send whole calls, one per new id."""
        index = raw.get("index")
        if isinstance(index, int):
            return index
        new_id = raw.get("id")
        known = {p.id for p in self.calls.values()}
        if not self.calls or (isinstance(new_id, str) and new_id not in known):
            return max(self.calls, default=-1) + 1
        return max(self.calls)

    def finish(self) -> Completion:
        calls = []
        for position, index in enumerate(sorted(self.calls)):
            parts = self.calls[index]
            if not parts.name:
                raise _WireError(f"streamed tool call #{index}: no function name")
            calls.append(ToolCall(parts.id or f"call_{position}", parts.name, "".join(parts.arguments)))
        text = "".join(self.text)
        return Completion(
            text=text if text or not calls else None,
            tool_calls=tuple(calls),
            usage=self.usage,
            finish_reason=self.finish_reason,
            model=self.model,
        )


def sse_data(line: str) -> str | None:
    """The payload of an SSE `data:` line; None for any other line (other fields, comments, blanks).

    Every OpenAI-compatible server sends one JSON object per `data:` line,
    so each line is taken as a whole event, blank separators or not.
    """
    return line[5:].strip() if line.startswith("data:") else None


DRAIN_SECS = 1.0
DRAIN_LINES = 128
"""How long, and how many lines, a stream is read past `[DONE]` for its end (`_read_to_the_end`)."""


async def _read_to_the_end(lines: AsyncIterator[str]) -> None:
    """Read what follows `[DONE]` until the body ends, so its connection goes back to the pool.

    A body left unread makes httpx close the connection: against a real
    provider, every streamed call would pay a new TCP and TLS handshake
    (benchmarks/server.py counted two connects a turn). Servers end the body
    right after `[DONE]`; one that does not is given up on after
    DRAIN_SECS or DRAIN_LINES, its connection closed, the answer kept.
    """
    try:
        async with asyncio.timeout(DRAIN_SECS):
            drained = 0
            async for _ in lines:
                drained += 1
                if drained >= DRAIN_LINES:
                    return
    except (TimeoutError, httpx.TransportError):
        return


# -- retries ------------------------------------------------------------------------------------------


def _traced(headers: dict[str, str]) -> dict[str, str]:
    """`headers` with the current span's `traceparent` (S26.1): the LLM server's own spans join the run's
    trace. Nothing is added when traces are off."""
    inject(headers)
    return headers


def retry_after_secs(headers: httpx.Headers) -> float | None:
    """The server's requested wait: `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry and how long to wait before each retry."""

    max_retries: int = 3
    backoff_secs: float = 0.5
    max_backoff_secs: float = 8.0

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Wait before retry number `retry` (0-based).

        The server's `Retry-After` wins (capped); otherwise exponential
        backoff with "equal jitter", so clients that failed together do not
        come back together.
        """
        if retry_after is not None:
            return min(retry_after, self.max_backoff_secs)
        base: float = min(self.backoff_secs * 2.0**retry, self.max_backoff_secs)
        return base / 2 + random.uniform(0, base / 2)


def _is_retryable_status(status: int) -> bool:
    """Rate limits, request timeouts and server trouble; 501 (no such endpoint) will not change."""
    return status in (408, 429) or (status >= 500 and status != 501)


# -- the provider -------------------------------------------------------------------------------------


class OpenAICompatProvider:
    """`Provider` for any server with an OpenAI-style `POST {base_url}/chat/completions`.

    Connections are made on first use inside each event loop that calls,
    and belong to that loop: the server's loop, a chat's, and a kernel's
    own loop (services/kernel_loop.py) each keep their own (a stack of
    one-connection clients, llm/connections.py; one TLS context for all).
    `aclose()` (or `async with`) releases them all, each on its own loop.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_secs: float = 60,
        max_retries: int = 3,
        backoff_secs: float = 0.5,
        max_backoff_secs: float = 8,
        strict_json_schema: bool = False,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if timeout_secs <= 0 or max_retries < 0 or backoff_secs < 0 or max_backoff_secs < 0:
            raise ValueError("timeout_secs must be > 0; max_retries and the backoffs >= 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_secs = timeout_secs
        self.retry = RetryPolicy(max_retries, backoff_secs, max_backoff_secs)
        self.strict_json_schema = strict_json_schema
        self._api_key = api_key or None
        self._url = f"{self.base_url}/chat/completions"
        self._shown_url = shown_url(self.base_url)
        self._clients: dict[asyncio.AbstractEventLoop, ClientStack] = {}
        self._tls: ssl.SSLContext | None = None  # made with the first client, shared by every one
        self._clients_lock = threading.Lock()  # loops on several threads make and drop clients

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return f"OpenAICompatProvider(base_url={self._shown_url!r}, model={self.model!r}, api_key={key})"

    async def __aenter__(self) -> OpenAICompatProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release every client, each on its own loop; one of a loop no longer running is just dropped.

        A client's connections belong to its loop: closing them from another
        would touch that loop's transports from the wrong thread.
        """
        with self._clients_lock:
            clients, self._clients = self._clients, {}
        here = asyncio.get_running_loop()
        for loop, client in clients.items():
            if loop is here:
                await client.aclose()
            elif loop.is_running() and not loop.is_closed():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(client.aclose(), loop))

    async def complete(self, request: CompletionRequest) -> Completion:
        body = self._encode(request, stream=False)
        return await self._with_retries(lambda: self._complete_once(body))

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        """Stream the answer; retried like `complete` until the first event is yielded.

        One generator from the body's lines to the caller: the attempts, the
        SSE lines and the chunks' text in one loop, since every generator
        between httpx and the agent loop is resumed for every chunk.
        """
        body = self._encode(request, stream=True)
        attempt = 0
        while True:
            attempt += 1
            started = False
            try:
                async with self._answer(body) as response:
                    if response.headers.get("content-type", "").startswith("application/json"):
                        await response.aread()  # the server ignored `stream`: one whole answer
                        completion = self._decode(response)
                        if completion.text:
                            started = True
                            yield TextDelta(completion.text)
                    else:
                        assembler = StreamAssembler()
                        lines = response.aiter_lines()
                        async for line in lines:
                            text = self._read_line(line, assembler)
                            if assembler.done:
                                await _read_to_the_end(lines)
                                break
                            if text:
                                started = True
                                yield TextDelta(text)
                        completion = self._finish(assembler)
                yield StreamDone(completion)  # the connection back in its pool first
                return
            except ProviderError as error:
                if started or not self._may_retry(error, attempt):
                    if attempt == 1:
                        raise
                    raise _after_attempts(error, attempt) from error
                await asyncio.sleep(self.retry.delay(attempt - 1, error.retry_after))

    # -- one attempt each --

    def _encode(self, request: CompletionRequest, *, stream: bool) -> bytes:
        body = encode_request(request, self.model, stream=stream, strict_schema=self.strict_json_schema)
        # a lone surrogate (from text cut mid-character) becomes "?" rather than an error
        return json.dumps(body, ensure_ascii=False).encode("utf-8", "replace")

    async def _complete_once(self, body: bytes) -> Completion:
        try:
            async with self._http().lend() as client:
                response = await client.post(self._url, content=body, headers=_traced({}))
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from exc
        self._raise_for_status(response)
        return self._decode(response)

    @asynccontextmanager
    async def _answer(self, body: bytes) -> AsyncGenerator[httpx.Response, None]:
        """A streamed request's response, once it said it succeeded; a transport error while it is open
        (sent, or reading the body) becomes a ProviderError."""
        headers = _traced({"Accept": "text/event-stream"})
        try:
            async with (
                self._http().lend() as client,
                client.stream("POST", self._url, content=body, headers=headers) as response,
            ):
                if not response.is_success:
                    await response.aread()
                    self._raise_for_status(response)
                yield response
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from exc

    def _read_line(self, line: str, assembler: StreamAssembler) -> str:
        """The text one line of an SSE body adds ("" for none), its chunk fed to `assembler`; `[DONE]`
        marks the assembler done."""
        data = sse_data(line)
        if data is None:
            return ""
        if data == "[DONE]":
            assembler.done = True
            return ""
        try:
            return assembler.feed(self._parse_chunk(data))
        except _WireError as exc:
            raise self._error(f"malformed stream chunk ({exc})") from exc

    # -- helpers --

    def _http(self) -> ClientStack:
        """The clients of the running event loop; those of closed loops are dropped, not reused."""
        loop = asyncio.get_running_loop()
        with self._clients_lock:
            clients = self._clients.get(loop)
            if clients is None:
                self._clients = {seen: c for seen, c in self._clients.items() if not seen.is_closed()}
                clients = self._clients[loop] = ClientStack(self._new_client)
        return clients

    def _new_client(self, limits: httpx.Limits) -> httpx.AsyncClient:
        """A client with `limits`; the TLS context (its CA certificates read once) shared by all."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers["User-Agent"] = USER_AGENT
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        if self._tls is None:
            self._tls = httpx.create_ssl_context()
        timeout = httpx.Timeout(self.timeout_secs)
        return httpx.AsyncClient(headers=headers, timeout=timeout, limits=limits, verify=self._tls)

    async def _with_retries(self, attempt_once: Callable[[], Awaitable[T]]) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await attempt_once()
            except ProviderError as error:
                if not self._may_retry(error, attempt):
                    if attempt == 1:
                        raise
                    raise _after_attempts(error, attempt) from error
                await asyncio.sleep(self.retry.delay(attempt - 1, error.retry_after))

    def _may_retry(self, error: ProviderError, attempt: int) -> bool:
        return error.retryable and attempt <= self.retry.max_retries

    def _error(self, message: str, **details: Any) -> ProviderError:
        """A ProviderError naming the server, with the API key scrubbed from any echoed text."""
        text = f"LLM server {self._shown_url}: {message}"
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return ProviderError(text, **details)

    def _raise_for_status(self, response: httpx.Response) -> None:
        if response.is_success:
            return
        status = response.status_code
        retryable = _is_retryable_status(status)
        raise self._error(
            f"HTTP {status}: {describe_body(response.text)}",
            status=status,
            retryable=retryable,
            retry_after=retry_after_secs(response.headers) if retryable else None,
        )

    def _transport_error(self, exc: httpx.TransportError) -> ProviderError:
        kind = type(exc).__name__
        if isinstance(exc, httpx.TimeoutException):
            return self._error(f"no answer within {self.timeout_secs:g} s ({kind})", retryable=True)
        retryable = isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError)
        return self._error(f"connection failed ({kind}: {exc or 'no detail'})", retryable=retryable)

    def _decode(self, response: httpx.Response) -> Completion:
        try:
            return decode_completion(response.json())
        except ValueError as exc:  # JSONDecodeError and _WireError alike
            reason = str(exc) if isinstance(exc, _WireError) else f"not JSON: {describe_body(response.text)}"
            raise self._error(f"malformed response ({reason})", status=response.status_code) from exc

    def _parse_chunk(self, data: str) -> dict[str, Any]:
        """One stream chunk; an `{"error": …}` event (vLLM, llama.cpp) becomes a ProviderError."""
        try:
            chunk = _mapping(json.loads(data), "stream chunk")
        except ValueError as exc:
            raise self._error(f"malformed stream chunk: {clip(data, 200)}") from exc
        if chunk.get("error") is not None:
            raise self._error(f"error in the stream: {server_error_message(chunk)}")
        return chunk

    def _finish(self, assembler: StreamAssembler) -> Completion:
        if assembler.finish_reason is None and not assembler.done:
            raise self._error("the stream ended before the answer was complete", retryable=True)
        try:
            return assembler.finish()
        except _WireError as exc:
            raise self._error(f"malformed stream ({exc})") from exc


def shown_url(url: str) -> str:
    """`url` fit to print: without user, password or query, where a key might sit."""
    return str(httpx.URL(url).copy_with(username=None, password=None, query=None))


def describe_body(text: str) -> str:
    """The server's own error message when the body has one, else the body's start."""
    try:
        said = server_error_message(_mapping(json.loads(text), "body"))
    except ValueError:
        said = None
    shown = said if said is not None else (text.strip() or "(empty body)")
    return clip(shown, _MAX_SERVER_MESSAGE + 1, "…")


def _after_attempts(error: ProviderError, attempts: int) -> ProviderError:
    """The final error of several attempts, saying how many there were."""
    return ProviderError(
        f"{error.message} (gave up after {attempts} attempts)",
        status=error.status,
        retryable=error.retryable,
        retry_after=error.retry_after,
        attempts=attempts,
    )


__all__ = ["USER_AGENT", "OpenAICompatProvider", "RetryPolicy", "describe_body", "shown_url"]
