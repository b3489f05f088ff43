"""The transcript helpers (S18) from JS and Rhai through the real dispatch path, on a real SQLite file.

The records are written as the kernel writes them (the store's `append` with
the caller's user); the helpers read them back through a script tool. The
attacks: another user naming the session id, records from before users were
recorded, bad arguments, a session too big to return whole.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.helpers import default_helper_table
from agentkernel.helpers import memory as memory_helpers
from agentkernel.identity import Caller
from agentkernel.services.lazy_messages import ClosableMessageStore
from agentkernel.services.memory import (
    KIND_AGENT,
    KIND_TOOL_RESULT,
    KIND_USER,
    SqliteMessageStore,
)
from agentkernel.testing.parts import kernel_parts
from tests.conftest import ToolFactory
from tests.deployed import message_store
from tests.helpers.probes import probe_source

KEYS = ["id", "role", "kind", "content", "meta", "created_at", "score"]


@pytest.fixture
def mkernel(project: Path) -> Iterator[Kernel]:
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml")) as kernel:
        yield kernel


@pytest.fixture
def records(mkernel: Kernel) -> Iterator[ClosableMessageStore]:
    """The kernel's own message store (its file, or the store database), opened beside it (as a second
    kernel would)."""
    store = message_store(mkernel.config.messages_db)
    try:
        yield store
    finally:
        store.close()


def probe(kernel: Kernel, make_tool: ToolFactory, engine: str, expr: str, caller: Caller) -> dict[str, Any]:
    """Run `expr` in a tool of `engine` for `caller`: {"value": …} or {"error": …}."""
    make_tool("probe", probe_source(engine, expr), ext=engine)
    result = kernel.run_tool("probe", {}, caller)
    assert result.success, result.content
    assert isinstance(result.data, dict)
    return result.data


def alice_session(store: ClosableMessageStore) -> None:
    store.append("s1", "user", KIND_USER, "Пришло ли поступление от ООО Ромашка?", user_id="alice")
    store.append("s1", "assistant", KIND_AGENT, "Да, поступление 120 000 ₽ пришло вчера.", user_id="alice")
    store.append("s1", "tool", KIND_TOOL_RESULT, "balance: 5", {"tool": "bank"}, user_id="alice")
    store.append("s1", "user", KIND_USER, "А ЁЛКИ заказали?", user_id="alice")


def test_the_table_has_the_three_helpers() -> None:
    assert {"memory_history", "memory_search", "memory_count"} <= set(default_helper_table().names())
    assert not [name for name in default_helper_table().names() if "memory" in name and "write" in name]


def test_s18_history_is_the_last_n_in_order(
    mkernel: Kernel, records: ClosableMessageStore, make_tool: ToolFactory, engine: str
) -> None:
    alice_session(records)
    alice = mkernel.caller(user_id="alice", session_id="s1")
    got = probe(mkernel, make_tool, engine, "memory_history(2)", alice)["value"]
    assert [r["content"] for r in got] == ["balance: 5", "А ЁЛКИ заказали?"]
    assert [list(r) for r in got] == [KEYS, KEYS]
    assert got[0]["meta"] == {"tool": "bank"} and got[0]["score"] is None
    assert (got[0]["role"], got[0]["kind"]) == ("tool", "tool_result") and got[0]["id"] < got[1]["id"]
    everything = probe(mkernel, make_tool, engine, "memory_history(100)", alice)["value"]
    assert len(everything) == 4
    assert probe(mkernel, make_tool, engine, "memory_history(0)", alice)["value"] == []
    assert probe(mkernel, make_tool, engine, "memory_count()", alice)["value"] == 4


def test_s18_search_ranks_russian_words_and_fills_score(
    mkernel: Kernel, records: ClosableMessageStore, make_tool: ToolFactory, engine: str
) -> None:
    alice_session(records)
    records.append("s1", "user", KIND_USER, "поступление, поступление и ещё раз поступление", user_id="alice")
    alice = mkernel.caller(user_id="alice", session_id="s1")
    hits = probe(mkernel, make_tool, engine, 'memory_search("ПОСТУПЛЕНИЕ", 5)', alice)["value"]
    assert hits[0]["content"] == "поступление, поступление и ещё раз поступление"
    assert len(hits) == 3 and all(list(h) == KEYS for h in hits)
    scores = [h["score"] for h in hits]
    assert all(isinstance(s, float) and s > 0 for s in scores) and scores == sorted(scores, reverse=True)
    # ё is е, any case; k bounds the answer, and defaults to 10
    elki = probe(mkernel, make_tool, engine, 'memory_search("елки", 1)', alice)["value"]
    assert [h["content"] for h in elki] == ["А ЁЛКИ заказали?"]
    assert len(probe(mkernel, make_tool, engine, 'memory_search("поступление")', alice)["value"]) == 3
    assert probe(mkernel, make_tool, engine, 'memory_search("нет-такого-слова", 5)', alice)["value"] == []


def test_s18_another_user_naming_the_session_id_reads_nothing_of_it(
    mkernel: Kernel, records: ClosableMessageStore, make_tool: ToolFactory, engine: str
) -> None:
    """A session id is chosen by the client (`tool run --session`): the user is part of the scope."""
    alice_session(records)
    records.append("s1", "user", KIND_USER, "bob's own поступление", user_id="bob")
    records.append("s1", "user", KIND_USER, "nobody's поступление")  # a caller without a user
    bob = mkernel.caller(user_id="bob", session_id="s1")
    assert probe(mkernel, make_tool, engine, "memory_count()", bob)["value"] == 1
    shown = probe(mkernel, make_tool, engine, "memory_history(50)", bob)["value"]
    assert [r["content"] for r in shown] == ["bob's own поступление"]
    hits = probe(mkernel, make_tool, engine, 'memory_search("поступление Ромашка", 50)', bob)["value"]
    assert [h["content"] for h in hits] == ["bob's own поступление"]
    nobody = mkernel.caller(session_id="s1")
    assert probe(mkernel, make_tool, engine, "memory_count()", nobody)["value"] == 1
    assert (
        probe(mkernel, make_tool, engine, "memory_count()", mkernel.caller(user_id="", session_id="s1"))[
            "value"
        ]
        == 1
    )  # "" is no user, as in session_key
    alice = mkernel.caller(user_id="alice", session_id="s1")
    assert probe(mkernel, make_tool, engine, "memory_count()", alice)["value"] == 4
    # the kernel's own read of the session (the server checks the owner first) sees every record
    assert len(mkernel.transcript("s1", 100)) == 6
    assert len(mkernel.transcript("s1", 100, user_id="bob")) == 1


@pytest.mark.embedded_only  # a file of version 1
def test_records_from_before_users_were_recorded_are_never_shown_to_scripts(
    mkernel: Kernel, make_tool: ToolFactory, engine: str
) -> None:
    """A version-1 file: its records have no user; the kernel's face reads them, a script never does."""
    path = mkernel.config.messages_db
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as conn:
        for statement in memory_store_v1():
            conn.execute(statement)
        conn.execute(
            "INSERT INTO messages (session_id, role, kind, content, meta, created_at) "
            "VALUES ('old', 'user', 'user', 'старое поступление', '{}', '2026-01-01T00:00:00.000Z')"
        )
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    for who in (mkernel.caller(user_id="alice", session_id="old"), mkernel.caller(session_id="old")):
        assert probe(mkernel, make_tool, engine, "memory_count()", who)["value"] == 0
        assert probe(mkernel, make_tool, engine, 'memory_search("поступление", 5)', who)["value"] == []
    assert [r.content for r in mkernel.transcript("old")] == ["старое поступление"]
    assert [r.content for r in mkernel.transcript("old", user_id="alice")] == ["старое поступление"]


