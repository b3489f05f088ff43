"""The store of tool results that `get_tool_result` reads (S16.4): an SQLite file every process shares.

A result recorded by one server process must be readable by another serving
the same session (`serve --workers N`), so the results live in a file, not
in a process (DESIGN rule 7). The file is beside the transcript
(`tool_results.db` next to `logging.messages_db_path`), apart from it so its
writes never queue behind the transcript's.

Bounded as the in-memory record was: `per_tool` results per (session, tool),
the oldest dropped as a new one comes, and `sessions` sessions, the one whose
last result is oldest dropped (with its results) as a new session comes.
Each record is one short IMMEDIATE transaction: the insert and both bounds (for a known session, its
use, the result's number, the result, and the oldest result once there are more than `per_tool`).
Results are JSON text; the caller owns their shape. The queries are
written once (`ResultMethods`, over a dialect: services/sql_dialect.py) for
this file and for the PostgreSQL store (services/tool_results_pg.py,
kernel.yaml `store.url`); `ToolResults` is what both offer.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from agentkernel.config.stores import TOOL_RESULTS_FILE
from agentkernel.errors import AgentKernelError
from agentkernel.services.sql_dialect import SQLITE, Connection, Dialect, Statements
from agentkernel.services.sqlite_db import Schema, SqliteStore
from agentkernel.types import JSONObject

FILE_NAME = TOOL_RESULTS_FILE
BUSY_TIMEOUT_SECS = 10.0
SESSIONS, RESULTS = "tool_result_sessions", "tool_results"

SCHEMA = Schema(
    version=1,
    upgrades={
        1: (
            f"CREATE TABLE {SESSIONS} ("
            " key TEXT PRIMARY KEY,"  # identity.session_key: the user and the session
            " used INTEGER NOT NULL"  # rises with each record: the least recently used session goes first
            ") WITHOUT ROWID",
            f"CREATE INDEX {SESSIONS}_used ON {SESSIONS} (used)",
            f"CREATE TABLE {RESULTS} ("
            f" key TEXT NOT NULL REFERENCES {SESSIONS} (key) ON DELETE CASCADE,"
            " tool TEXT NOT NULL,"
            " seq INTEGER NOT NULL,"  # rises with each result of (key, tool): the newest is the highest
            " result TEXT NOT NULL,"  # JSON
            " PRIMARY KEY (key, tool, seq)"
            ") WITHOUT ROWID",
        ),
    },
    too_new=lambda found: AgentKernelError(
        f"tool-result store schema version {found} is newer than this kernel's"
    ),
)


@runtime_checkable
class ToolResults(Protocol):
    """What the history (tools/history.py) uses of a tool-result store: the SQLite one here
    (`ToolResultStore`) or the PostgreSQL one (services/tool_results_pg.py, kernel.yaml `store.url`)."""

    def record(self, key: str, tool: str, result: JSONObject) -> None: ...

    def get(self, key: str, tool: str, index: int) -> JSONObject | None: ...

    def forget(self, key: str) -> None: ...

    def session_count(self) -> int: ...

    def close(self) -> None: ...


class _Store(Protocol):
    """What `ResultMethods` needs of the class it is mixed into: a dialect, its bounds and a store."""

    dialect: ClassVar[Dialect]
    per_tool: int
    sessions: int

    def _write(self) -> AbstractContextManager[Connection]: ...

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...


def check_bounds(per_tool: int, sessions: int) -> None:
    """ValueError unless both bounds are 1 or more."""
    if per_tool < 1 or sessions < 1:
        raise ValueError(f"per_tool and sessions must be 1 or more, got {per_tool!r} and {sessions!r}")


def _new_session(q: Statements, key: str, most: int) -> None:
    """Add session `key` as the most recently used, dropping the least recently used past `most`
    (in the caller's write transaction)."""
    q.execute(
        f"INSERT INTO {SESSIONS} (key, used) VALUES (?, (SELECT coalesce(max(used), 0) + 1 FROM {SESSIONS}))",
        (key,),
    )
    over = q.execute(f"SELECT count(*) FROM {SESSIONS}").fetchone()[0] - most
    if over > 0:
        q.execute(
            f"DELETE FROM {SESSIONS} WHERE key IN (SELECT key FROM {SESSIONS} ORDER BY used LIMIT ?)", (over,)
        )


class ResultMethods:
    """What both tool-result stores do, written once: SQLite's (`ToolResultStore`) and PostgreSQL's
    (tool_results_pg.py) differ in their `dialect` and their connections (`_write`, a transaction that
    is the only writer of the store while it lasts; `_read`)."""

    dialect: ClassVar[Dialect]

    def record(self: _Store, key: str, tool: str, result: JSONObject) -> None:
        """Keep `result` as the newest of (key, tool), within both bounds."""
        text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
        with self._write() as conn:
            q = Statements(conn, self.dialect)
            known = q.execute(
                f"UPDATE {SESSIONS} SET used = (SELECT max(used) + 1 FROM {SESSIONS}) WHERE key = ?", (key,)
            ).rowcount
            if not known:
                _new_session(q, key, self.sessions)
            seq = q.execute(
                f"SELECT coalesce(max(seq), 0) + 1 FROM {RESULTS} WHERE key = ? AND tool = ?", (key, tool)
            ).fetchone()[0]
            q.execute(
                f"INSERT INTO {RESULTS} (key, tool, seq, result) VALUES (?, ?, ?, ?)", (key, tool, seq, text)
            )
            if seq > self.per_tool:
                q.execute(
                    f"DELETE FROM {RESULTS} WHERE key = ? AND tool = ? AND seq <= ?",
                    (key, tool, seq - self.per_tool),
                )

    def get(self: _Store, key: str, tool: str, index: int) -> JSONObject | None:
        """The result `index` places before the newest (0: the newest); None when there is none."""
        if index < 0 or index >= self.per_tool:
            return None
        rows = self._read(
            self.dialect.sql(
                f"SELECT result FROM {RESULTS} WHERE key = ? AND tool = ? ORDER BY seq DESC LIMIT 1 OFFSET ?"
            ),
            (key, tool, index),
        )
        if not rows:
            return None
        found: JSONObject = json.loads(rows[0][0])
        return found

    def forget(self: _Store, key: str) -> None:
        """Drop every result of one session."""
        with self._write() as conn:
            Statements(conn, self.dialect).execute(f"DELETE FROM {SESSIONS} WHERE key = ?", (key,))

    def session_count(self: _Store) -> int:
        """Sessions held now."""
        return int(self._read(f"SELECT count(*) FROM {SESSIONS}", ())[0][0])


class ToolResultStore(ResultMethods, SqliteStore):
    """Results by (session key, tool), newest first, in their SQLite file; see the module docstring."""

    dialect = SQLITE

    def __init__(self, path: Path | str, *, per_tool: int, sessions: int) -> None:
        check_bounds(per_tool, sessions)
        super().__init__(path, SCHEMA, BUSY_TIMEOUT_SECS)
        self.per_tool = per_tool
        self.sessions = sessions


__all__ = ["FILE_NAME", "ResultMethods", "ToolResultStore", "ToolResults", "check_bounds"]
