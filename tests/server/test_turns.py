"""A turn's events as its reader takes them (Turn.batches, Turn.events): those waiting come together;
and its lease's renewal, which starts only once the turn outlives a third of the lease.

A reader behind its turn (a busy server) writes every frame waiting in one
piece; the events, their order, the end and what a reader that leaves
early does to the turn are as when they came one by one.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from agentkernel import Kernel
from agentkernel.agent.session import ChatSession
from agentkernel.config import load_kernel_config
from agentkernel.llm.base import ChatMessage
from agentkernel.server.events import StreamEvent
from agentkernel.server.sessions import SessionInfo
from agentkernel.server.turns import Turn, TurnRunner
from agentkernel.services.turn_leases import TurnLeases
from tests.conftest import wait_until
from tests.fakes import FakeLLMServer
from tests.server.test_turn_caps import Held

IDLE_SECS = 60.0  # the keep-alive's wait; never reached here (every event is queued before it is read)


def queued(count: int, *, ended: bool) -> Turn:
    """A turn whose `run` event and `count` tokens wait, then its end when `ended`."""
    turn = Turn("s1", "r1", run_id="run-1")
    turn.begin()
    for number in range(count):
        turn._put(StreamEvent("token", {"text": str(number)}))
    if ended:
        turn.close()
    return turn


async def read_batches(turn: Turn) -> list[list[str] | None]:
    shown: list[list[str] | None] = []
    async with contextlib.aclosing(turn.batches(IDLE_SECS)) as batches:
        async for batch in batches:
            shown.append(None if batch is None else [event.type for event in batch])
    return shown


def test_the_events_waiting_come_in_one_batch_in_order_and_the_end_after_them() -> None:
    turn = queued(3, ended=True)
    assert asyncio.run(read_batches(turn)) == [["run", "token", "token", "token"]]
    assert not turn.abandoned  # read to the end
    assert turn._backlog == 0


def test_events_still_gives_them_one_by_one_in_the_same_order() -> None:
    async def read() -> list[str]:
        turn = queued(2, ended=True)
        async with contextlib.aclosing(turn.events(IDLE_SECS)) as events:
            return [event.type async for event in events if event is not None]

    assert asyncio.run(read()) == ["run", "token", "token"]


def test_a_reader_that_leaves_before_the_end_abandons_the_turn() -> None:
    async def leave_after_one_batch(turn: Turn) -> list[str]:
        async with contextlib.aclosing(turn.batches(IDLE_SECS)) as batches:
            async for batch in batches:
                assert batch is not None
                return [event.type for event in batch]
        return []

    turn = queued(2, ended=False)
    assert asyncio.run(leave_after_one_batch(turn)) == ["run", "token", "token"]
    assert turn.abandoned  # the end never reached the reader
    assert not turn.streaming  # nothing more is queued for it


def test_events_queued_after_a_batch_was_taken_come_in_the_next() -> None:
    async def read() -> list[list[str] | None]:
        turn = queued(1, ended=False)
        shown: list[list[str] | None] = []
        async with contextlib.aclosing(turn.batches(IDLE_SECS)) as batches:
            async for batch in batches:
                shown.append(None if batch is None else [event.type for event in batch])
                if len(shown) == 1:  # the turn goes on while the reader writes
                    turn._put(StreamEvent("reply", {"content": "x", "streamed": True}))
                    turn.close()
        return shown

    assert asyncio.run(read()) == [["run", "token"], ["reply"]]


# -- the lease's renewal ---------------------------------------------------------------------------


@contextlib.contextmanager
def held_kernel(
    kernel_yaml: Path, llm_server: FakeLLMServer, count: int
) -> Iterator[tuple[Kernel, TurnLeases, threading.Event, threading.Event]]:
    """A kernel whose next LLM answer waits for a gate; its lease store; an event set once the store
    has run `count` renewals; the gate (opened at the end in any case)."""
    gate = threading.Event()
    llm_server.add(Held(gate))
    kernel = Kernel(load_kernel_config(kernel_yaml))
    try:
        leases = kernel.turn_leases()
        assert isinstance(leases, TurnLeases)
        yield kernel, leases, renewals_seen(leases, count), gate
    finally:
        gate.set()  # a held LLM answer never outlives its test
        kernel.close()


def renewals_seen(leases: TurnLeases, count: int) -> threading.Event:
    """Set once the lease store has run `count` renewals (its UPDATE of a lease's expiry)."""
    seen, renewals = threading.Event(), [0]

    def traced(statement: str) -> None:
        if statement.startswith("UPDATE turn_leases SET expires_at"):
            renewals[0] += 1
            if renewals[0] >= count:
                seen.set()

    leases._conn.set_trace_callback(traced)
    return seen


def renewing_tasks() -> list[str]:
    return [task.get_name() for task in asyncio.all_tasks() if task.get_name().startswith("lease ")]


async def held_turn(
    kernel: Kernel, lease_secs: float, while_held: Callable[[], Awaitable[None]]
) -> tuple[str, list[str]]:
    """A turn of session s1 held at its LLM call: `while_held()` awaited meanwhile; the turn's `done`
    reason and the renewing tasks left once it ended."""

    def open_chat(info: SessionInfo, history: list[ChatMessage] | None) -> ChatSession:
        return kernel.chat(info.template, user_id=info.user_id, session_id=info.id)

    runner = TurnRunner(open_chat, kernel.end_chat, leases=kernel.turn_leases, lease_secs=lease_secs)
    info = SessionInfo("s1", "alice", "tester", "2026-01-01T00:00:00+00:00")
    turn = await runner.start(info, "hi", "r1")
    assert turn.task is not None
    await while_held()
    await turn.task
    assert turn.result is not None
    return turn.result.reason.value, renewing_tasks()


def test_a_turn_that_outlives_a_third_of_its_lease_has_it_renewed_until_it_ends(
    kernel_yaml: Path, llm_server: FakeLLMServer
) -> None:
    with held_kernel(kernel_yaml, llm_server, 2) as (kernel, leases, twice, gate):

        async def renewed_twice() -> None:
            assert await asyncio.to_thread(twice.wait, 60), "the lease was not renewed while the turn ran"
            assert renewing_tasks() == ["lease s1"]
            gate.set()

        reason, left = asyncio.run(held_turn(kernel, 0.6, renewed_twice))
        assert (reason, left) == ("job_done", [])  # the renewal ended with the turn
        assert leases.running("alice") == 0  # and the lease went back


def test_a_turn_shorter_than_a_third_of_its_lease_starts_no_renewal(
    kernel_yaml: Path, llm_server: FakeLLMServer
) -> None:
    """Most turns end long before a third of their lease: their renewal is a timer, never a task."""

    def reached() -> bool:  # the turn is running: its lease taken, its LLM call made
        return len(llm_server.requests) == 1

    with held_kernel(kernel_yaml, llm_server, 1) as (kernel, leases, renewed, gate):

        async def at_the_llm() -> None:
            await asyncio.to_thread(wait_until, reached, "the turn to reach the LLM")
            assert renewing_tasks() == []
            gate.set()

        reason, left = asyncio.run(held_turn(kernel, 600, at_the_llm))
        assert (reason, left) == ("job_done", [])
        assert not renewed.is_set()
        assert leases.running("alice") == 0


def test_a_turn_gives_its_lease_back_in_the_transaction_that_ends_its_run(
    kernel_yaml: Path, llm_server: FakeLLMServer
) -> None:
    """No write of its own for the lease's release: the session is free once the run's end is written,
    and a process killed right after leaves no lease behind to expire."""
    with held_kernel(kernel_yaml, llm_server, 1) as (kernel, leases, _, gate):
        gate.set()
        transactions: list[list[str]] = []

        def traced(statement: str) -> None:
            if statement.startswith("BEGIN"):
                transactions.append([])
            elif transactions and not statement.startswith("COMMIT"):
                transactions[-1].append(statement.split(" WHERE")[0])

        leases._conn.set_trace_callback(traced)  # the file's one writing connection: the transcript's too

        async def nothing() -> None:
            pass

        reason, _ = asyncio.run(held_turn(kernel, 600, nothing))
        assert reason == "job_done" and leases.running("alice") == 0
        releases = [t for t in transactions if "DELETE FROM turn_leases" in t]
        assert len(releases) == 1, transactions
        assert any(s.startswith("UPDATE runs SET status = 'ended'") for s in releases[0]), releases[0]
