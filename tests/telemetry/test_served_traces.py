"""A served turn is a trace (S26.1): a real `agentkernel serve`, the scripted LLM, a real OTLP receiver.

Each test starts `agentkernel serve --port 0` in a subprocess on a project
whose kernel.yaml says `telemetry: {endpoint: <the receiver>}`, sends a
message whose answer calls a tool that a hook watches, and waits for the
spans to arrive (the batch exporter sends them; nothing sleeps): the run
is `invoke_agent`, its LLM calls `chat`, the tool call `execute_tool`,
the hook calls `hook`, linked parent to child; a caller's `traceparent`
is continued and ours reaches the LLM server; contents and user ids stay
out unless asked; no secret reaches any attribute.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from agentkernel.config.server import token_hash
from tests.conftest import ctrl_c_default, wait_until
from tests.fakes import FakeLLMServer, FakeToolCall, RecordedRequest, Reply
from tests.fakes.openai_server import Exchange, Turn
from tests.fakes.otlp import Received, Span, by_id, children, grpc_receiver, http_receiver
from tests.server.conftest import make_project, script_tool, write

BIN = Path(sys.executable).parent
WAIT_SECS = 120.0  # an upper bound for one thing to happen, never a measured time
TOKEN = "alice-secret-token"
LLM_KEY = "sk-the-llm-key-never-in-a-span"
ENV_SECRET = "env-secret-value-7f3a"
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
WATCH = """
function before_tool_call(ctx, call) { return {notice: 'watched ' + call.tool}; }
"""
UPPER = """
function run(args) {
  var s = env_var('MY_SECRET'), echo = env_var('ECHO_URL');
  if (echo) http_get(echo + '/seen?token=' + s, {Authorization: 'Bearer ' + s});
  return args.text.toUpperCase() + (s ? '!' : '');
}
"""


MCP_ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
MCP_CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "upper", "arguments": {"text": "hi"}},
}


DELEGATE = """
function run(args) { return run_subagent({task: 'the inner task', template: 'traced', tools: []}).answer; }
"""


def answer(request: RecordedRequest) -> Turn:
    """A tool call first (`delegate` when asked to delegate); once its result is in, the answer. A
    sub-agent's task is answered at once."""
    messages = (request.body or {}).get("messages", [])
    said = json.dumps(messages)
    if "the inner task" in said and not any(m.get("role") == "tool" for m in messages):
        return Reply(text="the inner answer")
    if any(m.get("role") == "tool" for m in messages):
        return Reply(text="the answer is HI")
    if "delegate" in said:
        return Reply(tool_calls=(FakeToolCall("delegate", "{}", id="call_dl"),))
    return Reply(tool_calls=(FakeToolCall("upper", '{"text": "hi"}', id="call_up"),))


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(max_requests=200) as server:
        server.respond_with(answer)
        yield server


def project(root: Path, llm: FakeLLMServer, telemetry: str) -> Path:
    """Tool `upper` (reads a secret variable), hook `watch` on it, template `traced`; `telemetry` YAML."""
    extra = (
        "http: {allow_private: true}\n"
        f'server:\n  mcp_stateless: true\n  tokens:\n    "{token_hash(TOKEN)}": alice\n{telemetry}'
    )
    make_project(root, llm, extra)
    config = root / "config" / "kernel.yaml"
    config.write_text(
        config.read_text().replace("  model: fake\n", "  model: fake\n  api_key_env: TRACED_LLM_KEY\n")
    )
    text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    script_tool(root / "config" / "scripts" / "tools", "upper", UPPER, parameters=text)
    script_tool(root / "config" / "scripts" / "tools", "delegate", DELEGATE)
    write(
        root / "config" / "templates" / "boss.yaml",
        "name: boss\ninstructions: Delegate.\ntools: [delegate]\n",
    )
    hooks = root / "config" / "scripts" / "hooks"
    write(hooks / "watch.js", WATCH)
    write(hooks / "watch.yaml", "kind: script_hook\nname: watch\nscript: watch.js\n")
    write(
        root / "config" / "templates" / "traced.yaml",
        "name: traced\ninstructions: Trace me.\ntools: [upper]\nhooks: [watch]\nmax_turns: 4\n",
    )
    return root


