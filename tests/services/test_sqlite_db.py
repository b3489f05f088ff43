"""The one SQLite module both stores open, write and migrate through (services/sqlite_db.py)."""

from __future__ import annotations

import os
import select
import signal
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkernel.errors import AgentKernelError
from agentkernel.services.sqlite_db import (
    Schema,
    SqliteStore,
    StoreBusy,
    _Writer,
    connect,
    migrate,
    transaction,
)

LOG = "CREATE TABLE IF NOT EXISTS runs (step INTEGER NOT NULL)"


def newer(found: int) -> AgentKernelError:
    return AgentKernelError(f"version {found} is newer")


def schema(*steps: tuple[str, ...], version_table: str | None = None) -> Schema:
    """Upgrade n (from 1) is steps[n-1]; each notes itself in `runs`, so a test counts the runs."""
    upgrades = {
        n: (LOG, *statements, f"INSERT INTO runs VALUES ({n})") for n, statements in enumerate(steps, 1)
    }
    return Schema(len(steps), upgrades, too_new=newer, version_table=version_table)


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    opened = connect(tmp_path / "sub" / "db.sqlite", busy_timeout_secs=2)
    yield opened
    opened.close()


def runs(conn: sqlite3.Connection) -> list[int]:
    return [row[0] for row in conn.execute("SELECT step FROM runs ORDER BY rowid")]


def user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def test_a_connection_is_configured_as_both_stores_need(conn: sqlite3.Connection, tmp_path: Path) -> None:
    assert (tmp_path / "sub" / "db.sqlite").exists()  # its folder made
    pragma = {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("journal_mode", "busy_timeout")}
    assert pragma == {"journal_mode": "wal", "busy_timeout": 2000}
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.isolation_level is None  # autocommit: every transaction an explicit BEGIN


def test_an_in_memory_database_opens_too() -> None:
    memory = connect(":memory:", busy_timeout_secs=1)
    try:
        assert memory.execute("PRAGMA journal_mode").fetchone()[0] == "memory"
    finally:
        memory.close()


