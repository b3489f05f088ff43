"""What every PostgreSQL store shares (S27.2): one connection pool, versioned schemas, clear errors.

The PostgreSQL form of a store (kernel.yaml `store.url`) keeps the SQLite
form's behaviour (services/sqlite_db.py) on a server many processes and
machines reach:

- **One pool a kernel** (`PgPool`): psycopg_pool's `ConnectionPool`, opened
  by the first store operation, not when the kernel starts; its connections
  are autocommit, so a read is one statement and a write is an explicit
  transaction (`PgStore._write`). Each connection is checked as it is
  lent, so after the database restarts the kernel goes on by itself; while
  it is down an operation fails with `StoreUnavailable` (a server's 503).
- **Versioned schemas** (`PgSchema`, `migrate`): each store's version is a
  row of `schema_versions(store, version)`; an older database is brought up
  to date at open, in one transaction holding an advisory lock, so two
  processes starting at once neither create a table twice nor upgrade it
  twice, and a failing step leaves the database as it was; a database
  written by a newer kernel is refused, naming the store and both versions.
- **No password shown**: errors name the database by its URL with the
  password masked (config/store.py `masked_url`).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from agentkernel.config.store import masked_url
from agentkernel.errors import AgentKernelError, StoreUnavailable

VERSIONS_TABLE = "schema_versions"
MIGRATION_LOCK = 0x616B_5F73_6368  # pg_advisory_xact_lock key held while any store's schema is migrated
POOL_MAX_SIZE = 10
CONNECT_TIMEOUT_SECS = 10.0  # how long an operation waits for a connection before StoreUnavailable
LIBPQ_CONNECT_TIMEOUT_SECS = 5  # one attempt to reach the server (a host that drops packets)


class SchemaTooNew(AgentKernelError):
    """The database holds a store's schema of a version newer than this kernel knows."""


