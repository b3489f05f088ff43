"""The state store on PostgreSQL (S11 on S27.2): `SqliteStateStore`'s behaviour, in the store database.

Chosen by the kernel when kernel.yaml sets `store.url` (and turns the state
store on, `state.db_path`, S11.3). The same tables, types, encoding, limits
and quota as the SQLite file (services/state.py says why), the operations
shared with it (`StateMethods`); what differs is how writers that may run
on many machines are kept apart, since nothing like SQLite's one writer at
a time (`BEGIN IMMEDIATE`) holds here:

- **One writer of a key at a time**: every write first takes a transaction
  advisory lock on its key (`pg_advisory_xact_lock` of a 64-bit hash of
  scope, owner and key), so a list's length and positions, a set's size
  and a key's type are read and changed by one transaction at a time; an
  advisory lock, not a row lock, since the key may not exist yet.
- **One writer of a user's quota at a time**: then it locks the user's row
  of `state_usage` (made if missing, `SELECT … FOR UPDATE`), reads the
  total, writes, and reads it again: two processes writing for one user
  never both pass the check, and a write that frees bytes is never refused
  for bytes another wrote meanwhile. The totals are kept by statement
  triggers (transition tables: one update a payer a statement, however
  many rows).
- **Crossing writers**: a write that frees another user's bytes updates
  that user's row too. The row of whoever wrote the key's value is locked
  with the writer's, in payer order, so two users rewriting each other's
  keys never deadlock; the rest (a list filled by a third user, replaced)
  may, and PostgreSQL then fails one of the two: its transaction rolled
  back, the store runs it again while the caller's time lasts (`_again`).
- **Bounded waits**: a write sets `lock_timeout` to the caller's `timeout`
  (at most `busy_timeout_secs`), so a key or a quota held by another writer
  gives `StateBusyError` by then. Reads take no lock: one snapshot
  (REPEATABLE READ, READ ONLY), never blocked by writers.
- **Keys are BYTEA** (their UTF-8): a key may hold a NUL, which TEXT cannot;
  bytes sort as SQLite sorts its text. Set members keep insertion order by
  a BIGSERIAL `id`.
- The tables are made on the first operation (schema version 1 = the
  file's version 3), not when the kernel starts.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import psycopg
from psycopg import errors as pg_errors

from agentkernel.config import KernelConfig, StateSettings
from agentkernel.ports import Namespace
from agentkernel.services.pg_copy import copy_table, move_sequence, read_only, source_version
from agentkernel.services.postgres import PgPool, PgSchema, SchemaTooNew, StoreUnavailable, migrate
from agentkernel.services.state import (
    BUSY_TIMEOUT_SECS,
    MAX_RESULT_BYTES,
    MAX_USER_BYTES,
    MAX_VALUE_BYTES,
    STATE_SCHEMA,
    StateBusyError,
    StateDialect,
    StateError,
    StateMethods,
)
from agentkernel.types import JSONValue

T = TypeVar("T")
_WHERE = "scope = %s AND owner = %s AND key = %s"

TABLES = ("state_keys", "state_list_items", "state_set_members", "state_usage")

_COUNT_BYTES = """CREATE FUNCTION state_count_bytes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO state_usage AS u (payer, bytes)
            SELECT payer, sum(bytes) FROM new_rows GROUP BY payer ORDER BY payer
            ON CONFLICT (payer) DO UPDATE SET bytes = u.bytes + excluded.bytes;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO state_usage AS u (payer, bytes)
            SELECT payer, -sum(bytes) FROM old_rows GROUP BY payer ORDER BY payer
            ON CONFLICT (payer) DO UPDATE SET bytes = u.bytes + excluded.bytes;
    ELSE
        INSERT INTO state_usage AS u (payer, bytes)
            SELECT payer, sum(bytes) FROM (
                SELECT payer, bytes FROM new_rows UNION ALL SELECT payer, -bytes FROM old_rows
            ) AS changed GROUP BY payer HAVING sum(bytes) <> 0 ORDER BY payer
            ON CONFLICT (payer) DO UPDATE SET bytes = u.bytes + excluded.bytes;
    END IF;
    RETURN NULL;
