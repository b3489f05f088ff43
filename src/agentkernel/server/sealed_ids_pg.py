"""Continuations and downloads on PostgreSQL (S6.2, S6.3 on S27.2): sealed_ids.py's rules in the store.

Chosen by the server when kernel.yaml sets `store.url` (sealing.py), so a
table's next page or a file sealed by one replica is opened by any other.
The tables, their columns and every query are the SQLite stores'
(`SealedMethods`, `ContinuationMethods`, `DownloadMethods`); what differs:

- **Sweeps never wait for each other**: the expiry sweep and a user's trim
  delete the rows they pick `FOR UPDATE SKIP LOCKED`, so two replicas
  sweeping at once (each insert sweeps) split the expired rows between
  them instead of one waiting on the other's row locks, and no two sweeps
  can deadlock whatever order they meet the rows in. SQLite needed nothing
  of the kind: `BEGIN IMMEDIATE` lets one writer in at a time.
- **Nothing else takes a row lock**: an insert adds a new random key, a
  lookup is one read, so no operation waits for a lock; `created_at` is a
  DOUBLE PRECISION (seconds since the epoch, as SQLite's REAL).
- Each table is versioned by its own row of `schema_versions`
  (`continuations`, `downloads`), version 1 being the SQLite tables'
  version 2 (both indexes).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from agentkernel.config import KernelConfig
from agentkernel.errors import AgentKernelError
from agentkernel.server.continuations import ContinuationMethods
from agentkernel.server.downloads import DownloadMethods
from agentkernel.server.sealed_ids import DEFAULT_TTL_SECS, SealedDialect, SealedMethods
from agentkernel.services.postgres import PgPool, PgSchema, PgStore

COPY_BATCH = 1000  # rows read from the file and inserted at a time

POSTGRES = SealedDialect(
    "%s",
    "DELETE FROM {table} WHERE key IN"
    " (SELECT key FROM {table} WHERE created_at <= %s FOR UPDATE SKIP LOCKED)",
    "DELETE FROM {table} WHERE key IN (SELECT key FROM {table} WHERE owner = %s"
    " ORDER BY created_at DESC OFFSET %s FOR UPDATE SKIP LOCKED)",
)


def pg_sealed_schema(table: str, what: str, columns: tuple[str, ...]) -> PgSchema:
    """A sealed table on PostgreSQL: the common columns around `columns`, both indexes (sealed_ids.py)."""
    return PgSchema(
        store=table,
        what=f"the {what} store",
        version=1,
        upgrades={
            1: (
                f"CREATE TABLE {table} ("
                " key TEXT PRIMARY KEY,"
                " owner TEXT NOT NULL,"
                + "".join(f" {column}," for column in columns)
                + " created_at DOUBLE PRECISION NOT NULL)",
                f"CREATE INDEX {table}_created ON {table} (created_at)",
                f"CREATE INDEX {table}_owner ON {table} (owner, created_at)",
            ),
        },
    )


class PostgresSealedIdStore(SealedMethods, PgStore):
    """One table of rows behind opaque ids in the store database; see the module docstring."""

    dialect = POSTGRES

    def __init__(
        self,
        pool: PgPool | str,
        *,
        ttl_secs: float = DEFAULT_TTL_SECS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        checked = self._checked_ttl(ttl_secs)
        super().__init__(pool, pg_sealed_schema(self.table, self.what, self.columns))
        self._configure(checked, clock)


class PostgresContinuationStore(ContinuationMethods, PostgresSealedIdStore):
    """Continuations in the store database (continuations.py `ContinuationStore`'s behaviour)."""


class PostgresDownloadStore(DownloadMethods, PostgresSealedIdStore):
    """Downloads in the store database (downloads.py `DownloadStore`'s behaviour)."""


_STORES: tuple[type[SealedMethods], ...] = (PostgresContinuationStore, PostgresDownloadStore)


def copy_from_sqlite(config: KernelConfig, target: psycopg.Connection[tuple[Any, ...]]) -> dict[str, int]:
    """Copy the continuations and downloads of the message store's file into the store database.

    Every row, the expired ones too (the first sweep deletes them), in the
    caller's transaction (`target`, not committed); the tables must exist
    (migrated) and be empty, else AgentKernelError naming the table. A
    missing file, or one that never held a table, copies nothing of it.
    """
    path = config.messages_db
    if not path.is_file():
        return {}
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {
            store.table: copied
            for store in _STORES
            if (copied := _copy_table(source, target, store, path)) is not None
        }
    finally:
        source.close()


def _copy_table(
    source: sqlite3.Connection,
    target: psycopg.Connection[tuple[Any, ...]],
    store: type[SealedMethods],
    path: Path,
) -> int | None:
    """The rows of `store.table` copied; None when the file has no such table."""
    table = store.table
    found = source.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    if found.fetchone() is None:
        return None
    if target.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None:
        raise AgentKernelError(
            f"the store database's table {table!r} already holds rows: not copying {path}'s over them"
        )
    names = ["key", "owner", *(column.split()[0] for column in store.columns), "created_at"]
    listed = ", ".join(names)
    rows = source.execute(f"SELECT {listed} FROM {table}")
    copied = 0
    with target.cursor() as cursor:
        while batch := rows.fetchmany(COPY_BATCH):
            cursor.executemany(
                f"INSERT INTO {table} ({listed}) VALUES ({', '.join(['%s'] * len(names))})",
                [tuple(map(_no_nul, row)) for row in batch],
            )
            copied += len(batch)
    return copied


def _no_nul(value: object) -> object:
    """A file's text as PostgreSQL can hold it: a NUL becomes U+FFFD (downloads.py `put` does the same)."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) else value


__all__ = [
    "COPY_BATCH",
    "POSTGRES",
    "PostgresContinuationStore",
    "PostgresDownloadStore",
    "PostgresSealedIdStore",
    "copy_from_sqlite",
    "pg_sealed_schema",
]
