"""The state store behind the `state_*` helpers (S11): Redis-like keys in one SQLite file.

A key lives in a `Namespace` (a scope and the id of its owner: a session, a
user, a template, or the one global space) and holds one of three types, as
in Redis: a **value** (any JSON value), a **list** (appended to by `push`,
read by `range`) or a **set** (unique JSON values). Using a key as the wrong
type is an error (Redis's WRONGTYPE), except `set` and `delete`, which
replace or remove a key of any type.

`StateStore` is the small interface the helpers depend on (DESIGN rule 8),
so a shared store can replace the embedded `SqliteStateStore`: with
`store.url`, `PostgresStateStore` (state_pg.py), which shares the
operations below (`StateMethods`, over a `StateDialect`). Decisions:

- **Concurrency.** One connection per store, opened on first use, guarded by
  a lock (threads); WAL journal, ``busy_timeout`` and ``BEGIN IMMEDIATE``
  writes (processes). Each operation is one transaction, so a `push` never
  loses an item and two `sadd` of one value never both report "added",
  whichever threads or processes race. Reads run in a deferred transaction:
  one snapshot, never blocked by writers.
- **Bounded waits.** Every operation takes a `timeout` (the script call's
  remaining time): the thread lock and SQLite's busy wait both give up by
  then, and never later than `busy_timeout_secs` (10 s), with
  `StateBusyError`, so a script is never held past its deadline by another
  writer.
- **Encoding.** Values are stored as compact JSON text: ints stay ints and
  floats stay floats. Set members are compared by *canonical* JSON (sorted
  object keys, integral floats written as ints, so `1` and `1.0` are one
  member) through its SHA-256; the member first added is the one returned.
  Lists keep positions 0..n-1 (only `push` adds, only deleting the key
  removes), so a range is an index range; a set whose last member is
  removed disappears, as in Redis.
- **Size.** One value (or list item, or set member) is at most
  `max_value_bytes` of UTF-8 JSON (default 1 MiB); one read (`range`,
  `smembers`, `keys`) returns at most `max_result_bytes` of JSON text
  (default 16 MiB), so a script cannot make the kernel load a huge list.
- **Quota per user.** Every row records the user whose write put it there
  (`payer`, "" for callers without a user) and its bytes (the UTF-8 JSON
  of the value, plus the key's own bytes on the key's row; a list item or
  set member also counts its key, stored again on its row, and
  ITEM_ROW_BYTES for the row itself); triggers keep
  each user's total in `state_usage`, in the same transaction. A write
  that would raise its user's total past `max_user_bytes` (default
  64 MiB) is refused and rolled back. It counts what a user writes in
  *every* scope, `global` and `agent` too, so a shared scope is no way
  around it; a write that frees bytes (a smaller value, a delete) is
  always allowed.
- **Schema** is created on open inside a write transaction and versioned
  in a table of its own (`state_schema`), so the file may even be shared
  with another store (e.g. the message store's ``user_version``). Version 2
  added the quota's columns, and keys session namespaces by user
  and session: a version 1 file's session keys, whose user is unknown, are
  kept under the owner `[0, "<session id>"]`, which no caller's namespace
  ever is, so no user inherits another's session keys. Version 3 counts
  list items and set members with their key and row.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

from agentkernel.config import KernelConfig, StateSettings
from agentkernel.errors import AgentKernelError
from agentkernel.ports import Namespace, StateStore
from agentkernel.services.sqlite_db import Schema, connect, migrate, set_busy_timeout, transaction
from agentkernel.types import JSONValue
from agentkernel.util.short_text import shown_value

MAX_VALUE_BYTES = StateSettings.max_value_bytes
MAX_RESULT_BYTES = StateSettings.max_result_bytes
MAX_USER_BYTES = StateSettings.max_user_bytes
BUSY_TIMEOUT_SECS = 10.0
SCHEMA_VERSION = 3

#: What each list item and set member counts beyond its JSON and its key's bytes: its row's own
#: columns and index entries. Its key is stored again on every such row (and in each index over it).
ITEM_ROW_BYTES = 64

VALUE, LIST, SET = "value", "list", "set"

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS state_keys (
        scope TEXT NOT NULL,
        owner TEXT NOT NULL,
        key TEXT NOT NULL,
        type TEXT NOT NULL CHECK (type IN ('value', 'list', 'set')),
        value TEXT,
        size INTEGER NOT NULL DEFAULT 0,
        payer TEXT NOT NULL DEFAULT '',
        bytes INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (scope, owner, key)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS state_list_items (
        scope TEXT NOT NULL,
        owner TEXT NOT NULL,
        key TEXT NOT NULL,
        pos INTEGER NOT NULL,
        value TEXT NOT NULL,
        payer TEXT NOT NULL DEFAULT '',
        bytes INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (scope, owner, key, pos)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS state_set_members (
        id INTEGER PRIMARY KEY,
        scope TEXT NOT NULL,
        owner TEXT NOT NULL,
        key TEXT NOT NULL,
        digest TEXT NOT NULL,
        value TEXT NOT NULL,
        payer TEXT NOT NULL DEFAULT '',
        bytes INTEGER NOT NULL DEFAULT 0,
        UNIQUE (scope, owner, key, digest)
    )""",
    "CREATE INDEX IF NOT EXISTS state_set_order ON state_set_members (scope, owner, key, id)",
)
"""Version 2. `state_set_members.id` is insertion order, which `smembers` returns."""

