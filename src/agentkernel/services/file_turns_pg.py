"""A DuckDB file's turn across machines: advisory locks of the store database (S27.2).

`FileTurn` (file_turns.py) takes turns with `flock`, which holds between
processes of one machine; servers on several machines sharing the data
volume need a lock they all see. `PgFileTurn` keeps the same protocol on
two PostgreSQL session advisory locks of the file's key: the turn (held,
exclusive, while the file is open) and the wish (held shared by whoever
waits, tested by the holder with a try-lock: `wanted`). The turn is held on
a connection of its own, so a process that dies — or loses the database —
gives it up with its connection, as a dead process gives up its flock.

A file's key is its path relative to the DuckDB folder, so machines may
mount the shared volume at different places; hashed to PostgreSQL's
64-bit lock key (a collision only makes two files take turns together).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors

from agentkernel.config.store import masked_url
from agentkernel.errors import StoreUnavailable

CONNECT_TIMEOUT_SECS = 5
LOCK_KINDS = ("turn", "want")


def lock_key(name: str, kind: str) -> int:
    """The signed 64-bit advisory lock key of file `name`'s `kind` lock."""
    digest = hashlib.blake2b(f"agentkernel-duckdb:{kind}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PgFileTurn:
    """One process's turn with one file, held as an advisory lock on a connection of its own."""

    def __init__(self, url: str, name: str) -> None:
        self._url = url
        self.name = name
        self._turn, self._want = (lock_key(name, kind) for kind in LOCK_KINDS)
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None

    @property
    def held(self) -> bool:
        return self._conn is not None

    def acquire(self, deadline: float) -> bool:
        """Take the turn, waiting until `deadline` (time.monotonic) with the wish held; False when late."""
        conn = self._connect()
        taken = False
        try:
            taken = self._try(conn) or self._wait(conn, deadline)
        finally:
            if taken:
                self._conn = conn
            else:
                conn.close()
        return taken

    def wanted(self) -> bool:
        """Whether another process waits for the turn we hold (a lost connection counts as wanted)."""
        if self._conn is None:
            return False
        try:
            free = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self._want,)).fetchone()
            if free == (True,):
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._want,))
                return False
        except psycopg.Error:
            pass  # the database is gone, and the lock with it: give the file up
        return True

    def release(self) -> None:
        """Give the turn up (closing its connection ends its locks); releasing twice is harmless."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        try:
            return psycopg.connect(self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECS)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(
                f"the store database {masked_url(self._url)} failed while taking the turn of "
                f"DuckDB file {self.name}: {exc}"
            ) from exc

    def _try(self, conn: psycopg.Connection[tuple[Any, ...]]) -> bool:
        return conn.execute("SELECT pg_try_advisory_lock(%s)", (self._turn,)).fetchone() == (True,)

    def _wait(self, conn: psycopg.Connection[tuple[Any, ...]], deadline: float) -> bool:
        """Wait for the turn within the deadline (lock_timeout), the wish held meanwhile."""
        remaining_ms = int((deadline - time.monotonic()) * 1000)
        if remaining_ms <= 0:
            return False
        conn.execute("SELECT pg_advisory_lock_shared(%s)", (self._want,))
        try:
            conn.execute(f"SET lock_timeout = {remaining_ms}")
            conn.execute("SELECT pg_advisory_lock(%s)", (self._turn,))
            return True
        except errors.LockNotAvailable:
            return False
        finally:
            conn.execute("RESET lock_timeout")
            conn.execute("SELECT pg_advisory_unlock_shared(%s)", (self._want,))


class PgFileTurns:
    """The turn of each file under `root`, in the store database at `url` (duck.py's `TurnOf`)."""

    def __init__(self, url: str, root: Path) -> None:
        self._url = url
        self._root = root

    def __call__(self, path: Path) -> PgFileTurn:
        try:
            name = path.relative_to(self._root).as_posix()
        except ValueError:
            name = path.as_posix()
        return PgFileTurn(self._url, name)


__all__ = ["PgFileTurn", "PgFileTurns", "lock_key"]