def test_a_transaction_commits_or_rolls_back(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE t (x INTEGER)")
    with transaction(conn, write=True):
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(ZeroDivisionError), transaction(conn, write=True):
        conn.execute("INSERT INTO t VALUES (2)")
        _ = 1 / 0
    assert [row[0] for row in conn.execute("SELECT x FROM t")] == [1] and not conn.in_transaction


def test_a_write_transaction_holds_the_write_lock_from_begin(
    conn: sqlite3.Connection, tmp_path: Path
) -> None:
    other = connect(tmp_path / "sub" / "db.sqlite", busy_timeout_secs=0)
    try:
        with transaction(conn, write=True), pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        with transaction(conn, write=False):  # a read takes no write lock
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
    finally:
        other.close()


def test_migration_runs_each_step_once_in_order(conn: sqlite3.Connection) -> None:
    migrate(conn, schema(("CREATE TABLE a (x)",), ("CREATE TABLE b (y)",)))
    assert runs(conn) == [1, 2] and user_version(conn) == 2


def test_migration_is_idempotent(conn: sqlite3.Connection) -> None:
    steps = schema(("CREATE TABLE a (x)",))  # not IF NOT EXISTS: a second run would fail
    migrate(conn, steps)
    migrate(conn, steps)
    assert runs(conn) == [1]


def test_an_older_file_runs_only_the_newer_steps(conn: sqlite3.Connection) -> None:
    migrate(conn, schema(("CREATE TABLE a (x)",)))
    migrate(conn, schema(("CREATE TABLE a (x)",), ("CREATE TABLE b (y)",)))
    assert runs(conn) == [1, 2] and user_version(conn) == 2


def test_a_failed_step_rolls_back_the_whole_migration(conn: sqlite3.Connection) -> None:
    broken = schema(("CREATE TABLE a (x)",), ("CREATE TABLE b (y)", "INSERT INTO no_such_table VALUES (1)"))
    with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        migrate(conn, broken)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == set() and user_version(conn) == 0 and not conn.in_transaction
    migrate(conn, schema(("CREATE TABLE a (x)",)))  # the file is as it was: a good migration still runs
    assert runs(conn) == [1]


def test_a_file_of_a_newer_kernel_is_refused(conn: sqlite3.Connection) -> None:
    migrate(conn, schema(("CREATE TABLE a (x)",), ("CREATE TABLE b (y)",)))
    with pytest.raises(AgentKernelError, match="version 2 is newer"):
        migrate(conn, schema(("CREATE TABLE a (x)",)))


def test_a_fresh_file_may_skip_to_the_latest_version(conn: sqlite3.Connection) -> None:
    """`fresh` builds version 2 at once; the upgrade is only for files a version-1 kernel made."""
    latest = Schema(
        2,
        {2: ("ALTER TABLE a ADD COLUMN y",)},
        too_new=newer,
        fresh=("CREATE TABLE a (x, y)",),
        version_table="a_schema",
    )
    migrate(conn, latest)
    assert [row[1] for row in conn.execute("PRAGMA table_info(a)")] == ["x", "y"]
    assert conn.execute("SELECT version FROM a_schema").fetchall() == [(2,)]
    assert user_version(conn) == 0  # left to another store sharing the file


def test_a_version_table_upgrades_an_older_file(conn: sqlite3.Connection) -> None:
    migrate(conn, schema(("CREATE TABLE a (x)",), version_table="v"))
    migrate(conn, schema(("CREATE TABLE a (x)",), ("CREATE TABLE b (y)",), version_table="v"))
    assert runs(conn) == [1, 2] and conn.execute("SELECT version FROM v").fetchall() == [(2,)]


def test_a_schema_without_every_upgrade_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no upgrade to version\(s\) \[2\]"):
        Schema(3, {1: (), 3: ()}, too_new=newer)


def test_a_write_waits_for_another_process_without_setting_the_busy_wait(tmp_path: Path) -> None:
    """The stores sharing a connection wait for other processes for different times (the event loop's
    writes not at all): the wait is `_Writer.begin`'s, BEGIN tried again, never a PRAGMA per write."""
    store = SqliteStore(tmp_path / "x.db", schema(("CREATE TABLE t (n INTEGER)",)), 10.0)
    other = connect(tmp_path / "x.db", busy_timeout_secs=0)  # another process's
    traced: list[str] = []
    retried = threading.Event()

    def trace(sql: str) -> None:
        traced.append(sql)
        if traced.count("BEGIN IMMEDIATE") >= 3:
            retried.set()

    store._conn.set_trace_callback(trace)
    try:
        other.execute("BEGIN IMMEDIATE")
        with store._write_at_once() as none:
            assert none is None  # held elsewhere: at once means not now
        busy = pytest.raises(StoreBusy, match=r"x\.db: another process held the store for more than 0\.05 s")
        with busy, store._write(timeout=0.05):
            pass
        traced.clear()
        waiting = threading.Thread(target=insert, args=(store, 1))
        waiting.start()
        assert retried.wait(30)  # it tried again while the other held the file
        other.execute("COMMIT")
        waiting.join(30)
        assert store._read("SELECT n FROM t", ()) == [(1,)]
        assert not [sql for sql in traced if "busy_timeout" in sql]
        assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 0
    finally:
        other.close()
        store.close()


def insert(store: SqliteStore, n: int) -> None:
    with store._write() as conn:
        conn.execute("INSERT INTO t (n) VALUES (?)", (n,))


def test_the_stores_of_one_file_write_through_one_connection(tmp_path: Path) -> None:
    """Two stores on one file (the transcript and the leases do) share the writing connection, so a write
    of one leaves the other's page cache warm; the connection lasts until the last of them closes."""
    first = SqliteStore(tmp_path / "x.db", schema(("CREATE TABLE t (n INTEGER)",)), 10.0)
    second = SqliteStore(tmp_path / "x.db", schema(("CREATE TABLE u (n INTEGER)",), version_table="v2"), 10.0)
    elsewhere = SqliteStore(tmp_path / "y.db", schema(("CREATE TABLE t (n INTEGER)",)), 10.0)
    try:
        assert first._conn is second._conn and first._conn is not elsewhere._conn
        with first._write() as conn:
            conn.execute("INSERT INTO t (n) VALUES (1)")
        first.close()
        first.close()  # twice is harmless, and closes nothing the other store uses
        with second._write() as conn:
            conn.execute("INSERT INTO t (n) VALUES (2)")
        assert second._read("SELECT n FROM t ORDER BY n", ()) == [(1,), (2,)]
        shared = second._conn
        second.close()
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            shared.execute("SELECT 1")
        again = SqliteStore(tmp_path / "x.db", schema(("CREATE TABLE t (n INTEGER)",)), 10.0)
        assert again._conn is not shared and again._read("SELECT count(*) FROM t", ()) == [(2,)]
        again.close()
    finally:
        elsewhere.close()


def test_a_write_begun_inside_another_to_the_same_file_is_refused_not_hung(tmp_path: Path) -> None:
    first = SqliteStore(tmp_path / "x.db", schema(("CREATE TABLE t (n INTEGER)",)), 10.0)
    second = SqliteStore(tmp_path / "x.db", schema(("CREATE TABLE u (n INTEGER)",), version_table="v2"), 10.0)
    try:
        with first._write() as conn:
            conn.execute("INSERT INTO t (n) VALUES (1)")
            nested = pytest.raises(AgentKernelError, match=r"x\.db: a write began inside another write")
            with nested, second._write():
                pass
            with second._write_at_once() as none:  # at once: not now, the caller writes elsewhere later
                assert none is None
        assert second._read("SELECT n FROM t", ()) == [(1,)]
    finally:
        first.close()
        second.close()


def test_a_forked_child_writes_through_a_connection_of_its_own(tmp_path: Path) -> None:
    """A connection must not cross a fork: the child's store on the same file opens its own, and does
    not wait for a lock another thread of the parent held at the fork."""
    parent = SqliteStore(tmp_path / "x.db", schema(("CREATE TABLE t (n INTEGER)",)), 10.0)
    told, tell = os.pipe()
    try:
        _Writer._registry_lock.acquire()  # another thread of the parent opening a store as the fork happens
        try:
            pid = os.fork()
        finally:
            if pid != 0:
                _Writer._registry_lock.release()
        if pid == 0:  # the child: says "0" only if its writer is new and its write landed
            code = b"1"
            try:
                child = SqliteStore(tmp_path / "x.db", schema(("CREATE TABLE t (n INTEGER)",)), 10.0)
                with child._write() as conn:
                    conn.execute("INSERT INTO t (n) VALUES (7)")
                code = b"0" if child._conn is not parent._conn else b"2"
                child.close()
            finally:
                os.write(tell, code)
                os._exit(0)
        answered = select.select([told], [], [], 60)[0]
        if not answered:  # stuck at the parent's lock: end it rather than hang the suite
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        assert answered and os.read(told, 1) == b"0"
        assert parent._read("SELECT n FROM t", ()) == [(7,)]
    finally:
        os.close(told)
        os.close(tell)
        parent.close()
