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
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol

from agentkernel.config import KernelConfig
from agentkernel.errors import AgentKernelError
from agentkernel.services.sqlite_db import Schema, SqliteStore
from agentkernel.util.valid_unicode import has_lone_surrogate, repair_text

BUSY_TIMEOUT_SECS = 10.0
SESSIONS_FILE = "sessions.db"  # beside the transcript (logging.messages_db_path)
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


class SessionStore(Protocol):
    """Where sessions are kept: the sessions file (`SessionDirectory`) or the store database
    (sessions_pg.py, kernel.yaml `store.url`)."""

    def create(self, user_id: str, template: str) -> SessionInfo: ...

    def create_at_once(self, user_id: str, template: str) -> SessionInfo | None: ...

    def owned(self, session_id: str, user_id: str) -> SessionInfo | None: ...

    def of_user(self, user_id: str) -> list[SessionInfo]: ...

    def name(self, session_id: str, message: str) -> str: ...

    def name_at_once(self, session_id: str, message: str) -> str | None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class SessionsDialect:
    """How one database spells the directory's queries (SQLite here, PostgreSQL in sessions_pg.py)."""

    mark: str  # the parameter placeholder: `?` or `%s`
    order: str  # a user's sessions, oldest first (texts in byte order, as SQLite sorts them)


SQLITE = SessionsDialect("?", "created_at, id")


class _Directory(Protocol):
    """What `DirectoryMethods` needs of the class it is mixed into: a dialect and a store."""

    dialect: ClassVar[SessionsDialect]

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...

    def _write(self) -> AbstractContextManager[Any]: ...

    def _write_at_once(self) -> AbstractContextManager[Any | None]: ...


class DirectoryMethods:
    """What both directories do, written once: the sessions file's (`SessionDirectory`) and the store
    database's (sessions_pg.py) differ only in their `dialect` and the store underneath."""

    dialect: ClassVar[SessionsDialect]

    def create(self: _Directory, user_id: str, template: str) -> SessionInfo:
        with self._write() as conn:
            return _inserted(self.dialect, conn, user_id, template)

    def create_at_once(self: _Directory, user_id: str, template: str) -> SessionInfo | None:
        """`create`, only if the store takes the write without waiting for anyone (as `name_at_once`):
        None, nothing written, when it would wait."""
        with self._write_at_once() as conn:
            return None if conn is None else _inserted(self.dialect, conn, user_id, template)

    def owned(self: _Directory, session_id: str, user_id: str) -> SessionInfo | None:
        """The session if `user_id` owns it; None when it is unknown or someone else's (the same 404).

        An id with a lone surrogate (a JSON body may spell one, `"\\ud800"`)
        has no UTF-8 form, and one with a NUL no PostgreSQL text, so neither
        can even be looked up: no session has it (their ids are UUIDs).
        """
        if has_lone_surrogate(session_id) or "\x00" in session_id:
            return None
        m = self.dialect.mark
        rows = self._read(
            f"SELECT {_COLUMNS} FROM sessions WHERE id = {m} AND user_id = {m}", (session_id, user_id)
        )
        return SessionInfo(*rows[0]) if rows else None

    def of_user(self: _Directory, user_id: str) -> list[SessionInfo]:
        """The user's sessions, oldest first."""
        rows = self._read(
            f"SELECT {_COLUMNS} FROM sessions WHERE user_id = {self.dialect.mark} "
            f"ORDER BY {self.dialect.order}",
            (user_id,),
        )
        return [SessionInfo(*row) for row in rows]

    def name(self: _Directory, session_id: str, message: str) -> str:
        """Title the session after `message` unless it has a title already; the title it has after.

        One UPDATE that only fills an empty title: whichever message the store
        saw first names the session, whatever server process wrote it.
        """
        with self._write() as conn:
            return _titled(self.dialect, conn, session_id, message)

    def name_at_once(self: _Directory, session_id: str, message: str) -> str | None:
        """`name`, only if the store takes the write without waiting for anyone (a local file no other
        writer holds): None, nothing written, when it would wait. For the event loop, which must not
        wait on a store: the caller names it on a worker thread instead."""
        with self._write_at_once() as conn:
            return None if conn is None else _titled(self.dialect, conn, session_id, message)


def _inserted(dialect: SessionsDialect, conn: Any, user_id: str, template: str) -> SessionInfo:
    """A new session of `user_id` with `template`, written in the caller's transaction."""
    info = SessionInfo(str(uuid.uuid4()), user_id, template, datetime.now(UTC).isoformat())
    m = dialect.mark
    conn.execute(
        f"INSERT INTO sessions (id, user_id, template, created_at) VALUES ({m}, {m}, {m}, {m})",
        (info.id, info.user_id, info.template, info.created_at),
    )
    return info


