"""A DuckDB file's turn between processes on several machines (S12.2 on S27.2): advisory locks.

With kernel.yaml `store.url`, the processes taking turns with a DuckDB file
(services/file_turns.py says why they must) may run on several machines
sharing the data volume, where a `flock` may not reach the other machine.
`PgFileTurn` is `FileTurn` with PostgreSQL's session advisory locks in place
of the two flocks, keyed by the file's path under the DuckDB folder (the
same on every machine that mounts the volume):

- the turn: `pg_advisory_lock(TURN_LOCK, hashtext(path))`, held by a
  connection of its own (not the pool's) for as long as the file is open;
- the wish: a waiter holds `pg_advisory_lock_shared(WANT_LOCK, …)` while it
  polls for the turn; the holder's `wanted` tries that lock exclusively.

A process that dies loses its connection, and its locks with it. Two paths
whose hashes collide only take turns with each other too.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg

from agentkernel.config.store import masked_url
from agentkernel.services.file_turns import FIRST_POLL_SECS, MOST_POLL_SECS
from agentkernel.services.postgres import StoreUnavailable

TURN_LOCK = 0x64747572  # pg_advisory_lock(TURN_LOCK, hashtext(path)): the file is open in that session
WANT_LOCK = 0x6477616E  # pg_advisory_lock_shared(WANT_LOCK, hashtext(path)): a session waits for it
CONNECT_TIMEOUT_SECS = 10


class PgFileTurn:
    """One process's (one pool's) turn with one file; `acquire`, then `release` when the file is closed."""

    def __init__(self, url: str, root: Path, path: Path) -> None:
        self._url = url
        self._key = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None  # holding the turn

    @property
    def held(self) -> bool:
        return self._conn is not None

    def acquire(self, deadline: float) -> bool:
        """Take the turn, waiting until `deadline` (time.monotonic) and saying we want it; False when late."""
        conn = self._connect()
        try:
            if self._try(conn, "pg_try_advisory_lock", TURN_LOCK) or self._wait(conn, deadline):
                self._conn = conn
                return True
            return False
        finally:
            if self._conn is not conn:
                conn.close()

    def wanted(self) -> bool:
        """Whether another (a process, a pool, on any machine) waits for the turn we hold."""
        if self._conn is None:
            return False
        if not self._try(self._conn, "pg_try_advisory_lock", WANT_LOCK):
            return True
        self._conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (WANT_LOCK, self._key))
        return False

    def release(self) -> None:
        """Give the turn up (the file is closed by now); releasing twice is harmless."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()  # the session's locks go with it

    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        try:
            return psycopg.connect(self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECS)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"the store database {masked_url(self._url)} (DuckDB files' turns) failed: {exc}"
            ) from exc

    def _try(self, conn: psycopg.Connection[tuple[Any, ...]], function: str, lock: int) -> bool:
        row = conn.execute(f"SELECT {function}(%s, hashtext(%s))", (lock, self._key)).fetchone()
        return bool(row is not None and row[0])

    def _wait(self, conn: psycopg.Connection[tuple[Any, ...]], deadline: float) -> bool:
        """Poll for the turn, the wish held meanwhile so the holder lets go."""
        conn.execute("SELECT pg_advisory_lock_shared(%s, hashtext(%s))", (WANT_LOCK, self._key))
        try:
            pause = FIRST_POLL_SECS
            while time.monotonic() < deadline:
                time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
                if self._try(conn, "pg_try_advisory_lock", TURN_LOCK):
                    return True
                pause = min(pause * 2, MOST_POLL_SECS)
            return False
        finally:
            conn.execute("SELECT pg_advisory_unlock_shared(%s, hashtext(%s))", (WANT_LOCK, self._key))


__all__ = ["TURN_LOCK", "WANT_LOCK", "PgFileTurn"]