def memory_store_v1() -> tuple[str, ...]:
    from agentkernel.services.memory import _MIGRATIONS

    return _MIGRATIONS[1]


@pytest.mark.parametrize(
    ("expr", "error"),
    [
        ("memory_history(-5)", "memory_history: n must be an integer of 0 or more, got -5"),
        ('memory_history("lots")', "memory_history: n must be an integer of 0 or more, got 'lots'"),
        ("memory_history(1.5)", "memory_history: n must be an integer of 0 or more, got 1.5"),
        ('memory_search("")', "memory_search: query must hold at least one word, got ''"),
        ('memory_search("  ?! ")', "memory_search: query must hold at least one word, got '  ?! '"),
        ("memory_search(42, 5)", "memory_search: query must be a string, got 42"),
        ('memory_search("x", -1)', "memory_search: k must be an integer of 0 or more, got -1"),
        ('memory_search("x", "5")', "memory_search: k must be an integer of 0 or more, got '5'"),
        ("memory_history()", "memory_history: expected at least 1 argument(s), got 0"),
        ("memory_count(1)", "memory_count: expected at most 0 argument(s), got 1"),
    ],
)
def test_bad_input_names_the_helper_and_the_argument(
    mkernel: Kernel, make_tool: ToolFactory, engine: str, expr: str, error: str
) -> None:
    caller = mkernel.caller(user_id="alice", session_id="s1")
    got = probe(mkernel, make_tool, engine, expr, caller)
    assert error in got["error"], got


