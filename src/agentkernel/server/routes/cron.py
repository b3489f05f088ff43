"""The caller's cron jobs (S10): list them, cancel one.

Jobs are made by scripts (`schedule_cron`), so there is no POST here: a
client runs the tool that schedules. A job belongs to the user who
scheduled it; another user's job is answered exactly as one that does not
exist (404), as sessions are, so names cannot be probed. The store is
SQLite: the routes are plain functions, run on FastAPI's worker threads.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Response

from agentkernel.server.identity import Parts, User
from agentkernel.server.problems import CALLER, documented

router = APIRouter(prefix="/v1/cron", tags=["cron"], responses=documented(*CALLER))


@router.get("")
def list_jobs(user: User, parts: Parts) -> list[dict[str, Any]]:
    """The caller's jobs by name, each as `list_cron` shows it (docs/scripts.md 8.14)."""
    return [
        {key: value for key, value in job.items() if key != "owner"} for job in parts.kernel.cron_jobs(user)
    ]


@router.delete("/{name}", status_code=204, response_class=Response, responses=documented(404))
def cancel_job(name: str, user: User, parts: Parts) -> Response:
    """Cancel the caller's job `name` (204); 404 when the caller has no job of that name."""
    if not parts.kernel.cancel_cron_job(user, name):
        raise HTTPException(404, f"no job {name!r}")
    return Response(status_code=204)
