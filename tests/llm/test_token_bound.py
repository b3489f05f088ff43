"""Holding a call's cost before spending a shared budget (llm/token_bound.py; S9.2, S17).

Threads stand for scripts and sub-agents spending one group at once; they
wait on events, never on time.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentkernel.agent.processes import Process, ProcessTable
from agentkernel.budget import BudgetExhausted
from agentkernel.config.templates import TemplateSpec
from agentkernel.llm import ChatMessage, ToolCall, ToolSchema, Usage
from agentkernel.llm.token_bound import (
    ANSWER_ROOM,
    MESSAGE_MARGIN,
    PromptTokens,
    held_for,
    held_for_async,
    message_bound,
    prompt_bound,
)


def spawn(tmp_path: Path, budget: int | None) -> Process:
    template = TemplateSpec(name="t", instructions="x", budget_tokens=budget)
    return ProcessTable().spawn(template, temp_root=tmp_path)


def test_bounds_count_every_byte_the_model_is_sent() -> None:
    call = ToolCall("c1", "upper", '{"text": "щ"}')
    assert message_bound(ChatMessage.assistant(None, (call,))) == 2 + 5 + 14 + 2 * MESSAGE_MARGIN
    assert message_bound(ChatMessage.tool("c1", "Щ", "upper")) == 2 + 2 + 5 + MESSAGE_MARGIN
    tool = ToolSchema("upper", "Up", {"type": "object"})
    messages = [ChatMessage.user("ab")]
    size = len('{"type": "object"}')
    assert prompt_bound(messages, tools=[tool]) == prompt_bound(messages) + 5 + 2 + MESSAGE_MARGIN + size
    assert prompt_bound(messages, {"type": "string"}) == prompt_bound(messages) + len('{"type": "string"}')


def test_prompt_tokens_are_exact_for_what_the_server_counted() -> None:
    known = [ChatMessage.system("s" * 1000), ChatMessage.user("q"), ChatMessage.assistant("a")]
    estimate = PromptTokens()
    assert estimate.bound(known, ()) == prompt_bound(known)  # nothing counted yet: the bytes
    estimate.learn(known, Usage(prompt_tokens=40, completion_tokens=2))
    more = [*known, ChatMessage.user("next")]
    assert estimate.bound(more, ()) == 42 + message_bound(more[-1]) + MESSAGE_MARGIN
    changed = [ChatMessage.system("other"), *more[1:]]
    assert estimate.bound(changed, ()) == prompt_bound(changed)  # another conversation: the bytes again
    estimate.learn(known, Usage())  # a server that reports no usage teaches nothing
    assert estimate.bound(more, ()) == prompt_bound(more)


def test_without_a_limit_nothing_is_held(tmp_path: Path) -> None:
    process = spawn(tmp_path, None)
    with held_for(process.budget, 10**9, None, None) as max_tokens:
        assert max_tokens is None and process.budget.held == 0
    with held_for(None, 5, 300, None) as max_tokens:
        assert max_tokens == 300


def test_a_call_holds_its_bound_and_room_and_shrinks_only_at_the_end(tmp_path: Path) -> None:
    process = spawn(tmp_path, 1000)
    with held_for(process.budget, 100, 300, None) as max_tokens:
        assert max_tokens == 300 and process.budget.held == 400
        process.charge(250)
    assert process.budget.held == 0 and process.budget.remaining == 750
    with held_for(
        process.budget, 100, None, None
    ) as max_tokens:  # no max_tokens: all that is left, < ANSWER_ROOM
        assert max_tokens == 650 and ANSWER_ROOM > 650
    with (
        pytest.raises(BudgetExhausted, match=r"^caller budget exhausted$"),
        held_for(process.budget, 750, 10, None),
    ):
        pass
    assert process.budget.held == 0


def test_a_call_waits_for_calls_in_flight_rather_than_shrink_or_fail(tmp_path: Path) -> None:
    process = spawn(tmp_path, 1000)
    second_waits, second_got = threading.Event(), []
    signal_of = process.budget.release_signal

    class Observed:
        """The release signal, telling the test when a caller starts waiting on it."""

        def __init__(self) -> None:
            self.signal = signal_of()

        def wait(self, timeout: float | None = None) -> bool:
            second_waits.set()
            return bool(self.signal.wait(timeout))

    def second() -> None:
        with held_for(process.budget, 100, 500, 60) as max_tokens:
            second_got.append(max_tokens)
            process.charge(300)

    with ThreadPoolExecutor(1) as pool:
        with held_for(process.budget, 100, 700, None) as first_room:
            assert first_room == 700 and process.budget.held == 800
            process.budget.release_signal = Observed  # type: ignore[method-assign,assignment]
            waiting = pool.submit(second)
            assert second_waits.wait(10)  # it found 200 free while 800 are held, and waits
            process.charge(200)  # the first answer, cheaper than its hold
            assert second_got == []  # it did not settle for the 200 free
        waiting.result(timeout=60)
    assert second_got == [500] and process.budget.used == 500 and process.budget.held == 0


def test_twenty_parallel_calls_never_pass_the_limit(tmp_path: Path) -> None:
    process = spawn(tmp_path, 5000)
    answered: list[int] = []
    lock = threading.Lock()

    def one(_: int) -> None:
        try:
            with held_for(process.budget, 200, 400, 60) as max_tokens:
                assert max_tokens is not None and max_tokens >= 1
                process.charge(200 + max_tokens)  # the whole room used, the worst case
                with lock:
                    answered.append(max_tokens)
        except BudgetExhausted:
            pass

    with ThreadPoolExecutor(20) as pool:
        list(pool.map(one, range(20)))
    assert process.budget.used <= 5000 and process.budget.held == 0
    assert process.budget.used == sum(200 + n for n in answered) and len(answered) >= 8


def test_a_stop_while_waiting_holds_nothing(tmp_path: Path) -> None:
    process = spawn(tmp_path, 1000)

    async def main() -> None:
        with held_for(process.budget, 100, 800, None):
            waiter = asyncio.ensure_future(_hold(process))
            await asyncio.sleep(0)  # it starts, finds 900 held, and waits
            assert not waiter.done()
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
        assert process.budget.held == 0

    asyncio.run(main())


async def _hold(process: Process) -> None:
    async with held_for_async(process.budget, 100, 800, process.deadline):
        pass
