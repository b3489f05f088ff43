"""Which chat sessions exist and whose they are: one small SQLite table beside the transcript.

The transcript (the message store) records what happened in a session; this
records who owns it, which template it talks to and its title (the first
message, shortened), so every endpoint can answer "another user's session"
exactly as "no such session" (404), the page can list chats by what they
are about, and a restarted server (or another one on the same file) still
knows both.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agentkernel.errors import AgentKernelError
from agentkernel.services.sqlite_db import Schema, SqliteStore
from agentkernel.util.valid_unicode import has_lone_surrogate, repair_text

BUSY_TIMEOUT_SECS = 10.0
TITLE_CHARS = 60  # a session's title: its first message cut to this, at a word when one ends late enough
_VERSION = 2
_COLUMNS = "id, user_id, template, created_at, title"
_BLANKS = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]+")

_SCHEMA = Schema(
    version=_VERSION,
    upgrades={
        1: (
            """CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                template TEXT NOT NULL,
                created_at TEXT NOT NULL
            )""",
            "CREATE INDEX sessions_user ON sessions (user_id, created_at)",
        ),
        2: ("ALTER TABLE sessions ADD COLUMN title TEXT NOT NULL DEFAULT ''",),
    },
    too_new=lambda found: AgentKernelError(
        f"the server's sessions file has schema version {found}, "
        f"newer than this agentkernel knows ({_VERSION})"
    ),
)


def title_of(message: str) -> str:
    """A title for a session whose first message is `message`: one line, at most TITLE_CHARS characters.

    Runs of white space and control or invisible format characters become
    one space (a title is shown on one line); a longer text is cut at its
    last word boundary past half the limit (else mid-word) and ends in "…".
    """
    text = _BLANKS.sub(" ", repair_text(message)).strip()
    if len(text) <= TITLE_CHARS:
        return text
    cut = text[: TITLE_CHARS - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > TITLE_CHARS // 2 else cut).rstrip() + "…"


@dataclass(frozen=True)
class SessionInfo:
    """One session: its id, its owner, its template, when it was made (ISO 8601, UTC), its title.

    The title is "" until the session's first message names it (`SessionDirectory.name`).
    """

    id: str
    user_id: str
    template: str
    created_at: str
    title: str = ""

    def to_json(self) -> dict[str, str]:
        """What the API shows; the owner is the caller, so it is left out."""
        return {"id": self.id, "template": self.template, "created_at": self.created_at, "title": self.title}


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
            f"SELECT {_COLUMNS} FROM sessions WHERE id = ? AND user_id = ?", (session_id, user_id)
        )
        return SessionInfo(*rows[0]) if rows else None

    def of_user(self, user_id: str) -> list[SessionInfo]:
        """The user's sessions, oldest first."""
        rows = self._read(
            f"SELECT {_COLUMNS} FROM sessions WHERE user_id = ? ORDER BY created_at, id", (user_id,)
        )
        return [SessionInfo(*row) for row in rows]

    def name(self, session_id: str, message: str) -> str:
        """Title the session after `message` unless it has a title already; the title it has after.

        One UPDATE that only fills an empty title: whichever message the store
        saw first names the session, whatever server process wrote it.
        """
        title = title_of(message)
        with self._write() as conn:
            conn.execute("UPDATE sessions SET title = ? WHERE id = ? AND title = ''", (title, session_id))
            row = conn.execute("SELECT title FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return str(row[0]) if row else title


__all__ = ["TITLE_CHARS", "SessionDirectory", "SessionInfo", "title_of"]