_TABLES = ("state_keys", "state_list_items", "state_set_members")

_FROM_V1 = (
    *(f"ALTER TABLE {table} ADD COLUMN payer TEXT NOT NULL DEFAULT ''" for table in _TABLES),
    *(f"ALTER TABLE {table} ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0" for table in _TABLES),
    "UPDATE state_keys SET bytes = length(CAST(key AS BLOB)) + coalesce(length(CAST(value AS BLOB)), 0)",
    "UPDATE state_list_items SET bytes = length(CAST(value AS BLOB))",
    "UPDATE state_set_members SET bytes = length(CAST(value AS BLOB))",
    *(f"UPDATE {table} SET owner = json_array(0, owner) WHERE scope = 'session'" for table in _TABLES),
)
"""Version 1 → 2: the quota's columns, and session keys set apart (see the module docstring)."""

_ITEM_BYTES_SQL = f"length(CAST(key AS BLOB)) + length(CAST(value AS BLOB)) + {ITEM_ROW_BYTES}"
_FROM_V2 = (
    f"UPDATE state_list_items SET bytes = {_ITEM_BYTES_SQL}",
    f"UPDATE state_set_members SET bytes = {_ITEM_BYTES_SQL}",
)
"""Version 2 → 3: an item or member counts its key and its row too (the triggers update the totals).

Before, a list item of `0` under a 1,000-byte key counted 1 byte and took
about 6 KB of the file (the key, stored on every row, overflows the page):
a user's 1 MB quota let a loop of `state_push` write 400 MB in 20 seconds.
"""

_USAGE = (
    "CREATE TABLE IF NOT EXISTS state_usage (payer TEXT PRIMARY KEY, bytes INTEGER NOT NULL) WITHOUT ROWID",
    """INSERT INTO state_usage (payer, bytes)
        SELECT payer, sum(bytes) FROM (
            SELECT payer, bytes FROM state_keys
            UNION ALL SELECT payer, bytes FROM state_list_items
            UNION ALL SELECT payer, bytes FROM state_set_members
        ) GROUP BY payer
        ON CONFLICT (payer) DO NOTHING""",
)
"""Each user's total bytes: counted once when made, then kept by the triggers below."""

