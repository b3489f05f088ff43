"""The script pool (fair_pool.py, issue 24 §6): workers shared fairly between users, none held by a ghost.

Calls are held running by gates the test opens; every step is waited for
on the pool's own counts or a call's future, never by sleeping (a long
timeout is only the failure guard).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError, Future

import pytest

from agentkernel.util.fair_pool import FairPool

GUARD = 30.0  # seconds: only a hung test ever waits this long


def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for `condition()` by polling the pool's state; GUARD as the failure bound."""
    end = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(0.001)


class Gates:
    """Calls that record when they start and wait for their own gate."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.gates: dict[str, threading.Event] = {}
        self._all_open = False
        self._lock = threading.Lock()

    def call(self, name: str) -> str:
        with self._lock:
            self.started.append(name)
            gate = self.gates.setdefault(name, threading.Event())
            if self._all_open:
                gate.set()
        assert gate.wait(GUARD), f"{name} was never let out"
        return name

    def open(self, name: str) -> None:
        with self._lock:
            self.gates.setdefault(name, threading.Event()).set()

    def open_all(self) -> None:
        """Every gate, those of calls still to start too."""
        with self._lock:
            self._all_open = True
            for gate in self.gates.values():
                gate.set()


@pytest.fixture
def gates() -> Iterator[Gates]:
    made = Gates()
    try:
        yield made
    finally:
        made.open_all()  # nothing outlives its test


def test_a_freed_worker_takes_the_call_of_the_user_with_none_running(gates: Gates) -> None:
    pool = FairPool(2)
    try:
        alice = [pool.submit("alice", gates.call, f"a{n}") for n in range(4)]
        until(lambda: pool.running("alice") == 2 and pool.waiting("alice") == 2, "two running, two waiting")
        bob = pool.submit("bob", gates.call, "b0")
        gates.open("a0")  # alice has one running, bob none: the freed worker is bob's
        until(lambda: len(gates.started) == 3, "the freed worker to take a call")
        assert gates.started == ["a0", "a1", "b0"]
        gates.open_all()
        assert [f.result(GUARD) for f in alice] == ["a0", "a1", "a2", "a3"] and bob.result(GUARD) == "b0"
    finally:
        pool.shutdown()


def test_one_user_flooding_takes_at_most_max_per_user_and_another_still_runs(gates: Gates) -> None:
    pool = FairPool(4, max_per_user=2)
    try:
        flood = [pool.submit("alice", gates.call, f"a{n}") for n in range(24)]
        until(lambda: pool.running("alice") == 2 and pool.waiting("alice") == 22, "alice at her cap")
        gates.open("b0")
        assert pool.submit("bob", gates.call, "b0").result(GUARD) == "b0"  # while all of alice's wait
        assert not any(f.done() for f in flood)
        assert pool.running("alice") == 2  # free workers never took a third of hers
        gates.open_all()
        assert sorted(f.result(GUARD) for f in flood) == sorted(f"a{n}" for n in range(24))
    finally:
        pool.shutdown()


def test_a_cancelled_call_leaves_the_queue_and_never_runs(gates: Gates) -> None:
    pool = FairPool(1)
    try:
        first = pool.submit("alice", gates.call, "a0")
        until(lambda: gates.started == ["a0"], "a0 to start")
        gone = pool.submit("alice", gates.call, "gone")
        bob = pool.submit("bob", gates.call, "b0")
        assert gone.cancel()
        assert pool.waiting("alice") == 0  # no ghost for a worker to pick up
        gates.open("a0")
        gates.open("b0")
        assert (first.result(GUARD), bob.result(GUARD)) == ("a0", "b0")
        assert "gone" not in gates.started
        with pytest.raises(CancelledError):
            gone.result(0)
    finally:
        pool.shutdown()


def test_an_awaited_call_cancelled_while_queued_is_dropped_and_frees_nothing_twice(gates: Gates) -> None:
    async def main(pool: FairPool) -> str:
        first = asyncio.ensure_future(pool.run("alice", gates.call, "a0"))
        await asyncio.to_thread(until, lambda: gates.started == ["a0"], "a0 to start")
        waiting = asyncio.ensure_future(pool.run("alice", gates.call, "gone"))
        await asyncio.to_thread(until, lambda: pool.waiting("alice") == 1, "the second call to queue")
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        assert pool.waiting("alice") == 0
        gates.open("a0")
        assert await first == "a0"
        gates.open("b0")
        return await pool.run("bob", gates.call, "b0")  # the one worker is free again

    pool = FairPool(1)
    try:
        assert asyncio.run(main(pool)) == "b0"
        assert "gone" not in gates.started and pool.running("alice") == 0
    finally:
        pool.shutdown()


def test_a_call_made_from_a_worker_runs_there_never_waiting_for_a_sibling() -> None:
    pool = FairPool(1)

    def outer() -> str:
        inner: Future[str] = pool.submit("alice", lambda: "inner")  # the only worker is this one
        return "outer+" + inner.result(GUARD)

    try:
        assert pool.submit("alice", outer).result(GUARD) == "outer+inner"
    finally:
        pool.shutdown()


def test_a_failing_call_raises_to_its_caller_and_the_worker_goes_on() -> None:
    pool = FairPool(1)

    def fail() -> None:
        raise ValueError("the script's own error")

    try:
        with pytest.raises(ValueError, match="the script's own error"):
            asyncio.run(pool.run(None, fail))
        assert asyncio.run(pool.run(None, lambda: 42)) == 42
    finally:
        pool.shutdown()


def test_shutdown_cancels_waiting_calls_lets_running_ones_finish_and_refuses_more(gates: Gates) -> None:
    pool = FairPool(2, max_per_user=1)
    running = pool.submit("alice", gates.call, "a0")
    until(lambda: gates.started == ["a0"], "a0 to start")
    held_back = pool.submit("alice", gates.call, "a1")  # over alice's cap, though a worker is free
    pool.shutdown()
    assert held_back.cancelled()
    gates.open("a0")
    assert running.result(GUARD) == "a0"
    with pytest.raises(RuntimeError, match="scripts pool is shut down"):
        pool.submit("bob", lambda: None)


def test_workers_start_on_demand_up_to_max_workers_and_end_with_the_pool(gates: Gates) -> None:
    before = threading.active_count()
    pool = FairPool(3, name="pool-test")
    try:
        assert threading.active_count() == before  # nothing runs until there is work
        calls = [pool.submit(f"user{n}", gates.call, f"c{n}") for n in range(5)]
        until(lambda: len(gates.started) == 3, "three calls to start")
        names = [t.name for t in threading.enumerate() if t.name.startswith("pool-test-")]
        assert len(names) == 3
        gates.open_all()
        assert [c.result(GUARD) for c in calls] == [f"c{n}" for n in range(5)]
    finally:
        pool.shutdown()
    until(
        lambda: not [t for t in threading.enumerate() if t.name.startswith("pool-test-")],
        "the workers to end",
    )


def test_max_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FairPool(0)


def test_a_call_runs_in_a_copy_of_its_submitter_s_context_variables() -> None:
    """The span a call belongs to travels with it (telemetry/spans.py), as through asyncio.to_thread."""
    seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="none")
    pool = FairPool(2)
    try:
        token = seen.set("the submitter's")
        try:
            assert pool.submit("alice", seen.get).result(GUARD) == "the submitter's"
        finally:
            seen.reset(token)
        assert pool.submit("alice", seen.get).result(GUARD) == "none"
    finally:
        pool.shutdown()
