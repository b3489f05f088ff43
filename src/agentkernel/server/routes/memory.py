"""`DELETE /v1/memory`: the `memory` hook forgets what it keeps about the caller.

The route does not know where or how the hook keeps facts: it sends the
hook its own forget command (`forget_command` in its YAML, `/forget` by
default) as the caller's message, through the kernel's hook pipeline with
no session and no LLM (`Kernel.run_hooks`), exactly as typing `/forget` in
a chat does. So the web page, the terminal chat, the API and a project's
own `memory` hook (`overrides: builtin`) all forget the same way. The user
is the caller's (the bearer token's): no request can name another.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from agentkernel.errors import ConfigError
from agentkernel.server.identity import Parts, User
from agentkernel.server.problems import CALLER, documented
from agentkernel.types import JSONObject

router = APIRouter(prefix="/v1/memory", tags=["memory"], responses=documented(*CALLER))
HOOK = "memory"
DEFAULT_COMMAND = "/forget"


class Forgotten(BaseModel):
    reply: str = Field(description="the hook's answer to the forget command, as a chat would show it")
    notices: list[str] = Field(description="the hook's notices (how many facts it forgot)")


@router.delete("", responses=documented(404))
async def forget(user: User, parts: Parts) -> Forgotten:
    """Clear the facts the `memory` hook keeps about the caller; 404 when no `memory` hook is loaded."""
    try:
        hook = await asyncio.to_thread(parts.kernel.hook, HOOK)
    except ConfigError:
        raise HTTPException(404, f"no {HOOK!r} hook is loaded") from None
    command = hook.raw.get("forget_command", DEFAULT_COMMAND)
    message: JSONObject = {
        "role": "user",
        "content": command if isinstance(command, str) else DEFAULT_COMMAND,
    }
    run = await parts.kernel.arun_hooks([hook], message, parts.kernel.caller(user_id=user))  # on the pool
    failed = [record.error for record in run.records if record.error is not None]
    if failed or run.before.reply is None:
        raise RuntimeError(f"the {HOOK} hook did not forget: {failed or 'it did not reply'}")
    return Forgotten(reply=run.before.reply, notices=run.before.notices)
