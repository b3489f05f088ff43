"""Turn leases: one turn per session at a time, across every process on one store.

A session's running turn holds a lease: a row of `turn_leases` in the
message store's SQLite file (kernel.yaml's `logging.messages_db_path`,
versioned in its own `turn_leases_schema` table), so every process serving
that file sees it. Decisions:

- **The row**: the session, its user, the holder's token (process id and
  16 random bytes, one per turn) and when it expires, in wall-clock seconds
  (processes share no monotonic clock; the lease is seconds long, so a
  clock step of seconds is what it does not survive).
- **Taking** (`take`) is one short write transaction (BEGIN IMMEDIATE, WAL):
  refused with `SessionLeased` while another token's row is live; refused
  with `UserAtCap` when the user already holds `most_per_user` live leases
  (every process's, counted in the same transaction, so two processes
  cannot both pass the cap). A row past its expiry is a dead holder's
  (killed, frozen): it is replaced, so a session is usable again at most
  the lease's length after its holder stopped renewing.
- **Renewing** (`renew`) moves the expiry on while the turn runs (the
  server does it every third of the lease), as long as the row is still
  the holder's token; False means the lease was lost (it expired and
  another process took it). **Releasing** deletes the holder's own row only.
- **Writes are fenced**: a leased turn's transcript records are written
  only while the row is still the writer's, checked inside the record's own
  insert (services/memory.py, `append(lease=…)`), so a holder frozen past its
  lease (SIGSTOP, swap) that wakes up cannot write into the turn that
  replaced it: its write fails with `LeaseLost`, whatever its timers say.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from agentkernel.errors import AgentKernelError
from agentkernel.services.sqlite_db import Schema, SqliteStore

TABLE = "turn_leases"
BUSY_TIMEOUT_SECS = 10.0

_SCHEMA = Schema(
    version=1,
    upgrades={
        1: (
            f"""CREATE TABLE {TABLE} (
                session_id TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                token TEXT NOT NULL,
                expires_at REAL NOT NULL
            )""",
            f"CREATE INDEX {TABLE}_user ON {TABLE} (user_id, expires_at)",
        )
    },
    too_new=lambda found: AgentKernelError(
        f"the turn leases in the message store have schema version {found}, "
        "newer than this agentkernel knows (1)"
    ),
    version_table=f"{TABLE}_schema",
)


@dataclass
class Lease:
    """One turn's hold on its session: whose, the holder's token, its length and its current expiry."""

    session_id: str
    user_id: str
    token: str
    secs: float
    expires_at: float  # wall-clock seconds, as last taken or renewed


class SessionLeased(AgentKernelError):
    """Another turn (of this process or another) holds the session's lease."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} has a turn running")
        self.session_id = session_id


class UserAtCap(AgentKernelError):
    """The user holds as many live leases as allowed (every process's turns)."""

    def __init__(self, user_id: str, running: int) -> None:
        super().__init__(f"user {user_id!r} has {running} turns running")
        self.user_id = user_id
        self.running = running


class LeaseLost(AgentKernelError):
    """A write of a turn whose lease expired and was taken by another: refused, nothing written."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id}: this turn's lease expired (not renewed within server.turn_lease_secs) "
            "and another turn holds the session now; this turn's record was not written"
        )
        self.session_id = session_id


def new_token() -> str:
    """A holder's token: its process id (for a person reading the table) and 16 random bytes."""
    return f"{os.getpid()}:{secrets.token_hex(16)}"


class TurnLeases(SqliteStore):
    """The `turn_leases` table, in the message store's file; safe from any thread and process."""

    def __init__(self, path: Path | str, busy_timeout_secs: float = BUSY_TIMEOUT_SECS) -> None:
        super().__init__(path, _SCHEMA, busy_timeout_secs)

    def take(self, session_id: str, user_id: str, secs: float, most_per_user: int | None = None) -> Lease:
        """The session's lease for `secs` seconds; SessionLeased or UserAtCap when it may not be taken."""
        lease = Lease(session_id, user_id, new_token(), secs, 0.0)
        with self._write() as conn:
            now = time.time()
            row = conn.execute(
                f"SELECT expires_at FROM {TABLE} WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is not None and row[0] > now:
                raise SessionLeased(session_id)
            if most_per_user is not None:
                (running,) = conn.execute(
                    f"SELECT count(*) FROM {TABLE} WHERE user_id = ? AND expires_at > ?", (user_id, now)
                ).fetchone()
                if running >= most_per_user:
                    raise UserAtCap(user_id, running)
            lease.expires_at = now + secs
            conn.execute(
                f"INSERT OR REPLACE INTO {TABLE} (session_id, user_id, token, expires_at) "
                "VALUES (?, ?, ?, ?)",
                (session_id, user_id, lease.token, lease.expires_at),
            )
        return lease

    def renew(self, lease: Lease) -> bool:
        """Move the expiry `lease.secs` on; False when the row is no longer this holder's (lost)."""
        with self._write() as conn:
            expires_at = time.time() + lease.secs
            cursor = conn.execute(
                f"UPDATE {TABLE} SET expires_at = ? WHERE session_id = ? AND token = ?",
                (expires_at, lease.session_id, lease.token),
            )
        if cursor.rowcount != 1:
            return False
        lease.expires_at = expires_at
        return True

    def release(self, lease: Lease) -> None:
        """The turn is over: its row goes (another holder's row, if it lost the lease, stays)."""
        with self._write() as conn:
            conn.execute(
                f"DELETE FROM {TABLE} WHERE session_id = ? AND token = ?", (lease.session_id, lease.token)
            )

    def running(self, user_id: str) -> int:
        """How many live leases `user_id` holds, every process's."""
        rows = self._read(
            f"SELECT count(*) FROM {TABLE} WHERE user_id = ? AND expires_at > ?", (user_id, time.time())
        )
        return int(rows[0][0])


__all__ = ["TABLE", "Lease", "LeaseLost", "SessionLeased", "TurnLeases", "UserAtCap", "new_token"]
