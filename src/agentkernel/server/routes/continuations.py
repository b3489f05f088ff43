"""`POST /v1/continuations {id}`: a table's next page (S6.3), run as the table's owner.

The id is the opaque one a sealed table carries (sealing.py); the args
behind it never leave the server. Unknown, expired and another user's ids
get the same 404, so an id says nothing about anyone else's tables.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field

from agentkernel.server.continuations import arun_continuation
from agentkernel.server.identity import Parts, User
from agentkernel.server.problems import CALLER, documented
from agentkernel.server.sealing import Sealing
from agentkernel.tools.dispatch import the_caller_approves

router = APIRouter(prefix="/v1/continuations", tags=["continuations"], responses=documented(*CALLER))
NOT_FOUND = "no such continuation (unknown, expired, or not yours)"


class NextPage(BaseModel):
    id: str = Field(min_length=1, max_length=200, description="a table's `continuation.id`")


def sealing_of(request: Request) -> Sealing:
    """The app's sealed-id stores (app.py puts them on `app.state`)."""
    sealing: Sealing = request.app.state.sealing
    return sealing


@router.post("", responses=documented(404, 413, 429))
async def next_page(body: NextPage, request: Request, user: User, parts: Parts) -> dict[str, Any]:
    """`{visual, success, error, warnings}`: the page's blocks, their tables and files sealed anew.

    The rerun is a tool run: 429 while the caller has server.max_running_tool_runs_per_user going.
    """
    sealing = sealing_of(request)
    async with parts.tool_runs.counted(user):  # refused before anything is read or run
        store = await asyncio.to_thread(sealing.continuations.store)
        result = await arun_continuation(
            parts.kernel,
            store,
            body.id,
            user,
            sealing.seal_page,
            functools.partial(parts.tool_runs.run_budgeted, asker=the_caller_approves),
        )
    if result is None:
        raise HTTPException(404, NOT_FOUND)
    shown = result.to_json()
    return {key: shown[key] for key in ("visual", "success", "error", "warnings")}


__all__ = ["NOT_FOUND", "router", "sealing_of"]
