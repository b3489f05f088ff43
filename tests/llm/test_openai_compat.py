"""OpenAICompatProvider against the scripted server over real loopback HTTP (S23.4)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from agentkernel.llm import (
    ChatMessage,
    Completion,
    CompletionRequest,
    OpenAICompatProvider,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSchema,
    Usage,
)
from agentkernel.llm.openai_compat import RetryPolicy
from tests.fakes import Drop, FakeLLMServer, FakeToolCall, HttpError, RawResponse, Reply
from tests.fakes.openai_server import Exchange

T = TypeVar("T")
KEY = "sk-test-0123456789SECRET"
HELLO = CompletionRequest((ChatMessage.system("be brief"), ChatMessage.user("hi")))
WORDCOUNT = ToolSchema(
    "wordcount", "Count words.", {"type": "object", "properties": {"text": {"type": "string"}}}
)


def make(server: FakeLLMServer, **options: Any) -> OpenAICompatProvider:
    """A provider on the fake server with tiny backoffs, so retry tests stay fast."""
    settings: dict[str, Any] = {"api_key": KEY, "backoff_secs": 0.001, "max_backoff_secs": 0.5, **options}
    return OpenAICompatProvider(server.base_url, "test-model", **settings)


def run(provider: OpenAICompatProvider, call: Awaitable[T]) -> T:
    """Run one call on a fresh event loop, closing the provider's client after."""

    async def go() -> T:
        async with provider:
            return await call

    return asyncio.run(go())


def complete(server: FakeLLMServer, request: CompletionRequest = HELLO, **options: Any) -> Completion:
    provider = make(server, **options)
    return run(provider, provider.complete(request))


def fail(server: FakeLLMServer, request: CompletionRequest = HELLO, **options: Any) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        complete(server, request, **options)
    return caught.value


def stream(server: FakeLLMServer, request: CompletionRequest = HELLO, **options: Any) -> list[StreamEvent]:
    provider = make(server, **options)

    async def collect() -> list[StreamEvent]:
        return [event async for event in provider.stream(request)]

    return run(provider, collect())


# -- answers and the request body ---------------------------------------------------------------------


def test_text_answer_with_usage(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="Hello!", prompt_tokens=12, completion_tokens=3))
    answer = complete(llm_server)
    assert answer == Completion("Hello!", (), Usage(12, 3), "stop", "fake-model")
    assert answer.usage.total_tokens == 15


def test_request_body_and_headers(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="ok"))
    complete(llm_server)
    [request] = llm_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.body == {
        "model": "test-model",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
    }


def test_no_key_sends_no_authorization(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="ok"))
    complete(llm_server, api_key=None)
    assert "authorization" not in llm_server.requests[0].headers


def test_model_override_max_tokens_and_temperature(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="ok"))
    complete(llm_server, CompletionRequest(HELLO.messages, max_tokens=64, temperature=0.2, model="other"))
    body = llm_server.bodies[0]
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("other", 64, 0.2)


def test_tool_call_round_trip(llm_server: FakeLLMServer) -> None:
    """The model calls a tool; the call and its result go back in the OpenAI shape."""
    llm_server.add(Reply(tool_calls=(FakeToolCall("wordcount", '{"text": "a b"}', id="call_1"),)))
    llm_server.add(Reply(text="2 words"))
    provider = make(llm_server)
    first_request = CompletionRequest(HELLO.messages, tools=(WORDCOUNT,))

    async def turn() -> tuple[Completion, Completion]:
        first = await provider.complete(first_request)
        result = ChatMessage.tool(first.tool_calls[0].id, "2", name="wordcount")
        follow_up = CompletionRequest((*HELLO.messages, first.message(), result), tools=(WORDCOUNT,))
        return first, await provider.complete(follow_up)

    first, second = run(provider, turn())
    assert first.tool_calls == (ToolCall("call_1", "wordcount", '{"text": "a b"}'),)
    assert (first.text, first.finish_reason, second.text) == (None, "tool_calls", "2 words")
    sent = llm_server.bodies[1]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "wordcount",
                "description": "Count words.",
                "parameters": WORDCOUNT.parameters,
            },
        }
    ]
    assert sent["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "wordcount", "arguments": '{"text": "a b"}'},
                }
            ],
        },
        {"role": "tool", "content": "2", "tool_call_id": "call_1", "name": "wordcount"},
    ]


