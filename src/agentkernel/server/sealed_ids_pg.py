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

import time
from collections.abc import Callable
from typing import Any, ClassVar

import psycopg

from agentkernel.config import KernelConfig
from agentkernel.server.continuations import ContinuationMethods
from agentkernel.server.downloads import DownloadMethods
from agentkernel.server.sealed_ids import DEFAULT_TTL_SECS, SealedDialect, SealedMethods
from agentkernel.services.pg_copy import copy_table, holds, read_only
from agentkernel.services.postgres import PgPool, PgSchema, PgStore

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
    pg_schema: ClassVar[PgSchema]

    def __init__(
        self,
        pool: PgPool | str,
        *,
        ttl_secs: float = DEFAULT_TTL_SECS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        checked = self._checked_ttl(ttl_secs)
        super().__init__(pool, self.pg_schema)
        self._configure(checked, clock)


class PostgresContinuationStore(ContinuationMethods, PostgresSealedIdStore):
    """Continuations in the store database (continuations.py `ContinuationStore`'s behaviour)."""

    pg_schema = pg_sealed_schema(
        ContinuationMethods.table, ContinuationMethods.what, ContinuationMethods.columns
    )


class PostgresDownloadStore(DownloadMethods, PostgresSealedIdStore):
    """Downloads in the store database (downloads.py `DownloadStore`'s behaviour)."""

    pg_schema = pg_sealed_schema(DownloadMethods.table, DownloadMethods.what, DownloadMethods.columns)


_STORES: tuple[type[PostgresSealedIdStore], ...] = (PostgresContinuationStore, PostgresDownloadStore)
SCHEMAS = tuple(store.pg_schema for store in _STORES)  # for `agentkernel store` (cli/store_cmd.py)


def copy_from_sqlite(config: KernelConfig, target: psycopg.Connection[tuple[Any, ...]]) -> dict[str, int]:
    """Copy the continuations and downloads of the message store's file into the store database.

    Every row, the expired ones too (the first sweep deletes them), in the
    caller's transaction (`target`, not committed); the tables must exist
    (migrated) and be empty, else CopyRefused naming the table
    (services/pg_copy.py). A missing file, or one that never held a table,
    copies nothing of it.
    """
    with read_only(config.messages_db) as source:
        if source is None:
            return {}
        return {
            store.table: copy_table(
                source,
                target,
                store.table,
                ["key", "owner", *(column.split()[0] for column in store.columns), "created_at"],
                convert=_no_nul,
            )
            for store in _STORES
            if holds(source, store.table)
        }


def _no_nul(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A file's row as PostgreSQL can hold it: a NUL becomes U+FFFD (downloads.py `put` does the same)."""
    return tuple(value.replace("\x00", "\ufffd") if isinstance(value, str) else value for value in row)


__all__ = [
    "POSTGRES",
    "SCHEMAS",
    "PostgresContinuationStore",
    "PostgresDownloadStore",
    "PostgresSealedIdStore",
    "copy_from_sqlite",
    "pg_sealed_schema",
]
