"""The per-session record of tool results that `get_tool_result` reads (S16.4), kept in the store.

Keyed by user **and** session (`identity.session_key`): a session id is not
a secret, so user B naming user A's session id reads B's own results. The
results live in an SQLite file beside the transcript (services/tool_results.py),
so every process serving a session (`serve --workers N`, a second server on
the project, `agentkernel tool run --session`) reads what any of them
recorded, and a session resumed after its chat closed still has them. The
record is bounded twice: per (session, tool) by `limits.history_per_tool`,
and in sessions by `limits.history_sessions`, the least recently used
session going first. `forget_session` drops one at once. With kernel.yaml's
`store.url` the same record lives in the store database instead
(services/tool_results_pg.py, handed in as `open_store`).

The file opens on the first call that has a session. A failure to record
(the disk is full, the store is locked past its wait) is logged and the
tool's result goes on unharmed: it is only not found by `get_tool_result`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from agentkernel.errors import AgentKernelError, HelperError
from agentkernel.identity import Caller, session_key
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONObject, VisualBlock
from agentkernel.util.lazy_log import LazyLogger

if TYPE_CHECKING:  # the store and SQLite are imported when the first call with a session opens it
    from agentkernel.services.tool_results import ToolResults

log = LazyLogger(__name__)

DEFAULT_SESSIONS = 1000


class ToolResultHistory:
    """The latest results of each tool in each (user, session), newest first on read.

    `path`: the store's file; None keeps the results in memory, in this
    process only (a kernel's own tests). `open_store`, when given, opens the
    store instead (the PostgreSQL one), `shown` naming it in messages.
    """

    def __init__(
        self,
        path: Path | None = None,
        per_tool: int = 20,
        sessions: int = DEFAULT_SESSIONS,
        *,
        open_store: Callable[[], ToolResults] | None = None,
        shown: str | None = None,
    ) -> None:
        self.path = path
        self.per_tool = per_tool
        self.sessions = sessions
        self.shown = shown if shown is not None else str(path)
        self._open_store = open_store
        self._store: ToolResults | None = None
        self._lock = threading.Lock()

    def record(self, caller: Caller, tool: str, result: ToolResult) -> None:
        """Keep `result` for the caller's session; a call without a session keeps nothing."""
        if caller.session_id is None:
            return
        try:
            self._opened().record(session_key(caller.user_id, caller.session_id), tool, _as_json(result))
        except _store_errors() as exc:
            log.warning(
                "the result of tool %s was not kept for get_tool_result (%s): %s", tool, self.shown, exc
            )

    def get(self, caller: Caller, tool: str, index: int = 0) -> ToolResult | None:
        """Index 0 is the latest result; None when there is none at that index."""
        if caller.session_id is None:
            return None
        try:
            found = self._opened().get(session_key(caller.user_id, caller.session_id), tool, index)
        except _store_errors() as exc:
            raise HelperError(f"get_tool_result: the tool-result store ({self.shown}) failed: {exc}") from exc
        return None if found is None else _from_json(found)

    def forget_session(self, user_id: str | None, session_id: str) -> None:
        self._opened().forget(session_key(user_id, session_id))

    def __len__(self) -> int:
        """Sessions held now."""
        return self._opened().session_count()

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def _opened(self) -> ToolResults:
        with self._lock:
            if self._store is None and self._open_store is not None:
                self._store = self._open_store()
            elif self._store is None:
                from agentkernel.services.sqlite_db import MEMORY  # SQLite: by the first call with a session
                from agentkernel.services.tool_results import ToolResultStore

                where = MEMORY if self.path is None else self.path
                self._store = ToolResultStore(where, per_tool=self.per_tool, sessions=self.sessions)
            return self._store


def _store_errors() -> tuple[type[Exception], ...]:
    """What a failing store raises: asked only when a call with a session raised (and so imported
    SQLite, opening the store), never by a call without one."""
    import sqlite3

    return (sqlite3.Error, OSError, AgentKernelError)


def _as_json(result: ToolResult) -> JSONObject:
    return {
        "content": result.content,
        "success": result.success,
        "error": result.error,
        "visual": list(result.visual),
        "warnings": list(result.warnings),
        "data": result.data,
    }


def _from_json(found: JSONObject) -> ToolResult:
    error = found.get("error")
    return ToolResult(
        content=str(found.get("content", "")),
        success=found.get("success") is True,
        error=error if isinstance(error, str) else None,
        visual=cast(list[VisualBlock], found.get("visual") or []),
        warnings=[str(w) for w in cast(list[object], found.get("warnings") or [])],
        data=found.get("data"),
    )


__all__ = ["DEFAULT_SESSIONS", "ToolResultHistory"]
