"""Rows kept on the server behind opaque random ids, for their owner only, for a while (S6.3).

What the server seals where a block leaves it (a table's continuation
args, a file's place in a scratch folder) is one row of an SQLite table,
and the client gets an id that stands for it. Every such table follows the
same rules, kept here once (continuations.py and downloads.py say what
their rows hold):

- **The id is a capability**: 192 random bits (`secrets.token_urlsafe`),
  never derived from the row, so it says nothing and cannot be guessed.
  The table keeps only its SHA-256 (the `key` column), as the server keeps
  its tokens' (`server.tokens`): a copy of the file is no key to
  anyone's rows.
- **One answer for unknown, expired and another user's ids**: `_lookup`
  returns None for all three, so an endpoint answers 404 alike and an id
  reveals nothing about whether it exists for someone else.
- **Expiry**: a row lives `ttl_secs` from its creation; an expired one
  answers None at once and is deleted by the next insert (an indexed
  range delete on `created_at`, nothing to do most of the time) or by
  `purge`.
- **A cap per user**: a user keeps at most `max_rows_per_owner` rows of
  a table (`MAX_ROWS_PER_OWNER`); past it the oldest are deleted first, so
  no one user's reads or scripts grow the file without bound.
- **Beside the transcript**: the tables live in the message store's SQLite
  file, each versioned in a table of its own (`Schema.version_table`), so
  they survive a restart and the checks that keep scripts away from the
  transcript (config/stores.py) keep them away from these too.

A table of this kind has the columns `key TEXT PRIMARY KEY`, `owner TEXT
NOT NULL`, `created_at REAL NOT NULL` (an index on it), and its own
(`sealed_schema`); a store names its table and schema as class attributes.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from agentkernel.errors import AgentKernelError
from agentkernel.services.sqlite_db import Schema, SqliteStore

DEFAULT_TTL_SECS = 24 * 3600.0
BUSY_TIMEOUT_SECS = 5.0
ID_BYTES = 24  # 192 bits; token_urlsafe makes 32 characters of [A-Za-z0-9_-]
MAX_ID_CHARS = 100  # anything longer is no id of ours: refused before hashing
MAX_ROWS_PER_OWNER = 20_000  # of one table, per user: the oldest beyond it are deleted (`_trim_now_and_then`)
TRIM_EVERY = 64  # a user's rows are trimmed once every this many new ones


def sealed_schema(table: str, what: str, columns: Sequence[str]) -> Schema:
    """The schema of a table of sealed rows: the common columns around `columns` (SQL column definitions).

    Versioned in a table of its own, `{table}_schema`, since the file is the
    message store's, which uses `user_version`; `what` names it in errors.
    """
    return Schema(
        version=2,
        upgrades={
            1: (
                f"CREATE TABLE {table} ("
                " key TEXT PRIMARY KEY,"  # SHA-256 of the id, hex
                " owner TEXT NOT NULL,"
                + "".join(f" {column}," for column in columns)
                + " created_at REAL NOT NULL"  # seconds since the epoch
                ") WITHOUT ROWID",
                f"CREATE INDEX {table}_created ON {table} (created_at)",
            ),
            2: (f"CREATE INDEX {table}_owner ON {table} (owner, created_at)",),  # a user's newest first
        },
        too_new=lambda found: AgentKernelError(
            f"{what} store schema version {found} is newer than this kernel's"
        ),
        version_table=f"{table}_schema",
    )


@dataclass(frozen=True)
class SealedDialect:
    """How one database spells a sealed table's statements (SQLite here, PostgreSQL in sealed_ids_pg.py).

    `expired` and `trim` are templates of `{table}`: the expiry sweep (one
    parameter, the oldest `created_at` kept) and a user's trim (the owner,
    how many of their newest rows stay).
    """

    mark: str  # the parameter placeholder: `?` or `%s`
    expired: str
    trim: str


SQLITE = SealedDialect(
    "?",
    "DELETE FROM {table} WHERE created_at <= ?",
    "DELETE FROM {table} WHERE key IN (SELECT key FROM {table} WHERE owner = ?"
    " ORDER BY created_at DESC LIMIT -1 OFFSET ?)",
)


class SealedTable(Protocol):
    """What `SealedMethods` needs of the class it is mixed into (its table, its dialect and a store), and
    what it gives the tables' own methods (continuations.py, downloads.py)."""

    table: ClassVar[str]
    dialect: ClassVar[SealedDialect]
    ttl_secs: float
    max_rows_per_owner: int
    _clock: Callable[[], float]
    _since_trim: dict[str, int]

    def _now(self, now: float | None) -> float: ...

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...

    def _write(self) -> AbstractContextManager[Any]: ...

    def _trim_now_and_then(self, conn: Any, owner: str) -> None: ...

    def _delete_expired(self, conn: Any, now: float) -> int: ...

    def _insert(self, owner: str, row: Mapping[str, object], now: float | None) -> str: ...

    def _lookup(
        self, sealed_id: object, owner: str, columns: Sequence[str], now: float | None
    ) -> tuple[Any, ...] | None: ...


