"""Per-user caps counted in the store, so every server process on one project counts the same work.

A count kept in one process's memory would let two `agentkernel serve`
processes on one project each allow a user the whole cap. `WorkLeases`
keeps one row per piece of work running, in an SQLite table (WAL, one
short IMMEDIATE transaction per start and per end), so a start counts every
process's rows and two processes cannot both slip under the cap (BEGIN
IMMEDIATE queues them). With kernel.yaml `store.url` the same table lives
in PostgreSQL (`PostgresWorkLeases`, work_leases_pg.py), so the cap holds
across machines too; `LeaseMethods` is both stores' code.

**A holder that dies** (kill -9, a crash, a frozen process) must not hold
its user's slots forever. Each row is a lease: it lives until `lease_until`,
and a thread of the process that holds it renews all its rows every
`lease_secs / 3` (one UPDATE for them all). A row past its lease is not
counted, and is deleted by the next start. So a dead holder's slots come
back within `lease_secs` of its death; a process frozen past its lease
(SIGSTOP) loses them too, and its work is then uncounted until it ends.

`SharedUserWork` has the verbs `running` and `held`, plus
`aheld`, the same from an event loop: the SQLite transaction runs on a
worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from agentkernel.errors import AgentKernelError
from agentkernel.services.sqlite_db import Schema, SqliteStore
from agentkernel.services.user_work import Cap, TooMuchWork

DEFAULT_LEASE_SECS = 30.0
BUSY_TIMEOUT_SECS = 10.0
TABLE = "running_work"

SCHEMA = Schema(
    version=1,
    upgrades={
        1: (
            f"CREATE TABLE {TABLE} ("
            " id TEXT PRIMARY KEY,"  # one piece of work
            " owner TEXT NOT NULL,"  # the user
            " setting TEXT NOT NULL,"  # the cap's setting: the kind of work
            " holder TEXT NOT NULL,"  # the process's random id (its pid for people: `pid:token`)
            " lease_until REAL NOT NULL"  # seconds since the epoch; past it the row is not counted
            ") WITHOUT ROWID",
            f"CREATE INDEX {TABLE}_owner ON {TABLE} (owner, setting, lease_until)",
            f"CREATE INDEX {TABLE}_holder ON {TABLE} (holder)",
            f"CREATE INDEX {TABLE}_lease ON {TABLE} (lease_until)",
        ),
    },
    too_new=lambda found: AgentKernelError(
        f"running-work store schema version {found} is newer than this kernel's"
    ),
    version_table=f"{TABLE}_schema",
)


@dataclass(frozen=True)
class LeaseDialect:
    """How one database spells the leases' queries (SQLite here, PostgreSQL in work_leases_pg.py), and
    the lock a start needs that SQLite's one writer at a time (BEGIN IMMEDIATE) gives for free.

    Queries are written once with `?` for a parameter; `q` makes them this database's.
    `lock_count(conn, user_id, setting)` serialises the count-then-insert of `start` for one
    user's kind of work (a no-op in SQLite).
    """

    mark: str
    lock_count: Callable[[Any, str, str], None]

    def q(self, sql: str) -> str:
        return sql.replace("?", self.mark)


def _no_lock(conn: Any, user_id: str, setting: str) -> None:
    """SQLite: the write transaction (BEGIN IMMEDIATE) already holds the whole file."""


SQLITE = LeaseDialect("?", _no_lock)


@runtime_checkable
class WorkLeaseStore(Protocol):
    """What `SharedUserWork` uses of a lease store: `WorkLeases` (SQLite) and `PostgresWorkLeases`
    (work_leases_pg.py) both are one."""

    lease_secs: float
    holder: str

    def start(self, user_id: str, cap: Cap, refused: type[TooMuchWork] = TooMuchWork) -> str: ...
    def end(self, work_id: str) -> None: ...
    def running(self, user_id: str, cap: Cap) -> int: ...
    def renew(self) -> int: ...
    def release_all(self) -> None: ...
    def close(self) -> None: ...


class _Store(Protocol):
    """What `LeaseMethods` needs of the class it is mixed into: a dialect, a holder, a clock, a store."""

    dialect: ClassVar[LeaseDialect]
    lease_secs: float
    holder: str
    _clock: Callable[[], float]

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...

    def _write(self) -> AbstractContextManager[Any]: ...


def holder_id() -> str:
    """A process's (a store instance's) holder id: its pid for people, a random token to be unique."""
    return f"{os.getpid()}:{secrets.token_hex(8)}"


def checked_lease_secs(lease_secs: float) -> float:
    if not lease_secs > 0:
        raise ValueError(f"running-work lease_secs must be positive, got {lease_secs!r}")
    return lease_secs


_COUNT = f"SELECT count(*) FROM {TABLE} WHERE owner = ? AND setting = ? AND lease_until > ?"


class LeaseMethods:
    """The leases' operations, written once: both stores differ only in their `dialect` and the store
    underneath (`_read`, `_write`)."""

    dialect: ClassVar[LeaseDialect]

    def start(self: _Store, user_id: str, cap: Cap, refused: type[TooMuchWork] = TooMuchWork) -> str:
        """Count one more piece of work (its row id), or raise `refused` when the user is at the cap."""
        q = self.dialect.q
        now = self._clock()
        work_id = secrets.token_hex(12)
        with self._write() as conn:
            conn.execute(q(f"DELETE FROM {TABLE} WHERE lease_until <= ?"), (now,))
            self.dialect.lock_count(conn, user_id, cap.setting)
            (running,) = conn.execute(q(_COUNT), (user_id, cap.setting, now)).fetchone()
            if running >= cap.limit:
                raise refused(user_id, cap, int(running))
            conn.execute(
                q(f"INSERT INTO {TABLE} (id, owner, setting, holder, lease_until) VALUES (?, ?, ?, ?, ?)"),
                (work_id, user_id, cap.setting, self.holder, now + self.lease_secs),
            )
        return work_id

    def end(self: _Store, work_id: str) -> None:
        """The piece of work `start` counted has ended."""
        with self._write() as conn:
            conn.execute(self.dialect.q(f"DELETE FROM {TABLE} WHERE id = ?"), (work_id,))

    def running(self: _Store, user_id: str, cap: Cap) -> int:
        """How much work of `cap`'s kind `user_id` has running now, in every process."""
        return int(self._read(self.dialect.q(_COUNT), (user_id, cap.setting, self._clock()))[0][0])

    def renew(self: _Store) -> int:
        """Push this holder's leases `lease_secs` ahead; how many rows it holds."""
        with self._write() as conn:
            until = self._clock() + self.lease_secs
            sql = self.dialect.q(f"UPDATE {TABLE} SET lease_until = ? WHERE holder = ?")
            return int(conn.execute(sql, (until, self.holder)).rowcount)

    def release_all(self: _Store) -> None:
        """Delete every row of this holder's (the process is closing)."""
        with self._write() as conn:
            conn.execute(self.dialect.q(f"DELETE FROM {TABLE} WHERE holder = ?"), (self.holder,))


