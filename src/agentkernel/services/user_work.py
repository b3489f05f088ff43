"""Per-user caps on work running at once: each kind's limit, and the refusal past it.

Every way a user makes work — a turn, a tool run, an MCP tool call, a
continuation, a cron run — spends the LLM, the script workers and memory
that all users share, so each kind has a `Cap`: a limit per user and the
setting that sets it. Past it the next is refused before it starts
(`TooMuchWork`, whose text names the setting, the limit and how many run:
the server answers it with 429, an MCP call with an error result). The
counts are the store's, so every server process on a project counts the
same: live turn leases (turn_leases.py), live work leases (work_leases.py),
live cron claims (cron_store.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentkernel.errors import AgentKernelError
from agentkernel.telemetry import metrics


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
        metrics.cap_refused(cap.setting)  # every refusal is made here (S26.2)
        self.cap = cap
        self.running = running
        self.limit = cap.limit


__all__ = ["Cap", "TooMuchWork"]