def _titled(dialect: SessionsDialect, conn: Any, session_id: str, message: str) -> str:
    """Fill the session's empty title with `message`'s, in the caller's transaction; the title it has."""
    title = title_of(message)
    m = dialect.mark
    conn.execute(f"UPDATE sessions SET title = {m} WHERE id = {m} AND title = ''", (title, session_id))
    row = conn.execute(f"SELECT title FROM sessions WHERE id = {m}", (session_id,)).fetchone()
    return str(row[0]) if row else title


class SessionDirectory(DirectoryMethods, SqliteStore):
    """The sessions table in its SQLite file; safe to use from any thread (one lock around one connection)."""

    dialect = SQLITE

    def __init__(self, path: Path | str) -> None:
        super().__init__(path, _SCHEMA, BUSY_TIMEOUT_SECS)


class OpenedOnFirstUse:
    """A session store opened by its first operation (the store database's: app.py), so a server whose
    database is down still starts, and says so on the requests that need it; a failed opening is tried
    again by the next operation."""

    def __init__(self, opener: Callable[[], SessionStore]) -> None:
        self._opener = opener
        self._store: SessionStore | None = None
        self._lock = threading.Lock()

    def _opened(self) -> SessionStore:
        with self._lock:
            if self._store is None:
                self._store = self._opener()
            return self._store

    def create(self, user_id: str, template: str) -> SessionInfo:
        return self._opened().create(user_id, template)

    def create_at_once(self, user_id: str, template: str) -> SessionInfo | None:
        """None while the store is not open yet (see `name_at_once`)."""
        store = self._store
        return None if store is None else store.create_at_once(user_id, template)

    def owned(self, session_id: str, user_id: str) -> SessionInfo | None:
        return self._opened().owned(session_id, user_id)

    def of_user(self, user_id: str) -> list[SessionInfo]:
        return self._opened().of_user(user_id)

    def name(self, session_id: str, message: str) -> str:
        return self._opened().name(session_id, message)

    def name_at_once(self, session_id: str, message: str) -> str | None:
        """None while the store is not open yet: opening reads (and may migrate) it, never on the loop."""
        store = self._store
        return None if store is None else store.name_at_once(session_id, message)

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


class KnownSessions:
    """A session store that remembers the sessions it has seen (up to `most`, the least recently asked
    for forgotten first), so a message to a known session costs no lookup in the store — on the event
    loop, and with `store.url` a round trip to the database.

    Safe because a session is never deleted and never changes owner or
    template: only its title does, once, from "" to its first message's. A
    title given by this process (`name`) is remembered; one another process
    gave is learned the next time this one names the session (its UPDATE
    changes nothing and answers the title the store has).
    """

    def __init__(self, store: SessionStore, most: int = 4096) -> None:
        self._store = store
        self._most = most
        self._known: OrderedDict[str, SessionInfo] = OrderedDict()  # least recently asked for first
        self._lock = threading.Lock()  # `owned` runs on the event loop, `create` and `name` on threads

    def _remember(self, info: SessionInfo) -> None:
        with self._lock:
            self._known[info.id] = info
            self._known.move_to_end(info.id)
            while len(self._known) > self._most:
                self._known.popitem(last=False)

    def create(self, user_id: str, template: str) -> SessionInfo:
        info = self._store.create(user_id, template)
        self._remember(info)
        return info

    def create_at_once(self, user_id: str, template: str) -> SessionInfo | None:
        info = self._store.create_at_once(user_id, template)
        if info is not None:
            self._remember(info)
        return info

    def owned(self, session_id: str, user_id: str) -> SessionInfo | None:
        with self._lock:
            info = self._known.get(session_id)
            if info is not None:
                self._known.move_to_end(session_id)
        if info is None:
            info = self._store.owned(session_id, user_id)
            if info is not None:
                self._remember(info)
        return info if info is not None and info.user_id == user_id else None

    def of_user(self, user_id: str) -> list[SessionInfo]:
        return self._store.of_user(user_id)

    def name(self, session_id: str, message: str) -> str:
        return self._titled(session_id, self._store.name(session_id, message))

    def name_at_once(self, session_id: str, message: str) -> str | None:
        title = self._store.name_at_once(session_id, message)
        return None if title is None else self._titled(session_id, title)

    def _titled(self, session_id: str, title: str) -> str:
        """Remember the title the store gave the session, if the session is remembered; the title."""
        with self._lock:
            info = self._known.get(session_id)
            if info is not None:
                self._known[session_id] = replace(info, title=title)
        return title

    def close(self) -> None:
        self._store.close()


def sessions_file(config: KernelConfig) -> Path:
    """The sessions file: beside the transcript (kernel.yaml's `logging.messages_db_path`)."""
    return config.messages_db.with_name(SESSIONS_FILE)


__all__ = [
    "SESSIONS_FILE",
    "SQLITE",
    "TITLE_CHARS",
    "DirectoryMethods",
    "KnownSessions",
    "OpenedOnFirstUse",
    "SessionDirectory",
    "SessionInfo",
    "SessionStore",
    "SessionsDialect",
    "sessions_file",
    "title_of",
]
