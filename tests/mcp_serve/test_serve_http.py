"""`/mcp` in `agentkernel serve` on 127.0.0.1 (real uvicorn), driven by the official SDK's client (issue 16).

Who calls is decided as on every other route (server/identity.py): a bearer
token, or `local` on loopback when no tokens are configured. `/mcp/{template}`
offers only that template's tools (S16.3).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from agentkernel.config.server import token_hash
from tests.conftest import wait_until
from tests.mcp_serve.conftest import (
    ACCEPT,
    INITIALIZE,
    WAIT_SECS,
    ListChanged,
    add_tool,
    live_server,
    run,
    text_of,
)
from tests.server.conftest import ROW_SECRET, LiveServer, script_tool

pytestmark = pytest.mark.across_deployments  # S27.3: on the project's files and on PostgreSQL

TOKENS = {"alice-token": "alice", "bob-token": "bob"}


@pytest.fixture
def with_tokens(mcp_project: Path) -> Iterator[LiveServer]:
    lines = "".join(f'    "{token_hash(token)}": {user}\n' for token, user in TOKENS.items())
    with live_server(mcp_project, "server:\n  tokens:\n" + lines) as live:
        yield live


@pytest.fixture
def local(mcp_project: Path) -> Iterator[LiveServer]:
    with live_server(mcp_project) as live:
        yield live


def test_a_missing_or_unknown_token_is_refused(with_tokens: LiveServer) -> None:
    with with_tokens.client() as http:
        for headers in ({}, {"Authorization": "Bearer mallory-token"}, {"Authorization": "alice-token"}):
            answer = http.post("/mcp", json=INITIALIZE, headers={**ACCEPT, **headers})
            assert answer.status_code == 401, answer.text
            assert answer.headers["www-authenticate"] == "Bearer"
            assert answer.json()["detail"] == "a valid bearer token is required"
        answer = http.post("/mcp", json=INITIALIZE, headers={**ACCEPT, "Authorization": "Bearer bob-token"})
        assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_token_is_the_identity_and_results_keep_text_and_blocks_apart(
    with_tokens: LiveServer, mcp_project: Path, mode: str
) -> None:
    async def body(client: Client) -> None:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        assert names == ["boom", "other", "recall", "remember", "table", "upper"]
        said = text_of(await client.call_tool("remember", {"note": f"alice via {mode}"}))
        user, _, scratch = said.split("|")
        assert (user, scratch) == ("alice", "scratch")
        table = await client.call_tool("table", {"n": 1})
        assert text_of(table) == "1 rows shown to the user"
        assert table.structured_content["blocks"][0]["rows"] == [{"id": 0, "secret": ROW_SECRET}]
        assert (await client.call_tool("boom", {})).is_error

    run(with_tokens.url + "/mcp", body, token="alice-token", mode=mode)
    kernel = with_tokens.kernel
    assert kernel.run_tool("recall", {}, kernel.caller(user_id="alice")).content == f"alice via {mode}"
    assert kernel.run_tool("recall", {}, kernel.caller(user_id="bob")).content == "null"


def test_a_file_block_leaves_as_a_download_for_its_owner_never_as_a_server_path(
    with_tokens: LiveServer, mcp_project: Path
) -> None:
    script_tool(
        mcp_project / "config" / "scripts" / "tools",
        "report",
        "function run() { fs_write('r.txt', 'the report');"
        " return {content: 'written', visual: {type: 'file', name: 'r.txt', path: 'r.txt'}}; }",
    )
    blocks: list[Any] = []

    async def body(client: Client) -> None:
        report = await client.call_tool("report", {})
        assert text_of(report) == "written", report
        blocks.extend(report.structured_content["blocks"])

    run(with_tokens.url + "/mcp", body, token="alice-token")
    (block,) = blocks
    assert "path" not in block and str(mcp_project) not in json.dumps(block)
    with with_tokens.client(headers={"Authorization": "Bearer alice-token"}) as alice:
        assert alice.get(block["download"]["url"]).text == "the report"
    with with_tokens.client(headers={"Authorization": "Bearer bob-token"}) as bob:
        assert bob.get(block["download"]["url"]).status_code == 404


def test_a_template_path_offers_only_its_tools(with_tokens: LiveServer) -> None:
    async def body(client: Client) -> None:
        assert sorted(t.name for t in (await client.list_tools()).tools) == ["table", "upper"]
        with pytest.raises(MCPError, match=r"unknown tool 'other' in template 'tester'"):
            await client.call_tool("other", {})

    run(with_tokens.url + "/mcp/tester", body, token="bob-token")
    with with_tokens.client(headers={"Authorization": "Bearer bob-token"}) as http:
        answer = http.post("/mcp/nobody", json=INITIALIZE, headers=ACCEPT)
        assert answer.status_code == 404
        assert answer.json()["detail"] == UNKNOWN.format(name="nobody")


UNKNOWN = (
    "no MCP server at /mcp/{name}: no template '{name}' that loads "
    "(the templates' servers: /mcp/tester; /mcp serves every tool you may call)"
)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_mcp_client_asking_for_an_unknown_server_sees_why_and_what_is_served(
    with_tokens: LiveServer, mode: str
) -> None:
    """The client showed `Not Found` (-32601) for /mcp/nosuch: the 404's body is a JSON-RPC error too."""

    async def body(client: Client) -> None:
        raise AssertionError("the session must not open")

    with pytest.raises(BaseException) as caught:
        run(with_tokens.url + "/mcp/nosuch", body, token="bob-token", mode=mode)
    errors = [e for e in leaves(caught.value) if isinstance(e, MCPError)]
    assert [(e.code, str(e)) for e in errors] == [(-32600, UNKNOWN.format(name="nosuch"))], caught.value
    with with_tokens.client(headers={"Authorization": "Bearer bob-token"}) as http:
        answer = http.post("/mcp/nosuch", json=INITIALIZE, headers=ACCEPT)
    shown = answer.json()
    assert (answer.status_code, shown["jsonrpc"], shown["id"]) == (404, "2.0", None)
    assert shown["error"] == {
        "code": -32600,
        "message": UNKNOWN.format(name="nosuch"),
        "type": "not_found_error",
    }
    assert shown["request_id"] == answer.headers["X-Request-Id"]


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or the error itself."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def test_without_tokens_everyone_is_local_and_a_foreign_host_or_origin_is_refused(
    local: LiveServer, mcp_project: Path
) -> None:
    async def body(client: Client) -> None:
        user = text_of(await client.call_tool("remember", {"note": "n"})).split("|")[0]
        assert user == "local"

    run(local.url + "/mcp", body)
    with local.client() as http:  # a web page reaching the loopback server through DNS rebinding
        answer = http.post("/mcp", json=INITIALIZE, headers={**ACCEPT, "Host": "evil.example:80"})
        assert answer.status_code == 403  # the rule of every route (server/identity.py)
        assert "only requests addressed to localhost" in answer.json()["detail"]
        # a page of another site posting to 127.0.0.1 itself: the Origin rule of every route (the SDK's
        # own Origin check stays behind it)
        answer = http.post("/mcp", json=INITIALIZE, headers={**ACCEPT, "Origin": "http://evil.example"})
        assert answer.status_code == 403
        assert "(Origin: 'http://evil.example')" in answer.json()["detail"]


