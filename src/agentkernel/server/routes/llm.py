"""`GET /v1/llm/status`: does the configured LLM answer, and if not, why and how to fix it.

The page reads it at load and shows a status line while the LLM cannot be
used; the answer is llm_status.py's last check, made again when stale (at
most one check at a time, each a few seconds at most).
"""

from __future__ import annotations

from fastapi import APIRouter

from agentkernel.server.identity import Parts, User
from agentkernel.server.problems import CALLER, documented

router = APIRouter(prefix="/v1/llm", tags=["llm"], responses=documented(*CALLER))


@router.get("/status")
async def llm_status(_: User, parts: Parts) -> dict[str, object]:
    """`{ok, configured, url, model, problem, hint, fix, checked_at}`: the LLM server as last checked."""
    return (await parts.llm.status()).to_json()
