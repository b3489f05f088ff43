"""`GET /metrics`: the kernel's metrics in Prometheus text format (S26.2, docs/server.md 16).

Behind the server's bearer tokens like every other route, unless kernel.yaml
says `telemetry.metrics_public: true` (a scraper inside the network then
needs no token). The figures are telemetry/metrics.py's — every worker's,
summed, under `serve --workers N` — and the approvals waiting for a person,
counted in the store as the page is made.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response

from agentkernel.server.identity import Parts, current_user
from agentkernel.server.problems import CALLER, documented
from agentkernel.telemetry import metrics as counted

router = APIRouter(tags=["metrics"], responses=documented(*CALLER))


@router.get("/metrics", response_class=Response)
async def metrics_page(request: Request, parts: Parts) -> Response:
    """The metrics page; 401 without a valid token unless `telemetry.metrics_public`."""
    if not parts.kernel.config.telemetry.metrics_public:
        current_user(request, parts)
    pending = await asyncio.to_thread(parts.kernel.approvals().count_pending)
    accept = request.headers.get("accept", "")  # Prometheus asks for OpenMetrics; curl gets text
    body, content_type = await asyncio.to_thread(counted.page, pending, accept)
    return Response(body, media_type=content_type)