def test_an_added_tool_is_announced_on_a_listen_stream(local: LiveServer, mcp_project: Path) -> None:
    async def body(client: Client) -> None:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(tools_list_changed=True) as subscription:
            add_tool(mcp_project, "added")
            with anyio.fail_after(WAIT_SECS):
                event = await anext(aiter(subscription))
            assert type(event).__name__ == "ToolsListChanged"
        assert "added" in {t.name for t in (await client.list_tools()).tools}

    run(local.url + "/mcp", body)


def test_an_edited_template_is_announced_on_a_handshake_session(local: LiveServer, mcp_project: Path) -> None:
    changed = ListChanged()

    async def main() -> None:
        with anyio.fail_after(WAIT_SECS * 2):
            async with Client(local.url + "/mcp/tester", mode="legacy", message_handler=changed) as client:
                assert sorted(t.name for t in (await client.list_tools()).tools) == ["table", "upper"]
                template = mcp_project / "config" / "templates" / "tester.yaml"
                template.write_text(template.read_text().replace("[upper, table]", "[upper, other]"))
                await changed.wait()
                assert sorted(t.name for t in (await client.list_tools()).tools) == ["other", "upper"]

    anyio.run(main)


def test_stopping_the_server_ends_open_streams_rather_than_waiting_for_them(mcp_project: Path) -> None:
    """A listen stream and a session's notification stream stay open while their clients do; a stop ends them.

    With a grace period far longer than `LiveServer.stop` waits, a stop that
    waited for them would fail there ("the server did not stop").
    """
    live = live_server(mcp_project, "server:\n  shutdown_grace_secs: 3600\n").__enter__()
    streaming, said = threading.Event(), []

    async def clients() -> None:
        changed = ListChanged()
        async with (
            Client(live.url + "/mcp", mode="legacy", message_handler=changed) as old,
            Client(live.url + "/mcp") as new,
        ):
            await old.list_tools()
            async with new.listen(tools_list_changed=True) as subscription:
                add_tool(mcp_project, "added")
                await changed.wait()  # the handshake session's notification stream is open: it carried this
                await anext(aiter(subscription))
                streaming.set()
                async for event in subscription:
                    said.append(f"unexpected {event}")
                said.append("the listen stream was closed gracefully")

    def in_thread() -> None:
        try:
            anyio.run(clients)
        except BaseException as exc:  # the handshake client's goodbye finds no server: expected
            said.append(f"client ended: {type(exc).__name__}")

    thread = threading.Thread(target=in_thread, daemon=True)
    thread.start()
    assert streaming.wait(WAIT_SECS * 2)
    live.stop()
    thread.join(WAIT_SECS)
    assert said[0] == "the listen stream was closed gracefully", said


