"""The per-session record of tool results that `get_tool_result` reads (S16.4).

Keyed by user **and** session (`identity.session_key`): a session id is not
a secret, so user B naming user A's session id reads B's own results. A
long-running kernel meets sessions without end and is never told that most
of them are over, so the record is bounded twice: per (session, tool) by
`limits.history_per_tool`, and in sessions by `limits.history_sessions`,
the least recently used session going first. `forget_session` drops one at
once (when its chat ends).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque

from agentkernel.identity import Caller, session_key
from agentkernel.tools.results import ToolResult

DEFAULT_SESSIONS = 1000


class ToolResultHistory:
    """The latest results of each tool in each (user, session), newest first on read."""

    def __init__(self, per_tool: int = 20, sessions: int = DEFAULT_SESSIONS) -> None:
        self.per_tool = per_tool
        self.sessions = sessions
        self._by_session: OrderedDict[str, dict[str, deque[ToolResult]]] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, caller: Caller, tool: str, result: ToolResult) -> None:
        """Keep `result` for the caller's session; a call without a session keeps nothing."""
        if caller.session_id is None:
            return
        key = session_key(caller.user_id, caller.session_id)
        with self._lock:
            tools = self._by_session.get(key)
            if tools is None:
                tools = self._by_session[key] = {}
                while len(self._by_session) > self.sessions:
                    self._by_session.popitem(last=False)
            else:
                self._by_session.move_to_end(key)
            tools.setdefault(tool, deque(maxlen=self.per_tool)).append(result)

    def get(self, caller: Caller, tool: str, index: int = 0) -> ToolResult | None:
        """Index 0 is the latest result; None when there is none at that index."""
        if caller.session_id is None:
            return None
        with self._lock:
            bucket = self._by_session.get(session_key(caller.user_id, caller.session_id), {}).get(tool)
            if bucket is None or index < 0 or index >= len(bucket):
                return None
            return bucket[-1 - index]

    def forget_session(self, user_id: str | None, session_id: str) -> None:
        with self._lock:
            self._by_session.pop(session_key(user_id, session_id), None)

    def __len__(self) -> int:
        """Sessions held now."""
        with self._lock:
            return len(self._by_session)


__all__ = ["DEFAULT_SESSIONS", "ToolResultHistory"]
