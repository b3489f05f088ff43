"""One way to open, write to and migrate the embedded SQLite files (the state and message stores).

Both stores are one file shared by the kernel's threads and by other processes
(two kernels, `hook_tool`, a CLI command), so they need the same four things,
done once here:

- **A connection** (`connect`): autocommit (``isolation_level=None``, every
  transaction an explicit BEGIN), usable from any thread (a lock serialises
  them), a busy wait, the WAL journal (readers never block the writer),
  ``synchronous=NORMAL`` (an application crash loses nothing; a power loss
  may lose the last transactions) and foreign keys enforced. The stores of
  one file in one process write through one connection (`_Writer`), whose
  WAL checkpoints are made on a thread of their own
  (services/wal_checkpoints.py); each reads through one of its own.
- **Transactions** (`transaction`): a write is ``BEGIN IMMEDIATE``, so the
  write lock is taken at BEGIN, where the busy wait applies; a deferred
  transaction that upgrades later may fail at once with SQLITE_BUSY, its
  snapshot being stale. Whatever raises inside rolls it back.
- **The busy wait**: how long a write waits for another process's; a store
  may bound it per operation (`SqliteStore._write(timeout)`), or write only
  if nobody holds the file (`SqliteStore._write_at_once`: no wait at all,
  for a write the event loop may make itself). A shared writer waits in
  `_Writer.begin`, its connection's own busy wait 0.
- **Migrations** (`Schema`, `migrate`): a schema version in the file, and the
  statements that bring an older file up to date, run once, in one write
  transaction, so two processes opening a fresh file at once do not both
  create it, and a failed step leaves the file as it was.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

from agentkernel.errors import AgentKernelError
from agentkernel.services.wal_checkpoints import Checkpointer

WAL_RETRY_SECS = 0.01
BUSY_FIRST_PAUSE_SECS = 0.001  # a write waiting for another process's: first pause, doubled up to the last
BUSY_LAST_PAUSE_SECS = 0.05
CHECKPOINT_WAIT_SECS = 0.05  # for another process's transaction in flight, before a checkpoint
MEMORY = ":memory:"


def connect(path: Path | str, busy_timeout_secs: float) -> sqlite3.Connection:
    """A configured connection to `path` (its folder made if missing); see the module docstring.

    `busy_timeout_secs` bounds every wait of the opening too (the switch to
    WAL while another process opens the same fresh file).
    """
    if str(path) != MEMORY:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        set_busy_timeout(conn, busy_timeout_secs)
        enable_wal(conn, busy_timeout_secs)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def set_busy_timeout(conn: sqlite3.Connection, secs: float) -> int:
    """Let SQLite wait up to `secs` for another writer; returns the wait in whole milliseconds."""
    millis = max(0, int(secs * 1000))
    conn.execute(f"PRAGMA busy_timeout = {millis}")
    return millis


def enable_wal(conn: sqlite3.Connection, wait_secs: float) -> None:
    """Put the file in WAL mode, retrying for up to `wait_secs`.

    A journal-mode change answers SQLITE_BUSY at once, without the busy
    handler, while another process opens the same fresh file; once the file
    is WAL (a lasting property of the file) this is a plain read. An
    in-memory database stays in its own journal mode.
    """
    deadline = time.monotonic() + wait_secs
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(WAL_RETRY_SECS)


@contextmanager
def transaction(conn: sqlite3.Connection, *, write: bool) -> Iterator[sqlite3.Connection]:
    """One transaction: committed when the block ends, rolled back when it raises.

    A write transaction is IMMEDIATE (see the module docstring); a read one
    is deferred, one snapshot that never waits for a writer. The caller keeps
    other threads off the connection meanwhile.
    """
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    with committed(conn):
        yield conn


@contextmanager
def committed(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """The transaction begun on `conn`, committed when the block ends, rolled back when it raises."""
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back already (e.g. disk full)
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


@dataclass(frozen=True)
class Schema:
    """A store's tables by version, and how a file of an older version is brought up to date.

    `upgrades[n]` takes a file from version n-1 to n; append, never edit.
    `fresh` makes an empty file (version 0) at `version` in one go; when it is
    empty, an empty file runs every upgrade from 1. The version lives in
    ``PRAGMA user_version``, or, with `version_table`, in a one-row table of
    that name, so two stores may share one file. `too_new(found)` is the error
    for a file written by a newer kernel.
    """

    version: int
    upgrades: Mapping[int, tuple[str, ...]]
    too_new: Callable[[int], Exception]
    fresh: tuple[str, ...] = ()
    version_table: str | None = None

    def __post_init__(self) -> None:
        first = 1 if not self.fresh else min(self.upgrades, default=self.version + 1)
        missing = sorted(set(range(first, self.version + 1)) - set(self.upgrades))
        if missing:
            raise ValueError(f"schema version {self.version} has no upgrade to version(s) {missing}")

    def read_version(self, conn: sqlite3.Connection) -> int:
        """The file's schema version; 0 for a file without it (a read: no write lock)."""
        if self.version_table is None:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
        table = (self.version_table,)
        if (
            conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", table).fetchone()
            is None
        ):
            return 0
        row = conn.execute(f"SELECT max(version) FROM {self.version_table}").fetchone()
        return int(row[0]) if row[0] is not None else 0

    def write_version(self, conn: sqlite3.Connection) -> None:
        """Record `version` as the file's (inside the migration's transaction)."""
        if self.version_table is None:
            conn.execute(f"PRAGMA user_version = {self.version}")
            return
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self.version_table} (version INTEGER NOT NULL)")
        conn.execute(f"DELETE FROM {self.version_table}")
        conn.execute(f"INSERT INTO {self.version_table} (version) VALUES (?)", (self.version,))

    def statements_from(self, found: int) -> Iterator[str]:
        """What takes a file of version `found` to `version`."""
        if found == 0 and self.fresh:
            yield from self.fresh
            return
        for step in range(found + 1, self.version + 1):
            yield from self.upgrades[step]


