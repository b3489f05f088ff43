"""The tools: list them (all, or a template's), and run one through the one dispatch path.

A run takes the caller's identity: their user id and, given `session`, that
session (it must be theirs) and its template's access list, exactly as the
agent would call the tool there. This works with no LLM configured. A run
counts against server.max_running_tool_runs_per_user (429 past it; 429 too
when it failed on the caller's quota, S26.3) and
spends the session's budget group, or, without a session,
server.tool_run_token_budget (server/tool_runs.py). The script, and a
listing (which may start outside MCP servers), run on the kernel's script
pool in the caller's queue, shared fairly between users (fair_pool.py); the
small reads around them on the default threads.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import BaseModel, Field

from agentkernel.config.templates import TemplateSpec
from agentkernel.errors import ConfigError, QuotaExhausted
from agentkernel.identity import Caller
from agentkernel.server.identity import Parts, User
from agentkernel.server.parts import ServerParts
from agentkernel.server.problems import CALLER, documented
from agentkernel.server.routes.continuations import sealing_of
from agentkernel.server.routes.sessions import owned_session
from agentkernel.server.sealing import seal_result
from agentkernel.tools.dispatch import the_caller_approves

router = APIRouter(prefix="/v1/tools", tags=["tools"], responses=documented(*CALLER))


class ToolRun(BaseModel):
    args: Any = Field(default_factory=dict, description="the tool's arguments (its `parameters` schema)")
    session: str | None = Field(default=None, description="run as in this session of yours")


def _template(parts: ServerParts, template: str) -> TemplateSpec:
    try:
        return parts.kernel.template(template)
    except ConfigError as exc:
        raise HTTPException(404, f"no template {template!r} that loads") from exc


def _caller(parts: ServerParts, user: str, session: str | None, template: str | None) -> Caller:
    """The identity a listing or a run uses; a session sets the template (and is checked to be the
    user's). A template's caller has its tools and its hooks (S24: a run from the panel passes them)."""
    if session is not None:
        info = owned_session(parts, session, user)
        return parts.kernel.caller(user_id=user, session_id=info.id, spec=_template(parts, info.template))
    if template is not None:
        return parts.kernel.caller(user_id=user, spec=_template(parts, template))
    return parts.kernel.caller(user_id=user)


@router.get("", responses=documented(404))
async def list_tools(
    user: User,
    parts: Parts,
    template: Annotated[str | None, Query(description="only the tools this template may call")] = None,
) -> list[dict[str, Any]]:
    """`[{name, description, parameters, ui}]`, by name."""
    caller = await asyncio.to_thread(_caller, parts, user, None, template)
    return [
        {"name": s.name, "description": s.description, "parameters": s.parameters, "ui": s.ui}
        for s in await parts.kernel.alist_tools(caller)  # may start outside MCP servers: on the pool
    ]


@router.post("/{name}/run", responses=documented(404, 413, 429))
async def run_tool(name: str, body: ToolRun, request: Request, user: User, parts: Parts) -> dict[str, Any]:
    """The ToolResult `{content, success, error, visual, warnings}`; 404 for a tool the caller cannot see;
    429 while the caller has server.max_running_tool_runs_per_user tool runs going, and for a run that
    failed on a quota of the caller's (S26.3: its `llm()` threw `quota exhausted: …`, uncaught)."""
    async with parts.tool_runs.counted(user):  # refused before anything is read or run
        caller = await asyncio.to_thread(_caller, parts, user, body.session, None)
        visible = await parts.kernel.alist_tools(caller)
        if name not in {spec.name for spec in visible}:
            raise HTTPException(404, f"no tool {name!r}")
        # the person who would be asked runs it: a call that needs approval (S24.4) is approved by that
        result = await parts.tool_runs.run_budgeted(name, body.args, caller, asker=the_caller_approves)
    if not result.success and QuotaExhausted.PREFIX in (result.error or ""):  # its llm() was refused:
        await asyncio.to_thread(parts.kernel.check_quota, user, caller.template)  # 429 if it still is
    return await seal_result(
        sealing_of(request),
        result.to_json(),
        owner=user,
        tool=name,
        session_id=caller.session_id,
        pid=caller.pid,
        template=caller.template,
    )
