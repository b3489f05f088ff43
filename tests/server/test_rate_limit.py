"""server.requests_per_user_per_sec on a real server: a user past their rate gets 429 on every route,
with `Retry-After`, while another user is served, and is served again once the wait is over.

Before, the per-user caps bounded only the work running at once: one token
flooding `POST /v1/sessions` (hundreds a second) made another user's turns
five times slower. The rates here are set tiny, so that what one request
costs never decides an outcome: 0.001 a second is one request in 1000 s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentkernel import Kernel
from agentkernel.config import ServerSettings, load_kernel_config
from agentkernel.config.server import token_hash
from tests.conftest import wait_until
from tests.fakes import FakeLLMServer, Reply
from tests.mcp_serve.test_serve_http import initialize
from tests.server.conftest import LiveServer, sse_events

ALICE, BOB = {"Authorization": "Bearer alice-token"}, {"Authorization": "Bearer bob-token"}
TOKENS = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}
RATE_SETTING = "server.requests_per_user_per_sec"
MOST_TRIES = 1000  # a burst of 2 at 2 a second is spent long before this many requests, however slow


def serving(kernel_yaml: Path, **settings: object) -> LiveServer:
    return LiveServer(Kernel(load_kernel_config(kernel_yaml)), ServerSettings(**settings))  # type: ignore[arg-type]


@pytest.fixture
def held(kernel_yaml: Path) -> Iterator[LiveServer]:
    """A server where alice's first three requests have spent her bucket for the next 1000 s; bob may
    send three."""
    live = serving(kernel_yaml, tokens=TOKENS, requests_per_user_per_sec=0.001, request_burst_per_user=3)
    with live, live.client() as client:
        assert [client.get("/v1/sessions", headers=ALICE).status_code for _ in range(3)] == [200] * 3
        yield live


def assert_refused(answer: httpx.Response, rate: str, wait: int | None = None) -> None:
    """A 429 of the rate limit: the house's error body naming the setting and the rate, `Retry-After`."""
    assert answer.status_code == 429, (answer.request.method, answer.request.url, answer.text)
    body = answer.json()
    assert f"{RATE_SETTING} ({rate} a second" in body["detail"] and "user 'alice'" in body["detail"]
    assert body["request_id"] == answer.headers["x-request-id"]
    assert body["error"] == {"message": body["detail"], "type": "rate_limit_error"}
    assert int(answer.headers["retry-after"]) >= 1
    if wait is not None:
        assert answer.headers["retry-after"] == str(wait)


def test_every_route_refuses_a_user_past_the_rate_and_serves_another(
    held: LiveServer, llm_server: FakeLLMServer
) -> None:
    """The API, the OpenAI-compatible routes, /mcp and /metrics: each refuses alice at once (the route,
    its body and its dependencies untouched), and bob's turn is answered meanwhile."""
    llm_server.add(Reply(text="bob is answered"))
    with held.client() as client:
        paths = client.get("/openapi.json").json()["paths"]  # no token: counted for nobody
        asked = [
            (method, re.sub(r"\{[^}]+\}", "x1", path))
            for path, methods in paths.items()
            for method in methods
        ]
        asked += [("post", "/mcp"), ("post", "/mcp/tester"), ("get", "/metrics"), ("get", "/")]
        for method, path in asked:
            assert_refused(client.request(method.upper(), path, headers=ALICE), "0.001", 1000)
        assert_refused(initialize(client, "alice-token"), "0.001")
        completion = {"model": "tester", "messages": [{"role": "user", "content": "hi"}]}
        assert_refused(client.post("/v1/chat/completions", json=completion, headers=ALICE), "0.001")
        session = client.post("/v1/sessions", json={"template": "tester"}, headers=BOB).json()["id"]
        turn = client.post(f"/v1/sessions/{session}/messages", json={"content": "hi"}, headers=BOB)
        assert ("reply", {"content": "bob is answered", "streamed": True}) in sse_events(turn.text)
        assert initialize(client, "bob-token").status_code == 200


def test_a_user_is_served_again_once_the_retry_after_is_over(kernel_yaml: Path) -> None:
    live = serving(kernel_yaml, tokens=TOKENS, requests_per_user_per_sec=2.0, request_burst_per_user=2)
    with live, live.client() as client:
        answers = (client.get("/v1/sessions", headers=ALICE) for _ in range(MOST_TRIES))
        refused = next((answer for answer in answers if answer.status_code != 200), None)
        assert refused is not None, f"{MOST_TRIES} requests at once, none refused"
        assert_refused(refused, "2", wait=1)
        assert client.get("/v1/sessions", headers=BOB).status_code == 200
        wait_until(lambda: client.get("/v1/sessions", headers=ALICE).status_code == 200, "alice served again")


@pytest.mark.parametrize(
    ("settings", "headers"),
    [
        ({}, {}),  # no tokens: everyone is `local`, with nobody else to protect
        ({"tokens": TOKENS, "requests_per_user_per_sec": None}, ALICE),  # null: no limit
    ],
    ids=["no tokens", "null"],
)
def test_nobody_is_held_without_tokens_or_with_a_null_rate(
    kernel_yaml: Path, settings: dict[str, object], headers: dict[str, str]
) -> None:
    live = serving(
        kernel_yaml, **{"request_burst_per_user": 1, "requests_per_user_per_sec": 0.001, **settings}
    )
    with live, live.client() as client:
        assert [client.get("/v1/sessions", headers=headers).status_code for _ in range(5)] == [200] * 5


def test_an_unknown_token_is_left_to_the_route_s_401_and_never_counted(held: LiveServer) -> None:
    with held.client() as client:
        stranger = {"Authorization": "Bearer nobody's"}
        assert {client.get("/v1/sessions", headers=stranger).status_code for _ in range(5)} == {401}
        assert client.get("/healthz", headers=stranger).status_code == 200
        assert client.get("/v1/sessions", headers=BOB).status_code == 200