PROBE = """
import asyncio, json, sys
from pathlib import Path
from typing import Any
from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.server.app import create_app

async def main():
    async with Kernel(load_kernel_config(Path(sys.argv[1]))) as kernel:
        app = create_app(kernel)
        async with app.router.lifespan_context(app):
            pass
asyncio.run(main())
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types"))))
"""


def test_serving_without_an_mcp_request_never_imports_the_sdk(mcp_project: Path) -> None:
    """Issue 8: `agentkernel serve` starts without paying for `import mcp` (~1.5 s)."""
    config = mcp_project / "config" / "kernel.yaml"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(config)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_endpoint_is_not_in_the_rest_api_and_answers_json_errors(local: LiveServer) -> None:
    with local.client() as http:
        assert not any(path.startswith("/mcp") for path in http.get("/openapi.json").json()["paths"])
        answer = http.post("/mcp", content=b"{not json", headers=ACCEPT)
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == -32700  # JSON-RPC's parse error, from the SDK


def test_a_handshake_session_answers_only_the_user_who_opened_it(with_tokens: LiveServer) -> None:
    """S18, and docs/security.md's rule that user B never reaches user A's data: an MCP session id is
    bound to the token's user. Before, bob holding alice's `Mcp-Session-Id` (a log, a proxy, a shared
    screen) could end her session or make calls in it; now he gets the 404 of an unknown session."""
    alice = {**ACCEPT, "Authorization": "Bearer alice-token"}
    bob = {**ACCEPT, "Authorization": "Bearer bob-token"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    with with_tokens.client() as http:
        opened = http.post("/mcp", json=INITIALIZE, headers=alice)
        assert opened.status_code == 200, opened.text
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        assert http.post("/mcp", json=listing, headers={**bob, **session}).status_code == 404
        assert http.delete("/mcp", headers={**bob, **session}).status_code == 404
        assert http.get("/mcp", headers={**bob, **session}).status_code == 404
        assert http.delete("/mcp", headers={**alice, **session}).status_code == 200  # still hers, still open
        assert http.delete("/mcp", headers={**alice, **session}).status_code == 404  # and now ended


def capped(project: Path, extra: str) -> LiveServer:
    lines = "".join(f'    "{token_hash(token)}": {user}\n' for token, user in TOKENS.items())
    return live_server(project, "server:\n  tokens:\n" + lines + extra)


def initialize(http: httpx.Client, token: str) -> httpx.Response:
    return http.post("/mcp", json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {token}"})


def ending(token: str, opened: httpx.Response) -> dict[str, str]:
    """The headers that name `opened`'s session, for its user."""
    session = opened.headers["mcp-session-id"]
    return {
        "Authorization": f"Bearer {token}",
        "Mcp-Session-Id": session,
        "Mcp-Protocol-Version": "2025-11-25",
    }


def test_a_user_past_the_session_cap_is_refused_until_one_of_theirs_ends(mcp_project: Path) -> None:
    """Before, the SDK's only limit was 10,000 sessions shared by everyone: one token could open them
    all and everyone else got 503. Now each user holds at most server.max_mcp_sessions_per_user."""
    with capped(mcp_project, "  max_mcp_sessions_per_user: 2\n") as live, live.client() as http:
        first, second = initialize(http, "alice-token"), initialize(http, "alice-token")
        assert first.status_code == second.status_code == 200, (first.text, second.text)
        refused = initialize(http, "alice-token")
        assert refused.status_code == 429, refused.text
        assert "user 'alice' has 2 MCP sessions open" in refused.json()["detail"]
        assert "server.max_mcp_sessions_per_user (2)" in refused.json()["detail"]
        assert initialize(http, "bob-token").status_code == 200  # another user's slots are their own
        assert http.delete("/mcp", headers=ending("alice-token", first)).status_code == 200
        again = initialize(http, "alice-token")
        assert again.status_code == 200, again.text
        assert initialize(http, "alice-token").status_code == 429

        async def listing(client: Client) -> None:
            assert (await client.list_tools()).tools != []

        run(f"{live.url}/mcp", listing, token="alice-token", mode="2026-07-28")  # no session: not capped


def test_an_expired_session_frees_its_slot(mcp_project: Path) -> None:
    extra = "  max_mcp_sessions_per_user: 1\n  mcp_session_idle_secs: 0.2\n"
    with capped(mcp_project, extra) as live, live.client() as http:
        opened = initialize(http, "alice-token")
        assert opened.status_code == 200, opened.text
        stale = {**ACCEPT, **ending("alice-token", opened)}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        wait_until(lambda: initialize(http, "alice-token").status_code == 200, "the idle session to end")
        assert http.post("/mcp", json=listing, headers=stale).status_code == 404  # it did end
