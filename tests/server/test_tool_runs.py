"""Tool runs outside turns — the API (and the page's panel), `/mcp`, continuations — are counted and budgeted.

Issue 24: 24 parallel `POST /v1/tools/ask_llm/run` waiting on a slow LLM
took every worker, and a run in a session skipped its template's token
budget (150 `llm()` calls through the API in a 1,500-token template). Now a
user has at most server.max_running_tool_runs_per_user runs going, every
route together (429, or an MCP error result, naming the setting), and a run
spends its session's budget group, or server.tool_run_token_budget.

Real uvicorn (LiveServer), real QuickJS, the scripted LLM; a run is held
going by an LLM answer that waits for the test, never by sleeping.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI
from mcp import Client

from agentkernel import Kernel
from agentkernel.config import ServerSettings, load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.server.rate_limit import UserRateLimit
from tests.conftest import wait_until
from tests.fakes import FakeLLMServer, RecordedRequest, Reply
from tests.fakes.openai_server import Exchange, Turn
from tests.mcp_serve.conftest import run as mcp_run
from tests.mcp_serve.conftest import text_of
from tests.server.conftest import LiveServer, make_project, script_tool, sse_events, write

pytestmark = pytest.mark.across_deployments  # S27.3: on the project's files and on PostgreSQL

ALICE, BOB = {"Authorization": "Bearer alice-token"}, {"Authorization": "Bearer bob-token"}
TOKENS = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}
BUDGET = 1_500  # the `budgeted` template's, and the session-less runs' in the budget tests
CALL_TOKENS = 150  # what the scripted LLM reports for each answer: about ten fit in BUDGET
MOST_CALLS = 50  # `spender` stops asking by itself after this many (the code before never said no)

SPENDER = f"""
function run(args) {{
  var calls = 0, error = null;
  for (; calls < {MOST_CALLS}; calls++) {{
    try {{ llm('spend ' + calls); }} catch (e) {{ error = String(e.message || e); break; }}
  }}
  var row = {{calls: calls, error: error}};
  return {{content: JSON.stringify(row),
           visual: {{type: 'table', columns: [{{key: 'calls'}}, {{key: 'error'}}], rows: [row],
                    continuation: {{args: {{}}}}}}}};
}}
"""
PAGED = """
function run(args) {
  return {content: 'a page', visual: {type: 'table', columns: [{key: 'n'}], rows: [{n: 1}],
                                      continuation: {args: {}}}};
}
"""


@dataclass(frozen=True)
class Held:
    """An LLM answer that waits until the test opens `gate` (the test's `finally` opens it)."""

    gate: threading.Event
    reply: Reply = field(default_factory=lambda: Reply(text="after the gate"))

    def answer(self, exchange: Exchange) -> None:
        self.gate.wait()
        self.reply.answer(exchange)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    opened = threading.Event()
    try:
        yield opened
    finally:
        opened.set()


def said(request: RecordedRequest) -> str:
    return json.dumps(request.body.get("messages", []), ensure_ascii=False)


@pytest.fixture
def project(tmp_path: Path, llm_server: FakeLLMServer) -> Path:
    """Tools `ask_llm` (one `llm()` call), `spender` (calls until refused), `paged` (a table with a next
    page), template `budgeted`."""
    make_project(tmp_path, llm_server)
    tools = tmp_path / "config" / "scripts" / "tools"
    script_tool(tools, "ask_llm", "function run(args) { return llm(args.q); }")
    script_tool(tools, "paged", PAGED)
    script_tool(tools, "spender", SPENDER)
    templates = tmp_path / "config" / "templates"
    write(
        templates / "budgeted.yaml",
        f"name: budgeted\ninstructions: Spend.\ntools: [spender]\nbudget: {{tokens: {BUDGET}}}\n",
    )
    return tmp_path


def serve(project: Path, **settings: Any) -> LiveServer:
    kernel = Kernel(load_kernel_config(project / "config" / "kernel.yaml"))
    return LiveServer(kernel, ServerSettings(tokens=TOKENS, **settings))


def run_tool(
    client: httpx.Client, name: str, body: dict[str, Any], headers: dict[str, str]
) -> httpx.Response:
    return client.post(f"/v1/tools/{name}/run", json=body, headers=headers)


def refused_for(answer: httpx.Response, running: int, most: int) -> None:
    assert answer.status_code == 429, answer.text
    detail = answer.json()["detail"]
    assert f"user 'alice' has {running} tool runs running" in detail, detail
    assert f"server.max_running_tool_runs_per_user ({most})" in detail, detail
    assert answer.json()["error"]["type"] == "rate_limit_error"


def tool_runs_of(live: LiveServer, user: str) -> int:
    assert live.server is not None
    app = live.server.config.app
    if isinstance(app, UserRateLimit):  # the layer around the app (serving.server_for)
        app = app.app
    assert isinstance(app, FastAPI)
    running: int = app.state.parts.tool_runs.running_of(user)
    return running


# -- the cap (item 6) ---------------------------------------------------------------------------------


def test_the_fifth_parallel_tool_run_is_429_on_every_route_while_another_users_goes_through(
    project: Path, llm_server: FakeLLMServer, gate: threading.Event
) -> None:
    """Four of alice's runs wait on the LLM; her fifth — by the API, over MCP, as a continuation — is
    refused naming the setting, bob's run answers, and once hers end she may run again."""

    def answer(request: RecordedRequest) -> Turn:
        return Reply(text="bob's answer") if "bob" in said(request) else Held(gate)

    llm_server.respond_with(answer)
    with serve(project) as live, live.client() as client, ThreadPoolExecutor(4) as pool:
        paged = run_tool(client, "paged", {}, ALICE)  # no LLM call: a next page to ask for
        page_id = paged.json()["visual"][0]["continuation"]["id"]
        ask = {"args": {"q": "alice asks"}}
        held: list[Future[httpx.Response]] = [
            pool.submit(run_tool, client, "ask_llm", ask, ALICE) for _ in range(4)
        ]
        wait_until(lambda: len(llm_server.requests) == 4, "four runs of alice to reach the LLM")
        refused_for(run_tool(client, "ask_llm", ask, ALICE), 4, 4)
        refused_for(client.post("/v1/continuations", json={"id": page_id}, headers=ALICE), 4, 4)

        async def over_mcp(mcp: Client) -> None:
            result = await mcp.call_tool("ask_llm", {"q": "alice over mcp"})
            assert result.is_error
            assert "user 'alice' has 4 tool runs running" in text_of(result)
            assert "server.max_running_tool_runs_per_user (4)" in text_of(result)

        mcp_run(live.url + "/mcp", over_mcp, token="alice-token")
        bobs = run_tool(client, "ask_llm", {"args": {"q": "bob asks"}}, BOB)
        assert bobs.status_code == 200 and bobs.json()["content"] == "bob's answer", bobs.text
        assert len(llm_server.requests) == 5  # the refused runs never reached the LLM
        gate.set()
        assert [f.result().json()["content"] for f in held] == ["after the gate"] * 4
        assert tool_runs_of(live, "alice") == 0
        assert run_tool(client, "table", {"args": {"n": 1}}, ALICE).status_code == 200


def test_the_count_drops_when_a_run_fails_or_its_script_throws(
    project: Path, llm_server: FakeLLMServer
) -> None:
    script_tool(project / "config" / "scripts" / "tools", "boom", "function run() { throw new Error('no'); }")
    with serve(project, max_running_tool_runs_per_user=1) as live, live.client() as client:
        for _ in range(3):
            failed = run_tool(client, "boom", {}, ALICE)
            assert failed.status_code == 200 and failed.json()["success"] is False, failed.text
            invalid = run_tool(client, "upper", {"args": {"text": 5}}, ALICE)  # refused by validation
            assert invalid.status_code == 200 and invalid.json()["success"] is False, invalid.text
        assert tool_runs_of(live, "alice") == 0
        assert run_tool(client, "upper", {"args": {"text": "ok"}}, ALICE).json()["content"] == "OK"


def test_an_mcp_call_its_client_cancels_keeps_its_slot_until_its_script_ends(
    project: Path, llm_server: FakeLLMServer, gate: threading.Event
) -> None:
    """The script goes on waiting for the LLM on its worker thread after a cancel; before, the cancel
    freed its slot at once, and a client could call, cancel and call again without end."""
    llm_server.respond_with(lambda request: Held(gate) if "held" in said(request) else Reply(text="free"))
    with serve(project, max_running_tool_runs_per_user=1) as live, live.client() as client:

        async def call_and_cancel(mcp: Client) -> None:
            async with anyio.create_task_group() as group:
                group.start_soon(mcp.call_tool, "ask_llm", {"q": "held"})
                while not llm_server.requests:  # the call's script is waiting for the LLM
                    await anyio.sleep(0.02)
                group.cancel_scope.cancel()
            for _ in range(2):  # the cancel has reached the server, and requests after it were answered
                await mcp.list_tools()

        mcp_run(live.url + "/mcp", call_and_cancel, token="alice-token")
        refused_for(run_tool(client, "ask_llm", {"args": {"q": "free"}}, ALICE), 1, 1)
        gate.set()
        wait_until(lambda: tool_runs_of(live, "alice") == 0, "the cancelled call's script to end")
        assert run_tool(client, "ask_llm", {"args": {"q": "free"}}, ALICE).json()["content"] == "free"


# -- the budgets (item 7) -----------------------------------------------------------------------------


@pytest.fixture
def priced(llm_server: FakeLLMServer) -> FakeLLMServer:
    """Every answer costs CALL_TOKENS tokens."""
    llm_server.respond_with(lambda _: Reply(text="spent", prompt_tokens=100, completion_tokens=50))
    return llm_server


def spent(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200 and answer.json()["success"] is True, answer.text
    row: dict[str, Any] = json.loads(answer.json()["content"])
    return row


def test_a_run_in_a_session_spends_the_sessions_budget_with_its_turns(
    project: Path, priced: FakeLLMServer
) -> None:
    """Before, the run asked the LLM MOST_CALLS times (and would have gone on until its timeout)."""
    with serve(project) as live, live.client() as client:
        made = client.post("/v1/sessions", json={"template": "budgeted"}, headers=ALICE)
        session = made.json()["id"]
        first = spent(run_tool(client, "spender", {"args": {}, "session": session}, ALICE))
        assert first["error"] == "caller budget exhausted", first
        assert 0 < first["calls"] <= BUDGET // CALL_TOKENS
        assert len(priced.requests) == first["calls"]  # what the scripted server received
        again = spent(run_tool(client, "spender", {"args": {}, "session": session}, ALICE))
        assert again == {"calls": 0, "error": "caller budget exhausted"}  # the same group, spent
        turn = client.post(f"/v1/sessions/{session}/messages", json={"content": "go"}, headers=ALICE)
        assert dict(sse_events(turn.text))["done"] == {"reason": "budget_exhausted"}  # and the turns' too
        assert len(priced.requests) == first["calls"]


def test_a_run_without_a_session_over_mcp_or_as_a_continuation_stops_at_the_default_budget(
    project: Path, priced: FakeLLMServer
) -> None:
    """server.tool_run_token_budget, for each run: a second run has a budget of its own."""
    with serve(project, tool_run_token_budget=BUDGET) as live, live.client() as client:
        runs = [spent(run_tool(client, "spender", {"args": {}}, ALICE)) for _ in range(2)]
        for row in runs:
            assert row["error"] == "caller budget exhausted", row
            assert 0 < row["calls"] <= BUDGET // CALL_TOKENS
        assert len(priced.requests) == sum(row["calls"] for row in runs)
        page = run_tool(client, "spender", {"args": {}}, ALICE).json()["visual"][0]["continuation"]["id"]
        rerun = client.post("/v1/continuations", json={"id": page}, headers=ALICE)
        assert rerun.status_code == 200, rerun.text
        (row,) = rerun.json()["visual"][0]["rows"]
        assert row["error"] == "caller budget exhausted" and 0 < row["calls"] <= BUDGET // CALL_TOKENS

        async def over_mcp(mcp: Client) -> None:
            row = json.loads(text_of(await mcp.call_tool("spender", {})))
            assert row["error"] == "caller budget exhausted" and 0 < row["calls"] <= BUDGET // CALL_TOKENS

        mcp_run(live.url + "/mcp", over_mcp, token="alice-token")
