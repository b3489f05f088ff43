"""The session directory on PostgreSQL (S27.2): sessions.py's behaviour, in the store database.

Chosen by the server when kernel.yaml sets `store.url` (app.py
`session_directory`), so a session made through one replica is known, with
its owner, template and title, to every other. The table and every query
are the sessions file's (`DirectoryMethods`); what differs:

- **Titles**: `name` is the same one UPDATE filling an empty title, which
  PostgreSQL's row lock makes first-writer-wins across replicas as SQLite's
  `BEGIN IMMEDIATE` did; the wait for that lock is bounded by
  `lock_timeout` (BUSY_TIMEOUT_SECS, as the file's busy wait), past which
  psycopg's LockNotAvailable is raised (a logged 500).
- **Order**: a user's sessions are listed by `created_at` then id in byte
  order (COLLATE "C"), as SQLite sorts them, whatever the database's
  collation.
- Versioned by the `sessions` row of `schema_versions`; its version 1 is
  the file's version 2 (with titles).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from agentkernel.config import KernelConfig
from agentkernel.server.sessions import BUSY_TIMEOUT_SECS, DirectoryMethods, SessionsDialect, sessions_file
from agentkernel.services.pg_copy import copy_table, holds, read_only
from agentkernel.services.postgres import PgPool, PgSchema, PgStore

TABLE = "sessions"
_COPIED = ("id", "user_id", "template", "created_at", "title")

_SCHEMA = PgSchema(
    store=TABLE,
    what="the server's sessions",
    version=1,
    upgrades={
        1: (
            f"""CREATE TABLE {TABLE} (
                id TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                template TEXT NOT NULL,
                created_at TEXT NOT NULL,
                title TEXT NOT NULL DEFAULT ''
            )""",
            f"CREATE INDEX {TABLE}_user ON {TABLE} (user_id, created_at)",
        ),
    },
)

POSTGRES = SessionsDialect("%s", 'created_at COLLATE "C", id COLLATE "C"')


class PostgresSessionDirectory(DirectoryMethods, PgStore):
    """The sessions table in the store database: see the module docstring and `SessionDirectory`."""

    dialect = POSTGRES

    def __init__(self, pool: PgPool | str) -> None:
        super().__init__(pool, _SCHEMA)

    @contextmanager
    def _write_at_once(self) -> Iterator[None]:
        """Never at once: a write is a round trip to the database, for a worker thread to wait on."""
        yield None

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A transaction whose waits for a row lock last at most BUSY_TIMEOUT_SECS."""
        with super()._write() as conn:
            conn.execute(
                "SELECT set_config('lock_timeout', %s, true)", (f"{int(BUSY_TIMEOUT_SECS * 1000)}ms",)
            )
            yield conn


SCHEMAS = (_SCHEMA,)  # for `agentkernel store` (cli/store_cmd.py)


def copy_from_sqlite(config: KernelConfig, target: psycopg.Connection[tuple[Any, ...]]) -> dict[str, int]:
    """Copy the sessions file's sessions into the store database's (migrated, empty) table.

    In the caller's transaction (`target`, not committed); CopyRefused
    naming the table when it holds rows already (services/pg_copy.py); {}
    without a sessions file (or one that never held a session table). A file
    of schema version 1 has no titles: its sessions are copied untitled.
    """
    with read_only(sessions_file(config)) as source:
        if source is None or not holds(source, TABLE):
            return {}
        titled = any(row[1] == "title" for row in source.execute(f"PRAGMA table_info({TABLE})"))
        columns = _COPIED if titled else _COPIED[:-1]
        return {TABLE: copy_table(source, target, TABLE, columns)}


__all__ = ["POSTGRES", "SCHEMAS", "TABLE", "PostgresSessionDirectory", "copy_from_sqlite"]
