"""The kernel-wide concurrency limit (S9.2): LimitedProvider over the real provider."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing

import pytest

from agentkernel.llm import (
    ChatMessage,
    Completion,
    CompletionRequest,
    LimitedProvider,
    OpenAICompatProvider,
    StreamDone,
    StreamEvent,
    TextDelta,
    Usage,
)
from agentkernel.llm.fair_slots import FairSlots
from tests.fakes import FakeLLMServer, RecordedRequest, Reply

HELLO = CompletionRequest((ChatMessage.user("hi"),))


def echo_slowly(request: RecordedRequest) -> Reply:
    """Answer with the question, slowly enough that concurrent requests overlap."""
    return Reply(text=request.body["messages"][-1]["content"], delay=0.1, chunk_delay=0.02)


def ask(n: int) -> CompletionRequest:
    return CompletionRequest((ChatMessage.user(f"q{n}"),))


def test_at_most_limit_requests_in_flight(llm_server: FakeLLMServer) -> None:
    llm_server.respond_with(echo_slowly)

    async def main() -> list[Completion]:
        async with OpenAICompatProvider(llm_server.base_url, "m") as inner:
            limited = LimitedProvider(inner, limit=2)
            return await asyncio.gather(*(limited.complete(ask(n)) for n in range(5)))

    answers = asyncio.run(main())
    assert [a.text for a in answers] == [f"q{n}" for n in range(5)]
    assert llm_server.max_in_flight == 2


def test_a_stream_holds_its_slot_to_the_end(llm_server: FakeLLMServer) -> None:
    llm_server.respond_with(echo_slowly)

    async def collect(limited: LimitedProvider, n: int) -> str:
        return "".join([e.text async for e in limited.stream(ask(n)) if isinstance(e, TextDelta)])

    async def main() -> list[str]:
        async with OpenAICompatProvider(llm_server.base_url, "m") as inner:
            limited = LimitedProvider(inner, limit=1)
            return await asyncio.gather(*(collect(limited, n) for n in range(3)))

    assert asyncio.run(main()) == ["q0", "q1", "q2"]
    assert llm_server.max_in_flight == 1


def test_one_set_of_slots_limits_every_provider_sharing_it(llm_server: FakeLLMServer) -> None:
    llm_server.respond_with(echo_slowly)

    async def main() -> None:
        shared = FairSlots(2)
        async with (
            OpenAICompatProvider(llm_server.base_url, "a") as a,
            OpenAICompatProvider(llm_server.base_url, "b") as b,
        ):
            first, second = LimitedProvider(a, shared), LimitedProvider(b, shared)
            await asyncio.gather(*(p.complete(ask(n)) for n in range(3) for p in (first, second)))

    asyncio.run(main())
    assert llm_server.max_in_flight == 2 and len(llm_server.requests) == 6


class _EndlessProvider:
    """A provider that streams forever: only closing the stream ends it."""

    def __init__(self) -> None:
        self.closed_streams = 0

    async def complete(self, request: CompletionRequest) -> Completion:
        return Completion("done", (), Usage(), "stop", None)

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        try:
            while True:
                yield TextDelta("x")
                await asyncio.sleep(0)
        finally:
            self.closed_streams += 1

    async def aclose(self) -> None:
        pass


def test_closing_a_stream_early_frees_its_slot() -> None:
    inner = _EndlessProvider()
    limited = LimitedProvider(inner, limit=1)

    async def main() -> str | None:
        stream = limited.stream(HELLO)
        assert isinstance(stream, AsyncGenerator)  # what aclosing needs: an async generator's aclose
        async with aclosing(stream) as events:
            async for _ in events:
                break
        answer = await asyncio.wait_for(limited.complete(HELLO), timeout=2)
        return answer.text

    assert asyncio.run(main()) == "done"
    assert inner.closed_streams == 1


def test_stream_done_comes_after_the_slot_is_free(llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="hi"))

    async def main() -> bool:
        async with OpenAICompatProvider(llm_server.base_url, "m") as inner:
            limited = LimitedProvider(inner, limit=1)
            async for event in limited.stream(HELLO):
                if isinstance(event, StreamDone):
                    # a consumer that stops here must not block the next call
                    await asyncio.wait_for(limited.complete(HELLO), timeout=2)
                    return True
        return False

    llm_server.add(Reply(text="next"))
    assert asyncio.run(main())


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        LimitedProvider(_EndlessProvider(), 0)
