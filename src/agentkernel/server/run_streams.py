"""How many run event streams each user reads at once (`server.max_run_streams_per_user`).

A stream of a run still going reads the store (run_wakeups.py) until the
run's `done` (routes/runs.py), so one token opening streams without end
would make the server read for nobody. Each process counts its own (like
`server.max_open_chats`): the cap holds per process.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from agentkernel.services.user_work import Cap, TooMuchWork


class TooManyStreams(TooMuchWork):
    """The user reads `server.max_run_streams_per_user` run event streams already (HTTP 429)."""


class RunStreams:
    """The run event streams being read, per user, on this process."""

    def __init__(self, limit: int) -> None:
        self.cap = Cap(
            "run event streams",
            "server.max_run_streams_per_user",
            limit,
            "close one (each ends with its run's `done`)",
        )
        self._open: dict[str, int] = {}

    def check(self, user_id: str) -> None:
        """TooManyStreams when `user_id` has as many open as the cap allows (before a stream starts)."""
        running = self._open.get(user_id, 0)
        if running >= self.cap.limit:
            raise TooManyStreams(user_id, self.cap, running)

    @contextlib.contextmanager
    def holding(self, user_id: str) -> Iterator[None]:
        """One stream of `user_id` open while the block runs; TooManyStreams past the cap."""
        self.check(user_id)
        self._open[user_id] = self._open.get(user_id, 0) + 1
        try:
            yield
        finally:
            left = self._open.pop(user_id) - 1
            if left:
                self._open[user_id] = left


__all__ = ["RunStreams", "TooManyStreams"]
