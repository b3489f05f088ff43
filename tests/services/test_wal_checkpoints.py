"""WAL checkpoints on a thread of their own (services/wal_checkpoints.py), as the stores' writer makes
them (services/sqlite_db.py `_Writer`): never inside the COMMIT of the thread that writes."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from agentkernel.services.sqlite_db import Schema, SqliteStore
from agentkernel.services.wal_checkpoints import Checkpointer

SCHEMA = Schema(1, {1: ("CREATE TABLE t (n INTEGER, blob BLOB)",)}, too_new=ValueError)


def in_the_file(path: Path) -> int:
    """Rows of `t` in the database file itself, the WAL ignored: what checkpoints have copied."""
    conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 't'").fetchone() is None:
            return 0  # not even the table: the migration is in the WAL still
        return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])
    finally:
        conn.close()


def write(store: SqliteStore, rows: int, size: int = 16) -> None:
    for n in range(rows):
        with store._write() as conn:
            conn.execute("INSERT INTO t (n, blob) VALUES (?, randomblob(?))", (n, size))


def test_a_commit_never_checkpoints_the_thread_of_the_checkpoints_does(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "x.db", SCHEMA, 10.0)
    checkpoints = store._writer.checkpoints
    assert checkpoints is not None
    try:
        assert store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        checkpoints.close()  # no thread: whatever reaches the file now, a commit copied
        write(store, 40, size=100_000)  # about 1,000 pages: SQLite's own checkpoint would have run
        assert in_the_file(tmp_path / "x.db") == 0
    finally:
        store.close()
    assert in_the_file(tmp_path / "x.db") == 40  # the file's last connection to close copies the rest


def test_checkpoints_come_every_so_many_commits_and_rewind_the_wal(tmp_path: Path) -> None:
    """Each checkpoint is made while no commit can come, so the next write starts the WAL over: the
    WAL stays the size of the writes between two checkpoints, however much is written."""
    store = SqliteStore(tmp_path / "x.db", SCHEMA, 10.0)
    checkpoints = store._writer.checkpoints
    assert checkpoints is not None
    try:
        for round_ in range(1, 11):
            write(store, checkpoints.every_commits, size=8_000)  # 3 pages a commit
            assert checkpoints.wait_runs(round_, 30)
            assert in_the_file(tmp_path / "x.db") >= (round_ - 1) * checkpoints.every_commits
        written = 10 * checkpoints.every_commits * 8_000
        assert (tmp_path / "x.db-wal").stat().st_size < written / 4
    finally:
        store.close()


def test_a_few_commits_are_checkpointed_once_the_writer_is_idle(tmp_path: Path) -> None:
    made: list[str] = []
    checkpoints = Checkpointer(str(tmp_path / "x.db"), lambda: made.append("checkpoint"), idle_secs=0.01)
    name = f"checkpoints {tmp_path / 'x.db'}"
    try:
        assert checkpoints.runs == 0 and not [t for t in threading.enumerate() if t.name == name]
        checkpoints.committed()  # the first commit starts the thread
        assert checkpoints.wait_runs(1, 30) and made == ["checkpoint"]
    finally:
        checkpoints.close()
    checkpoints.committed()  # closed: no thread starts again
    assert not [t for t in threading.enumerate() if t.name == name]


def test_a_failed_checkpoint_is_logged_and_tried_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failures = iter([sqlite3.OperationalError("disk I/O error")])
    made: list[str] = []

    def checkpoint() -> None:
        for failure in failures:
            raise failure
        made.append("checkpoint")

    checkpoints = Checkpointer(str(tmp_path / "x.db"), checkpoint, every_commits=1, idle_secs=0.01)
    try:
        checkpoints.committed()
        assert checkpoints.wait_runs(1, 30) and made == []
        checkpoints.committed()
        assert checkpoints.wait_runs(2, 30) and made == ["checkpoint"]
    finally:
        checkpoints.close()
    assert "x.db: a WAL checkpoint failed" in caplog.text and "disk I/O error" in caplog.text


def test_the_wal_is_rewound_while_another_process_writes_too(tmp_path: Path) -> None:
    """Another server process (`serve --workers 2`) writing the same file all along: a checkpoint that
    let it append meanwhile would never find the WAL whole, and the WAL would grow without end. The
    checkpoint takes the file's write lock (FULL), waiting a moment for the other's transaction."""
    store = SqliteStore(tmp_path / "x.db", SCHEMA, 10.0)
    checkpoints = store._writer.checkpoints
    assert checkpoints is not None
    other = sqlite3.connect(tmp_path / "x.db", isolation_level=None, check_same_thread=False)
    other.execute("PRAGMA wal_autocheckpoint = 0")  # its checkpoints are its own thread's, like ours
    other.execute("PRAGMA busy_timeout = 10000")
    done = threading.Event()

    def other_process() -> None:  # a busy server's writes: a thousand a second, not back to back
        while not done.wait(0.001):
            other.execute("BEGIN IMMEDIATE")
            other.execute("INSERT INTO t (n, blob) VALUES (-1, randomblob(8000))")
            other.execute("COMMIT")

    writing = threading.Thread(target=other_process)
    writing.start()
    try:
        for round_ in range(1, 21):
            write(store, checkpoints.every_commits, size=8_000)
            assert checkpoints.wait_runs(round_, 30)
    finally:
        done.set()
        writing.join()
        other.close()
    try:
        written = int(store._read("SELECT count(*) FROM t", ())[0][0]) * 3 * 4096
        assert (tmp_path / "x.db-wal").stat().st_size < written / 4
    finally:
        store.close()
