"""`GET /metrics` (S26.2): a real `agentkernel serve`, a turn with a tool call and a hook, the page parsed.

The server is `agentkernel serve --port 0` in a subprocess (and `--workers 2`
for the figures of two processes), wired to the scripted LLM in this
process; the page is read with prometheus_client's own parser. A turn of
template `metered` asks for the tool `upper` and for `made_up` (no such
tool), its hook `audit` says a notice before each tool call, then the LLM
answers. Nothing sleeps: a test waits on answers and on the parent's
/proc children.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.server import token_hash
from tests.conftest import ctrl_c_default, wait_until
from tests.fakes import FakeLLMServer, FakeToolCall, RecordedRequest, Reply
from tests.server.conftest import LiveServer, make_project, script_tool, sse_events, write

BIN = Path(sys.executable).parent
WAIT_SECS = 60.0  # an upper bound for one answer, never a measured time
MOST_TRIES = 200  # turns sent before giving up on seeing both workers (a bound, not an expectation)
ALICE = {"Authorization": "Bearer alice-token"}
TOKENS = f'  tokens:\n    "{token_hash("alice-token")}": alice\n'
WORKER = "function run(args) { return shell('echo $PPID').stdout.trim(); }"  # the worker running it
AUDIT = "function before_tool_call(ctx, call) { return {notice: 'audited ' + call.tool}; }"


def llm_turn(request: RecordedRequest) -> Reply:
    """A user's message: call `upper` and `made_up` (or `pid` when asked); the tools' results: answer."""
    messages = (request.body or {}).get("messages", [])
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return Reply(text=f"done {last['content']}", prompt_tokens=7, completion_tokens=3)
    if "which worker" in json.dumps(last):
        return Reply(tool_calls=(FakeToolCall("pid", "{}", id=f"call-{len(messages)}"),))
    calls = (FakeToolCall("upper", '{"text": "hi"}', id="call-1"), FakeToolCall("made_up", "{}", id="call-2"))
    return Reply(tool_calls=calls, prompt_tokens=11, completion_tokens=2)


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(max_requests=2000) as server:
        server.respond_with(llm_turn)
        yield server


def write_project(root: Path, llm: FakeLLMServer, extra: str = "") -> Path:
    """Template `metered` (tools upper, pid; hook audit), alice's token, the shell on; `extra` YAML."""
    config = make_project(root, llm, f"shell:\n  enabled: true\nserver:\n{TOKENS}{extra}")
    script_tool(root / "config" / "scripts" / "tools", "pid", WORKER)
    hooks = root / "config" / "scripts" / "hooks"
    write(hooks / "audit.js", AUDIT)
    write(hooks / "audit.yaml", "kind: script_hook\nname: audit\nscript: audit.js\n")
    write(
        root / "config" / "templates" / "metered.yaml",
        "name: metered\ninstructions: Count.\ntools: [upper, pid]\nhooks: [audit]\n",
    )
    return config


