"""Clients beyond loopback (issue 11 section 3; S23.6): with no tokens, 403; with tokens, the token decides.

`agentkernel serve` refuses to listen beyond loopback without tokens
(test_serve_cli.py, test_settings.py); this is the second wall, for the app
served some other way: a request whose client address is not loopback. The
app is driven as ASGI with such a client address (httpx's ASGITransport),
and through the real server as a reverse proxy on loopback would reach it,
naming the real client in `X-Forwarded-For` (uvicorn trusts that header
from 127.0.0.1 only).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.server.app import create_app
from tests.server.conftest import LiveServer, make_project

REMOTE = ("10.0.0.5", 1234)
NO_TOKENS = "no tokens are configured, so only loopback clients are served"


def answers(
    kernel_yaml: Path, client: tuple[str, int], headers: dict[str, str], base_url: str = "http://127.0.0.1"
) -> dict[str, httpx.Response]:
    """The answers to a few requests from `client`, through the whole app (middleware, identity, routes)."""

    async def ask() -> dict[str, httpx.Response]:
        with Kernel(load_kernel_config(kernel_yaml)) as kernel:
            transport = httpx.ASGITransport(app=create_app(kernel), client=client)
            async with httpx.AsyncClient(transport=transport, base_url=base_url, headers=headers) as http:
                return {
                    "sessions": await http.get("/v1/sessions"),
                    "new session": await http.post("/v1/sessions", json={"template": "tester"}),
                    "tools": await http.get("/v1/tools"),
                    "tool run": await http.post("/v1/tools/upper/run", json={"args": {"text": "a"}}),
                    "health": await http.get("/healthz"),
                }

    return asyncio.run(ask())


def test_without_tokens_a_client_beyond_loopback_is_refused(tmp_path: Path) -> None:
    kernel_yaml = make_project(tmp_path, None)
    refused = answers(kernel_yaml, REMOTE, {})
    health = refused.pop("health")
    for what, answer in refused.items():
        assert answer.status_code == 403, (what, answer.text)
        assert answer.json()["detail"] == NO_TOKENS
        assert answer.json()["request_id"] == answer.headers["x-request-id"]
    assert health.status_code == 200  # it says nothing about anyone
    for loopback in (("127.0.0.1", 1234), ("::1", 1234)):
        served = answers(kernel_yaml, loopback, {})
        assert {what: a.status_code for what, a in served.items()} == {
            "sessions": 200,
            "new session": 201,
            "tools": 200,
            "tool run": 200,
            "health": 200,
        }


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Authorization": "Bearer alice-token"}, 200),
        ({}, 401),
        ({"Authorization": "Bearer not-a-token"}, 401),
    ],
)
def test_with_tokens_the_token_decides_wherever_the_client_is(
    tmp_path: Path, headers: dict[str, str], status: int
) -> None:
    tokens = f'server:\n  tokens:\n    "{token_hash("alice-token")}": alice\n'
    got = answers(make_project(tmp_path, None, tokens), REMOTE, headers)
    assert got["sessions"].status_code == status, got["sessions"].text
    assert got["tools"].status_code == status
    assert got["new session"].status_code == (201 if status == 200 else 401)
    if status == 401:
        assert got["sessions"].headers["www-authenticate"] == "Bearer"
    else:
        assert got["tool run"].json()["content"] == "A"


def test_a_reverse_proxy_on_loopback_forwarding_a_remote_client_is_refused_without_tokens(
    tmp_path: Path,
) -> None:
    with (
        LiveServer(Kernel(load_kernel_config(make_project(tmp_path, None)))) as live,
        live.client() as client,
    ):
        assert client.get("/v1/sessions").status_code == 200  # the proxy itself, on loopback
        forwarded = client.get("/v1/sessions", headers={"X-Forwarded-For": "10.0.0.5"})
        assert forwarded.status_code == 403 and forwarded.json()["detail"] == NO_TOKENS
        local = client.get("/v1/sessions", headers={"X-Forwarded-For": "127.0.0.1"})
        assert local.status_code == 200


@pytest.mark.parametrize(
    "base_url",
    ["http://evil.example", "http://evil.example:8765", "http://127.0.0.1.nip.io:8765", "http://10.0.0.5"],
)
def test_without_tokens_a_request_addressed_to_another_name_is_refused(tmp_path: Path, base_url: str) -> None:
    """DNS rebinding (S23.6): a page of evil.example re-pointed at 127.0.0.1 comes from loopback, but its Host
    header still names evil.example; without tokens that is refused, whatever the route."""
    refused = answers(make_project(tmp_path, None), ("127.0.0.1", 1234), {}, base_url)
    assert refused.pop("health").status_code == 200
    host = base_url.removeprefix("http://")
    for what, answer in refused.items():
        assert answer.status_code == 403, (what, answer.text)
        assert f"(Host: {host!r})" in answer.json()["detail"]
        assert "configure server.tokens" in answer.json()["detail"]


@pytest.mark.parametrize(
    "base_url", ["http://localhost:8765", "http://LOCALHOST", "http://[::1]:8765", "http://127.0.0.2"]
)
def test_without_tokens_loopback_names_are_served(tmp_path: Path, base_url: str) -> None:
    served = answers(make_project(tmp_path, None), ("127.0.0.1", 1234), {}, base_url)
    assert served["sessions"].status_code == 200 and served["tool run"].json()["content"] == "A"


def test_with_tokens_the_host_header_does_not_matter(tmp_path: Path) -> None:
    """Behind a token a rebinding page has nothing: it cannot read the token; any name is served."""
    tokens = f'server:\n  tokens:\n    "{token_hash("alice-token")}": alice\n'
    got = answers(
        make_project(tmp_path, None, tokens),
        ("127.0.0.1", 1234),
        {"Authorization": "Bearer alice-token"},
        "http://agents.example.com",
    )
    assert got["tool run"].json()["content"] == "A"


def test_the_real_server_refuses_a_rebound_host_without_tokens(tmp_path: Path) -> None:
    with (
        LiveServer(Kernel(load_kernel_config(make_project(tmp_path, None)))) as live,
        live.client() as client,
    ):
        assert client.get("/v1/sessions").status_code == 200
        rebound = client.get("/v1/sessions", headers={"Host": "evil.example:8765"})
        assert rebound.status_code == 403 and "'evil.example:8765'" in rebound.json()["detail"]


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "http://127.0.0.1.nip.io:8765", "null", "file://", "http://[::1"]
)
def test_without_tokens_a_page_of_another_site_is_refused_by_its_origin(tmp_path: Path, origin: str) -> None:
    """S23.6 (CSRF): a page of evil.example posting to http://127.0.0.1:8765 itself needs no rebinding:
    its Host names loopback. A body with no Content-Type (fetch with a Blob) or a POST with no body
    (`/stop`) goes without a CORS preflight, and FastAPI before 0.132 read such a body as JSON, so the
    page could run a turn of the user's agent. The browser names the page in `Origin`: only loopback
    pages are served (the rule the MCP SDK applies to /mcp)."""
    refused = answers(make_project(tmp_path, None), ("127.0.0.1", 1234), {"Origin": origin})
    assert refused.pop("health").status_code == 200
    for what, answer in refused.items():
        assert answer.status_code == 403, (what, answer.text)
        assert f"(Origin: {origin!r})" in answer.json()["detail"]


@pytest.mark.parametrize("origin", ["http://127.0.0.1:8765", "http://localhost:3000", "http://[::1]:8765"])
def test_without_tokens_a_loopback_page_is_served(tmp_path: Path, origin: str) -> None:
    served = answers(make_project(tmp_path, None), ("127.0.0.1", 1234), {"Origin": origin})
    assert served["sessions"].status_code == 200 and served["tool run"].json()["content"] == "A"


def test_with_tokens_the_origin_does_not_matter(tmp_path: Path) -> None:
    """A page of another site has no token to send; a client that has one may be any page (its own UI)."""
    tokens = f'server:\n  tokens:\n    "{token_hash("alice-token")}": alice\n'
    headers = {"Authorization": "Bearer alice-token", "Origin": "https://agents.example.com"}
    got = answers(make_project(tmp_path, None, tokens), ("127.0.0.1", 1234), headers)
    assert got["tool run"].json()["content"] == "A"


def test_a_body_without_content_type_is_not_read_as_json(client: httpx.Client) -> None:
    """The other half of the CSRF wall (pyproject pins fastapi>=0.132 for it): `fetch` with a Blob body
    sends no Content-Type and no preflight; such a body is refused, never run."""
    answer = client.post("/v1/tools/upper/run", content=b'{"args": {"text": "a"}}')
    assert "content-type" not in answer.request.headers
    assert answer.status_code == 422, answer.text
