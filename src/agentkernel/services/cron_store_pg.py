"""The cron store on PostgreSQL (S10.2, S27.2): `CronStore`'s behaviour, in the store database.

Chosen by the kernel when kernel.yaml sets `store.url`; the same rows as
the SQLite file (table `cron_jobs`, the file's `jobs`), the same queries
(`CronMethods` over `POSTGRES`). What SQLite's one writer at a time gave
for free is spelled out with locks, so any number of schedulers on any
number of machines share the store:

- **A due time claimed once**: `claim_due` selects the due rows `FOR UPDATE
  SKIP LOCKED`, so a row another scheduler is claiming is skipped (not
  waited for) and, once that claim commits, no longer due; a row changed
  meanwhile is re-read under its lock before it is taken.
- **An owner's cap across schedulers**: before counting the live claims of
  the owners it is about to claim for, `claim_due` takes a transaction
  advisory lock per owner (`pg_advisory_xact_lock(RUNS_LOCK,
  hashtext(owner))`, in sorted order, so two schedulers never deadlock), so
  the second scheduler counts the first one's claims. `put` counts an
  owner's jobs under another advisory lock (`JOBS_LOCK`) for
  `cron.max_jobs_per_user`. A lock held by a claim's row is never awaited
  while holding an owner's lock of the other kind, so the locks form no
  cycle.
- **Bounded waits**: each write transaction sets `lock_timeout` to
  `BUSY_TIMEOUT_SECS` (SQLite's busy wait); past it `StoreBusy`.
- Owners and names are `COLLATE "C"`, so listings come in SQLite's (byte)
  order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from agentkernel.config import KernelConfig
from agentkernel.services.cron_store import BUSY_TIMEOUT_SECS, CronDialect, CronMethods
from agentkernel.services.pg_copy import copy_tables
from agentkernel.services.pg_waits import bounded
from agentkernel.services.postgres import PgPool, PgSchema, PgStore

TABLE = "cron_jobs"
JOBS_LOCK = 0x63726E6A  # pg_advisory_xact_lock(JOBS_LOCK, hashtext(owner)): an owner's job count (put)
RUNS_LOCK = 0x63726E72  # pg_advisory_xact_lock(RUNS_LOCK, hashtext(owner)): an owner's live claims

_SCHEMA = PgSchema(
    store="cron",
    what="the cron store",
    version=2,
    upgrades={
        1: (
            f"""CREATE TABLE {TABLE} (
                owner TEXT COLLATE "C" NOT NULL,
                name TEXT COLLATE "C" NOT NULL,
                definition TEXT NOT NULL,
                scheduled_by TEXT NOT NULL DEFAULT '',
                static INTEGER NOT NULL DEFAULT 0,
                generation BIGINT NOT NULL DEFAULT 1,
                created_at DOUBLE PRECISION NOT NULL,
                next_run DOUBLE PRECISION,
                claimed_by TEXT,
                claimed_due DOUBLE PRECISION,
                claim_until DOUBLE PRECISION,
                last_run DOUBLE PRECISION,
                last_ok INTEGER,
                last_error TEXT,
                runs BIGINT NOT NULL DEFAULT 0,
                waiting TEXT,
                PRIMARY KEY (owner, name)
            )""",
            f"CREATE INDEX {TABLE}_next_run ON {TABLE} (next_run)",
            f"CREATE INDEX {TABLE}_claim_until ON {TABLE} (claim_until)",
        ),
        2: (f"ALTER TABLE {TABLE} ADD COLUMN last_firing TEXT",),  # as the SQLite store's version 3
    },
)


def _lock_jobs_of(conn: psycopg.Connection[tuple[Any, ...]], owner: str) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (JOBS_LOCK, owner))


def _lock_runs_of(conn: psycopg.Connection[tuple[Any, ...]], owners: Iterable[str]) -> None:
    for owner in owners:  # sorted by the caller: every scheduler takes them in one order
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (RUNS_LOCK, owner))


POSTGRES = CronDialect(
    TABLE, "%s", "least", " FOR UPDATE SKIP LOCKED", _lock_jobs_of, _lock_runs_of, " FOR UPDATE"
)


class PostgresCronStore(CronMethods, PgStore):
    """The jobs of every user in the store database: see the module docstring and `CronMethods`."""

    dialect = POSTGRES

    def __init__(self, pool: PgPool | str, busy_timeout_secs: float = BUSY_TIMEOUT_SECS) -> None:
        super().__init__(pool, _SCHEMA)
        self._busy_timeout_secs = busy_timeout_secs

    @contextmanager
    def _write(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        with super()._write() as conn, bounded(conn, "the cron store", self._busy_timeout_secs):
            yield conn


def copy_from_sqlite(config: KernelConfig, target: psycopg.Connection[tuple[Any, ...]]) -> dict[str, int]:
    """The project's cron file (`cron.db_path`) copied into the (migrated, empty) `cron_jobs` table.

    Inside the caller's transaction; {} without the file. Claims are copied
    as they are: one of a server still running expires and is run again.
    """
    return copy_tables(config.cron.db_path, target, {"jobs": TABLE})


__all__ = ["JOBS_LOCK", "POSTGRES", "RUNS_LOCK", "TABLE", "PostgresCronStore", "copy_from_sqlite"]