END $$"""
"""Each payer's total moved by what one statement inserted, deleted or changed (the file's triggers)."""

_TRIGGERS = tuple(
    f"CREATE TRIGGER {table}_{name} AFTER {event} ON {table} REFERENCING {tables} "
    "FOR EACH STATEMENT EXECUTE FUNCTION state_count_bytes()"
    for table in TABLES[:3]
    for name, event, tables in (
        ("added", "INSERT", "NEW TABLE AS new_rows"),
        ("removed", "DELETE", "OLD TABLE AS old_rows"),
        ("changed", "UPDATE", "OLD TABLE AS old_rows NEW TABLE AS new_rows"),
    )
)

SCHEMA = PgSchema(
    store="state",
    what="the state store",
    version=1,
    upgrades={
        1: (
            """CREATE TABLE state_keys (
                scope TEXT NOT NULL,
                owner TEXT NOT NULL,
                key BYTEA NOT NULL,
                type TEXT NOT NULL CHECK (type IN ('value', 'list', 'set')),
                value TEXT,
                size BIGINT NOT NULL DEFAULT 0,
                payer TEXT NOT NULL DEFAULT '',
                bytes BIGINT NOT NULL DEFAULT 0,
                PRIMARY KEY (scope, owner, key)
            )""",
            """CREATE TABLE state_list_items (
                scope TEXT NOT NULL,
                owner TEXT NOT NULL,
                key BYTEA NOT NULL,
                pos BIGINT NOT NULL,
                value TEXT NOT NULL,
                payer TEXT NOT NULL DEFAULT '',
                bytes BIGINT NOT NULL DEFAULT 0,
                PRIMARY KEY (scope, owner, key, pos)
            )""",
            """CREATE TABLE state_set_members (
                id BIGSERIAL PRIMARY KEY,
                scope TEXT NOT NULL,
                owner TEXT NOT NULL,
                key BYTEA NOT NULL,
                digest TEXT NOT NULL,
                value TEXT NOT NULL,
                payer TEXT NOT NULL DEFAULT '',
                bytes BIGINT NOT NULL DEFAULT 0,
                UNIQUE (scope, owner, key, digest)
            )""",
            "CREATE INDEX state_set_order ON state_set_members (scope, owner, key, id)",
            "CREATE TABLE state_usage (payer TEXT PRIMARY KEY, bytes BIGINT NOT NULL)",
            _COUNT_BYTES,
            *_TRIGGERS,
        ),
    },
)


def _key_bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogatepass")


def _key_text(stored: bytes) -> str:
    return bytes(stored).decode("utf-8", "surrogatepass")


POSTGRES = StateDialect("%s", _key_bytes, _key_text)


def key_lock(ns: Namespace, key: str) -> int:
    """The advisory lock of one key: a signed 64-bit hash of its scope, owner and key."""
    named = json.dumps([ns.scope, ns.owner, key], ensure_ascii=True).encode("ascii")
    return int.from_bytes(hashlib.sha256(named).digest()[:8], "big", signed=True)


class PostgresStateStore(StateMethods):
    """The state store in the PostgreSQL database: see the module docstring and `SqliteStateStore`.

    Given a URL, the store has a pool of its own and closes it; given a
    `PgPool` (the kernel's, shared by its stores), closing leaves it open.
    """

    dialect = POSTGRES

    def __init__(
        self,
        pool: PgPool | str,
        *,
        max_value_bytes: int = MAX_VALUE_BYTES,
        max_result_bytes: int = MAX_RESULT_BYTES,
        max_user_bytes: int = MAX_USER_BYTES,
        busy_timeout_secs: float = BUSY_TIMEOUT_SECS,
    ) -> None:
        self._owns_pool = isinstance(pool, str)
        self._pool = PgPool(pool) if isinstance(pool, str) else pool
        self.max_value_bytes = max_value_bytes
        self.max_result_bytes = max_result_bytes
        self.max_user_bytes = max_user_bytes
        self.busy_timeout_secs = busy_timeout_secs
        self._migrating = threading.Lock()
        self._migrated = False
        self._closed = False

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Refuse further operations; close the store's own pool (a shared one is the kernel's)."""
        self._closed = True
        if self._owns_pool:
            self._pool.close()

    def _migrate(self) -> None:
        """The tables made or upgraded by the first operation (PgSchema, under its advisory lock)."""
        with self._migrating:
            if not self._migrated:
                migrate(self._pool, SCHEMA)
                self._migrated = True

    @contextmanager
    def _transaction(
        self, timeout: float | None, *, write: bool
    ) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """One transaction on a connection of the pool; a write's lock waits bounded by `timeout`."""
        if self._closed:
            raise StateError("the state store is closed")
        wait = self.busy_timeout_secs if timeout is None else max(0.0, min(timeout, self.busy_timeout_secs))
        try:
            self._migrate()
            with self._pool.connection(timeout) as conn:  # a script's time left bounds the pool's wait too
                yield from self._in_transaction(conn, wait, write=write)
        except (StoreUnavailable, SchemaTooNew) as exc:
            raise StateError(str(exc)) from exc

    @staticmethod
    def _in_transaction(
        conn: psycopg.Connection[tuple[Any, ...]], wait: float, *, write: bool
    ) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """The transaction itself; its errors as StateError here, before the pool's own handling
        (which takes any OperationalError, a lock timeout's too, for the database being down)."""
        try:
            with conn.transaction():
                if write:  # 0 would mean no limit: wait at least a millisecond
                    conn.execute(
                        "SELECT set_config('lock_timeout', %s, true)", (f"{max(1, int(wait * 1000))}ms",)
                    )
                else:
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield conn
        except (pg_errors.LockNotAvailable, pg_errors.DeadlockDetected) as exc:
            raise StateBusyError("the state store is locked by another writer; try again") from exc
        except psycopg.Error as exc:
            raise StateError(f"the state store failed: {exc}") from exc

    def _lock_key(self, conn: psycopg.Connection[tuple[Any, ...]], ns: Namespace, key: str) -> None:
        """No other writer of this key (in any process) until the transaction ends."""
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (key_lock(ns, key),))

    def _lock_usage(self, conn: psycopg.Connection[tuple[Any, ...]], ns: Namespace, key: str) -> int:
        """The writer's total, its row locked until the transaction ends (made first if missing).

        The row of whoever wrote the key's value is locked too, in payer order,
        since replacing the value frees that user's bytes: two users rewriting
        each other's keys take their rows in one order, never crossing.
        """
        conn.execute(
            "INSERT INTO state_usage (payer, bytes) VALUES (%s, 0) ON CONFLICT DO NOTHING", (ns.user,)
        )
        rows = conn.execute(
            "SELECT payer, bytes FROM state_usage WHERE payer = %s OR payer = "
            f"(SELECT payer FROM state_keys WHERE {_WHERE}) ORDER BY payer FOR UPDATE",
            (ns.user, *POSTGRES.params(ns, key)),
        ).fetchall()
        return sum(int(bytes_) for payer, bytes_ in rows if payer == ns.user)

    # -- writes: a write PostgreSQL failed to break a deadlock is run again ----------------------

    def _again(self, timeout: float | None, operation: Callable[[float | None], T]) -> T:
        """`operation(time left)`, run again while time is left when PostgreSQL broke a deadlock by
        failing it: its transaction was rolled back, so nothing of it happened."""
        deadline = time.monotonic() + (self.busy_timeout_secs if timeout is None else timeout)
        while True:
            left = max(0.0, deadline - time.monotonic())
            try:
                return operation(left)
            except StateBusyError as exc:
                if left <= 0 or not isinstance(exc.__cause__, pg_errors.DeadlockDetected):
                    raise

    def set(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> None:
        self._again(timeout, lambda left: StateMethods.set(self, ns, key, value, timeout=left))

    def delete(self, ns: Namespace, key: str, *, timeout: float | None = None) -> bool:
        return self._again(timeout, lambda left: StateMethods.delete(self, ns, key, timeout=left))

    def push(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> int:
        return self._again(timeout, lambda left: StateMethods.push(self, ns, key, value, timeout=left))

    def sadd(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> bool:
        return self._again(timeout, lambda left: StateMethods.sadd(self, ns, key, value, timeout=left))

    def srem(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> bool:
        return self._again(timeout, lambda left: StateMethods.srem(self, ns, key, value, timeout=left))


def on_pool(pool: PgPool, settings: StateSettings) -> PostgresStateStore:
    """The kernel's state store with `store.url` (when `state.db_path` turns it on, S11.3): its limits
    from kernel.yaml's `state:`, on the kernel's shared pool; nothing connects before a `state_*` call."""
    return PostgresStateStore(
        pool,
        max_value_bytes=settings.max_value_bytes,
        max_result_bytes=settings.max_result_bytes,
        max_user_bytes=settings.max_user_bytes,
    )


# -- moving a project's file over --------------------------------------------------------------

_COPIED = {
    "state_keys": "scope, owner, key, type, value, size, payer, bytes",
    "state_list_items": "scope, owner, key, pos, value, payer, bytes",
    "state_set_members": "id, scope, owner, key, digest, value, payer, bytes",
}


def copy_from_sqlite(config: KernelConfig, target: psycopg.Connection[tuple[Any, ...]]) -> dict[str, int]:
    """Copy the project's state file (`state.db_path`) into the (migrated, empty) PostgreSQL tables.

    Inside the caller's transaction on `target` (not committed here); set
    members keep their ids (the order `smembers` returns) and the id
    sequence moves past them; `state_usage` is counted again by the
    triggers as the rows go in. No file, or one without the state tables,
    copies nothing; a file of an older schema (never opened by this
    agentkernel) is refused, as is a target table already holding rows.
    """
    path = config.state.db_path
    if path is None:
        return {}
    with read_only(Path(path)) as source:
        if source is None or not source_version(source, STATE_SCHEMA, "the state store's tables", Path(path)):
            return {}
        copied = {
            table: copy_table(source, target, table, _names(columns), _key_as_bytes(_names(columns)))
            for table, columns in _COPIED.items()
        }
    move_sequence(target, "state_set_members", "id")
    return copied


def _names(columns: str) -> list[str]:
    return [name.strip() for name in columns.split(",")]


def _key_as_bytes(names: list[str]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A SQLite row with its `key` column as the BYTEA PostgreSQL keeps keys in."""
    at_key = names.index("key")
    return lambda row: (*row[:at_key], _key_bytes(row[at_key]), *row[at_key + 1 :])


SCHEMAS = (SCHEMA,)
"""The tables `agentkernel store migrate` brings up to date (cli/store_cmd.py)."""

__all__ = [
    "POSTGRES",
    "SCHEMA",
    "SCHEMAS",
    "TABLES",
    "PostgresStateStore",
    "copy_from_sqlite",
    "key_lock",
    "on_pool",
]
