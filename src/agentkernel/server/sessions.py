"""Which chat sessions exist and whose they are: one small SQLite table beside the transcript.

The transcript (the message store) records what happened in a session; this
records who owns it and which template it talks to, so every endpoint can
answer "another user's session" exactly as "no such session" (404), and a
restarted server still knows its sessions.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agentkernel.errors import AgentKernelError
from agentkernel.services.sqlite_db import Schema, SqliteStore
from agentkernel.util.valid_unicode import has_lone_surrogate

BUSY_TIMEOUT_SECS = 10.0

_SCHEMA = Schema(
    version=1,
    upgrades={
        1: (
            """CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                template TEXT NOT NULL,
                created_at TEXT NOT NULL
            )""",
            "CREATE INDEX sessions_user ON sessions (user_id, created_at)",
        )
    },
    too_new=lambda found: AgentKernelError(
        f"the server's sessions file has schema version {found}, newer than this agentkernel knows (1)"
    ),
)


@dataclass(frozen=True)
class SessionInfo:
    """One session: its id, its owner, its template and when it was made (ISO 8601, UTC)."""

    id: str
    user_id: str
    template: str
    created_at: str

    def to_json(self) -> dict[str, str]:
        """What the API shows; the owner is the caller, so it is left out."""
        return {"id": self.id, "template": self.template, "created_at": self.created_at}


class SessionDirectory(SqliteStore):
    """The sessions table; safe to use from any thread (one lock around one connection)."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(path, _SCHEMA, BUSY_TIMEOUT_SECS)

    def create(self, user_id: str, template: str) -> SessionInfo:
        info = SessionInfo(str(uuid.uuid4()), user_id, template, datetime.now(UTC).isoformat())
        with self._write() as conn:
            conn.execute(
                "INSERT INTO sessions (id, user_id, template, created_at) VALUES (?, ?, ?, ?)",
                (info.id, info.user_id, info.template, info.created_at),
            )
        return info

    def owned(self, session_id: str, user_id: str) -> SessionInfo | None:
        """The session if `user_id` owns it; None when it is unknown or someone else's (the same 404).

        An id with a lone surrogate (a JSON body may spell one, `"\\ud800"`)
        has no UTF-8 form, so SQLite cannot even look it up: no session has it.
        """
        if has_lone_surrogate(session_id):
            return None
        rows = self._read(
            "SELECT id, user_id, template, created_at FROM sessions WHERE id = ? AND user_id = ?",
            (session_id, user_id),
        )
        return SessionInfo(*rows[0]) if rows else None

    def of_user(self, user_id: str) -> list[SessionInfo]:
        """The user's sessions, oldest first."""
        rows = self._read(
            "SELECT id, user_id, template, created_at FROM sessions WHERE user_id = ? "
            "ORDER BY created_at, id",
            (user_id,),
        )
        return [SessionInfo(*row) for row in rows]


__all__ = ["SessionDirectory", "SessionInfo"]
