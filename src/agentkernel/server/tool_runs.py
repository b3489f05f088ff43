"""Tool runs a user starts without a turn — `POST /v1/tools/{name}/run` (the page's panel too), MCP tool
calls at `/mcp`, continuations — counted against a cap per user, and spending a budget.

**Counted.** A user has at most `server.max_running_tool_runs_per_user` of
them running at once, every route together: past it, TooManyToolRuns
before the run starts (429 on the HTTP routes, an error result at `/mcp`).
The count is the store's (services/work_leases.py), so every server process
on one project counts the same runs, and a process that dies gives its
user's slots back within the lease. Each holds a script worker and may wait on the LLM for
its whole `timeout_secs`, so without the cap one token could hold every
worker and every LLM slot.

**Budgeted** (S9.2). A run is a process of its own, ended when the run
ends (its sub-agents with it), so `llm()`, `llm_json` and `run_subagent` in
it spend a budget group like an agent's tool call does:

- in one of the user's chat sessions, the session's group: the process is a
  child of the session's open chat (opened if need be, and kept open while
  the run lasts), so the runs and the turns of a session share its
  template's `budget.tokens` together;
- anywhere else (no session, an MCP session, a continuation of such a run),
  a group of `server.tool_run_token_budget` tokens for that run alone: a
  session costs nothing to make and brings a full template budget, so a
  budget per user per window would bound nobody; what bounds a user is this
  per-run budget times the cap above.

Past the budget a script's `llm()` throws `caller budget exhausted`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from dataclasses import replace
from typing import Any, TypeVar

import anyio

from agentkernel.agent.processes import Process
from agentkernel.config.server import LOCAL_USER
from agentkernel.config.templates import TemplateSpec
from agentkernel.identity import Caller
from agentkernel.kernel import Kernel
from agentkernel.server.sessions import SessionInfo, SessionStore
from agentkernel.server.turns import TurnRunner
from agentkernel.services.user_work import Cap, TooMuchWork
from agentkernel.services.work_leases import SharedUserWork
from agentkernel.tools.dispatch import Asker
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONValue

T = TypeVar("T")

TOOL_RUN = "tool-run"  # the name of a run's process, and of its template when the caller has none


class TooManyToolRuns(TooMuchWork):
    """The user has `server.max_running_tool_runs_per_user` tool runs going already (HTTP 429)."""


def tool_run_cap(limit: int) -> Cap:
    """server.max_running_tool_runs_per_user as a cap: what a refusal says."""
    return Cap(
        "tool runs",
        "server.max_running_tool_runs_per_user",
        limit,
        "wait for one to end (tool runs, MCP tool calls and continuations count together)",
    )


class ToolRuns:
    """The server's tool runs outside turns: `admitted(caller)` counts one and gives it its budget."""

    def __init__(
        self,
        kernel: Kernel,
        sessions: SessionStore,
        turns: TurnRunner,
        work: SharedUserWork,
        *,
        max_running_per_user: int,
        budget_tokens: int,
    ) -> None:
        self._kernel = kernel
        self._sessions = sessions
        self._turns = turns
        self._work = work
        self.cap = tool_run_cap(max_running_per_user)
        self._budget_tokens = budget_tokens

    def running_of(self, user_id: str) -> int:
        """How many tool runs of `user_id` are going now, every route's, in every process (blocking)."""
        return self._work.running(user_id, self.cap)

    def counted(self, user_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        """The block is one of `user_id`'s tool runs (TooManyToolRuns before it starts when it may not)."""
        return self._work.aheld(user_id, self.cap, TooManyToolRuns)

    async def run(
        self, name: str, args: JSONValue, caller: Caller, origin: str = "panel", *, asker: Asker | None = None
    ) -> ToolResult:
        """The tool run as one of the caller's, `counted` and then as `run_budgeted` runs it."""
        async with self.counted(caller.user_id or LOCAL_USER):
            return await self.run_budgeted(name, args, caller, origin, asker=asker)

    async def run_budgeted(
        self, name: str, args: JSONValue, caller: Caller, origin: str = "panel", *, asker: Asker | None = None
    ) -> ToolResult:
        """The tool run as a process of its own, spending the budget the module docstring says.

        The process (and any sub-agent of it) ends with the run. A request
        cancelled meanwhile (an MCP client's cancel, the server stopping)
        waits for the run's end all the same: a script on its worker thread
        cannot be stopped from here, so it holds its slot until it ends (at
        its `timeout_secs` at the latest), and no process is left behind.
        A call a person must approve is put to `asker` (Kernel.arun_tool).
        """
        return await to_the_end(self._run(name, args, caller, origin, asker))

    async def _run(
        self, name: str, args: JSONValue, caller: Caller, origin: str, asker: Asker | None
    ) -> ToolResult:
        async with self._process(caller, caller.user_id or LOCAL_USER) as process:
            ran = replace(caller, pid=process.pid, process=process)
            return await self._kernel.arun_tool(name, args, ran, origin, asker=asker)

    @contextlib.asynccontextmanager
    async def _process(self, caller: Caller, user: str) -> AsyncIterator[Process]:
        session = await self._chat_session(caller.session_id, user)
        async with contextlib.AsyncExitStack() as stack:
            if session is None:
                spec = TemplateSpec(caller.template or TOOL_RUN, "", budget_tokens=self._budget_tokens)
                parent = None
            else:
                chat = await stack.enter_async_context(self._turns.lent(session))
                spec, parent = chat.process.template, chat.process
            process = await asyncio.to_thread(  # a session's scratch folder is made (and cleaned)
                self._kernel.spawn,
                spec,
                user_id=caller.user_id,
                session_id=caller.session_id,
                parent=parent,
                name=TOOL_RUN,
            )
            try:
                yield process
            finally:
                self._kernel.terminate(process.pid)

    async def _chat_session(self, session_id: str | None, user: str) -> SessionInfo | None:
        """The user's chat session `session_id`; None for none, or an id of something else (MCP's)."""
        if session_id is None:
            return None
        return await asyncio.to_thread(self._sessions.owned, session_id, user)


async def to_the_end(work: Coroutine[Any, Any, T]) -> T:
    """`work`'s result; when the awaiting task is cancelled, `work` still runs to its end, and then the
    cancellation is raised (shielded from anyio's repeated delivery meanwhile)."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with anyio.CancelScope(shield=True):
            await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: it is the cancellation that is raised
        raise


__all__ = ["TOOL_RUN", "TooManyToolRuns", "ToolRuns", "to_the_end", "tool_run_cap"]