def migrate(conn: sqlite3.Connection, schema: Schema) -> None:
    """Bring the file to `schema.version` (nothing to do: no write lock taken); refuse a newer file.

    The version is read again under the write lock, since another process
    may have migrated meanwhile; every statement and the new version are one
    transaction, so a failing step leaves the file at its old version.
    """
    if schema.read_version(conn) == schema.version:
        return
    with transaction(conn, write=True):
        found = schema.read_version(conn)
        if found > schema.version:
            raise schema.too_new(found)
        if found == schema.version:
            return
        for statement in schema.statements_from(found):
            conn.execute(statement)
        schema.write_version(conn)


class StoreBusy(AgentKernelError):
    """A read waited for the store past the time its caller had left."""


class _Writer:
    """One process's writing connection to one file and its thread lock, shared by every store on it.

    The transcript, the turn leases, the usage ledger and the approvals live in
    one file: each with a connection of its own, every write of one would
    empty the others' page caches (SQLite sees another writer), and a turn
    writes through three of them. Their writes were serialised by SQLite's
    file lock anyway; sharing one connection serialises them by its thread
    lock instead and keeps its cache warm. Counted (`users`): the last store
    to close closes it. Per process (`os.getpid`): a forked child opens its
    own. `:memory:` is never shared, each connection being a database.
    """

    _open: ClassVar[dict[tuple[int, str], _Writer]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, key: tuple[int, str], busy_timeout_secs: float) -> None:
        """A new connection to `key`'s path; a file's hands its WAL checkpoints to a `Checkpointer`."""
        self.key = key
        self.conn = connect(key[1], busy_timeout_secs)
        set_busy_timeout(self.conn, 0)  # a write waits in `begin`, as long as its store says
        self.lock = threading.Lock()
        self.users = 1
        self.owner: int | None = None  # the thread holding `lock`, to refuse a nested write
        self.checkpoints: Checkpointer | None = None
        if key[1] != MEMORY:
            self.conn.execute("PRAGMA wal_autocheckpoint = 0")
            self.checkpoints = Checkpointer(key[1], self._checkpoint)

    @classmethod
    def opened(cls, path: str, busy_timeout_secs: float) -> _Writer:
        """The writer of `path` in this process: the open one, counted once more, else a new one."""
        if path == MEMORY:
            return cls((os.getpid(), path), busy_timeout_secs)
        key = (os.getpid(), os.path.abspath(path))
        with cls._registry_lock:
            writer = cls._open.get(key)
            if writer is not None:
                writer.users += 1
                return writer
            writer = cls._open[key] = cls(key, busy_timeout_secs)
            return writer

    @classmethod
    def forked(cls) -> None:
        """In a forked child: none of the parent's writers (their connections must not cross a fork, and
        a lock another thread of the parent held at the fork would stay held here forever)."""
        cls._open = {}
        cls._registry_lock = threading.Lock()

    def committed(self) -> None:
        """A write transaction committed (the lock held): counted towards the next checkpoint."""
        if self.checkpoints is not None:
            self.checkpoints.committed()

    def _checkpoint(self) -> None:
        """The WAL copied into the file while no commit can come: none of this process (the lock held)
        nor of another (FULL takes the file's write lock, waiting up to CHECKPOINT_WAIT_SECS for the
        transaction in flight; past it, what can be copied is, as PASSIVE would). See Checkpointer."""
        with self.lock:
            if self.users > 0:
                set_busy_timeout(self.conn, CHECKPOINT_WAIT_SECS)
                try:
                    self.conn.execute("PRAGMA wal_checkpoint(FULL)").fetchall()
                finally:
                    set_busy_timeout(self.conn, 0)

    def release(self) -> None:
        """One store fewer: after the last, the checkpoints stopped and the connection closed, once no
        write is in flight."""
        with self._registry_lock:
            self.users -= 1
            if self.users > 0:
                return
            if self._open.get(self.key) is self:
                del self._open[self.key]
        if self.checkpoints is not None:
            self.checkpoints.close()
        with self.lock:
            self.conn.close()

    @contextmanager
    def held(self, path: str, timeout: float | None) -> Iterator[None]:
        """The thread lock, waited for up to `timeout` s (None: no bound): StoreBusy past it, and an
        error at once for a write begun inside another on this file by the same thread (it would wait
        for itself)."""
        if self.owner == threading.get_ident():
            raise AgentKernelError(f"{path}: a write began inside another write to the same file")
        if not self.lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            raise StoreBusy(f"{path}: the store was busy with other writes for more than {timeout:g} s")
        with self._owned():
            yield

    @contextmanager
    def held_now(self) -> Iterator[_Writer | None]:
        """The thread lock if free now (self), else None; nothing waited for."""
        if not self.lock.acquire(blocking=False):
            yield None
            return
        with self._owned():
            yield self

    @contextmanager
    def _owned(self) -> Iterator[None]:
        """The lock, just acquired, marked as this thread's until released at the block's end."""
        self.owner = threading.get_ident()
        try:
            yield
        finally:
            self.owner = None
            self.lock.release()

    def begin(self, wait_secs: float) -> bool:
        """BEGIN IMMEDIATE, tried again while another process holds the file, for up to `wait_secs`
        (0: once); False if it still held it. The lock held.

        The connection's own busy wait stays 0: the stores sharing it wait
        for other processes for different times, and the event loop's
        writes not at all, so the wait is here rather than a PRAGMA set
        before every write of another kind. It sleeps and tries again, as
        SQLite's busy handler does.
        """
        deadline = time.monotonic() + wait_secs
        pause = BUSY_FIRST_PAUSE_SECS
        while True:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return True
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc):
                    raise
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))
            pause = min(pause * 2, BUSY_LAST_PAUSE_SECS)

    def migrate(self, schema: Schema, wait_secs: float) -> None:
        """`migrate` on this connection, waiting up to `wait_secs` for another process's write. The lock
        held."""
        set_busy_timeout(self.conn, wait_secs)
        try:
            migrate(self.conn, schema)
        finally:
            set_busy_timeout(self.conn, 0)


