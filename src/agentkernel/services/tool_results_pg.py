"""The store of tool results on PostgreSQL (S16.4, S27.2): `ToolResultStore`'s behaviour, in the database.

Chosen by the kernel when kernel.yaml sets `store.url`. The same two tables
and the same queries (`ResultMethods`, over the `POSTGRES` dialect) as the
file beside the transcript, bounded the same way: `per_tool` results per
(session, tool) and `sessions` sessions, the least recently used going.

- **One writer at a time**: a record reads the highest `used` and `seq`
  and counts every session to keep the bound, so two at once could give two
  results one `seq`, or leave a session too many. Each write transaction
  therefore first takes a transaction-level advisory lock
  (`pg_advisory_xact_lock`, released at commit), as SQLite's BEGIN IMMEDIATE
  made each record the file's only writer; a record is a few statements on
  indexed rows, so the lock is held briefly.
- **Bounded waits**: that lock, and any row lock, is waited for at most
  `busy_timeout_secs` (`SET LOCAL lock_timeout`); past it, StoreUnavailable,
  which the history logs as it logs SQLite's busy error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from agentkernel.config.kernel_yaml import KernelConfig
from agentkernel.services import tool_results as sqlite_results
from agentkernel.services.pg_copy import copy_table, read_only, source_version
from agentkernel.services.postgres import PgPool, PgSchema, PgStore
from agentkernel.services.sql_dialect import POSTGRES
from agentkernel.services.tool_results import (
    BUSY_TIMEOUT_SECS,
    FILE_NAME,
    RESULTS,
    SESSIONS,
    ResultMethods,
    check_bounds,
)

WRITE_LOCK = 0x616B_5F74_7265  # the pg_advisory_xact_lock key every write of the store holds

SCHEMA = PgSchema(
    store="tool_results",
    what="the tool-result store",
    version=1,
    upgrades={
        1: (
            f"CREATE TABLE {SESSIONS} (key TEXT PRIMARY KEY, used BIGINT NOT NULL)",
            f"CREATE INDEX {SESSIONS}_used ON {SESSIONS} (used)",
            f"""CREATE TABLE {RESULTS} (
                key TEXT NOT NULL REFERENCES {SESSIONS} (key) ON DELETE CASCADE,
                tool TEXT NOT NULL,
                seq BIGINT NOT NULL,
                result TEXT NOT NULL,
                PRIMARY KEY (key, tool, seq)
            )""",
        ),
    },
)


class PostgresToolResults(ResultMethods, PgStore):
    """Results by (session key, tool), newest first, in the PostgreSQL database: see the module docstring."""

    dialect = POSTGRES

    def __init__(
        self,
        pool: PgPool | str,
        *,
        per_tool: int,
        sessions: int,
        busy_timeout_secs: float = BUSY_TIMEOUT_SECS,
    ) -> None:
        check_bounds(per_tool, sessions)
        super().__init__(pool, SCHEMA)
        self.per_tool = per_tool
        self.sessions = sessions
        self._lock_timeout = f"{max(1, int(busy_timeout_secs * 1000))}ms"

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A transaction holding the store's write lock, every lock wait bounded by the busy timeout."""
        with super()._write() as conn:
            conn.execute("SELECT set_config('lock_timeout', %s, true)", (self._lock_timeout,))
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            yield conn


def copy_from_sqlite(config: KernelConfig, target: psycopg.Connection[tuple[Any, ...]]) -> dict[str, int]:
    """Copy the sessions and results of `tool_results.db` (beside the message store) into the (migrated,
    empty) tables of `target`, in its transaction; rows copied per table."""
    path = config.messages_db.with_name(FILE_NAME)
    with read_only(path) as source:
        if source is None or not source_version(source, sqlite_results.SCHEMA, "the tool results", path):
            return {}
        return {
            SESSIONS: copy_table(source, target, SESSIONS, ("key", "used")),
            RESULTS: copy_table(source, target, RESULTS, ("key", "tool", "seq", "result")),
        }


SCHEMAS = (SCHEMA,)
"""The tables `agentkernel store migrate` brings up to date (cli/store_cmd.py)."""

__all__ = ["SCHEMA", "SCHEMAS", "PostgresToolResults", "copy_from_sqlite"]