class Served:
    """`agentkernel serve --port 0` on a project, its secrets in its environment."""

    def __init__(self, root: Path, log: Path, echo: str = "") -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTKERNEL_CONFIG", "OTEL_"))}
        env.update(TRACED_LLM_KEY=LLM_KEY, MY_SECRET=ENV_SECRET, ECHO_URL=echo)
        env["OTEL_BSP_SCHEDULE_DELAY"] = "50"  # the batch sent within 50 ms, not the default 5 s
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

    def start(self, text: str) -> str:
        """A session of `traced`, a message sent and left streaming (its response never read); the run."""
        auth = {"Authorization": f"Bearer {TOKEN}"}
        client = httpx.Client(base_url=self.url, headers=auth, timeout=WAIT_SECS)
        session = client.post("/v1/sessions", json={"template": "traced"})
        assert session.status_code == 201, session.text
        path = f"/v1/sessions/{session.json()['id']}/messages"
        stream = client.send(client.build_request("POST", path, json={"content": text}), stream=True)
        assert stream.status_code == 200, stream.read()
        return stream.headers["x-run-id"]

    def turn(self, text: str, headers: dict[str, str] | None = None, template: str = "traced") -> str:
        """A session of `template`, one message answered; the run's id."""
        auth = {"Authorization": f"Bearer {TOKEN}", **(headers or {})}
        with httpx.Client(base_url=self.url, headers=auth, timeout=WAIT_SECS) as client:
            session = client.post("/v1/sessions", json={"template": template})
            assert session.status_code == 201, session.text
            sent = client.post(f"/v1/sessions/{session.json()['id']}/messages", json={"content": text})
            assert sent.status_code == 200, sent.text
            assert '"reason": "job_done"' in sent.text or '"reason":"job_done"' in sent.text, sent.text
            return sent.headers["X-Run-Id"]

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


