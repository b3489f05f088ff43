"""`GET /healthz`: 200 once the kernel is loaded (the app exists only around a loaded kernel)."""

from __future__ import annotations

from fastapi import APIRouter

from agentkernel.server.problems import documented

router = APIRouter(tags=["health"], responses=documented(500))


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
