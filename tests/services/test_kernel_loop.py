"""The kernel's event loop as worker threads reach it (services/kernel_loop.py; S9.2, S21.3).

Scripts' `llm()` calls and sub-agents run on the kernel's loop — the
server's or a chat's, else one of the kernel's own — while other loops may
use the same provider: the concurrency limit and the HTTP clients must hold
across all of them.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from agentkernel.llm import ChatMessage, CompletionRequest, LimitedProvider, OpenAICompatProvider
from agentkernel.services.kernel_loop import KernelLoop
from tests.fakes import FakeLLMServer, RecordedRequest, Reply

HELLO = CompletionRequest((ChatMessage.user("hi"),))


def slowly(request: RecordedRequest) -> Reply:
    return Reply(text="ok", delay=0.05)


def test_an_int_limit_holds_across_event_loops_and_threads(llm_server: FakeLLMServer) -> None:
    llm_server.respond_with(slowly)
    inner = OpenAICompatProvider(llm_server.base_url, "m", max_retries=0)
    limited = LimitedProvider(inner, 2)
    helpers = KernelLoop()

    async def three() -> None:
        await asyncio.gather(*(limited.complete(HELLO) for _ in range(3)))

    with ThreadPoolExecutor(4) as pool:
        answers = [pool.submit(helpers.run, lambda: limited.complete(HELLO), 10) for _ in range(4)]
        loops = [pool.submit(asyncio.run, three()) for _ in range(2)]
        assert all(a.result().text == "ok" for a in answers)
        for done in loops:
            done.result()
    assert llm_server.max_in_flight == 2 and len(llm_server.requests) == 10
    assert len(inner._clients) >= 1
    asyncio.run(inner.aclose())  # the kernel loop's client closed on that loop, the dead loops' dropped
    assert inner._clients == {}
    helpers.close()


def test_a_wait_past_its_timeout_cancels_the_request() -> None:
    helpers = KernelLoop()
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError, match=r"no answer within 0\.05 s"):
        helpers.run(forever, 0.05)
    assert cancelled.wait(5)
    with pytest.raises(TimeoutError, match="no time left"):
        helpers.run(forever, 0)
    helpers.close()


def test_an_adopted_running_loop_is_used_and_waiting_on_it_from_itself_is_refused() -> None:
    home = KernelLoop()

    async def where() -> int:
        return threading.get_ident()

    async def chat() -> None:
        home.adopt(asyncio.get_running_loop())
        here = threading.get_ident()
        on_worker = await asyncio.to_thread(home.run, where, 5)  # a script's thread waits on the chat's loop
        assert on_worker == here and not home.owns_loop
        with pytest.raises(RuntimeError, match="scripts run on worker threads"):
            home.run(where, 5)

    asyncio.run(chat())
    assert home.run(where, 5) != threading.get_ident() and home.owns_loop  # the adopted loop ended
    home.close()
    assert not home.owns_loop