_ADD_USAGE = (
    "INSERT INTO state_usage (payer, bytes) VALUES (NEW.payer, NEW.bytes) "
    "ON CONFLICT (payer) DO UPDATE SET bytes = bytes + excluded.bytes;"
)
_SUB_USAGE = "UPDATE state_usage SET bytes = bytes - OLD.bytes WHERE payer = OLD.payer;"
_TRIGGERS = tuple(
    statement
    for table in _TABLES
    for statement in (
        f"CREATE TRIGGER IF NOT EXISTS {table}_added AFTER INSERT ON {table} BEGIN {_ADD_USAGE} END",
        f"CREATE TRIGGER IF NOT EXISTS {table}_removed AFTER DELETE ON {table} BEGIN {_SUB_USAGE} END",
        f"CREATE TRIGGER IF NOT EXISTS {table}_changed AFTER UPDATE OF payer, bytes ON {table} "
        f"BEGIN {_SUB_USAGE} {_ADD_USAGE} END",
    )
)

STATE_SCHEMA = Schema(
    version=SCHEMA_VERSION,
    fresh=(*_SCHEMA, *_USAGE, *_TRIGGERS),
    upgrades={2: (*_SCHEMA, *_FROM_V1, *_USAGE, *_TRIGGERS), 3: _FROM_V2},
    too_new=lambda found: StateError(f"state store schema version {found} is newer than this kernel's"),
    version_table="state_schema",  # not user_version: the file may be shared with another store
)

_WHERE = "scope = ? AND owner = ? AND key = ?"
_ADD_TO_KEY = (
    "INSERT INTO state_keys (scope, owner, key, type, size, payer, bytes) VALUES (?, ?, ?, ?, 1, ?, ?) "
    "ON CONFLICT (scope, owner, key) DO UPDATE SET size = state_keys.size + 1"
)
"""A list or set one item longer (made when missing); qualified `state_keys.size` as PostgreSQL wants."""


class StateError(AgentKernelError):
    """An operation the store refused; the text is meant for the script's author."""


class WrongTypeError(StateError):
    """A key used as another type than it holds (Redis's WRONGTYPE)."""


class StateLimitError(StateError):
    """A value, a result or a user's total over the configured size limit."""


class StateBusyError(StateError):
    """The store stayed locked by other writers until the caller's time ran out."""


# -- values ---------------------------------------------------------------------------------