class PgPool:
    """Connections to one database, shared by every store of a kernel; opened on the first use."""

    def __init__(
        self, url: str, *, max_size: int = POOL_MAX_SIZE, timeout_secs: float = CONNECT_TIMEOUT_SECS
    ) -> None:
        self.shown = masked_url(url)
        self._url = url
        self._max_size = max_size
        self._timeout_secs = timeout_secs
        self._opening = threading.Lock()
        self._pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] | None = None
        self._closed = False
        self._lent: Counter[int] = Counter()  # connections lent and not yet given back, by id of their pool

    def _opened(self) -> ConnectionPool[psycopg.Connection[tuple[Any, ...]]]:
        with self._opening:
            if self._closed:
                raise StoreUnavailable(f"the store database {self.shown} is closed (the kernel is closing)")
            if self._pool is None:
                self._pool = ConnectionPool(
                    self._url,
                    min_size=1,
                    max_size=self._max_size,
                    timeout=self._timeout_secs,
                    kwargs={"autocommit": True, "connect_timeout": LIBPQ_CONNECT_TIMEOUT_SECS},
                    check=ConnectionPool.check_connection,  # a connection the database dropped is replaced
                    open=False,
                    name="agentkernel-store",
                )
                self._pool.open(wait=False)
            return self._pool

    @contextmanager
    def connection(self, wait_secs: float | None = None) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A connection of the pool (autocommit), given back when the block ends; waited for at most
        `wait_secs` (a script's time left) when shorter than the pool's own wait."""
        pool, conn = self._lend(wait_secs)
        try:
            yield conn
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"the store database {self.shown} failed: {exc}") from exc
        finally:
            pool.putconn(conn)
            with self._opening:
                self._lent[id(pool)] -= 1
                if not self._lent[id(pool)]:
                    del self._lent[id(pool)]

    def _lend(
        self, wait_secs: float | None = None
    ) -> tuple[ConnectionPool[psycopg.Connection[tuple[Any, ...]]], psycopg.Connection[tuple[Any, ...]]]:
        """A connection, from a fresh pool when the database is back but the pool still waits out the
        backoff of its reconnection attempts (after a long outage, longer than an operation waits)."""
        wait = self._timeout_secs if wait_secs is None else max(0.001, min(wait_secs, self._timeout_secs))
        renewed = False
        while True:
            pool = self._opened()
            try:
                conn = pool.getconn(timeout=wait)
            except PoolClosed:  # another thread renewed it meanwhile (or the kernel is closing: _opened says)
                continue
            except PoolTimeout as exc:
                if wait < self._timeout_secs:  # the caller's time ran out first: busy, not down
                    raise self._down(wait, "the time left to the caller") from exc
                if self._busy(pool):  # every connection is lent: load, not a pool stuck reconnecting
                    raise self._down(wait, "every connection of the pool is lent") from exc
                if renewed or not self._reachable():
                    raise self._down(wait) from exc
            else:
                with self._opening:
                    self._lent[id(pool)] += 1
                return pool, conn
            self._renew(pool)
            renewed = True

    def _busy(self, pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]]) -> bool:
        with self._opening:
            return self._lent[id(pool)] >= self._max_size

    def _reachable(self) -> bool:
        try:
            psycopg.connect(self._url, connect_timeout=LIBPQ_CONNECT_TIMEOUT_SECS).close()
        except psycopg.Error:
            return False
        return True

    def _renew(self, stale: ConnectionPool[psycopg.Connection[tuple[Any, ...]]]) -> None:
        """Drop `stale` for a pool made on the next use; it closes apart (its lent connections as they
        come back), so no operation waits for it."""
        with self._opening:
            if self._pool is not stale:
                return
            self._pool = None
        threading.Thread(target=stale.close, name="agentkernel-store-renewed", daemon=True).start()

    def _down(self, waited: float, bound: str = "") -> StoreUnavailable:
        if bound:
            return StoreUnavailable(
                f"the store database {self.shown} gave no connection within {waited:.2g} s ({bound}): "
                f"every connection of the pool is busy, or the database does not answer"
            )
        return StoreUnavailable(
            f"the store database {self.shown} gave no connection within {waited:g} s "
            f"(store.url / $AGENTKERNEL_STORE_URL): is it running and reachable?"
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection (after the operations in flight); closing twice is harmless."""
        with self._opening:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


@dataclass(frozen=True)
class PgSchema:
    """A store's tables by version: `upgrades[n]` takes the database from version n-1 to n (append only).

    `store` is its row in `schema_versions`; `what` how errors name it.
    """

    store: str
    what: str
    version: int
    upgrades: Mapping[int, tuple[str, ...]]

    def __post_init__(self) -> None:
        missing = sorted(set(range(1, self.version + 1)) - set(self.upgrades))
        if missing:
            raise ValueError(
                f"{self.store}: schema version {self.version} has no upgrade to version(s) {missing}"
            )


def read_version(conn: psycopg.Connection[tuple[Any, ...]], store: str) -> int:
    """The store's schema version in the database; 0 when it has none yet."""
    if conn.execute("SELECT to_regclass(%s)", (VERSIONS_TABLE,)).fetchone() == (None,):
        return 0
    row = conn.execute(f"SELECT version FROM {VERSIONS_TABLE} WHERE store = %s", (store,)).fetchone()
    return 0 if row is None else int(row[0])


def migrate(pool: PgPool, schema: PgSchema) -> None:
    """Bring the store's tables to `schema.version`, or refuse a newer database (SchemaTooNew).

    One transaction under the migration's advisory lock: the version is read
    once the lock is held, so a process that waited finds the work done.
    """
    with pool.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} (store TEXT PRIMARY KEY, version INT NOT NULL)"
        )
        found = read_version(conn, schema.store)
        if found > schema.version:
            raise SchemaTooNew(
                f"{schema.what} in the store database {pool.shown} has schema version {found} "
                f"({VERSIONS_TABLE}.store = {schema.store!r}), newer than this agentkernel knows "
                f"({schema.version}); upgrade agentkernel"
            )
        if found == schema.version:
            return
        for step in range(found + 1, schema.version + 1):
            for statement in schema.upgrades[step]:
                conn.execute(statement)
        conn.execute(
            f"INSERT INTO {VERSIONS_TABLE} (store, version) VALUES (%s, %s) "
            "ON CONFLICT (store) DO UPDATE SET version = excluded.version",
            (schema.store, schema.version),
        )


class PgStore:
    """A store in the PostgreSQL database: migrated on open; `_write` and `_read` for its operations.

    Given a URL, the store has a pool of its own and closes it; given a
    `PgPool` (the kernel's, shared by its stores), closing leaves it open.
    """

    def __init__(self, pool: PgPool | str, schema: PgSchema) -> None:
        self._owns_pool = isinstance(pool, str)
        self._pool = PgPool(pool) if isinstance(pool, str) else pool
        try:
            migrate(self._pool, schema)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the store's own pool (a shared one is the kernel's to close); twice is harmless."""
        if self._owns_pool:
            self._pool.close()

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A connection in one transaction: committed when the block ends, rolled back when it raises."""
        with self._pool.connection() as conn, conn.transaction():
            yield conn

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._pool.connection() as conn:
            return conn.execute(sql, params).fetchall()


__all__ = [
    "VERSIONS_TABLE",
    "PgPool",
    "PgSchema",
    "PgStore",
    "SchemaTooNew",
    "StoreUnavailable",
    "migrate",
    "read_version",
]
