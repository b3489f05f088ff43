"""Two `agentkernel serve` processes on one project answer as one (issue 27 item 5; DESIGN rule 7).

Each server is `agentkernel serve --port 0` in a subprocess, both on one
project folder (one message store, one cron store, one scratch root), wired
to the scripted LLM in this process. What one process made, the other
serves: a table's next page, a download, a user's tool-run count, an MCP
client's calls. Cron firing once with two servers is
tests/server/test_cron_serving.py's. Nothing sleeps: a run is held going by
an LLM answer that waits for the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentkernel.config.server import token_hash
from tests.conftest import ctrl_c_default, wait_until
from tests.fakes import FakeLLMServer, RecordedRequest, Reply
from tests.fakes.openai_server import Exchange, Turn
from tests.mcp_serve.conftest import text_of
from tests.server.conftest import make_project, script_tool, write

BIN = Path(sys.executable).parent
WAIT_SECS = 120.0  # an upper bound for one thing to happen, never a measured time
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}
TOKENS = {"alice-token": "alice", "bob-token": "bob"}
MOST_RUNS = 2

PAGED = """
function run(args) {
  var page = args.page || 1;
  return {content: 'page ' + page, visual: {type: 'table', columns: [{key: 'n'}], rows: [{n: page}],
                                            continuation: {args: {page: page + 1}}}};
}
"""
REPORT = """
function run(args) {
  fs_write('report.csv', 'a,b\\n1,2\\n');
  return {content: 'a report',
          visual: {type: 'file', path: 'report.csv', name: 'report.csv', mime: 'text/csv'}};
}
"""


@dataclass(frozen=True)
class Held:
    """An LLM answer that waits until the test opens `gate` (the fixture's `finally` opens it)."""

    gate: threading.Event
    reply: Reply = field(default_factory=lambda: Reply(text="after the gate"))

    def answer(self, exchange: Exchange) -> None:
        self.gate.wait()
        self.reply.answer(exchange)


class Served:
    """`agentkernel serve --port 0` on a project: its process, URL, and stderr in a file (a pipe fills)."""

    def __init__(self, root: Path, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
        self.log = log
        with log.open("ab") as stderr:
            self.process = subprocess.Popen(
                [str(BIN / "agentkernel"), "serve", "--port", "0"],
                cwd=root,
                env=env,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                preexec_fn=ctrl_c_default,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("agentkernel: serving on http://127.0.0.1:"), (line, log.read_text())
        self.url = line.split()[3]

    def client(self, headers: dict[str, str] = ALICE) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=headers, timeout=WAIT_SECS)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=WAIT_SECS)
            finally:
                if self.process.poll() is None:
                    self.process.kill()
                    self.process.wait()
        assert "Traceback" not in self.log.read_text(), self.log.read_text()


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    opened = threading.Event()
    try:
        yield opened
    finally:
        opened.set()


@pytest.fixture
def llm(gate: threading.Event) -> Iterator[FakeLLMServer]:
    def answer(request: RecordedRequest) -> Turn:
        said = json.dumps((request.body or {}).get("messages", []))
        return Held(gate) if "hold" in said else Reply(text="an answer")

    with FakeLLMServer(max_requests=2000) as server:
        server.respond_with(answer)
        yield server


@pytest.fixture
def project(tmp_path: Path, llm: FakeLLMServer) -> Path:
    """Tokens for alice and bob, a cap of MOST_RUNS tool runs; tools `paged`, `report`, `ask_llm`."""
    return served_project(tmp_path / "project", llm)


def served_project(root: Path, llm: FakeLLMServer, more: str = "") -> Path:
    """`project`'s folder at `root`, with `more` (YAML text) in its kernel.yaml."""
    tokens = "".join(f'    "{token_hash(token)}": {user}\n' for token, user in TOKENS.items())
    extra = (
        f"server:\n  max_running_tool_runs_per_user: {MOST_RUNS}\n  mcp_stateless: true\n  tokens:\n{tokens}"
    )
    root.mkdir()
    make_project(root, llm, extra + more)
    tools = root / "config" / "scripts" / "tools"
    script_tool(
        tools, "paged", PAGED, parameters={"type": "object", "properties": {"page": {"type": "integer"}}}
    )
    script_tool(tools, "report", REPORT)
    script_tool(tools, "ask_llm", "function run(args) { return llm(args.q); }")
    write(
        root / "config" / "templates" / "reporter.yaml",
        "name: reporter\ninstructions: Report.\ntools: [report]\n",
    )
    return root


@pytest.fixture
def two(project: Path, tmp_path: Path) -> Iterator[tuple[Served, Served]]:
    """Two servers on the one project; both stopped (SIGTERM, no traceback) at the end."""
    started: list[Served] = []
    try:
        for name in ("a", "b"):
            started.append(Served(project, tmp_path / f"serve-{name}.log"))
        yield started[0], started[1]
    finally:
        for served in started:
            served.stop()


@pytest.fixture
def two_machines(tmp_path: Path, llm: FakeLLMServer, pg_url: str) -> Iterator[tuple[Served, Served]]:
    """Two servers as on two machines (S27.2): each its own project folder, so its own SQLite files, and
    one store database (`store.url`), the session scratch folders on a volume both mount (`paths`)."""
    shared = tmp_path / "shared-scratch"
    more = f"store:\n  url: {pg_url}\npaths:\n  temp_root: {shared}\n"
    started: list[Served] = []
    try:
        for name in ("a", "b"):
            root = served_project(tmp_path / f"machine-{name}", llm, more)
            started.append(Served(root, tmp_path / f"serve-{name}.log"))
        yield started[0], started[1]
    finally:
        for served in started:
            served.stop()


def holding(llm: FakeLLMServer) -> int:
    """How many of the LLM's requests are runs held at the gate (each server's start-up probe is not)."""
    return sum("hold" in json.dumps((request.body or {}).get("messages", [])) for request in llm.requests)


def run_tool(client: httpx.Client, name: str, body: dict[str, Any]) -> httpx.Response:
    return client.post(f"/v1/tools/{name}/run", json=body)


def test_a_next_page_made_on_one_process_pages_through_the_other(two: tuple[Served, Served]) -> None:
    a, b = two
    with a.client() as on_a, b.client() as on_b, b.client(BOB) as bob_on_b:
        first = run_tool(on_a, "paged", {"args": {}})
        assert first.status_code == 200, first.text
        page_id = first.json()["visual"][0]["continuation"]["id"]
        second = on_b.post("/v1/continuations", json={"id": page_id})
        assert second.status_code == 200, second.text
        assert second.json()["visual"][0]["rows"] == [{"n": 2}]
        third = on_a.post("/v1/continuations", json={"id": second.json()["visual"][0]["continuation"]["id"]})
        assert third.json()["visual"][0]["rows"] == [{"n": 3}]
        assert bob_on_b.post("/v1/continuations", json={"id": page_id}).status_code == 404  # still alice's


def test_on_postgres_a_next_page_made_on_one_machine_pages_through_the_other(
    two_machines: tuple[Served, Served],
) -> None:
    """The continuation lives in the store database, not in either machine's message store file."""
    a, b = two_machines
    with a.client() as on_a, b.client() as on_b, b.client(BOB) as bob_on_b:
        first = run_tool(on_a, "paged", {"args": {}})
        assert first.status_code == 200, first.text
        page_id = first.json()["visual"][0]["continuation"]["id"]
        second = on_b.post("/v1/continuations", json={"id": page_id})
        assert second.status_code == 200, second.text
        assert second.json()["visual"][0]["rows"] == [{"n": 2}]
        third = on_a.post("/v1/continuations", json={"id": second.json()["visual"][0]["continuation"]["id"]})
        assert third.status_code == 200, third.text
        assert third.json()["visual"][0]["rows"] == [{"n": 3}]
        assert bob_on_b.post("/v1/continuations", json={"id": page_id}).status_code == 404  # still alice's


def test_on_postgres_a_session_made_on_one_machine_is_known_to_the_other_with_its_downloads(
    two_machines: tuple[Served, Served],
) -> None:
    """Who owns which session is in the store database: the other machine lists it, runs a tool in it
    (its scratch folder on the shared volume), and the file it offered is fetched through the first."""
    a, b = two_machines
    with a.client() as on_a, b.client() as on_b, a.client(BOB) as bob_on_a, b.client(BOB) as bob_on_b:
        made = on_a.post("/v1/sessions", json={"template": "reporter"})
        assert made.status_code in (200, 201), made.text
        session = made.json()["id"]
        assert [s["id"] for s in on_b.get("/v1/sessions").json()] == [session]
        assert bob_on_b.get("/v1/sessions").json() == []
        report = run_tool(on_b, "report", {"args": {}, "session": session})
        assert report.status_code == 200, report.text
        assert run_tool(bob_on_b, "report", {"args": {}, "session": session}).status_code == 404  # alice's
        url = report.json()["visual"][0]["download"]["url"]
        fetched = on_a.get(url)
        assert fetched.status_code == 200, fetched.text
        assert fetched.text == "a,b\n1,2\n"
        assert bob_on_a.get(url).status_code == 404


def test_a_download_made_on_one_process_is_fetched_on_the_other(two: tuple[Served, Served]) -> None:
    a, b = two
    with a.client() as on_a, b.client() as on_b, b.client(BOB) as bob_on_b:
        session = on_a.post("/v1/sessions", json={"template": "reporter"})
        assert session.status_code in (200, 201), session.text
        made = run_tool(on_a, "report", {"args": {}, "session": session.json()["id"]})
        assert made.status_code == 200, made.text
        url = made.json()["visual"][0]["download"]["url"]
        fetched = on_b.get(url)
        assert fetched.status_code == 200, fetched.text
        assert fetched.text == "a,b\n1,2\n"
        assert bob_on_b.get(url).status_code == 404


def test_a_users_tool_runs_are_counted_across_both_processes(
    two: tuple[Served, Served], llm: FakeLLMServer, gate: threading.Event
) -> None:
    """Alice's MOST_RUNS runs wait on the LLM on A; her next is refused on B, bob's goes through on B;
    once hers end, B runs hers again."""
    a, b = two
    hold = {"args": {"q": "hold"}}
    with (
        a.client() as on_a,
        b.client() as on_b,
        b.client(BOB) as bob_on_b,
        ThreadPoolExecutor(MOST_RUNS) as pool,
    ):
        held: list[Future[httpx.Response]] = [
            pool.submit(run_tool, on_a, "ask_llm", hold) for _ in range(MOST_RUNS)
        ]
        wait_until(lambda: holding(llm) == MOST_RUNS, "alice's runs on A to reach the LLM")
        refused = run_tool(on_b, "ask_llm", hold)
        assert refused.status_code == 429, refused.text
        detail = refused.json()["detail"]
        assert f"user 'alice' has {MOST_RUNS} tool runs running" in detail, detail
        assert f"server.max_running_tool_runs_per_user ({MOST_RUNS})" in detail, detail
        bobs = run_tool(bob_on_b, "ask_llm", {"args": {"q": "bob asks"}})
        assert bobs.status_code == 200 and bobs.json()["content"] == "an answer", bobs.text
        assert holding(llm) == MOST_RUNS  # the refused run never reached the LLM
        gate.set()
        assert [f.result().status_code for f in held] == [200] * MOST_RUNS
        again = run_tool(on_b, "ask_llm", {"args": {"q": "alice again"}})
        assert again.status_code == 200, again.text


class Alternating(httpx2.AsyncBaseTransport):
    """Sends the client's first request to one port, and every later one to the other, by turns."""

    def __init__(self, *ports: int) -> None:
        self._ports = ports
        self._sent = 0
        self.served: list[int] = []
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self._ports[self._sent % len(self._ports)]
        self._sent += 1
        self.served.append(port)
        request.url = request.url.copy_with(port=port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_an_mcp_client_that_began_on_one_process_goes_on_through_the_other(
    two: tuple[Served, Served], mode: str
) -> None:
    """With `server.mcp_stateless`, a handshake-era client's `initialize` answered by A, its calls by B
    then A then B, all answer; its tool runs share one session as a 2026-07-28 client's do."""
    calls_through_both(*two, mode)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_on_postgres_an_mcp_client_goes_on_through_the_other_machine(
    two_machines: tuple[Served, Served], mode: str
) -> None:
    """`/mcp` keeps nothing of its own with `server.mcp_stateless`: two machines answer one client."""
    calls_through_both(*two_machines, mode)


def calls_through_both(a: Served, b: Served, mode: str) -> None:
    """An MCP client whose requests go to A, B, A, B…: three tool calls, each answered."""
    ports = [int(served.url.rsplit(":", 1)[1]) for served in (a, b)]
    routes = Alternating(*ports)

    async def main() -> None:
        headers = {"Authorization": "Bearer alice-token"}
        async with httpx2.AsyncClient(headers=headers, timeout=WAIT_SECS, transport=routes) as http:
            transport = streamable_http_client(a.url + "/mcp", http_client=http)
            with anyio.fail_after(WAIT_SECS * 2):
                async with Client(transport, mode=mode) as client:
                    for word in ("one", "two", "three"):
                        result = await client.call_tool("upper", {"text": word})
                        assert not result.is_error, result
                        assert text_of(result) == word.upper()

    anyio.run(main)
    assert set(routes.served) == set(ports)  # both processes answered


def test_a_killed_process_gives_its_users_slots_back_within_the_lease(
    project: Path, tmp_path: Path, llm: FakeLLMServer
) -> None:
    """kill -9 of the process running alice's runs: the other refuses her while their leases last, and
    admits her once they ran out (server.work_lease_secs, short here); before, nothing gave them back."""
    yaml_path = project / "config" / "kernel.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("server:\n", "server:\n  work_lease_secs: 3\n", 1))
    a, b = Served(project, tmp_path / "serve-a.log"), Served(project, tmp_path / "serve-b.log")
    try:
        with a.client() as on_a, b.client() as on_b, ThreadPoolExecutor(MOST_RUNS) as pool:
            hold = {"args": {"q": "hold"}}
            for _ in range(MOST_RUNS):
                pool.submit(run_tool, on_a, "ask_llm", hold)  # ends with an error when A is killed
            wait_until(lambda: holding(llm) == MOST_RUNS, "alice's runs on A to reach the LLM")
            assert run_tool(on_b, "upper", {"args": {"text": "x"}}).status_code == 429
            a.process.kill()
            a.process.wait(timeout=WAIT_SECS)
            wait_until(
                lambda: run_tool(on_b, "upper", {"args": {"text": "x"}}).status_code == 200,
                "B to admit alice once the dead process's leases ran out",
            )
    finally:
        a.stop()
        b.stop()
