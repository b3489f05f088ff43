"""The LLM's slots shared fairly between users (llm/fair_slots.py, issue 24 §5).

A freed slot goes to the waiting user with the fewest held, ties to the
longest waiter; a waiter that gives up (cancelled, timed out) leaves no
ghost behind and loses no slot, even when it gives up just as a slot is
handed to it; waiters on other event loops and threads are served alike.
Every step is waited for by the slots' own counts, never by sleeping.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Callable

import pytest

from agentkernel.llm import ChatMessage, Completion, CompletionRequest, LimitedProvider, StreamEvent, Usage
from agentkernel.llm.fair_slots import FairSlots


async def settle(condition: Callable[[], bool], what: str) -> None:
    """Let the loop run until `condition()` holds; a bound on steps as the failure guard."""
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


def waits(slots: FairSlots, key: str) -> bool:
    return slots.waiting(key) >= 1


async def holder(slots: FairSlots, key: str, got: list[str], release: asyncio.Event) -> None:
    """Take a slot as `key`, say so in `got`, hold it until `release` is set."""
    async with slots.slot(key):
        got.append(key)
        await release.wait()


def test_a_freed_slot_goes_to_the_user_with_none_ahead_of_the_one_with_many() -> None:
    async def main() -> list[str]:
        slots, got = FairSlots(2), list[str]()
        alice_done, bob_done = asyncio.Event(), asyncio.Event()
        first = [asyncio.create_task(holder(slots, "alice", got, alice_done)) for _ in range(2)]
        await settle(lambda: slots.held("alice") == 2, "alice to hold both slots")
        more = [asyncio.create_task(holder(slots, "alice", got, alice_done)) for _ in range(3)]
        await settle(lambda: slots.waiting("alice") == 3, "alice's three more to wait")
        bob = asyncio.create_task(holder(slots, "bob", got, bob_done))  # asked last
        await settle(lambda: slots.waiting("bob") == 1, "bob to wait")
        first[0].cancel()  # one of alice's calls ends: its slot is bob's
        await settle(lambda: got[-1:] == ["bob"], "bob to get the freed slot")
        assert (slots.held("alice"), slots.held("bob"), slots.waiting("alice")) == (1, 1, 3)
        alice_done.set()
        bob_done.set()
        await asyncio.gather(*first[1:], *more, bob)
        await asyncio.gather(first[0], return_exceptions=True)
        return got

    assert asyncio.run(main()) == ["alice", "alice", "bob", "alice", "alice", "alice"]


def test_users_with_the_same_share_take_turns_the_one_served_longest_ago_first() -> None:
    async def main() -> list[str]:
        slots, got, done = FairSlots(1), list[str](), asyncio.Event()
        await slots.acquire(None)  # the kernel's own call holds the one slot
        waiters = []
        for key in ("carol", "alice", "bob", "alice", "carol"):
            waiters.append(asyncio.create_task(holder(slots, key, got, done)))
            await settle(functools.partial(waits, slots, key), f"{key} to wait")
        done.set()
        slots.release(None)
        await asyncio.gather(*waiters)
        return got

    # carol's second call goes before alice's: carol was served before alice was
    assert asyncio.run(main()) == ["carol", "alice", "bob", "carol", "alice"]


def test_a_cancelled_or_timed_out_waiter_leaves_no_ghost_and_no_slot_is_lost() -> None:
    async def main() -> None:
        slots = FairSlots(1)
        await slots.acquire("alice")
        gone = asyncio.create_task(slots.acquire("bob"))
        await settle(lambda: slots.waiting("bob") == 1, "bob to wait")
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(slots.acquire("carol"), 0.05)
        assert slots.waiting("bob") == slots.waiting("carol") == 0  # no ghost to hand the slot to
        slots.release("alice")
        await asyncio.wait_for(slots.acquire("dave"), 5)  # the slot came back free, not to a ghost
        assert (slots.held("dave"), slots.held("bob"), slots.held("carol")) == (1, 0, 0)
        slots.release("dave")

    asyncio.run(main())


def test_a_waiter_cancelled_as_the_slot_is_handed_to_it_passes_the_slot_on() -> None:
    async def main() -> None:
        slots = FairSlots(1)
        await slots.acquire("alice")
        bob = asyncio.create_task(slots.acquire("bob"))
        await settle(lambda: slots.waiting("bob") == 1, "bob to wait")
        carol = asyncio.create_task(slots.acquire("carol"))
        await settle(lambda: slots.waiting("carol") == 1, "carol to wait")
        slots.release("alice")  # handed to bob (he waited longer)…
        assert slots.held("bob") == 1
        bob.cancel()  # …who gives up before he runs again
        await asyncio.gather(bob, return_exceptions=True)
        await asyncio.wait_for(carol, 5)  # the slot went on to carol
        assert (slots.held("bob"), slots.held("carol")) == (0, 1)
        slots.release("carol")
        await asyncio.wait_for(slots.acquire("alice"), 5)  # and is free again after her

    asyncio.run(main())


def test_waiters_on_other_event_loops_and_threads_are_served_by_fair_share() -> None:
    slots, got = FairSlots(2), []
    waiting_elsewhere = threading.Event()

    def bob_on_his_own_loop() -> None:
        async def bob() -> None:
            task = asyncio.create_task(slots.acquire("bob"))
            await settle(lambda: slots.waiting("bob") == 1, "bob to wait")
            waiting_elsewhere.set()
            await task
            got.append("bob")
            slots.release("bob")

        asyncio.run(bob())

    async def main() -> None:
        await slots.acquire("alice")
        await slots.acquire("alice")
        more = asyncio.create_task(slots.acquire("alice"))
        await settle(lambda: slots.waiting("alice") == 1, "alice's third call to wait")
        other = threading.Thread(target=bob_on_his_own_loop)
        other.start()
        await asyncio.to_thread(waiting_elsewhere.wait, 30)
        slots.release("alice")  # bob, on another loop, holds none and alice one: the slot is his
        await asyncio.wait_for(more, 30)  # bob's release hands it back to alice's third call
        got.append("alice")
        await asyncio.to_thread(other.join, 30)
        slots.release("alice")
        slots.release("alice")

    asyncio.run(main())
    assert got == ["bob", "alice"]
    assert slots.held("alice") == slots.held("bob") == 0


class _GatedProvider:
    """Each call enters (recorded by its text), then waits until the test lets it out."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.open: dict[str, asyncio.Event] = {}

    async def complete(self, request: CompletionRequest) -> Completion:
        text = str(request.messages[-1].content)
        self.entered.append(text)
        await self.open.setdefault(text, asyncio.Event()).wait()
        return Completion(text, (), Usage(), "stop", None)

    def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


