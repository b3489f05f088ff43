"""What every route needs, in one typed place on the app: kernel, settings, sessions, turns, runs, LLM."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from agentkernel.config import ServerSettings
from agentkernel.kernel import Kernel
from agentkernel.server.llm_status import LLMWatch
from agentkernel.server.run_streams import RunStreams
from agentkernel.server.run_wakeups import PollingWakeups, RunWakeups
from agentkernel.server.sessions import SessionStore
from agentkernel.server.tool_runs import ToolRuns
from agentkernel.server.turns import TurnRunner


@dataclass(frozen=True)
class ServerParts:
    kernel: Kernel
    settings: ServerSettings
    sessions: SessionStore
    turns: TurnRunner
    tool_runs: ToolRuns
    llm: LLMWatch
    run_streams: RunStreams
    run_wakeups: RunWakeups = field(default_factory=PollingWakeups)  # a run's new records (run_wakeups.py)


async def server_parts(request: Request) -> ServerParts:
    """The app's parts (a FastAPI dependency; async, so it runs on the event loop: FastAPI runs a plain
    function's dependency on a worker thread, a hop for every request)."""
    parts: ServerParts = request.app.state.parts
    return parts


def request_id(request: Request) -> str:
    """The id of this request, also in its `X-Request-Id` header (failures.py)."""
    return str(request.scope.get("state", {}).get("request_id", "-"))


__all__ = ["ServerParts", "request_id", "server_parts"]
