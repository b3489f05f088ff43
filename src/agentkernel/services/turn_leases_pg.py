"""Turn leases and the run journal on PostgreSQL (S25, S27.2): `TurnLeases`' behaviour in the store database.

Chosen by the kernel when kernel.yaml sets `store.url`; the same rows as
in the message store's file (turn_leases.py says what a lease and a run
are), beside the transcript (memory_pg.py), whose steps check their lease
and move their run in their own transaction. The SQLite store has one
writer at a time; here many processes on many machines write at once, so:

- **Taking a session** (`take`) holds two transaction-scoped advisory locks,
  the user's then the session's (`pg_advisory_xact_lock` on a hash of each):
  a session's lease row may not exist yet (no row to lock), and the user's
  cap counts rows of other sessions, so two takers of one session, or of
  two sessions of a user at the cap, wait for each other's commit rather
  than both passing.
- **Taking over a run** (`take_over`, the servers' resumers) locks the same
  two keys, the session's with `pg_try_advisory_xact_lock` (held: another
  taker has it, None at once), then the lease row `FOR UPDATE` and the
  run's row `FOR UPDATE SKIP LOCKED` (being written: None): two servers
  never take the same run, and none waits for another. Rows are locked in
  one order everywhere, the lease's before the run's (a step's too), so no
  two transactions deadlock.
- Renewing, releasing, ending a run and asking a stop are single-row
  UPDATEs/DELETEs fenced by the holder's token, atomic as they stand.
- Expiries are wall-clock seconds (DOUBLE PRECISION), as in the file.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

from agentkernel.services.pg_copy import copy_tables
from agentkernel.services.postgres import PgPool, PgSchema, PgStore
from agentkernel.services.turn_leases import (
    RUNNING,
    RUNS,
    TABLE,
    Lease,
    LeaseMethods,
    hold,
    new_token,
    one_run,
    taken_over,
)

if TYPE_CHECKING:
    from agentkernel.config import KernelConfig

SCHEMA = PgSchema(
    store="turn_leases",
    what="the turn leases and runs",
    version=1,
    upgrades={
        1: (
            f"""CREATE TABLE {TABLE} (
                session_id TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                token TEXT NOT NULL,
                expires_at DOUBLE PRECISION NOT NULL,
                stop_asked INTEGER NOT NULL DEFAULT 0
            )""",
            f"CREATE INDEX {TABLE}_user ON {TABLE} (user_id, expires_at)",
            f"""CREATE TABLE {RUNS} (
                id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                status TEXT NOT NULL,
                reason TEXT,
                text TEXT,
                prompt TEXT,
                started_call TEXT,
                one_off INTEGER NOT NULL DEFAULT 0,
                idem_key TEXT,
                body_hash TEXT,
                created_at DOUBLE PRECISION NOT NULL,
                ended_at DOUBLE PRECISION,
                taken_over INTEGER NOT NULL DEFAULT 0,
                template TEXT NOT NULL DEFAULT '',
                waiting_call TEXT,
                traceparent TEXT
            )""",
            f"CREATE UNIQUE INDEX {RUNS}_key ON {RUNS} (user_id, idem_key) WHERE idem_key IS NOT NULL",
            f"CREATE INDEX {RUNS}_open ON {RUNS} (session_id) WHERE status = '{RUNNING}'",
            f"CREATE INDEX {RUNS}_session ON {RUNS} (session_id, created_at)",
            f"CREATE INDEX {RUNS}_body ON {RUNS} (user_id, body_hash, created_at) WHERE one_off = 1",
        ),
    },
)

_USER_KEY = "agentkernel.turn_leases.user:"
_SESSION_KEY = "agentkernel.turn_leases.session:"
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_TRY_LOCK = "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))"


class PostgresTurnLeases(LeaseMethods, PgStore):
    """Turn leases and runs in the PostgreSQL database: see the module docstring and `TurnLeases`."""

    mark = "%s"
    hold_sql = (
        f"INSERT INTO {TABLE} (session_id, user_id, token, expires_at) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (session_id) DO UPDATE SET user_id = excluded.user_id, token = excluded.token, "
        "expires_at = excluded.expires_at, stop_asked = 0"
    )

    def __init__(self, pool: PgPool | str) -> None:
        super().__init__(pool, SCHEMA)

    @contextmanager
    def _write_at_once(self) -> Iterator[None]:
        """Never at once: a write is a round trip to the database, for a worker thread to wait on."""
        yield None

    @staticmethod
    def _claim(conn: psycopg.Connection[tuple[Any, ...]], session_id: str, user_id: str) -> None:
        """The user's then the session's advisory lock, held until the transaction ends."""
        conn.execute(_LOCK, (_USER_KEY + user_id,))
        conn.execute(_LOCK, (_SESSION_KEY + session_id,))

    def take_over(self, run_id: str, secs: float) -> Lease | None:
        """The lease of an unfinished run's session, when its holder is gone (None: it is held, another
        server is taking it, or the run has ended meanwhile); see the module docstring."""
        found = self._read(f"SELECT session_id, user_id FROM {RUNS} WHERE id = %s", (run_id,))
        if not found:
            return None
        session_id, user_id = found[0]
        with self._write() as conn:
            conn.execute(_LOCK, (_USER_KEY + user_id,))
            if conn.execute(_TRY_LOCK, (_SESSION_KEY + session_id,)).fetchone() != (True,):
                return None
            now = time.time()
            # the lease row before the run's, in the order a step locks them (memory_pg.py): no deadlock
            row = conn.execute(
                f"SELECT expires_at FROM {TABLE} WHERE session_id = %s FOR UPDATE", (session_id,)
            ).fetchone()
            if row is not None and row[0] > now:
                return None
            run = one_run(conn, "%s", f"id = %s AND status = '{RUNNING}' FOR UPDATE SKIP LOCKED", (run_id,))
            if run is None:
                return None
            taken = taken_over(conn, "%s", "id = %s", (run_id,))
            lease = Lease(run.session_id, run.user_id, new_token(), secs, 0.0, resumes=taken)
            hold(conn, self.hold_sql, lease, now)
        return lease


def copy_from_sqlite(config: KernelConfig, target: psycopg.Connection[tuple[Any, ...]]) -> dict[str, int]:
    """The runs and turn leases of the message store's file copied into the store database
    (services/pg_copy.py: read-only, refused into tables holding rows, in the caller's transaction)."""
    return copy_tables(config.messages_db, target, {RUNS: RUNS, TABLE: TABLE})


SCHEMAS = (SCHEMA,)

__all__ = ["SCHEMA", "SCHEMAS", "PostgresTurnLeases", "copy_from_sqlite"]