def test_malformed_tool_arguments_come_back_raw(llm_server: FakeLLMServer) -> None:
    """Parsing the arguments is the agent loop's job, so bad JSON can go back to the model."""
    llm_server.add(Reply(tool_calls=(FakeToolCall("wordcount", '{"text": '), FakeToolCall("other", ""))))
    answer = complete(llm_server)
    assert [(c.name, c.arguments) for c in answer.tool_calls] == [("wordcount", '{"text": '), ("other", "")]
    assert answer.tool_calls[0].id != answer.tool_calls[1].id


def test_json_schema_becomes_response_format(llm_server: FakeLLMServer) -> None:
    schema = {"title": "Verdict!", "type": "object", "properties": {"ok": {"type": "boolean"}}}
    llm_server.add(Reply(text='{"ok": true}'))
    complete(llm_server, CompletionRequest(HELLO.messages, json_schema=schema))
    assert llm_server.bodies[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Verdict", "schema": schema, "strict": False},
    }


def test_missing_usage_counts_zero(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="ok", usage=False))
    assert complete(llm_server).usage == Usage(0, 0)


# -- retries ------------------------------------------------------------------------------------------


def test_429_and_500_are_retried(llm_server: FakeLLMServer) -> None:
    llm_server.add(HttpError(429), HttpError(500), HttpError(503), Reply(text="finally"))
    assert complete(llm_server).text == "finally"
    assert len(llm_server.requests) == 4
    assert llm_server.bodies[0] == llm_server.bodies[3]