class Served:
    """`agentkernel serve --port 0` (plus `args`) in a project: the parent, its URL, its log."""

    def __init__(self, root: Path, *args: str) -> None:
        unset = ("AGENTKERNEL_CONFIG", "PROMETHEUS_MULTIPROC_DIR")
        env = {k: v for k, v in os.environ.items() if k not in unset}
        self.log = root / "serve.log"
        with self.log.open("w") as errors:
            self.process = subprocess.Popen(
                [str(BIN / "agentkernel"), "serve", "--port", "0", *args],
                cwd=root,
                env=env,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                preexec_fn=ctrl_c_default,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("agentkernel: serving on http://127.0.0.1:"), (line, self.log.read_text())
        self.url = line.split()[3]

    def request(self, method: str, path: str, body: Any = None, headers: Any = ALICE) -> httpx.Response:
        """One request on a connection of its own: under --workers, any worker may take it."""
        with httpx.Client(base_url=self.url, timeout=WAIT_SECS, headers=headers) as client:
            return client.request(method, path, json=body)

    def turn(self, content: str) -> str:
        """A turn in a new session of `metered`: its reply."""
        made = self.request("POST", "/v1/sessions", {"template": "metered"})
        assert made.status_code == 201, made.text
        answer = self.request("POST", f"/v1/sessions/{made.json()['id']}/messages", {"content": content})
        assert answer.status_code == 200, answer.text
        return str(dict(sse_events(answer.text))["reply"]["content"])

    def children(self) -> set[int]:
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return {int(pid) for pid in path.read_text().split()}
        except FileNotFoundError:
            return set()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(WAIT_SECS)
            finally:
                if self.process.poll() is None:
                    self.process.kill()
                    self.process.wait()
        assert "Traceback" not in self.log.read_text(), self.log.read_text()


class Page:
    """A metrics page, parsed: `value(name, **labels)` sums the samples of `name` carrying `labels`."""

    def __init__(self, text: str) -> None:
        self.samples = [s for f in text_string_to_metric_families(text) for s in f.samples]

    def value(self, name: str, **labels: str) -> float:
        return sum(s.value for s in self.samples if s.name == name and labels.items() <= s.labels.items())


def scrape(served: Served) -> Page:
    got = served.request("GET", "/metrics")
    assert got.status_code == 200, got.text
    assert got.headers["content-type"].startswith("text/plain; version=")
    return Page(got.text)


@pytest.fixture
def project(tmp_path: Path, llm: FakeLLMServer) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    write_project(root, llm)
    return root


@pytest.fixture
def served(project: Path) -> Iterator[Served]:
    server = Served(project)
    try:
        yield server
    finally:
        server.stop()


def test_a_turn_with_a_tool_call_and_a_hook_moves_the_metrics(served: Served) -> None:
    assert served.turn("go").startswith("done ")
    page = scrape(served)
    assert page.value("agentkernel_turns_total", template="metered", end_reason="job_done") == 1
    assert page.value("agentkernel_turn_duration_seconds_count", template="metered") == 1
    llm_calls = {"template": "metered", "model": "fake"}  # the model asked for, not the one the server named
    assert page.value("agentkernel_llm_call_duration_seconds_count", **llm_calls, outcome="ok") == 2
    assert page.value("agentkernel_llm_tokens_total", **llm_calls, direction="input") == 11 + 7
    assert page.value("agentkernel_llm_tokens_total", **llm_calls, direction="output") == 2 + 3
    assert page.value("agentkernel_tool_calls_total", tool="upper", outcome="ok") == 1
    assert page.value("agentkernel_tool_calls_total", tool="unknown", outcome="failed") == 1
    assert page.value("agentkernel_hook_verdicts_total", event="before_tool_call", verdict="notice") >= 1
    assert page.value("agentkernel_script_duration_seconds_count", engine="javascript") >= 2  # tool, hook
    assert page.value("agentkernel_approvals_pending") == 0
    assert page.value("agentkernel_runs_resumed_total") == 0
    values = {value for s in page.samples for value in s.labels.values()}
    assert not values & {"alice", "made_up", "fake-model"}  # no user, no invented tool, no reported model
    assert not {name for s in page.samples for name in s.labels} & {"user", "user_id", "session"}
    asked = {**ALICE, "Accept": "application/openmetrics-text; version=1.0.0"}  # as Prometheus asks
    open_metrics = served.request("GET", "/metrics", headers=asked)
    assert open_metrics.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    assert open_metrics.text.endswith("# EOF\n")


def test_the_page_needs_a_token(served: Served) -> None:
    assert served.request("GET", "/metrics", headers={}).status_code == 401
    wrong = {"Authorization": "Bearer not-a-token"}
    assert served.request("GET", "/metrics", headers=wrong).status_code == 401


def test_metrics_public_serves_the_page_without_a_token(tmp_path: Path, llm: FakeLLMServer) -> None:
    config = write_project(tmp_path, llm, "telemetry:\n  metrics_public: true\n")
    with LiveServer(Kernel(load_kernel_config(config))) as live, live.client() as client:
        got = client.get("/metrics")
        assert got.status_code == 200, got.text
        assert "agentkernel_approvals_pending" in got.text


def test_two_workers_each_show_the_whole_servers_figures(project: Path) -> None:
    served = Served(project, "--workers", "2")
    try:
        wait_until(lambda: len(served.children()) == 2, "two workers")
        seen: set[str] = set()
        turns = 0
        while len(seen) < 2 and turns < MOST_TRIES:
            seen.add(served.turn("which worker?").removeprefix("done "))
            turns += 1
        assert {int(pid) for pid in seen} == served.children()  # turns ran in both processes
        for _ in range(4):  # each scrape on a new connection: either worker answers, each shows every turn
            page = scrape(served)
            assert page.value("agentkernel_turns_total", template="metered", end_reason="job_done") == turns
            assert page.value("agentkernel_tool_calls_total", tool="pid", outcome="ok") == turns
    finally:
        served.stop()
    assert not list((project / "data" / "metrics").iterdir())  # the folder went with the server
