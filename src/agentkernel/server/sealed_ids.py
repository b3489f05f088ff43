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
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

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


class SealedIdStore(SqliteStore):
    """One table of rows behind opaque ids (see the module docstring); subclasses name their table."""

    table: ClassVar[str]
    what: ClassVar[str]  # what a row is, for messages: "continuation"
    schema: ClassVar[Schema]

    def __init__(
        self,
        path: Path | str,
        *,
        ttl_secs: float = DEFAULT_TTL_SECS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not ttl_secs > 0:
            raise ValueError(f"{self.what} ttl_secs must be positive, got {ttl_secs!r}")
        super().__init__(path, self.schema, BUSY_TIMEOUT_SECS)
        self.ttl_secs = ttl_secs
        self._clock = clock
        self.max_rows_per_owner = MAX_ROWS_PER_OWNER
        self._since_trim: dict[str, int] = {}  # rows an owner got since their rows were last trimmed

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now

    def _insert(self, owner: str, row: Mapping[str, object], now: float | None) -> str:
        """Keep `row` for `owner`; its new opaque id. Expired rows are deleted in the same transaction."""
        at = self._now(now)
        new_id = secrets.token_urlsafe(ID_BYTES)
        columns = ", ".join(["key", "owner", *row, "created_at"])
        marks = ", ".join("?" * (len(row) + 3))
        with self._write() as conn:
            self._delete_expired(conn, at)
            conn.execute(
                f"INSERT INTO {self.table} ({columns}) VALUES ({marks})",
                (sealed_key(new_id), owner, *row.values(), at),
            )
            self._trim_now_and_then(conn, owner)
        return new_id

    def _trim_now_and_then(self, conn: sqlite3.Connection, owner: str) -> None:
        """Keep `owner`'s newest `max_rows_per_owner` rows, checked once every TRIM_EVERY of their rows.

        Each read of a transcript seals its blocks anew (sealing.py), so a
        user who reads again and again, or a script that makes tables
        without end, would grow the file for a whole TTL; with a cap per
        user, one user's rows are bounded and nobody else's are touched.
        The oldest go first: their ids answer as expired ones do. Counting
        on every insert would walk the user's rows each time, so it waits
        for TRIM_EVERY new ones (a user holds at most that many more).
        """
        since = self._since_trim.get(owner, 0) + 1
        if since < TRIM_EVERY:
            self._since_trim[owner] = since
            return
        self._since_trim.pop(owner, None)
        conn.execute(
            f"DELETE FROM {self.table} WHERE key IN (SELECT key FROM {self.table} WHERE owner = ?"
            " ORDER BY created_at DESC LIMIT -1 OFFSET ?)",
            (owner, self.max_rows_per_owner),
        )

    def _lookup(
        self, sealed_id: object, owner: str, columns: Sequence[str], now: float | None
    ) -> tuple[Any, ...] | None:
        """`columns` of `owner`'s live row `sealed_id`, then its `created_at`; None otherwise (see above)."""
        if (
            not isinstance(sealed_id, str)
            or not 0 < len(sealed_id) <= MAX_ID_CHARS
            or not sealed_id.isascii()
        ):
            return None  # no id of ours (they are ASCII): a lone surrogate from JSON never reaches the hash
        rows = self._read(
            f"SELECT owner, {', '.join(columns)}, created_at FROM {self.table} WHERE key = ?",
            (sealed_key(sealed_id),),
        )
        if not rows or rows[0][0] != owner or not rows[0][-1] > self._now(now) - self.ttl_secs:
            return None
        return tuple(rows[0][1:])

    def purge(self, now: float | None = None) -> int:
        """Delete the expired rows; how many."""
        with self._write() as conn:
            return self._delete_expired(conn, self._now(now))

    def _delete_expired(self, conn: sqlite3.Connection, now: float) -> int:
        expired = (now - self.ttl_secs,)
        return conn.execute(f"DELETE FROM {self.table} WHERE created_at <= ?", expired).rowcount

    def count(self) -> int:
        """How many rows the table holds, expired ones included (for tests and the benchmark)."""
        return int(self._read(f"SELECT count(*) FROM {self.table}", ())[0][0])


def sealed_key(sealed_id: str) -> str:
    """What the table keeps of an id: its SHA-256, hex."""
    return hashlib.sha256(sealed_id.encode("utf-8")).hexdigest()


__all__ = [
    "BUSY_TIMEOUT_SECS",
    "DEFAULT_TTL_SECS",
    "ID_BYTES",
    "MAX_ID_CHARS",
    "MAX_ROWS_PER_OWNER",
    "SealedIdStore",
    "sealed_key",
    "sealed_schema",
]
