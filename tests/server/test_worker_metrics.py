"""A worker's metrics page (server/worker_metrics.py): a token's user is held to their request rate too."""

from __future__ import annotations

import httpx

from agentkernel.config.server import ServerSettings, token_hash
from agentkernel.config.telemetry import TelemetrySettings
from agentkernel.server.worker_metrics import MetricsPage

ALICE, BOB = {"Authorization": "Bearer alice-token"}, {"Authorization": "Bearer bob-token"}


def test_a_user_past_the_rate_is_refused_with_retry_after_and_another_is_served() -> None:
    tokens = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}
    settings = ServerSettings(tokens=tokens, requests_per_user_per_sec=0.001, request_burst_per_user=1)
    page = MetricsPage("127.0.0.1", 0, settings, TelemetrySettings(), lambda: 0)
    try:
        assert httpx.get(page.url, headers=ALICE).status_code == 200
        refused = httpx.get(page.url, headers=ALICE)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1000"
        assert "server.requests_per_user_per_sec (0.001 a second" in refused.text
        assert httpx.get(page.url, headers=BOB).status_code == 200
        assert httpx.get(page.url, headers={"Authorization": "Bearer wrong"}).status_code == 401
    finally:
        page.close()