os.register_at_fork(after_in_child=_Writer.forked)


class SqliteStore:
    """A store on one file: a writing connection and a reading one, each under a lock; migrated on open.

    Subclasses add their operations on `_write` (a write transaction, the
    writer's lock held) and `_read` / `_reading`. In WAL mode readers never
    wait for a writer, so reads go through a connection of their own: a
    script's read is not queued behind the kernel's writes, nor behind a
    write that waits on another process's lock (the busy timeout). An
    in-memory store has one database per connection, so it reads through
    the writing one.
    """

    def __init__(self, path: Path | str, schema: Schema, busy_timeout_secs: float) -> None:
        self.path = str(path)
        self._busy_timeout_secs = busy_timeout_secs
        self._writer = _Writer.opened(self.path, busy_timeout_secs)
        try:
            with self._writer.held(self.path, None):
                self._writer.migrate(schema, busy_timeout_secs)
        except BaseException:
            self._writer.release()
            raise
        self._lock = self._writer.lock
        self._read_lock = self._lock if self.path == MEMORY else threading.Lock()
        self._reader: sqlite3.Connection | None = self._writer.conn if self.path == MEMORY else None
        self._closed = False

    @property
    def _conn(self) -> sqlite3.Connection:
        """The writing connection (shared with the process's other stores on this file: `_Writer`)."""
        return self._writer.conn

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the reader, and the writer once no other store of this process uses it, after any
        operation in flight (the locks); closing twice is harmless."""
        with self._read_lock:
            if self._reader is not None and self._reader is not self._writer.conn:
                self._reader.close()
                self._reader = None
            if self._closed:
                return
            self._closed = True
        self._writer.release()

    @contextmanager
    def _write(self, timeout: float | None = None) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE, see `transaction`) holding the thread lock too.

        With `timeout`, both waits (the thread lock, SQLite's busy wait for
        another process) end within it: StoreBusy past it.
        """
        with self._writer.held(self.path, timeout):
            wait = self._busy_timeout_secs if timeout is None else min(timeout, self._busy_timeout_secs)
            if not self._writer.begin(wait):
                if timeout is None:
                    raise sqlite3.OperationalError(f"{self.path}: database is locked (waited {wait:g} s)")
                raise StoreBusy(f"{self.path}: another process held the store for more than {timeout:g} s")
            with committed(self._writer.conn) as conn:
                yield conn
            self._writer.committed()

    @contextmanager
    def _write_at_once(self) -> Iterator[sqlite3.Connection | None]:
        """A write transaction begun only when nothing holds the store now (another thread of this
        process, another process): its connection, else None at once, nothing waited for.

        For a write the event loop may make itself: a busy file never holds it,
        the caller writes on a worker thread instead.
        """
        with self._writer.held_now() as writer:
            if writer is None or not writer.begin(0):
                yield None
                return
            with committed(writer.conn) as conn:
                yield conn
            writer.committed()

    @contextmanager
    def _reading(self, timeout: float | None = None) -> Iterator[sqlite3.Connection]:
        """The reading connection, held by this thread; StoreBusy when not free within `timeout` s."""
        if not self._read_lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            raise StoreBusy(f"{self.path}: the store was busy with other reads for more than {timeout:g} s")
        try:
            if self._reader is None:
                self._reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                set_busy_timeout(self._reader, self._busy_timeout_secs)
            yield self._reader
        finally:
            self._read_lock.release()

    def _read(self, sql: str, params: tuple[Any, ...], timeout: float | None = None) -> list[tuple[Any, ...]]:
        with self._reading(timeout) as conn:
            return conn.execute(sql, params).fetchall()


__all__ = [
    "Schema",
    "SqliteStore",
    "StoreBusy",
    "committed",
    "connect",
    "enable_wal",
    "migrate",
    "set_busy_timeout",
    "transaction",
]
