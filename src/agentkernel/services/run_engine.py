"""The port of a run engine (S27.2): where a server hands a session's run when it does not drive it itself.

`runs.engine: temporal` gives servers one (services/temporal_runs.py);
without, the server's own turns drive runs. Kept apart from the adapter so
the server can name it, and catch its failure, without importing the SDK.
"""

from __future__ import annotations

from typing import Protocol

from agentkernel.errors import AgentKernelError


class EngineUnavailable(AgentKernelError):
    """The run engine did not answer (or refused): the run could not be started or cancelled there."""


class RunEngine(Protocol):
    """Runs started (idempotently: a running one is kept) and cancelled by run id."""

    async def start(self, run_id: str, lease_token: str | None = None) -> None: ...

    async def cancel(self, run_id: str) -> bool: ...


__all__ = ["EngineUnavailable", "RunEngine"]
