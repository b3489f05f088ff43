"""One user floods `agentkernel serve` by every route at once; another user's turn still answers (issue 24).

A real `agentkernel serve` (a subprocess) on a project wired to the
scripted LLM, two token users. Every LLM request of alice's flood waits for
the test (a gate), so whatever of hers is admitted stays running: parallel
turns, tool runs through the API, MCP tool calls, continuations, and cron
jobs a tool of hers scheduled. The caps are set low enough here (one of
each kind) that what she may have in flight (three LLM calls) cannot fill
`llm.max_concurrency` (four): the caps alone hold, whatever the order the
LLM's slots are handed out in. Before, every tool run, MCP call and
continuation was admitted and so were all her cron runs: the four slots
were hers, and bob's turn waited for her gate.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp_types import CallToolResult
from prometheus_client.parser import text_string_to_metric_families

from agentkernel.config.server import token_hash
from tests.conftest import wait_until
from tests.fakes import FakeLLMServer, RecordedRequest, Reply
from tests.fakes.openai_server import CHAT_PATH, Exchange, Turn
from tests.mcp_serve.conftest import run as mcp_run
from tests.mcp_serve.conftest import text_of
from tests.server.conftest import make_project, script_tool, sse_events
from tests.server.test_cron_serving import BOB, Served

TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = {"Authorization": "Bearer alice-token"}
FLOOD = "flood"  # in every prompt of alice's: the LLM holds those answers until the gate opens
EACH = 3  # requests of each kind alice sends at once
REFUSED = "agentkernel_cap_refusals_total"
TURN_CAP = "server.max_running_turns_per_user (1)"
RUN_CAP = "server.max_running_tool_runs_per_user (1)"


@dataclass(frozen=True)
class Held:
    gate: threading.Event

    def answer(self, exchange: Exchange) -> None:
        self.gate.wait()
        Reply(text="flood answered").answer(exchange)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    opened = threading.Event()
    try:
        yield opened
    finally:
        opened.set()


def floods(request: RecordedRequest) -> bool:
    """A chat request of alice's flood (not `serve`'s start-up `GET /models`, which has no body)."""
    return request.path == CHAT_PATH and FLOOD in json.dumps(request.body.get("messages", []))


@pytest.fixture
def llm(gate: threading.Event) -> Iterator[FakeLLMServer]:
    def answer(request: RecordedRequest) -> Turn:
        return Held(gate) if floods(request) else Reply(text="bob is answered")

    with FakeLLMServer(max_requests=2000) as server:
        server.respond_with(answer)
        yield server


@pytest.fixture
def project(tmp_path: Path, llm: FakeLLMServer) -> Path:
    tokens = "".join(f'    "{token_hash(token)}": {user}\n' for token, user in TOKENS.items())
    make_project(
        tmp_path,
        None,
        f"llm:\n  base_url: {llm.base_url}\n  model: fake\n  max_retries: 0\n  max_concurrency: 4\n"
        f"server:\n  tokens:\n{tokens}"
        "  max_running_turns_per_user: 1\n  max_running_tool_runs_per_user: 1\n"
        "cron:\n  max_running_per_user: 1\n",
    )
    tools = tmp_path / "config" / "scripts" / "tools"
    script_tool(tools, "ask_llm", "function run(args) { return llm(args.q); }")
    script_tool(tools, "cron_set", "function run(args) { return JSON.stringify(schedule_cron(args)); }")
    script_tool(
        tools,
        "paged",
        "function run(args) { if (args.again) llm(args.again);"
        " return {content: 'page', visual: {type: 'table', columns: [{key: 'n'}], rows: [{n: 1}],"
        f" continuation: {{args: {{again: '{FLOOD} page'}}}}}}}}; }}",
    )
    return tmp_path


def refusal(answer: httpx.Response) -> str:
    assert answer.status_code == 429, answer.text
    detail: str = answer.json()["detail"]
    return detail


def mcp_call(url: str) -> CallToolResult:
    results: list[CallToolResult] = []

    async def call(client: Client) -> None:
        results.append(await client.call_tool("ask_llm", {"q": f"{FLOOD} over mcp"}))

    mcp_run(url + "/mcp", call, token="alice-token")
    return results[0]


def test_a_flood_by_every_route_is_refused_past_the_caps_and_another_users_turn_answers(
    project: Path, llm: FakeLLMServer, gate: threading.Event, tmp_path: Path
) -> None:
    server = Served(project, tmp_path / "serve.log")
    try:
        with server.client(ALICE) as alice, server.client(BOB) as bob, ThreadPoolExecutor(4 * EACH) as pool:
            try:
                admitted = flood(server, alice, pool, llm)
                session = bob.post("/v1/sessions", json={"template": "tester"}).json()["id"]
                answer = bob.post(f"/v1/sessions/{session}/messages", json={"content": "bob here"})
                events = dict(sse_events(answer.text))  # (the client's timeout is only a failure guard)
                assert events["reply"]["content"] == "bob is answered", events
                assert events["done"] == {"reason": "job_done"}
                assert sum(map(floods, llm.requests)) == 3  # alice's turn, tool run and cron run, no more
                page = text_string_to_metric_families(alice.get("/metrics").text)
                caps = {
                    s.labels["cap"]: s.value for f in page for s in f.samples if s.name.startswith(REFUSED)
                }
                assert caps == {  # every refusal counted, by its setting (S26.2)
                    "server.max_running_turns_per_user": EACH - 1,
                    "server.max_running_tool_runs_per_user": 3 * EACH - 1,
                }
                # her other jobs are held (and say so) once the scheduler finds each due, each at
                # its own second: on a busy machine that may come after the looks above, so look until
                waiting: list[str] = []

                def some_held() -> bool:
                    waiting[:] = [job["waiting"] for job in alice.get("/v1/cron").json() if job["waiting"]]
                    return bool(waiting)

                wait_until(some_held, "a cron job of hers held by the cap")
                assert "cron.max_running_per_user (1)" in waiting[0], waiting
            finally:
                gate.set()  # the held answers come, so the pool's threads end
            for held in admitted:
                answered = held.result()
                assert isinstance(answered, CallToolResult) or answered.status_code == 200, answered.text
    finally:
        server.stop()


def flood(
    server: Served, alice: httpx.Client, pool: ThreadPoolExecutor, llm: FakeLLMServer
) -> list[Future[Any]]:
    """Alice's flood, every route at once; once each request is admitted or refused, the admitted ones."""
    page = alice.post("/v1/tools/paged/run", json={"args": {}}).json()["visual"][0]["continuation"]["id"]
    for index in range(5):  # a tool schedules her jobs, every second each
        job = {"name": f"j{index}", "template": "tester", "prompt": f"{FLOOD} cron", "interval_secs": 1}
        assert alice.post("/v1/tools/cron_set/run", json={"args": job}).json()["success"] is True
    sessions = [alice.post("/v1/sessions", json={"template": "tester"}).json()["id"] for _ in range(EACH)]
    turns = [
        pool.submit(alice.post, f"/v1/sessions/{s}/messages", json={"content": f"{FLOOD} turn"})
        for s in sessions
    ]
    ask = {"args": {"q": f"{FLOOD} api"}}
    runs: list[Future[Any]] = [
        pool.submit(alice.post, "/v1/tools/ask_llm/run", json=ask) for _ in range(EACH)
    ]
    runs += [pool.submit(alice.post, "/v1/continuations", json={"id": page}) for _ in range(EACH)]
    runs += [pool.submit(mcp_call, server.url) for _ in range(EACH)]
    wait_until(lambda: sum(f.done() for f in turns) == EACH - 1, "all but one of alice's turns refused")
    wait_until(lambda: sum(f.done() for f in runs) == 3 * EACH - 1, "all but one of her tool runs refused")
    for refused in [f.result() for f in turns if f.done()]:
        assert TURN_CAP in refusal(refused)
    for done in [f.result() for f in runs if f.done()]:
        said = text_of(done) if isinstance(done, CallToolResult) else refusal(done)
        assert "user 'alice' has 1 tool runs running" in said and RUN_CAP in said, said
    wait_until(lambda: sum(map(floods, llm.requests)) == 3, "her admitted turn, tool run and cron run")
    return [f for f in [*turns, *runs] if not f.done()]
