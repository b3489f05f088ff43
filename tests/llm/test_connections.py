"""The LLM client's connections (llm/connections.py): every one kept for the next call, one request each at
a time, the least recently used closed once idle, all closed with the provider."""

from __future__ import annotations

import asyncio

import httpx

from agentkernel.llm import ChatMessage, CompletionRequest, OpenAICompatProvider, StreamDone
from agentkernel.llm.connections import ClientStack
from tests.fakes import FakeLLMServer, Reply

HELLO = CompletionRequest((ChatMessage.user("hi"),))
AT_ONCE = 25


def plain_client(limits: httpx.Limits) -> httpx.AsyncClient:
    return httpx.AsyncClient(limits=limits)


def test_every_connection_of_calls_at_once_is_kept_for_the_next_ones(llm_server: FakeLLMServer) -> None:
    """25 streamed calls at once, twice: 25 connections, the second 25 calls on the first's (a client
    lent to one call at a time is given back for the next, its connection open)."""
    llm_server.respond_with(lambda request: Reply(text="ok"))
    provider = OpenAICompatProvider(llm_server.base_url, "m", max_retries=0)

    async def one_call() -> str:
        events = [event async for event in provider.stream(HELLO)]
        assert isinstance(events[-1], StreamDone)
        return events[-1].completion.text or ""

    async def twice() -> list[str]:
        async with provider:
            first = await asyncio.gather(*(one_call() for _ in range(AT_ONCE)))
            return first + list(await asyncio.gather(*(one_call() for _ in range(AT_ONCE))))

    assert asyncio.run(twice()) == ["ok"] * (2 * AT_ONCE)
    assert llm_server.connections == AT_ONCE


def test_a_client_is_lent_to_one_request_at_a_time_the_last_given_back_first() -> None:
    async def go() -> None:
        stack = ClientStack(plain_client)
        async with stack.lend() as one, stack.lend() as two:
            assert one is not two
        assert stack.idle == 2
        async with stack.lend() as again:
            assert again is one  # `two` was given back first, `one` last
        await stack.aclose()

    asyncio.run(go())


def test_clients_idle_longer_than_the_keep_alive_are_closed_as_others_come_back() -> None:
    async def go() -> None:
        stack = ClientStack(plain_client, idle_secs=0.0)
        async with stack.lend() as old, stack.lend() as new:
            pass
        # `new` was given back first: `old`, given back after it, found it idle past 0 s
        assert (stack.idle, new.is_closed, old.is_closed) == (1, True, False)
        await stack.aclose()
        assert old.is_closed

    asyncio.run(go())


def test_a_client_lent_when_the_stack_closes_is_closed_when_given_back() -> None:
    async def go() -> None:
        stack = ClientStack(plain_client)
        async with stack.lend() as lent, stack.lend() as idle:
            pass
        async with stack.lend() as again:
            assert again is lent
            await stack.aclose()
            assert idle.is_closed and not lent.is_closed
        assert lent.is_closed and stack.idle == 0

    asyncio.run(go())


def test_a_request_lending_while_an_idle_client_closes_takes_a_client_safely() -> None:
    """Closing an idle client waits; another request may lend meanwhile (the stack emptied under it)."""
    closing, lent, closed = asyncio.Event(), asyncio.Event(), asyncio.Event()

    class SlowToClose(httpx.AsyncClient):
        async def aclose(self) -> None:
            closing.set()
            await lent.wait()  # the other request took the last idle client meanwhile
            await super().aclose()
            closed.set()

    async def go() -> None:
        stack = ClientStack(lambda limits: SlowToClose(limits=limits), idle_secs=0.0)

        async def lend_while_closing() -> httpx.AsyncClient:
            await closing.wait()
            async with stack.lend() as client:
                lent.set()
                await closed.wait()
                return client

        other = asyncio.create_task(lend_while_closing())
        async with stack.lend() as kept, stack.lend():
            pass  # the inner one goes back first, and is closed as idle when `kept` comes back
        assert await other is kept and stack.idle == 1
        await stack.aclose()

    asyncio.run(go())
