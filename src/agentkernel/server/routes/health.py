"""`GET /healthz`: 200 once the kernel is loaded (the app exists only around a loaded kernel)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