def test_a_long_query_is_refused(mkernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    expr = f'memory_search("{"я" * (memory_helpers.MAX_QUERY_CHARS + 1)}", 5)'
    got = probe(mkernel, make_tool, engine, expr, mkernel.caller(user_id="a", session_id="s1"))
    assert "memory_search: query is 4,097 characters long, over the limit of 4,096" in got["error"]


def test_s18_without_a_session_the_manuals_error(
    mkernel: Kernel, make_tool: ToolFactory, engine: str
) -> None:
    got = probe(mkernel, make_tool, engine, "memory_count()", mkernel.caller(user_id="alice"))
    assert got["error"].startswith("memory: no session id (memory_count reads the caller's own session")


def test_s18_without_a_store_the_manuals_error(project: Path, make_tool: ToolFactory, engine: str) -> None:
    """`live=False` (hook_tool without --live) attaches no message store."""
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml"), live=False) as kernel:
        got = probe(kernel, make_tool, engine, 'memory_search("x", 1)', kernel.caller(session_id="s1"))
    assert (
        got["error"] == "memory: no message store attached to this kernel (hook_tool attaches it with --live)"
    )


def test_one_call_returns_at_most_max_records(
    mkernel: Kernel, records: ClosableMessageStore, make_tool: ToolFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_helpers, "MAX_RECORDS", 3)
    for i in range(5):
        records.append("s1", "user", KIND_USER, f"слово {i}", user_id="alice")
    alice = mkernel.caller(user_id="alice", session_id="s1")
    got = probe(mkernel, make_tool, ".js", "memory_history(1000000)", alice)["value"]
    assert [r["content"] for r in got] == ["слово 2", "слово 3", "слово 4"]
    assert len(probe(mkernel, make_tool, ".js", 'memory_search("слово", 1000000)', alice)["value"]) == 3


def test_search_ranks_the_latest_search_window_matches(
    mkernel: Kernel, records: ClosableMessageStore, make_tool: ToolFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_helpers, "SEARCH_WINDOW", 2)
    records.append("s1", "user", KIND_USER, "счёт счёт счёт, старый", user_id="alice")
    for i in range(3):
        records.append("s1", "user", KIND_USER, f"счёт {i}", user_id="alice")
    alice = mkernel.caller(user_id="alice", session_id="s1")
    got = probe(mkernel, make_tool, ".js", 'memory_search("счет", 2)', alice)["value"]
    assert sorted(r["content"] for r in got) == ["счёт 1", "счёт 2"]


def test_one_call_returns_at_most_max_result_bytes(
    mkernel: Kernel, records: ClosableMessageStore, make_tool: ToolFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session of big records: the newest (or best) that fit, never the whole session at once."""
    monkeypatch.setattr(memory_helpers, "MAX_RESULT_BYTES", 25_000)
    for i in range(5):
        records.append("s1", "tool", KIND_TOOL_RESULT, f"часть {i} " + "ж" * 5_000, user_id="alice")
    alice = mkernel.caller(user_id="alice", session_id="s1")
    got = probe(mkernel, make_tool, ".js", "memory_history(5)", alice)["value"]
    assert [r["content"][:7] for r in got] == ["часть 3", "часть 4"]  # 10 KB of UTF-8 each
    assert len(probe(mkernel, make_tool, ".js", 'memory_search("часть", 5)', alice)["value"]) == 2


def one_record(kernel: Kernel) -> tuple[SqliteMessageStore, Caller]:
    """The kernel's own store (opened here) holding one record of alice's, and alice as the caller."""
    store = kernel_parts(kernel).store.store
    assert isinstance(store, SqliteMessageStore)
    store.append("s1", "user", KIND_USER, "первое", user_id="alice")
    return store, kernel.caller(user_id="alice", session_id="s1")


@pytest.mark.embedded_only  # the SQLite store's locks
def test_reads_do_not_queue_behind_the_stores_writes(
    mkernel: Kernel, make_tool: ToolFactory, engine: str
) -> None:
    """WAL readers never wait for a writer: a write held up (here: its lock held) leaves reads free."""
    store, alice = one_record(mkernel)
    with store._lock:  # the writer's lock, as a write waiting on another process's lock holds it
        assert probe(mkernel, make_tool, engine, "memory_count()", alice) == {"value": 1}


@pytest.mark.embedded_only  # the SQLite store's locks (memory_pg's timeout: tests/services/test_memory_pg.py)
def test_a_read_waits_for_the_store_no_longer_than_the_script_may_run(
    mkernel: Kernel, make_tool: ToolFactory, engine: str
) -> None:
    store, alice = one_record(mkernel)
    make_tool(
        "probe",
        probe_source(engine, 'memory_search("первое", 5)'),
        ext=engine,
        yaml_extra="timeout_secs: 1\n",
    )
    with store._read_lock:  # another read that does not end: without the bound, run_tool never returns
        result = mkernel.run_tool("probe", {}, alice)
    busy = "memory_search: the transcript store was busy past the script's time limit"
    # the script catches the error, unless its own 1 s ran out in the same instant (a loaded machine)
    assert result.data == {"error": busy} or (not result.success and "1 s" in result.content), result
    assert (
        probe(mkernel, make_tool, engine, 'memory_search("первое", 5)', alice)["value"][0]["content"]
        == "первое"
    )


def test_s18_the_helpers_only_read(
    mkernel: Kernel, records: ClosableMessageStore, make_tool: ToolFactory, engine: str
) -> None:
    alice_session(records)
    alice = mkernel.caller(user_id="alice", session_id="s1")
    expr = '[memory_history(10), memory_search("поступление", 3), memory_count()]'
    probe(mkernel, make_tool, engine, expr, alice)
    assert records.count("s1") == 4