def encode_value(value: JSONValue, limit: int | None = MAX_VALUE_BYTES) -> str:
    """Compact JSON text of a value, refusing what JSON cannot hold or what is over `limit` bytes.

    Lone surrogates (a JS string may carry them) cannot be UTF-8: such a text
    keeps them as `\\u` escapes, so they still come back unchanged.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (ValueError, TypeError) as exc:
        raise StateError(f"value has no JSON form: {exc}") from None
    except RecursionError:
        raise StateError("value is nested too deeply") from None
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
        size = len(text)
    if limit is not None and size > limit:
        raise StateLimitError(
            f"value is {size} bytes of JSON, over the limit of {limit} (state.max_value_bytes)"
        )
    return text


def _integral_as_int(text: str) -> int | float:
    number = float(text)
    return int(number) if number.is_integer() else number


def canonical_json(text: str) -> str:
    """The one text of a JSON value that equal values share: sorted keys, `1.0` as `1`."""
    return json.dumps(
        json.loads(text, parse_float=_integral_as_int),
        sort_keys=True,
        ensure_ascii=True,
        separators=(",", ":"),
    )


def member_digest(text: str) -> str:
    """The key a set member is unique by: SHA-256 of its canonical JSON."""
    import hashlib  # OpenSSL's library: for a set member only

    try:
        canonical = canonical_json(text)
    except RecursionError:
        raise StateError("value is nested too deeply") from None
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def lrange_bounds(length: int, start: int, stop: int) -> tuple[int, int] | None:
    """Redis LRANGE's index rules: the inclusive positions to read, or None for nothing.

    Negative indexes count from the end; a start before the first item is 0;
    a stop past the last item is the last item.
    """
    if start < 0:
        start += length
    if stop < 0:
        stop += length
    start = max(start, 0)
    if start > stop or start >= length:
        return None
    return start, min(stop, length - 1)


# -- what both stores do ------------------------------------------------------------------


@dataclass(frozen=True)
class StateDialect:
    """How one database spells the state queries: its parameter mark and how a key is stored.

    SQLite here (`?`, keys as TEXT); PostgreSQL in state_pg.py (`%s`, keys as
    BYTEA, since a key may hold a NUL, which PostgreSQL's TEXT cannot). Both
    sort keys by their UTF-8 bytes.
    """

    mark: str
    key_param: Callable[[str], object]  # a key as the driver stores it
    key_text: Callable[[Any], str]  # a stored key back as text

    def sql(self, text: str) -> str:
        """`text`, written with `?` marks, in this dialect."""
        return text if self.mark == "?" else text.replace("?", self.mark)

    def params(self, ns: Namespace, key: str) -> tuple[object, ...]:
        return (ns.scope, ns.owner, self.key_param(key))


SQLITE = StateDialect("?", str, str)


class StateMethods:
    """The `StateStore` operations, written once over a dialect and a database (SQLite's
    `SqliteStateStore`, PostgreSQL's `PostgresStateStore` in state_pg.py).

    A store gives `_transaction` (one transaction, its waits bounded by
    `timeout`, its failures as `StateError`), `_lock_key` (no other writer of
    that key until the transaction ends) and `_lock_usage` (the writer's
    total, no other writer of it until the transaction ends): every write holds
    both, so sizes, positions and the quota are read and checked in one
    consistent state.
    """

    dialect: ClassVar[StateDialect]
    max_value_bytes: int
    max_result_bytes: int
    max_user_bytes: int

    def _transaction(self, timeout: float | None, *, write: bool) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _lock_key(self, conn: Any, ns: Namespace, key: str) -> None:
        raise NotImplementedError

    def _lock_usage(self, conn: Any, ns: Namespace, key: str) -> int:
        raise NotImplementedError

    @contextmanager
    def _writing(
        self, ns: Namespace, key: str, timeout: float | None, *, quota: bool = True
    ) -> Iterator[Any]:
        """A write of `key`; with `quota`, rolled back if it raised the writer's total over the quota."""
        with self._transaction(timeout, write=True) as conn:
            self._lock_key(conn, ns, key)
            before = self._lock_usage(conn, ns, key) if quota else 0
            yield conn
            if not quota:
                return
            after = self._usage(conn, ns.user)
            if after > before and after > self.max_user_bytes:
                whose = "this user's keys" if ns.user else "the keys of callers without a user"
                raise StateLimitError(
                    f"{whose} would take {after:,} bytes, over the {self.max_user_bytes:,}-byte "
                    "quota (state.max_user_bytes); delete keys to make room"
                )

    def _usage(self, conn: Any, user: str) -> int:
        row = conn.execute(
            self.dialect.sql("SELECT bytes FROM state_usage WHERE payer = ?"), (user,)
        ).fetchone()
        return int(row[0]) if row is not None else 0

    # -- shared steps ---------------------------------------------------------------------

    def _type_of(self, conn: Any, ns: Namespace, key: str) -> tuple[str, int] | None:
        row = conn.execute(
            self.dialect.sql(f"SELECT type, size FROM state_keys WHERE {_WHERE}"),
            self.dialect.params(ns, key),
        ).fetchone()
        return (row[0], int(row[1])) if row is not None else None

    @staticmethod
    def _expect(ns: Namespace, key: str, found: tuple[str, int] | None, wanted: str) -> int:
        """The size of a key of type `wanted`; 0 when missing; WrongTypeError otherwise."""
        if found is None:
            return 0
        if found[0] != wanted:
            raise WrongTypeError(
                f"key {_shown(key)} in scope {ns.scope!r} holds a {found[0]}, not a {wanted}"
            )
        return found[1]

    def _drop(self, conn: Any, ns: Namespace, key: str) -> bool:
        params, sql = self.dialect.params(ns, key), self.dialect.sql
        conn.execute(sql(f"DELETE FROM state_list_items WHERE {_WHERE}"), params)
        conn.execute(sql(f"DELETE FROM state_set_members WHERE {_WHERE}"), params)
        return int(conn.execute(sql(f"DELETE FROM state_keys WHERE {_WHERE}"), params).rowcount) > 0

    def _collect(self, texts: Iterator[str]) -> list[str]:
        """`texts`, refusing a result over max_result_bytes before loading it all."""
        out: list[str] = []
        total = 0
        for text in texts:
            total += len(
                text.encode("utf-8", "surrogatepass")
            )  # stored values are valid UTF-8 (encode_value)
            if total > self.max_result_bytes:
                raise StateLimitError(
                    f"the result is over the limit of {self.max_result_bytes} bytes of JSON "
                    "(state.max_result_bytes); read a smaller range"
                )
            out.append(text)
        return out

    # -- values ---------------------------------------------------------------------------

    def get(self, ns: Namespace, key: str, *, timeout: float | None = None) -> JSONValue:
        with self._transaction(timeout, write=False) as conn:
            row = conn.execute(
                self.dialect.sql(f"SELECT type, value FROM state_keys WHERE {_WHERE}"),
                self.dialect.params(ns, key),
            ).fetchone()
        if row is None:
            return None
        self._expect(ns, key, (row[0], 0), VALUE)  # a list or a set cannot be read as a value
        return _decode(row[1])

    def set(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> None:
        text = encode_value(value, self.max_value_bytes)
        with self._writing(ns, key, timeout) as conn:
            found = self._type_of(conn, ns, key)
            if found is not None and found[0] != VALUE:
                self._drop(conn, ns, key)
            conn.execute(
                self.dialect.sql(
                    "INSERT INTO state_keys (scope, owner, key, type, value, payer, bytes) "
                    "VALUES (?, ?, ?, 'value', ?, ?, ?) ON CONFLICT (scope, owner, key) DO UPDATE "
                    "SET value = excluded.value, payer = excluded.payer, bytes = excluded.bytes"
                ),
                (*self.dialect.params(ns, key), text, ns.user, _bytes(key) + _bytes(text)),
            )

    def delete(self, ns: Namespace, key: str, *, timeout: float | None = None) -> bool:
        with self._writing(ns, key, timeout, quota=False) as conn:
            return self._drop(conn, ns, key)

    def keys(self, ns: Namespace, *, timeout: float | None = None) -> list[str]:
        with self._transaction(timeout, write=False) as conn:
            rows = conn.execute(
                self.dialect.sql("SELECT key FROM state_keys WHERE scope = ? AND owner = ? ORDER BY key"),
                (ns.scope, ns.owner),
            )
            return self._collect(self.dialect.key_text(row[0]) for row in rows)

    # -- lists ----------------------------------------------------------------------------

    def push(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> int:
        text = encode_value(value, self.max_value_bytes)
        with self._writing(ns, key, timeout) as conn:
            size = self._expect(ns, key, self._type_of(conn, ns, key), LIST)
            params = self.dialect.params(ns, key)
            conn.execute(
                self.dialect.sql(_ADD_TO_KEY),
                (*params, LIST, ns.user, _bytes(key)),
            )
            conn.execute(
                self.dialect.sql(
                    "INSERT INTO state_list_items (scope, owner, key, pos, value, payer, bytes) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)"
                ),
                (*params, size, text, ns.user, _item_bytes(key, text)),
            )
        return size + 1

    def range(
        self, ns: Namespace, key: str, start: int, stop: int, *, timeout: float | None = None
    ) -> list[JSONValue]:
        with self._transaction(timeout, write=False) as conn:
            length = self._expect(ns, key, self._type_of(conn, ns, key), LIST)
            bounds = lrange_bounds(length, start, stop)
            if bounds is None:
                return []
            rows = conn.execute(
                self.dialect.sql(
                    f"SELECT value FROM state_list_items WHERE {_WHERE} AND pos BETWEEN ? AND ? ORDER BY pos"
                ),
                (*self.dialect.params(ns, key), *bounds),
            )
            texts = self._collect(row[0] for row in rows)
        return [_decode(text) for text in texts]

    # -- sets -----------------------------------------------------------------------------

    def sadd(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> bool:
        text = encode_value(value, self.max_value_bytes)
        digest = member_digest(text)
        with self._writing(ns, key, timeout) as conn:
            self._expect(ns, key, self._type_of(conn, ns, key), SET)
            params = self.dialect.params(ns, key)
            added = int(
                conn.execute(
                    self.dialect.sql(
                        "INSERT INTO state_set_members (scope, owner, key, digest, value, payer, bytes) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope, owner, key, digest) DO NOTHING"
                    ),
                    (*params, digest, text, ns.user, _item_bytes(key, text)),
                ).rowcount
            )
            if added:
                conn.execute(
                    self.dialect.sql(_ADD_TO_KEY),
                    (*params, SET, ns.user, _bytes(key)),
                )
        return added > 0

    def smembers(self, ns: Namespace, key: str, *, timeout: float | None = None) -> list[JSONValue]:
        with self._transaction(timeout, write=False) as conn:
            if not self._expect(ns, key, self._type_of(conn, ns, key), SET):
                return []
            rows = conn.execute(
                self.dialect.sql(f"SELECT value FROM state_set_members WHERE {_WHERE} ORDER BY id"),
                self.dialect.params(ns, key),
            )
            texts = self._collect(row[0] for row in rows)
        return [_decode(text) for text in texts]

    def srem(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> bool:
        # no size limit: a member too big to add cannot be there, and removing it is harmless
        digest = member_digest(encode_value(value, limit=None))
        with self._writing(ns, key, timeout, quota=False) as conn:
            size = self._expect(ns, key, self._type_of(conn, ns, key), SET)
            params, sql = self.dialect.params(ns, key), self.dialect.sql
            removed = int(
                conn.execute(
                    sql(f"DELETE FROM state_set_members WHERE {_WHERE} AND digest = ?"), (*params, digest)
                ).rowcount
            )
            if removed and size <= 1:
                conn.execute(sql(f"DELETE FROM state_keys WHERE {_WHERE}"), params)
            elif removed:
                conn.execute(sql(f"UPDATE state_keys SET size = size - 1 WHERE {_WHERE}"), params)
        return removed > 0


# -- the SQLite store -----------------------------------------------------------------------


class SqliteStateStore(StateMethods):
    """The embedded state store: one SQLite file, safe across threads and processes.

    The file (and its folder) is created on the first operation, not at
    construction, so a kernel that never runs a `state_*` helper writes
    nothing. See the module docstring for concurrency and size decisions.
    """

    dialect = SQLITE

    def __init__(
        self,
        path: Path | str,
        *,
        max_value_bytes: int = MAX_VALUE_BYTES,
        max_result_bytes: int = MAX_RESULT_BYTES,
        max_user_bytes: int = MAX_USER_BYTES,
        busy_timeout_secs: float = BUSY_TIMEOUT_SECS,
    ) -> None:
        self.path = Path(path)
        self.max_value_bytes = max_value_bytes
        self.max_result_bytes = max_result_bytes
        self.max_user_bytes = max_user_bytes
        self.busy_timeout_secs = busy_timeout_secs
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._busy_ms = -1
        self._closed = False

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection after any operation in flight; closing twice is harmless."""
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- connection and transactions ------------------------------------------------------

    def _connection(self, timeout: float | None) -> sqlite3.Connection:
        """The open connection; opened, configured and migrated on first use (lock held).

        Opening waits for other writers too (WAL setup, a fresh file's
        schema), so its busy wait is bounded by `timeout` like any operation.
        """
        if self._closed:
            raise StateError("the state store is closed")
        if self._conn is None:
            wait = self._busy_wait(timeout)
            try:
                conn = connect(self.path, wait)
            except OSError as exc:
                raise StateError(f"cannot create the state store's folder: {exc.strerror or exc}") from exc
            try:
                self._busy_ms = max(0, int(wait * 1000))
                migrate(conn, STATE_SCHEMA)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _busy_wait(self, timeout: float | None) -> float:
        return self.busy_timeout_secs if timeout is None else min(timeout, self.busy_timeout_secs)

    def _bound_busy_wait(self, conn: sqlite3.Connection, timeout: float | None) -> None:
        """SQLite's busy wait no longer than the caller may wait (a PRAGMA only when it changes)."""
        wanted = self._busy_wait(timeout)
        if max(0, int(wanted * 1000)) != self._busy_ms:
            self._busy_ms = set_busy_timeout(conn, wanted)

    @contextmanager
    def _transaction(self, timeout: float | None, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction under the thread lock, both waits bounded by `timeout`.

        Writes are IMMEDIATE: the write lock is taken at BEGIN, where the busy
        wait applies; a deferred transaction that upgrades later may fail at
        once with SQLITE_BUSY, its snapshot being stale.
        """
        wait = self.busy_timeout_secs if timeout is None else max(0.0, min(timeout, self.busy_timeout_secs))
        if not self._lock.acquire(timeout=wait):
            raise StateBusyError(f"the state store stayed busy for {wait:.1f} s")
        try:
            conn = self._connection(timeout)
            self._bound_busy_wait(conn, timeout)
            with transaction(conn, write=write):
                yield conn
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise StateBusyError("the state store is locked by another writer; try again") from exc
            raise StateError(f"the state store failed: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StateError(f"the state store is unusable: {exc}") from exc
        finally:
            self._lock.release()

    def _lock_key(self, conn: sqlite3.Connection, ns: Namespace, key: str) -> None:
        """Nothing to do: BEGIN IMMEDIATE holds the file's one write lock."""

    def _lock_usage(self, conn: sqlite3.Connection, ns: Namespace, key: str) -> int:
        """The writer's total, which no other writer can change (BEGIN IMMEDIATE)."""
        return self._usage(conn, ns.user)


def _item_bytes(key: str, text: str) -> int:
    """What a list item or set member counts against its writer's quota (see `_FROM_V2`)."""
    return _bytes(key) + _bytes(text) + ITEM_ROW_BYTES


def _bytes(text: str) -> int:
    """The UTF-8 size of a key or of a stored JSON text (lone surrogates counted as escaped)."""
    return len(text.encode("utf-8", "surrogatepass"))


def _decode(text: str) -> JSONValue:
    try:
        value: JSONValue = json.loads(text)
    except RecursionError:  # stored by a Python whose recursion limit was higher
        raise StateError("the stored value is nested too deeply to read") from None
    return value


def _shown(key: str) -> str:
    """A key as error messages show it: quoted, cut when long, with its length then."""
    shown = shown_value(key)
    return shown if shown == repr(key) else f"{shown} ({len(key)} chars)"


# -- configuration --------------------------------------------------------------------------


def from_config(config: KernelConfig) -> SqliteStateStore | None:
    """The store kernel.yaml asks for (`state.db_path` or `logging.state_db_path`), else None.

    Without a path the `state_*` helpers throw (S11.3). Nothing is created
    here: the file (and its folder) appear on the first operation.
    """
    settings = config.state
    if settings.db_path is None:
        return None
    return SqliteStateStore(
        settings.db_path,
        max_value_bytes=settings.max_value_bytes,
        max_result_bytes=settings.max_result_bytes,
        max_user_bytes=settings.max_user_bytes,
    )


__all__ = [
    "LIST",
    "MAX_RESULT_BYTES",
    "MAX_USER_BYTES",
    "MAX_VALUE_BYTES",
    "SET",
    "SQLITE",
    "VALUE",
    "Namespace",
    "SqliteStateStore",
    "StateBusyError",
    "StateDialect",
    "StateError",
    "StateLimitError",
    "StateMethods",
    "StateStore",
    "WrongTypeError",
    "canonical_json",
    "encode_value",
    "from_config",
    "lrange_bounds",
    "member_digest",
]
