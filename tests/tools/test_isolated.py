"""WorkerPool (tools/isolated.py): work in real worker processes, killed at the deadline, capped in memory.

Every function here is a real one the worker imports by name (the stdlib's,
or a built-in's): nothing is mocked. A worker's end is checked in /proc:
gone, not a zombie.
"""

from __future__ import annotations

import operator
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkernel.builtins.office_work import fill_template
from agentkernel.config import CallBudget, ScriptLimits
from agentkernel.errors import ScriptError, ScriptLimitError
from agentkernel.tools.isolated import WorkerPool
from tests.conftest import wait_until


def budget(timeout_secs: float = 30.0, memory_mb: int = 64) -> CallBudget:
    return CallBudget.starting_now(ScriptLimits(1, timeout_secs, memory_mb << 20, 1 << 20))


def gone(pid: int) -> bool:
    """No such process: ended and reaped (a zombie still has its /proc entry)."""
    return not Path(f"/proc/{pid}").exists()


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    workers = WorkerPool(1)
    try:
        yield workers
    finally:
        workers.close()


def warm(pool: WorkerPool) -> int:
    """The pool's one worker, started and answering; its pid."""
    assert pool.run("t", budget(), operator.add, 2, 3) == 5
    [pid] = pool.pids()
    return pid


def test_a_call_past_its_deadline_is_killed_and_the_worker_replaced(pool: WorkerPool) -> None:
    first = warm(pool)
    with pytest.raises(ScriptLimitError) as stopped:
        pool.run("slow_tool", budget(0.5), time.sleep, 60)
    assert stopped.value.limit == "timeout_secs"
    assert str(stopped.value) == "slow_tool exceeded timeout_secs (0.5 s): its worker process was killed"
    assert gone(first)
    [second] = pool.pids()
    assert second != first
    assert pool.run("t", budget(), operator.mul, 6, 7) == 42


def test_memory_past_the_limit_is_named_and_the_worker_replaced(pool: WorkerPool) -> None:
    first = warm(pool)
    with pytest.raises(ScriptLimitError) as stopped:
        pool.run("big_tool", budget(memory_mb=16), bytearray, 200 << 20)
    assert stopped.value.limit == "memory"
    assert str(stopped.value).startswith("big_tool exceeded memory_limit_mb (16 MiB) in its worker process")
    assert gone(first)
    assert pool.run("t", budget(memory_mb=16), len, bytearray(8 << 20)) == 8 << 20  # the limit is per call


def test_a_refusal_is_the_functions_own_text_and_the_worker_stays(pool: WorkerPool) -> None:
    first = warm(pool)
    with pytest.raises(ScriptError) as refused:
        pool.run("fill_contract", budget(), fill_template, b"not a zip", "'t.docx'", {}, 1000)
    assert str(refused.value) == (
        "fill_contract: template 't.docx' is not a Word .docx file (it is not even a zip archive)"
    )
    assert not isinstance(refused.value, ScriptLimitError)
    assert pool.pids() == [first]


def test_a_crash_is_named_and_a_dead_worker_explained(pool: WorkerPool) -> None:
    with pytest.raises(ScriptError, match=r"^t failed in its worker process: ValueError: invalid literal"):
        pool.run("t", budget(), int, "x")
    with pytest.raises(ScriptError) as died:
        pool.run("t", budget(), os.abort)
    assert str(died.value) == (
        "t: its worker process died (SIGABRT), most likely out of memory_limit_mb (64 MiB)"
    )
    assert pool.run("t", budget(), operator.add, 1, 1) == 2


def hang_up(secs: float) -> None:
    """In a worker: close every descriptor (its socket too) and live on: a worker that stops answering."""
    os.closerange(3, 1 << 16)
    time.sleep(secs)


def test_a_worker_that_stops_answering_is_ended_and_said_so(pool: WorkerPool) -> None:
    """Told apart from a worker that died (whose socket closes a moment before it can be reaped: its own
    status is waited for, so an abort is named SIGABRT, never the kill that would have beaten it)."""
    with pytest.raises(ScriptError) as ended:
        pool.run("t", budget(), hang_up, 600.0)
    assert re.fullmatch(r"t: its worker process stopped answering \(.+\) and was ended", str(ended.value))
    assert pool.run("t", budget(), operator.add, 1, 1) == 2