class WorkLeases(LeaseMethods, SqliteStore):
    """The table of running work in one SQLite file (see the module docstring); one holder id per
    instance."""

    dialect = SQLITE

    def __init__(
        self,
        path: Path | str,
        *,
        lease_secs: float = DEFAULT_LEASE_SECS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.lease_secs = checked_lease_secs(lease_secs)
        super().__init__(path, SCHEMA, BUSY_TIMEOUT_SECS)
        self.holder = holder_id()
        self._clock = clock


class SharedUserWork:
    """Per-user work counted on a lease store, its leases renewed by its own thread until `close`.

    `where` is the SQLite file (`WorkLeases` on it), or what opens the
    store given `lease_secs` (the kernel's PostgreSQL one with `store.url`,
    work_leases_pg.py).
    The store is opened on first use (a worker thread's: it is I/O), so a
    server whose store cannot be opened still starts, and says why on the
    request that needs it.
    """

    def __init__(
        self, where: Path | Callable[[float], WorkLeaseStore], *, lease_secs: float = DEFAULT_LEASE_SECS
    ) -> None:
        self._open: Callable[[float], WorkLeaseStore] = (
            (lambda secs: WorkLeases(where, lease_secs=secs)) if isinstance(where, Path) else where
        )
        self.lease_secs = lease_secs
        self._store: WorkLeaseStore | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def store(self) -> WorkLeaseStore:
        """The store, opened (and its renewing thread started) on first use."""
        with self._lock:
            if self._store is None:
                self._store = self._open(self.lease_secs)
                self._renewer = threading.Thread(
                    target=self._renew, name="agentkernel-work-leases", daemon=True
                )
                self._renewer.start()
            return self._store

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_secs / 3):
            store = self._store
            if store is None:
                return
            with contextlib.suppress(Exception):  # a busy store: the next round tries again, well in time
                store.renew()

    def running(self, user_id: str, cap: Cap) -> int:
        """How much work of `cap`'s kind `user_id` has running now, in every process on the store."""
        return self.store().running(user_id, cap)

    @contextlib.contextmanager
    def held(self, user_id: str, cap: Cap, refused: type[TooMuchWork] = TooMuchWork) -> Iterator[None]:
        """The block counts as one piece of work (`refused` before it starts when it may not). Blocking."""
        store = self.store()
        work_id = store.start(user_id, cap, refused)
        try:
            yield
        finally:
            store.end(work_id)

    @contextlib.asynccontextmanager
    async def aheld(
        self, user_id: str, cap: Cap, refused: type[TooMuchWork] = TooMuchWork
    ) -> AsyncIterator[None]:
        """`held` from an event loop: the store's transactions run on worker threads.

        Both are shielded: a request cancelled while its row is written or
        deleted still gets the row deleted, or it would be renewed (and
        counted) for as long as this process lives.
        """
        store = await asyncio.to_thread(self.store)
        starting = asyncio.ensure_future(asyncio.to_thread(store.start, user_id, cap, refused))
        try:
            work_id = await asyncio.shield(starting)
        except asyncio.CancelledError:
            starting.add_done_callback(lambda done: self._end_later(store, done))
            raise
        try:
            yield
        finally:
            await asyncio.shield(asyncio.ensure_future(asyncio.to_thread(store.end, work_id)))

    @staticmethod
    def _end_later(store: WorkLeaseStore, started: asyncio.Future[str]) -> None:
        """A start whose awaiting request was cancelled: its row, if it was written, is deleted."""
        if not started.cancelled() and started.exception() is None:
            asyncio.get_running_loop().run_in_executor(None, store.end, started.result())

    def close(self) -> None:
        """Stop renewing, give back this process's rows, close the store; closing twice is harmless."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        with self._lock:
            if self._store is not None:
                with contextlib.suppress(Exception):
                    self._store.release_all()
                self._store.close()
                self._store = None


__all__ = [
    "DEFAULT_LEASE_SECS",
    "SQLITE",
    "TABLE",
    "LeaseDialect",
    "LeaseMethods",
    "SharedUserWork",
    "WorkLeaseStore",
    "WorkLeases",
    "checked_lease_secs",
    "holder_id",
]