def entered(provider: _GatedProvider, count: int) -> bool:
    return len(provider.entered) == count


def test_the_provider_serves_requests_by_their_user() -> None:
    def ask(user: str | None, n: int) -> CompletionRequest:
        return CompletionRequest((ChatMessage.user(f"{user}-{n}"),), user=user)

    async def main() -> list[str]:
        inner = _GatedProvider()
        limited = LimitedProvider(inner, 2)
        calls = [asyncio.create_task(limited.complete(ask("alice", n))) for n in range(5)]
        await settle(lambda: limited.slots.waiting("alice") == 3, "alice: two in flight, three waiting")
        calls.append(asyncio.create_task(limited.complete(ask("bob", 0))))
        calls.append(asyncio.create_task(limited.complete(ask(None, 0))))  # no user: the kernel's own
        await settle(lambda: limited.slots.waiting("bob") == limited.slots.waiting(None) == 1, "both to wait")
        for answered in range(1, 8):  # the calls in flight answer one by one, oldest first
            inner.open.setdefault(inner.entered[answered - 1], asyncio.Event()).set()
            await settle(functools.partial(entered, inner, min(7, answered + 2)), "the next to enter")
        await asyncio.gather(*calls)
        return inner.entered

    # alice-2 before the kernel's call: alice, then holding none, was last served before it came
    assert asyncio.run(main()) == ["alice-0", "alice-1", "bob-0", "alice-2", "None-0", "alice-3", "alice-4"]


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FairSlots(0)