def test_gives_up_after_max_retries(llm_server: FakeLLMServer) -> None:
    llm_server.add(*[HttpError(500, "overloaded")] * 3, Reply(text="too late"))
    error = fail(llm_server, max_retries=2)
    assert (error.status, error.retryable, error.attempts) == (500, True, 3)
    assert "HTTP 500: overloaded (gave up after 3 attempts)" in str(error)
    assert len(llm_server.requests) == 3 and llm_server.remaining == 1


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits the provider chose before its retries (what it then sleeps), in order."""
    chosen: list[float] = []
    choose = RetryPolicy.delay

    def recording(policy: RetryPolicy, retry: int, retry_after: float | None) -> float:
        chosen.append(choose(policy, retry, retry_after))
        return chosen[-1]

    monkeypatch.setattr(RetryPolicy, "delay", recording)
    return chosen


def test_retry_after_is_honoured(llm_server: FakeLLMServer, waits: list[float]) -> None:
    llm_server.add(HttpError(429, retry_after="0.3"), Reply(text="ok"))
    assert complete(llm_server).text == "ok"
    assert waits == [0.3]


def test_retry_after_is_capped(llm_server: FakeLLMServer, waits: list[float]) -> None:
    llm_server.add(HttpError(429, retry_after="3600"), Reply(text="ok"))
    assert complete(llm_server, max_backoff_secs=0.05).text == "ok"
    assert waits == [0.05]


def test_timeout_is_retried(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="slow", delay=30.0), Reply(text="fast"))  # cut short when the server stops
    assert complete(llm_server, timeout_secs=0.2).text == "fast"  # not "slow": the first try timed out
    assert len(llm_server.requests) == 2


def test_timeout_error_says_so(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="slow", delay=1.0))
    error = fail(llm_server, timeout_secs=0.1, max_retries=0)
    assert error.retryable and error.status is None
    assert "no answer within 0.1 s" in str(error)


def test_dropped_connection_is_retried(llm_server: FakeLLMServer) -> None:
    llm_server.add(Drop(), Drop(), Reply(text="ok"))
    assert complete(llm_server).text == "ok"
    assert len(llm_server.requests) == 3


def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = OpenAICompatProvider(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff_secs=0.001)
    with pytest.raises(ProviderError) as caught:
        run(provider, provider.complete(HELLO))
    assert caught.value.retryable and caught.value.attempts == 2
    assert "connection failed (ConnectError" in str(caught.value)


# -- failing fast -------------------------------------------------------------------------------------


def test_400_fails_fast_with_the_servers_message(llm_server: FakeLLMServer) -> None:
    llm_server.add(HttpError(400, "'messages' must not be empty"), Reply(text="unused"))
    error = fail(llm_server)
    assert (error.status, error.retryable, error.attempts) == (400, False, 1)
    assert str(error) == f"LLM server {llm_server.base_url}: HTTP 400: 'messages' must not be empty"
    assert llm_server.remaining == 1


def test_plain_text_error_body_is_shown(llm_server: FakeLLMServer) -> None:
    llm_server.add(HttpError(404, body="model 'x' not found, try pulling it first"))
    assert "HTTP 404: model 'x' not found, try pulling it first" in str(fail(llm_server))


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("{not json", "malformed response (not JSON: {not json)"),
        ('{"id": "x"}', "malformed response (no `choices` in response)"),
        ('{"choices": [{"message": "hi"}]}', "choices[0].message: expected an object, got str"),
        (
            '{"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}',
            "tool_calls[0].function.name: missing",
        ),
        ('{"error": {"message": "model overloaded"}}', "error in a successful response: model overloaded"),
    ],
)
def test_malformed_response_is_not_retried(llm_server: FakeLLMServer, body: str, reason: str) -> None:
    llm_server.add(RawResponse(body), Reply(text="unused"))
    error = fail(llm_server)
    assert reason in str(error)
    assert (error.status, error.retryable, llm_server.remaining) == (200, False, 1)


def test_api_key_never_appears_in_errors_or_repr(llm_server: FakeLLMServer) -> None:
    echo = f"Incorrect API key provided: {KEY}"
    llm_server.add(HttpError(401, echo), *[HttpError(500, f"auth {KEY}")] * 2)
    first, second = fail(llm_server), fail(llm_server, max_retries=1)
    assert "Incorrect API key provided: ***" in str(first)
    for text in (str(first), repr(first), str(second), repr(make(llm_server))):
        assert KEY not in text
    assert "api_key=set" in repr(make(llm_server))


def test_credentials_in_base_url_are_not_shown() -> None:
    provider = OpenAICompatProvider("https://user:pw@llm.example/v1?k=1", "m")
    assert "pw" not in repr(provider) and "k=1" not in repr(provider)


# -- streaming ----------------------------------------------------------------------------------------


def texts(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def done(events: list[StreamEvent]) -> Completion:
    assert isinstance(events[-1], StreamDone)
    assert sum(isinstance(e, StreamDone) for e in events) == 1
    return events[-1].completion


def test_stream_text_and_usage(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="Hello, streaming world", prompt_tokens=7, completion_tokens=4))
    events = stream(llm_server)
    assert texts(events) == "Hello, streaming world" and len(events) > 3
    assert done(events) == Completion("Hello, streaming world", (), Usage(7, 4), "stop", "fake-model")
    body = llm_server.bodies[0]
    assert (body["stream"], body["stream_options"]) == (True, {"include_usage": True})


def test_streamed_calls_reuse_their_connection(llm_server: FakeLLMServer) -> None:
    """The body is read to its end after [DONE], so the next call needs no new TCP (or TLS) handshake."""
    llm_server.add(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    provider = make(llm_server)

    async def three_calls() -> list[str]:
        return [texts([e async for e in provider.stream(HELLO)]) for _ in range(3)]

    assert run(provider, three_calls()) == ["one", "two", "three"]
    assert llm_server.connections == 1


@dataclass(frozen=True)
class GoesOnAfterDone:
    """A server that sends [DONE] and then keeps the body open (until it stops, at most 10 s)."""

    def answer(self, exchange: Exchange) -> None:
        exchange.start_events()
        for chunk in Reply(text="kept").chunks(include_usage=False):
            exchange.event(json.dumps(chunk))
        exchange.event("[DONE]")
        exchange.sleep(10.0)
        exchange.end_events()


def test_a_body_left_open_after_done_is_given_up_and_the_answer_kept(llm_server: FakeLLMServer) -> None:
    llm_server.add(GoesOnAfterDone(), Reply(text="next"))
    provider = make(llm_server)

    async def two_calls() -> list[str]:
        return [texts([e async for e in provider.stream(HELLO)]) for _ in range(2)]

    assert run(provider, two_calls()) == ["kept", "next"]
    assert llm_server.connections == 2  # the open one was closed, not reused


def test_stream_assembles_tool_calls(llm_server: FakeLLMServer) -> None:
    calls = (
        FakeToolCall("wordcount", '{"text": "one two three"}'),
        FakeToolCall("currency", '{"amount": 5}'),
    )
    llm_server.add(Reply(text="Let me check.", tool_calls=calls, chunk_chars=2))
    completion = done(stream(llm_server, CompletionRequest(HELLO.messages, tools=(WORDCOUNT,))))
    assert completion.text == "Let me check."
    assert completion.tool_calls == (
        ToolCall("call_fake_0", "wordcount", '{"text": "one two three"}'),
        ToolCall("call_fake_1", "currency", '{"amount": 5}'),
    )
    assert completion.finish_reason == "tool_calls"
    assert llm_server.bodies[0]["tools"][0]["function"]["name"] == "wordcount"


def test_stream_without_usage(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="hi", usage=False))
    assert done(stream(llm_server)).usage == Usage(0, 0)


def test_stream_is_retried_before_the_first_event(llm_server: FakeLLMServer) -> None:
    llm_server.add(HttpError(500), Drop(), Reply(text="ok", drop_after_chunks=1), Reply(text="ok"))
    events = stream(llm_server)
    assert texts(events) == "ok" and len(llm_server.requests) == 4


def test_stream_broken_after_text_is_not_retried(llm_server: FakeLLMServer) -> None:
    """A retry would repeat text the user has already seen."""
    llm_server.add(Reply(text="abcdefghi", drop_after_chunks=3), Reply(text="unused"))
    provider = make(llm_server)
    seen: list[str] = []

    async def consume() -> None:
        async for event in provider.stream(HELLO):
            if isinstance(event, TextDelta):
                seen.append(event.text)

    with pytest.raises(ProviderError, match="connection failed"):
        run(provider, consume())
    assert seen == ["abc", "def"] and llm_server.remaining == 1


def test_stream_cut_cleanly_before_the_end(llm_server: FakeLLMServer) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "half"}, "finish_reason": None}]}
    llm_server.add(RawResponse(f"data: {json.dumps(chunk)}\n\n", content_type="text/event-stream"))
    with pytest.raises(ProviderError, match="the stream ended before the answer was complete"):
        stream(llm_server)


def test_stream_error_event(llm_server: FakeLLMServer) -> None:
    body = 'data: {"error": {"message": "context length exceeded"}}\n\n'
    llm_server.add(RawResponse(body, content_type="text/event-stream"))
    with pytest.raises(ProviderError, match="error in the stream: context length exceeded"):
        stream(llm_server)


def test_stream_400_fails_fast(llm_server: FakeLLMServer) -> None:
    llm_server.add(HttpError(400, "bad tools"))
    with pytest.raises(ProviderError, match="HTTP 400: bad tools"):
        stream(llm_server)
    assert len(llm_server.requests) == 1


def test_server_that_ignores_stream_flag(llm_server: FakeLLMServer) -> None:
    llm_server.add(RawResponse(json.dumps(Reply(text="whole").completion())))
    events = stream(llm_server)
    assert events[0] == TextDelta("whole") and done(events).text == "whole"


def test_one_provider_across_event_loops(llm_server: FakeLLMServer) -> None:
    """A CLI may run several `asyncio.run`s; a client from a finished loop is not reused."""
    llm_server.add(Reply(text="one"), Reply(text="two"))
    provider = make(llm_server)
    assert asyncio.run(provider.complete(HELLO)).text == "one"
    assert run(provider, provider.complete(HELLO)).text == "two"