def test_only_plain_values_come_back(pool: WorkerPool) -> None:
    with pytest.raises(ScriptError, match=r"answered what no kernel reads: .* only plain values may cross"):
        pool.run("t", budget(), ScriptError, "an object, not a value")


def test_a_worker_has_none_of_the_kernels_descriptors_environment_or_folder(pool: WorkerPool) -> None:
    os.environ["AGENTKERNEL_TEST_SECRET"] = "s3cret"
    with socket.create_server(("127.0.0.1", 0)) as listening:
        assert listening.fileno() > 2
        try:
            assert pool.run("t", budget(), os.getenv, "AGENTKERNEL_TEST_SECRET") is None
        finally:
            del os.environ["AGENTKERNEL_TEST_SECRET"]
        descriptors = pool.run("t", budget(), os.listdir, "/proc/self/fd")
    # stdin and stdout (/dev/null), stderr (the kernel's log), its socket, and the one listdir opened
    assert len(descriptors) == 5, descriptors
    assert pool.run("t", budget(), os.getcwd) == "/"


def test_a_deadline_that_passes_while_the_worker_starts_keeps_it_for_the_next_call(pool: WorkerPool) -> None:
    with pytest.raises(ScriptLimitError, match=r"exceeded timeout_secs \(0.001 s\): waiting for its worker"):
        pool.run("t", budget(0.001), operator.add, 1, 2)
    [starting] = pool.pids()
    assert pool.run("t", budget(), operator.add, 1, 2) == 3
    assert pool.pids() == [starting]


def test_a_call_waits_for_a_free_worker_until_its_deadline(pool: WorkerPool) -> None:
    warm(pool)
    busy = threading.Thread(target=lambda: pool.run("t", budget(), time.sleep, 3))
    busy.start()
    try:
        with pytest.raises(ScriptLimitError) as waited:
            pool.run("second", budget(0.5), operator.add, 1, 2)
        assert str(waited.value) == (
            "second exceeded timeout_secs (0.5 s) waiting for one of the 1 worker processes "
            "(scripts.python_workers), all busy"
        )
    finally:
        busy.join()


def test_close_ends_idle_and_busy_workers() -> None:
    two = WorkerPool(2)
    idle = warm(two)
    failures: list[str] = []

    def slow(user: str) -> None:
        with pytest.raises(ScriptError) as stopped:
            two.run("t", budget(), time.sleep, 60, user=user)
        failures.append(str(stopped.value))

    callers = [threading.Thread(target=slow, args=(user,)) for user in ("ann", "bob")]
    for caller in callers:
        caller.start()
    wait_until(lambda: len(two.pids()) == 2, "a second worker for the second sleeper")
    pids = two.pids()
    assert idle in pids
    two.close()
    for caller in callers:
        caller.join(timeout=30)
    assert failures == ["t: stopped, the kernel is closing"] * 2
    assert all(gone(pid) for pid in pids)
    with pytest.raises(ScriptError, match="the kernel is closing"):
        two.run("t", budget(), operator.add, 1, 2)
    two.close()  # twice is harmless


def test_one_user_never_holds_every_worker_while_another_waits() -> None:
    """Two workers: ann's first long call holds one, her second waits though the other is free, and bob's
    call runs at once on it (before, ann's two calls held both and bob's timed out waiting); when ann's
    first ends, her second gets its turn."""
    two = WorkerPool(2)
    answers: dict[str, object] = {}

    def ann(which: str, secs: float) -> None:
        answers[which] = two.run("t", budget(), time.sleep, secs, user="ann")

    first = threading.Thread(target=ann, args=("first", 2.0))
    second = threading.Thread(target=ann, args=("second", 2.0))
    try:
        first.start()
        wait_until(lambda: len(two.pids()) == 1, "ann's first call in a worker")
        second.start()
        wait_until(lambda: two.waiting("ann") == 1, "ann's second call waiting for her turn")
        assert two.run("bob's", budget(1.5), operator.add, 1, 2, user="bob") == 3
        assert "first" not in answers  # bob's ran while ann's first still held its worker
        first.join(timeout=30)
        second.join(timeout=30)
        assert answers == {"first": None, "second": None}
    finally:
        two.close()
