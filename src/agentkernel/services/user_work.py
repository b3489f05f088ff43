"""Per-user caps on work running at once: how many of each kind one user has running, and the refusal.

Every way a user makes work — a turn, a tool run, an MCP tool call, a
continuation, a cron run — spends the LLM, the script workers and memory
that all users share, so each kind has a `Cap`: a limit per user and the
setting that sets it. `UserWork` counts what runs in this process and
refuses the next before it starts (`TooMuchWork`, whose text names the
setting, the limit and how many run: the server answers it with 429, an MCP
call with an error result). The count drops the moment a piece of work
ends, however it ends (`held`'s `finally`). Turns and cron runs may run in
several processes on one store, so their counts are the store's (live turn
leases, services/turn_leases.py; live claims, services/cron_store.py); they
share only `Cap`'s wording.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from agentkernel.errors import AgentKernelError


@dataclass(frozen=True)
class Cap:
    """One kind of work's limit per user: `what` it counts (a plural noun), its setting, what to do."""

    what: str
    setting: str
    limit: int
    advice: str

    def refusal(self, user_id: str, running: int) -> str:
        """The sentence a refusal says: whose, how many run, which setting allows how many, what to do."""
        return (
            f"user {user_id!r} has {running} {self.what} running, the most {self.setting} "
            f"({self.limit}) allows; {self.advice}"
        )


class TooMuchWork(AgentKernelError):
    """A user has as much of one kind of work running as its cap allows (HTTP 429)."""

    def __init__(self, user_id: str, cap: Cap, running: int) -> None:
        super().__init__(cap.refusal(user_id, running))
        self.cap = cap
        self.running = running
        self.limit = cap.limit


class UserWork:
    """The work each user has running in this process, per cap; safe from any thread."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def running(self, user_id: str, cap: Cap) -> int:
        """How much work of `cap`'s kind `user_id` has running now."""
        with self._lock:
            return self._running.get((user_id, cap.setting), 0)

    def start(self, user_id: str, cap: Cap, refused: type[TooMuchWork] = TooMuchWork) -> None:
        """Count one more piece of work, or raise `refused` when the user is at the cap already.

        Pair every `start` with one `end` (`held` does), however the work ends.
        """
        key = (user_id, cap.setting)
        with self._lock:
            running = self._running.get(key, 0)
            if running >= cap.limit:
                raise refused(user_id, cap, running)
            self._running[key] = running + 1

    def end(self, user_id: str, cap: Cap) -> None:
        """One piece of work `start` counted has ended."""
        key = (user_id, cap.setting)
        with self._lock:
            left = self._running.get(key, 0) - 1
            if left > 0:
                self._running[key] = left
            else:
                self._running.pop(key, None)

    @contextmanager
    def held(self, user_id: str, cap: Cap, refused: type[TooMuchWork] = TooMuchWork) -> Iterator[None]:
        """The block counts as one piece of work (`refused` before it starts when it may not)."""
        self.start(user_id, cap, refused)
        try:
            yield
        finally:
            self.end(user_id, cap)


__all__ = ["Cap", "TooMuchWork", "UserWork"]