class SealedMethods:
    """What every sealed table does (see the module docstring), written once for both databases: the
    SQLite store (`SealedIdStore`) and the PostgreSQL one (sealed_ids_pg.py) differ only in their
    `dialect` and the store underneath (`_read`, `_write`)."""

    table: ClassVar[str]
    what: ClassVar[str]  # what a row is, for messages: "continuation"
    columns: ClassVar[
        tuple[str, ...]
    ]  # the table's own columns (SQL definitions), between owner and created_at
    dialect: ClassVar[SealedDialect]

    def _configure(self, ttl_secs: float, clock: Callable[[], float]) -> None:
        self.ttl_secs = ttl_secs
        self._clock = clock
        self.max_rows_per_owner = MAX_ROWS_PER_OWNER
        self._since_trim: dict[str, int] = {}  # rows an owner got since their rows were last trimmed

    @classmethod
    def _checked_ttl(cls, ttl_secs: float) -> float:
        if not ttl_secs > 0:
            raise ValueError(f"{cls.what} ttl_secs must be positive, got {ttl_secs!r}")
        return ttl_secs

    def _now(self: SealedTable, now: float | None) -> float:
        return self._clock() if now is None else now

    def _insert(self: SealedTable, owner: str, row: Mapping[str, object], now: float | None) -> str:
        """Keep `row` for `owner`; its new opaque id. Expired rows are deleted in the same transaction."""
        at = self._now(now)
        new_id = secrets.token_urlsafe(ID_BYTES)
        columns = ", ".join(["key", "owner", *row, "created_at"])
        marks = ", ".join([self.dialect.mark] * (len(row) + 3))
        with self._write() as conn:
            self._delete_expired(conn, at)
            conn.execute(
                f"INSERT INTO {self.table} ({columns}) VALUES ({marks})",
                (sealed_key(new_id), owner, *row.values(), at),
            )
            self._trim_now_and_then(conn, owner)
        return new_id

    def _trim_now_and_then(self: SealedTable, conn: Any, owner: str) -> None:
        """Keep `owner`'s newest `max_rows_per_owner` rows, checked once every TRIM_EVERY of their rows.

        Each read of a transcript seals its blocks anew (sealing.py), so a
        user who reads again and again, or a script that makes tables
        without end, would grow the file for a whole TTL; with a cap per
        user, one user's rows are bounded and nobody else's are touched.
        The oldest go first: their ids answer as expired ones do. Counting
        on every insert would walk the user's rows each time, so it waits
        for TRIM_EVERY new ones (a user holds at most that many more, per
        process: the count is only when to look, the rows are the store's).
        """
        since = self._since_trim.get(owner, 0) + 1
        if since < TRIM_EVERY:
            self._since_trim[owner] = since
            return
        self._since_trim.pop(owner, None)
        conn.execute(self.dialect.trim.format(table=self.table), (owner, self.max_rows_per_owner))

    def _lookup(
        self: SealedTable, sealed_id: object, owner: str, columns: Sequence[str], now: float | None
    ) -> tuple[Any, ...] | None:
        """`columns` of `owner`'s live row `sealed_id`, then its `created_at`; None otherwise (see above)."""
        if (
            not isinstance(sealed_id, str)
            or not 0 < len(sealed_id) <= MAX_ID_CHARS
            or not sealed_id.isascii()
        ):
            return None  # no id of ours (they are ASCII): a lone surrogate from JSON never reaches the hash
        rows = self._read(
            f"SELECT owner, {', '.join(columns)}, created_at FROM {self.table} "
            f"WHERE key = {self.dialect.mark}",
            (sealed_key(sealed_id),),
        )
        if not rows or rows[0][0] != owner or not rows[0][-1] > self._now(now) - self.ttl_secs:
            return None
        return tuple(rows[0][1:])

    def purge(self: SealedTable, now: float | None = None) -> int:
        """Delete the expired rows; how many."""
        with self._write() as conn:
            return self._delete_expired(conn, self._now(now))

    def _delete_expired(self: SealedTable, conn: Any, now: float) -> int:
        expired = (now - self.ttl_secs,)
        return int(conn.execute(self.dialect.expired.format(table=self.table), expired).rowcount)

    def count(self: SealedTable) -> int:
        """How many rows the table holds, expired ones included (for tests and the benchmark)."""
        return int(self._read(f"SELECT count(*) FROM {self.table}", ())[0][0])


class SealedIdStore(SealedMethods, SqliteStore):
    """One table of rows behind opaque ids in an SQLite file (see the module docstring); subclasses name
    their table."""

    dialect = SQLITE
    schema: ClassVar[Schema]

    def __init__(
        self,
        path: Path | str,
        *,
        ttl_secs: float = DEFAULT_TTL_SECS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        checked = self._checked_ttl(ttl_secs)
        super().__init__(path, self.schema, BUSY_TIMEOUT_SECS)
        self._configure(checked, clock)


def sealed_key(sealed_id: str) -> str:
    """What the table keeps of an id: its SHA-256, hex."""
    return hashlib.sha256(sealed_id.encode("utf-8")).hexdigest()


__all__ = [
    "BUSY_TIMEOUT_SECS",
    "DEFAULT_TTL_SECS",
    "ID_BYTES",
    "MAX_ID_CHARS",
    "MAX_ROWS_PER_OWNER",
    "SQLITE",
    "TRIM_EVERY",
    "SealedDialect",
    "SealedIdStore",
    "SealedMethods",
    "SealedTable",
    "sealed_key",
    "sealed_schema",
]
