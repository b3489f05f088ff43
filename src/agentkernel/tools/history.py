"""The per-session record of tool results that `get_tool_result` reads (S16.4)."""

from __future__ import annotations

import threading
from collections import deque

from agentkernel.tools.results import ToolResult


class ToolResultHistory:
    """The latest results of each tool in each session, newest first on read.

    Bounded per (session, tool) so a long session cannot grow it without end.
    """

    def __init__(self, per_tool: int = 20) -> None:
        self.per_tool = per_tool
        self._results: dict[tuple[str, str], deque[ToolResult]] = {}
        self._lock = threading.Lock()

    def record(self, session_id: str, tool: str, result: ToolResult) -> None:
        with self._lock:
            key = (session_id, tool)
            bucket = self._results.get(key)
            if bucket is None:
                bucket = self._results[key] = deque(maxlen=self.per_tool)
            bucket.append(result)

    def get(self, session_id: str, tool: str, index: int = 0) -> ToolResult | None:
        """Index 0 is the latest result; None when there is none at that index."""
        with self._lock:
            bucket = self._results.get((session_id, tool))
            if bucket is None or index < 0 or index >= len(bucket):
                return None
            return bucket[-1 - index]

    def forget_session(self, session_id: str) -> None:
        with self._lock:
            for key in [k for k in self._results if k[0] == session_id]:
                del self._results[key]


__all__ = ["ToolResultHistory"]
