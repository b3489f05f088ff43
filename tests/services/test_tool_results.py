"""The store of tool results (S16.4): newest first per (session, tool), bounded per tool and in sessions.

Every test runs on both stores: the SQLite file beside the transcript and
the PostgreSQL database (S27.2, tests/pg.py). Two stores on one file (or
database) stand for two processes; the writers racing are real processes.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkernel.services.tool_results import ToolResults, ToolResultStore
from agentkernel.services.tool_results_pg import PostgresToolResults

WAIT_SECS = 120.0  # an upper bound for another process, never a measured time

Store = ToolResultStore | PostgresToolResults

RECORDER = textwrap.dedent(
    """
    import sys
    from agentkernel.services.tool_results import ToolResultStore

    where, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if where.startswith("postgresql://"):
        from agentkernel.services.tool_results_pg import PostgresToolResults

        store = PostgresToolResults(where, per_tool=1000, sessions=3)
    else:
        store = ToolResultStore(where, per_tool=1000, sessions=3)
    print("ready", flush=True)
    sys.stdin.readline()
    for n in range(count):
        store.record("shared", "t", {"who": who, "n": n})
        store.record(f"{who}-{n}", "t", {"n": n})  # a new session each time: the bound at work
    store.close()
    print("done", flush=True)
    """
)


def open_store(where: str, per_tool: int = 3, sessions: int = 100) -> Store:
    """The PostgreSQL store for a postgresql:// URL, else the SQLite one on that file."""
    if where.startswith("postgresql://"):
        return PostgresToolResults(where, per_tool=per_tool, sessions=sessions)
    return ToolResultStore(where, per_tool=per_tool, sessions=sessions)


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the results live: a tool_results.db file, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "data" / "tool_results.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(where: str) -> Iterator[Store]:
    with open_store(where) as opened:
        yield opened


def test_results_are_read_newest_first_and_only_the_last_per_tool_are_kept(store: Store) -> None:
    assert isinstance(store, ToolResults)
    for n in range(5):
        store.record("k", "t", {"n": n, "text": "é ✓"})
    assert [store.get("k", "t", i) for i in range(4)] == [
        {"n": 4, "text": "é ✓"},
        {"n": 3, "text": "é ✓"},
        {"n": 2, "text": "é ✓"},
        None,  # per_tool: 3
    ]
    assert store.get("k", "t", -1) is None
    assert store.get("k", "other", 0) is None and store.get("other", "t", 0) is None


def test_the_least_recently_used_session_goes_first_with_its_results(where: str) -> None:
    with open_store(where, sessions=2) as store:
        store.record("a", "t", {"n": 1})
        store.record("b", "t", {"n": 2})
        store.record("a", "u", {"n": 3})  # a used again: b is now the oldest
        store.record("c", "t", {"n": 4})
        assert store.session_count() == 2
        assert store.get("b", "t", 0) is None
        assert store.get("a", "t", 0) == {"n": 1} and store.get("c", "t", 0) == {"n": 4}


def test_forget_drops_one_session_and_a_second_store_reads_what_the_first_wrote(where: str) -> None:
    with open_store(where) as one, open_store(where) as other:
        one.record("k", "t", {"n": 1})
        one.record("j", "t", {"n": 2})
        assert other.get("k", "t", 0) == {"n": 1}
        other.forget("k")
        assert one.get("k", "t", 0) is None and one.session_count() == 1


def test_bounds_below_one_are_refused(where: str) -> None:
    with pytest.raises(ValueError, match="per_tool and sessions must be 1 or more, got 0 and 5"):
        open_store(where, per_tool=0, sessions=5)


def test_two_processes_recording_at_once_lose_nothing_and_keep_the_bounds(where: str, store: Store) -> None:
    count = 30
    started = [
        subprocess.Popen(
            [sys.executable, "-c", RECORDER, where, who, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("ann", "bob")
    ]
    try:
        for process in started:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        for process in started:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        for process in started:
            out, err = process.communicate(timeout=WAIT_SECS)
            assert out.strip() == "done", err
    finally:
        for process in started:
            process.kill()
            process.wait()
    with open_store(where, per_tool=1000, sessions=3) as reader:
        found = [reader.get("shared", "t", i) for i in range(2 * count + 1)]
        assert found[-1] is None  # every result of both kept, each its own place
        kept = [r for r in found if r is not None]
        assert sorted((r["who"], r["n"]) for r in kept) == sorted(
            (who, n) for who in ("ann", "bob") for n in range(count)
        )
        assert reader.session_count() == 3
