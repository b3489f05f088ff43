"""The work leases on PostgreSQL (S27.2): `WorkLeases`' per-user caps, counted across machines.

Chosen by the server when kernel.yaml sets `store.url`: the same
`running_work` rows and queries (`LeaseMethods` over `POSTGRES`), so every
server process on every machine of a deployment counts the same work. What
SQLite's one writer at a time gave for free is an advisory lock: `start`
counts a user's rows of one kind and inserts its own under
`pg_advisory_xact_lock(COUNT_LOCK, hashtext(user))` (every kind of the
user's work: starts are short), so two processes starting at once for one
user queue, and the second counts the first's row (a plain count would let
both slip under the cap). Lock waits
are bounded by `lock_timeout` (SQLite's busy wait): `StoreBusy` past it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from agentkernel.config import KernelConfig
from agentkernel.services.pg_copy import copy_tables
from agentkernel.services.pg_waits import bounded
from agentkernel.services.postgres import PgPool, PgSchema, PgStore
from agentkernel.services.work_leases import (
    BUSY_TIMEOUT_SECS,
    DEFAULT_LEASE_SECS,
    TABLE,
    LeaseDialect,
    LeaseMethods,
    checked_lease_secs,
    holder_id,
)

COUNT_LOCK = 0x776F726B  # pg_advisory_xact_lock(COUNT_LOCK, hashtext(user)): one user's counts

_SCHEMA = PgSchema(
    store="work_leases",
    what="the running-work leases",
    version=1,
    upgrades={
        1: (
            f"""CREATE TABLE {TABLE} (
                id TEXT PRIMARY KEY,
                owner TEXT NOT NULL,
                setting TEXT NOT NULL,
                holder TEXT NOT NULL,
                lease_until DOUBLE PRECISION NOT NULL
            )""",
            f"CREATE INDEX {TABLE}_owner ON {TABLE} (owner, setting, lease_until)",
            f"CREATE INDEX {TABLE}_holder ON {TABLE} (holder)",
            f"CREATE INDEX {TABLE}_lease ON {TABLE} (lease_until)",
        ),
    },
)


def _lock_count(conn: psycopg.Connection[tuple[Any, ...]], user_id: str, setting: str) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (COUNT_LOCK, user_id))


POSTGRES = LeaseDialect("%s", _lock_count)


class PostgresWorkLeases(LeaseMethods, PgStore):
    """The table of running work in the store database (see the module docstring); one holder id per
    instance."""

    dialect = POSTGRES

    def __init__(
        self,
        pool: PgPool | str,
        *,
        lease_secs: float = DEFAULT_LEASE_SECS,
        clock: Callable[[], float] = time.time,
        busy_timeout_secs: float = BUSY_TIMEOUT_SECS,
    ) -> None:
        self.lease_secs = checked_lease_secs(lease_secs)
        super().__init__(pool, _SCHEMA)
        self.holder = holder_id()
        self._clock = clock
        self._busy_timeout_secs = busy_timeout_secs

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        with super()._write() as conn, bounded(conn, "the running-work leases", self._busy_timeout_secs):
            yield conn


def copy_from_sqlite(config: KernelConfig, target: psycopg.Connection[tuple[Any, ...]]) -> dict[str, int]:
    """The message store's `running_work` rows copied into the (migrated, empty) PostgreSQL table.

    Inside the caller's transaction; {} without the file (or the table). A
    row of a process still running keeps counting until its lease ends.
    """
    return copy_tables(config.messages_db, target, {TABLE: TABLE})


__all__ = ["COUNT_LOCK", "POSTGRES", "PostgresWorkLeases", "copy_from_sqlite"]