class _Seen(BaseHTTPRequestHandler):
    """Answers 200 to any GET, keeping each request's `traceparent` (in `server.seen`)."""

    def do_GET(self) -> None:
        self.server.seen.append(self.headers.get("traceparent", ""))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def echo() -> Iterator[tuple[str, list[str]]]:
    """A 127.0.0.1 server the tool's http_get calls: its URL and the traceparents it was sent."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Seen)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.seen  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def served(
    tmp_path: Path, llm: FakeLLMServer, echo: tuple[str, list[str]]
) -> Iterator[tuple[Served, Received]]:
    with http_receiver() as (endpoint, received):
        root = project(tmp_path / "project", llm, f"telemetry:\n  endpoint: {endpoint}\n")
        server = Served(root, tmp_path / "serve.log", echo[0])
        try:
            yield server, received
        finally:
            server.stop()


def the_run(received: Received, run_id: str) -> list[Span]:
    """The spans of the run `run_id`, once its `invoke_agent` and the spans under it have all arrived."""

    def whole(spans: list[Span]) -> bool:
        run = [s for s in spans if s.attributes.get("agentkernel.run.id") == run_id]
        if not run:
            return False
        trace = [s for s in spans if s.trace_id == run[0].trace_id]
        names = {s.name for s in trace}
        return {"execute_tool upper", "chat fake"} <= names and sum(s.name == "chat fake" for s in trace) == 2

    spans = received.wait_for(whole, f"the spans of run {run_id}")
    root = next(s for s in spans if s.attributes.get("agentkernel.run.id") == run_id)
    return [s for s in spans if s.trace_id == root.trace_id]


def one(spans: list[Span], name: str) -> Span:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def test_a_turn_is_a_trace_of_the_run_its_llm_calls_its_tool_call_its_hook_and_its_http_get(
    served: tuple[Served, Received], llm: FakeLLMServer, echo: tuple[str, list[str]]
) -> None:
    server, received = served
    run_id = server.turn("say hi")
    spans = the_run(received, run_id)
    trace_id = spans[0].trace_id
    spans = received.wait_for(
        lambda got: any(s.name == "http_get" and s.trace_id == trace_id for s in got), "the http_get span"
    )
    spans = [s for s in spans if s.trace_id == trace_id]
    run = one(spans, "invoke_agent traced")
    assert run.parent_id == ""  # no caller's trace: a trace of its own
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "traced"
    assert run.attributes["gen_ai.conversation.id"]
    assert run.attributes["agentkernel.end_reason"] == "job_done"
    assert run.attributes["user.hash"] == hashlib.sha256(b"alice").hexdigest()[:16]
    assert "user.id" not in run.attributes
    assert run.resource["service.name"] == "agentkernel"
    chats = [s for s in children(spans, run) if s.name == "chat fake"]
    assert len(chats) == 2
    first = chats[0] if chats[0].attributes["gen_ai.response.finish_reasons"] == ["tool_calls"] else chats[1]
    assert first.kind == 3  # SPAN_KIND_CLIENT
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "fake"
    assert first.attributes["gen_ai.response.model"]
    assert isinstance(first.attributes["gen_ai.usage.input_tokens"], int)
    assert isinstance(first.attributes["gen_ai.usage.output_tokens"], int)
    tool = one(children(spans, run), "execute_tool upper")
    assert tool.attributes["gen_ai.tool.name"] == "upper"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_up"
    assert tool.attributes["agentkernel.tool.origin"] == "llm"
    assert tool.attributes["agentkernel.tool.outcome"] == "success"
    assert tool.attributes["agentkernel.tool.warnings"] == 0
    # the script's http_get: a client span under the tool call, and the server it called was sent its context
    fetched = one(children(spans, tool), "http_get")
    assert fetched.kind == 3  # SPAN_KIND_CLIENT
    assert fetched.attributes["http.request.method"] == "GET"
    assert fetched.attributes["server.address"] == "127.0.0.1"
    assert fetched.attributes["http.response.status_code"] == 200
    assert ENV_SECRET not in json.dumps(fetched.attributes)  # neither the query nor the header
    assert [seen[:52] for seen in echo[1]] == [f"00-{trace_id}-{fetched.span_id}"]  # then the flags
    hook = one(children(spans, tool), "hook watch.before_tool_call")
    assert hook.attributes["agentkernel.hook.event"] == "before_tool_call"
    assert hook.attributes["agentkernel.hook.verdict"] == "notice"
    # contents are off by default: no messages, arguments or results on any span
    for span in spans:
        assert not any(key.endswith(("messages", "arguments", "result")) for key in span.attributes), span
    # the LLM server was sent our trace: each request's traceparent names its chat span
    sent = {r.headers.get("traceparent", "")[:52] for r in llm.requests if r.path.endswith("/completions")}
    assert {f"00-{c.trace_id}-{c.span_id}" for c in chats} <= sent


def test_a_callers_traceparent_is_continued(served: tuple[Served, Received]) -> None:
    server, received = served
    run_id = server.turn("say hi", {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
    spans = the_run(received, run_id)
    run = one(spans, "invoke_agent traced")
    assert (run.trace_id, run.parent_id) == (CALLER_TRACE, CALLER_SPAN)
    assert {s.trace_id for s in spans} == {CALLER_TRACE}
    assert by_id(spans)[one(spans, "execute_tool upper").parent_id] == run


def test_a_tool_run_over_the_api_and_over_mcp_continues_the_caller_s_trace(
    served: tuple[Served, Received],
) -> None:
    """POST /v1/tools/upper/run and an MCP `tools/call` at /mcp, each with a caller's traceparent: each
    call's `execute_tool` is a child of the caller's span, its hook under it."""
    server, received = served
    spans_of = {"panel": "0af7651916cd43dd8448eb211c8031aa", "mcp_client": "0af7651916cd43dd8448eb211c8031bb"}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=WAIT_SECS) as client:
        ran = client.post(
            "/v1/tools/upper/run",
            json={"args": {"text": "hi"}},
            headers={"traceparent": f"00-{spans_of['panel']}-{CALLER_SPAN}-01"},
        )
        assert ran.status_code == 200, ran.text
        mcp = {**MCP_ACCEPT, "traceparent": f"00-{spans_of['mcp_client']}-{CALLER_SPAN}-01"}
        assert client.post("/mcp", json=MCP_INITIALIZE, headers=mcp).status_code == 200
        called = client.post("/mcp", json=MCP_CALL, headers=mcp)
        assert called.status_code == 200 and "HI" in called.text, called.text
    spans = received.wait_for(
        lambda spans: {s.trace_id for s in spans if s.name == "execute_tool upper"} >= set(spans_of.values()),
        "the two calls' spans",
    )
    for origin, trace_id in spans_of.items():
        tool = next(s for s in spans if s.name == "execute_tool upper" and s.trace_id == trace_id)
        assert (tool.parent_id, tool.attributes["agentkernel.tool.origin"]) == (CALLER_SPAN, origin)


def test_a_sub_agent_s_run_nests_under_the_tool_call_that_started_it(served: tuple[Served, Received]) -> None:
    server, received = served
    run_id = server.turn("delegate this", template="boss")
    spans = received.wait_for(
        lambda spans: (
            any(s.name == "invoke_agent traced" for s in spans)
            and any(s.attributes.get("agentkernel.run.id") == run_id for s in spans)
        ),
        "the run and its sub-agent's",
    )
    boss = next(s for s in spans if s.attributes.get("agentkernel.run.id") == run_id)
    call = one(children(spans, boss), "execute_tool delegate")
    helper = one(
        children(spans, call), "run_subagent"
    )  # the script's helper call (telemetry/helper_spans.py)
    inner = one(children(spans, helper), "invoke_agent traced")
    assert inner.attributes["gen_ai.agent.name"] == "traced" and inner.trace_id == boss.trace_id
    assert [s.name for s in children(spans, inner)] == ["chat fake"]


def test_no_secret_reaches_any_span(served: tuple[Served, Received]) -> None:
    """The server's token, the LLM's key (sent as Authorization), a variable a tool reads: in no attribute,
    event or resource of any span exported."""
    server, received = served
    the_run(received, server.turn("say hi"))
    every = json.dumps(
        [[s.name, s.attributes, s.events, s.resource] for s in received.spans], ensure_ascii=False
    )
    for secret in (TOKEN, LLM_KEY, ENV_SECRET, "Bearer", "authorization"):
        assert secret.lower() not in every.lower(), secret


@pytest.fixture
def captured(tmp_path: Path, llm: FakeLLMServer) -> Iterator[tuple[Served, Received]]:
    with http_receiver() as (endpoint, received):
        telemetry = (
            f"telemetry:\n  endpoint: {endpoint}\n  capture_content: true\n  record_user_ids: true\n"
            "  service_name: traced-kernel\n"
        )
        server = Served(project(tmp_path / "project", llm, telemetry), tmp_path / "serve.log")
        try:
            yield server, received
        finally:
            server.stop()


def test_contents_and_user_ids_only_when_asked(captured: tuple[Served, Received]) -> None:
    server, received = captured
    spans = the_run(received, server.turn("say hi"))
    run = one(spans, "invoke_agent traced")
    assert run.attributes["user.id"] == "alice"
    assert run.resource["service.name"] == "traced-kernel"
    tool = one(spans, "execute_tool upper")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"text": "hi"}
    assert tool.attributes["gen_ai.tool.call.result"] == "HI!"
    said = " ".join(str(s.attributes.get("gen_ai.input.messages", "")) for s in spans)
    assert "say hi" in said
    every = json.dumps([[s.attributes, s.events] for s in received.spans], ensure_ascii=False)
    for secret in (TOKEN, LLM_KEY, ENV_SECRET):
        assert secret not in every, secret


def test_the_grpc_exporter_sends_the_same_trace(tmp_path: Path, llm: FakeLLMServer) -> None:
    with grpc_receiver() as (endpoint, received):
        telemetry = f"telemetry:\n  endpoint: {endpoint}\n  protocol: grpc\n"
        server = Served(project(tmp_path / "project", llm, telemetry), tmp_path / "serve.log")
        try:
            spans = the_run(received, server.turn("say hi"))
        finally:
            server.stop()
    run = one(spans, "invoke_agent traced")
    assert one(spans, "execute_tool upper").parent_id == run.span_id
    assert {h.get("x-received-over") for h in received.headers} == {"grpc"}  # each export came over gRPC


def test_a_run_resumed_after_its_server_died_joins_its_trace(tmp_path: Path) -> None:
    """A's run is killed (SIGKILL) during its first LLM call; B resumes it: B's `invoke_agent` is in the
    trace A's run began (kept with the run in the store), under A's run's span."""
    gate = threading.Event()
    with FakeLLMServer(max_requests=200) as llm, http_receiver() as (endpoint, received):
        llm.add(Held(gate), Reply(tool_calls=(FakeToolCall("upper", '{"text": "hi"}', id="call_up"),)))
        llm.add(Reply(text="resumed answer"))
        root = project(tmp_path / "project", llm, f"telemetry:\n  endpoint: {endpoint}\n")
        config = root / "config" / "kernel.yaml"
        config.write_text(config.read_text().replace("server:\n", "server:\n  turn_lease_secs: 1\n"))
        a = Served(root, tmp_path / "a.log")
        try:
            run_id = a.start("say hi")
            wait_until(lambda: len(chat_requests(llm)) == 1, "A's run to reach the LLM")
            a.process.send_signal(signal.SIGKILL)
            a.process.wait()
        finally:
            gate.set()
        with contextlib.closing(sqlite3.connect(root / "data" / "messages.db")) as db:
            (kept,) = db.execute("SELECT traceparent FROM runs WHERE id = ?", (run_id,)).fetchone()
        _, trace_id, run_span, _ = kept.split("-")
        assert chat_requests(llm)[0].headers["traceparent"].split("-")[1] == trace_id
        b = Served(root, tmp_path / "b.log")
        try:
            spans = received.wait_for(
                lambda spans: (
                    any(s.attributes.get("agentkernel.run.resumed") for s in spans)
                    and any(s.name == "execute_tool upper" for s in spans)
                ),
                "the resumed run's spans",
            )
        finally:
            b.stop()
    resumed = next(s for s in spans if s.attributes.get("agentkernel.run.resumed"))
    assert (resumed.trace_id, resumed.parent_id) == (trace_id, run_span)
    assert resumed.attributes["agentkernel.run.id"] == run_id
    assert one(spans, "execute_tool upper").trace_id == trace_id


def chat_requests(llm: FakeLLMServer) -> list[RecordedRequest]:
    return [r for r in llm.requests if r.path.endswith("/chat/completions")]


@dataclass(frozen=True)
class Held:
    """An LLM answer that waits until the test opens `gate`."""

    gate: threading.Event
    reply: Reply = field(default_factory=lambda: Reply(text="after the gate"))

    def answer(self, exchange: Exchange) -> None:
        self.gate.wait()
        self.reply.answer(exchange)
