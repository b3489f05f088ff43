"""`agentkernel serve` under load: a message's round trip, its first event, a table's next page (issue 11 §7).

    .venv/bin/python benchmarks/server.py [--clients 1,10,100] [--workers 1,2] [--samples 200] [--pages 200]
        [--stores embedded,postgres] [--runs local,temporal] [--rounds 3] [--no-kernel-alone] [--smoke]

Three processes, as in use: the server (`python -m agentkernel serve --port 0`
on a temporary project), the scripted OpenAI-compatible LLM of the tests
(tests/fakes, answering at once, in a process of its own so it does not
share this one's GIL), and this one, the clients (httpx, async).

Each turn is one message: the LLM asks for one script tool call (`upper`, a
one-line JavaScript tool), the server runs it, the LLM answers in 8 streamed
pieces; the client reads the event stream to `event: done`. For each number
of concurrent clients (each sending its messages one after the other, a new
session every `--session-turns`, each client a user of its own with its own
bearer token, as people are: one user may run only
`server.max_running_turns_per_user` turns at once; and
`server.requests_per_user_per_sec` is set too high for a client's
back-to-back turns to meet: its check is in every figure, its refusal in
none, benchmarks/request_flood.py), it prints the round trip (POST
/v1/sessions/{id}/messages until `done`) and the time to the first event,
p50 and p99, the turns per second, and the CPU each process spent per turn
(Linux /proc). Then one client pages a table: POST /v1/continuations with
the id a `paged` tool's table carried out of a turn, p50 over `--pages`
calls. Last, the same turns through the kernel alone (`Kernel.chat(...).send`
in this process, no HTTP), at 1 and at the most clients: the ratio is what
the server adds. The target, p99 <= 50 ms at 100 clients, is printed with
PASS or MISS. `--workers 1,2` runs every level against `serve --workers 1`,
then `--workers 2` (a fresh server and project each), and prints the turns
per second of each count over one worker's, level by level; the server's
CPU is its processes' together. `--stores embedded,postgres` runs every
count again with the stores on PostgreSQL (S27.2: a cluster of Debian's
postgresql started for the run, a fresh database each server; its CPU
printed as `database`) and prints each figure over the embedded one's.
`--runs local,temporal` runs the PostgreSQL stores' counts again with the
runs on Temporal (S27.2; embedded stores always run locally): a dev
server of the `temporal` CLI started for the run as the tests start it
(tests/temporal.py; its CPU printed as `temporal`), `runs: {engine:
temporal}` in each project's kernel.yaml (a task queue of its own), one
`agentkernel serve` process and, for each `--workers` count, that many
`agentkernel worker` processes (their CPU printed apart as `workers`); it
prints what Temporal adds to the round trip's p50 over the same stores
with local runs (goal <= 100 ms a turn with one tool call) and, with any
deployment, N workers' turns per second over one's (goal >= 1.7x).
Beside the embedded stores' server, the floor (issue 31): a bare agent on
FastAPI + uvicorn (uvicorn's defaults: uvloop and httptools when
installed) in a process of its own, with the same routes, bearer tokens,
events and scripted LLM, the conversation in memory and the tool in
Python; at each number of clients, `--rounds` pairs (the server, then the
floor) one after the other, and the server's CPU per turn and turns/s over
the floor's, each pair's and their median, against the goals (CPU <= 1.3x;
turns/s >= 0.8x with one worker, >= 1.5x with two). Then the durable
floor, the same bare agent recording what S25.1 asks a run to record
before its effects are used, by hand in an SQLite file (WAL,
`synchronous=NORMAL`, on its event loop): the session, then a turn's four
transactions (the run's start with the user's message, the LLM's tool
call, the tool's result, the answer with the run's end); the server over
it shows what the server costs past the writes any durable agent makes.
Last, the contract floor: the durable one doing what SPEC asks of any
runtime besides, by hand: each LLM call counted in a usage ledger in its
own transaction (S26.3), and the tool a JavaScript script run in a fresh
QuickJS context with a memory and stack limit on a worker thread (S21.3).
`--profile FILE` runs
the server under cProfile counting its event loop thread's CPU time (with
more than one worker: the parent only).
Run from the project folder (it imports tests.fakes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import uvicorn
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import StreamingResponse

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakes import FakeLLMServer, FakeToolCall, RecordedRequest, Reply  # noqa: E402

from agentkernel.config.server import MOST_REQUESTS_PER_SEC, ServerSettings, token_hash  # noqa: E402

if TYPE_CHECKING:
    from tests.pg import OwnCluster
    from tests.temporal import DevServer

    from agentkernel import Kernel

TARGET_P99_MS = 50.0
TARGET_CLIENTS = 100
GOAL_TEMPORAL_ADDED_MS = 100.0  # issue 30: what Temporal may add to a turn's p50 (one tool call)
GOAL_WORKERS_RATIO = 1.7  # issue 30: two workers' turns/s over one's
GOAL_FLOOR_CPU = 1.3  # issue 31: the server's CPU per turn over the bare FastAPI + uvicorn agent's
GOAL_FLOOR_RATE = {1: 0.8, 2: 1.5}  # issue 31: the server's turns/s over the bare agent's, by workers
LOCAL, TEMPORAL = "local", "temporal"
BUSY_TRIES = 1000  # a message answered 409 is sent again this many times at most,
BUSY_WAIT_SECS = 0.005  # this long apart
# idle connections are dropped before uvicorn's keep-alive (5 s) ends them, which a request could race
KEEPALIVE_SECS = 1.0
# a client sends its turns one after the other, faster than a person (hundreds a second at one client):
# the rate limit is on, its check counted in every figure, and never met
NEVER_MET_RATE = str(MOST_REQUESTS_PER_SEC)
# one user's turns at once; --smoke runs more clients than this, so a cap meeting one user fails it
USER_TURN_CAP = ServerSettings().max_running_turns_per_user
TABLE_WORD = "table"  # a message with this word asks for the `paged` tool, any other for `upper`
UPPER_JS = "function run(args) { return args.text.toUpperCase(); }"
PAGED_JS = """
function run(args) {
  var page = args.page || 1;
  var rows = [];
  for (var i = 0; i < 20; i++) rows.push({n: (page - 1) * 20 + i, page: page});
  return {content: 'page ' + page,
          visual: {type: 'table', title: 'Numbers', columns: [{key: 'n', title: 'N'}, {key: 'page'}],
                   rows: rows, continuation: {args: {page: page + 1}}}};
}
"""
TOOL_YAML = (
    "kind: script_tool\nname: {name}\nscript: {name}.js\ndescription: {description}\n"
    "parameters:\n  type: object\n  properties:\n    {field}: {{type: {type}}}\n"
)


# -- the scripted LLM, in a process of its own ------------------------------------------------


def llm_turn(request: RecordedRequest) -> Reply:
    """One script tool call, then (once its result is in the conversation) the final answer."""
    messages = request.body["messages"]
    if messages[-1]["role"] == "tool":
        return Reply(text="Done: the tool answered.", prompt_tokens=40, completion_tokens=5)
    asked = str(messages[-1]["content"])
    if TABLE_WORD in asked:
        return Reply(tool_calls=(FakeToolCall("paged", "{}"),))
    return Reply(tool_calls=(FakeToolCall("upper", json.dumps({"text": asked})),))


def serve_llm() -> None:
    """`--llm`: the scripted server until stdin closes; its base URL is the first line printed."""
    import socketserver

    socketserver.TCPServer.request_queue_size = 1024
    with FakeLLMServer(max_requests=10**9) as server:
        server.respond_with(llm_turn)
        print(server.base_url, flush=True)
        sys.stdin.read()  # the benchmark closes our stdin when it is done (or dies)


# -- the floor: a bare FastAPI + uvicorn agent, in a process of its own --------------------------

UPPER_TOOL = {
    "type": "function",
    "function": {
        "name": "upper",
        "description": "Upper-case a text.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
}


def bare_frame(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


async def bare_llm_call(
    llm: httpx.AsyncClient, messages: list[dict[str, Any]]
) -> AsyncIterator[tuple[str, Any]]:
    """One streamed chat completion, read to its end (so the connection is pooled): ("token", text)
    as they come, ("usage", its token counts) when the server sends them, then ("message", the
    assistant message with its tool calls)."""
    body = {"model": "fake", "messages": messages, "tools": [UPPER_TOOL], "stream": True}
    body["stream_options"] = {"include_usage": True}
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async with llm.stream("POST", "/chat/completions", json=body) as answer:
        async for line in answer.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                yield "usage", chunk["usage"]
            for choice in chunk["choices"]:
                delta = choice["delta"]
                if delta.get("content"):
                    text.append(delta["content"])
                    yield "token", delta["content"]
                for part in delta.get("tool_calls") or []:
                    call = calls.setdefault(part["index"], {"id": "", "name": "", "arguments": ""})
                    call["id"] = part.get("id") or call["id"]
                    function = part.get("function") or {}
                    call["name"] += function.get("name") or ""
                    call["arguments"] += function.get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls.values()
        ]
    yield "message", message


class BareRecord:
    """What the durable floor records (`--bare URL CLIENTS FILE`), in one SQLite file on the event
    loop; without a file it records nothing (the plain floor)."""

    SCHEMA = (
        "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, user_id TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
        "status TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, "
        "run_id TEXT NOT NULL, message TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS messages_session ON messages (session_id, id)",
        "CREATE TABLE IF NOT EXISTS usage (user_id TEXT NOT NULL, day TEXT NOT NULL, calls INTEGER NOT NULL, "
        "input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, PRIMARY KEY (user_id, day))",
    )

    def __init__(self, path: str | None) -> None:
        self.conn = None if path is None else sqlite3.connect(path, isolation_level=None)
        if self.conn is not None:
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            for statement in self.SCHEMA:
                self.conn.execute(statement)

    def session(self, session: str, user: str) -> None:
        self._write([("INSERT INTO sessions (id, user_id) VALUES (?, ?)", (session, user))])

    def step(self, session: str, run: str, message: dict[str, Any], status: str | None = None) -> None:
        """One message of a run in one transaction; with `status`, the run's start or end with it."""
        message_row = (session, run, json.dumps(message))
        writes: list[tuple[str, tuple[Any, ...]]] = [
            ("INSERT INTO messages (session_id, run_id, message) VALUES (?, ?, ?)", message_row)
        ]
        if status == "running":
            start = ("INSERT INTO runs (id, session_id, status) VALUES (?, ?, ?)", (run, session, status))
            writes.insert(0, start)
        elif status is not None:
            writes.append(("UPDATE runs SET status = ? WHERE id = ?", (status, run)))
        self._write(writes)

    def usage(self, user: str, counts: dict[str, Any]) -> None:
        """One LLM call counted in its user's row of the day, in a transaction of its own (S26.3: a call
        is counted even when its run dies before its step is written)."""
        upsert = (
            "INSERT INTO usage VALUES (?, date('now'), 1, ?, ?) ON CONFLICT (user_id, day) DO UPDATE SET "
            "calls = calls + 1, input_tokens = input_tokens + excluded.input_tokens, "
            "output_tokens = output_tokens + excluded.output_tokens"
        )
        inputs, outputs = int(counts.get("prompt_tokens", 0)), int(counts.get("completion_tokens", 0))
        self._write([(upsert, (user, inputs, outputs))])

    def _write(self, writes: list[tuple[str, tuple[Any, ...]]]) -> None:
        if self.conn is None:
            return
        self.conn.execute("BEGIN IMMEDIATE")
        for sql, params in writes:
            self.conn.execute(sql, params)
        self.conn.execute("COMMIT")


class SandboxedUpper:
    """The `upper` tool as the contract floor runs it: its JavaScript, compiled once, run in a fresh
    QuickJS runtime and context with a memory and stack limit, on a worker thread (S21.3)."""

    def __init__(self) -> None:
        import agentkernel_quickjs as quickjs

        self.quickjs = quickjs
        self.bytecode = quickjs.Runtime().new_context().compile(UPPER_JS, filename="upper.js").write_object()

    def __call__(self, arguments: dict[str, Any]) -> str:
        runtime = self.quickjs.Runtime()
        runtime.set_memory_limit(64 << 20)
        runtime.set_max_stack_size(1 << 20)
        ctx = runtime.new_context()
        ctx.eval_function(ctx.read_object(self.bytecode))
        answer = ctx.get("run").call(ctx.parse_json(json.dumps(arguments)))  # a string comes back as str
        return answer if isinstance(answer, str) else str(json.loads(answer.json()))


def serve_bare(llm_url: str, clients: int, record_in: str | None = None, contract: bool = False) -> None:
    """`--bare`: the floor, a hand-written agent on FastAPI + uvicorn (uvicorn's defaults: its loop and
    HTTP parser as installed): the same sessions and messages routes, bearer tokens, the same events,
    the conversation in memory, the `upper` tool as a Python function, streamed LLM calls on pooled
    connections; with `record_in`, its steps recorded there too (`BareRecord`); with `contract` too,
    each LLM call counted in a usage ledger in that file and the tool run as JavaScript in a fresh
    QuickJS context on a worker thread (`SandboxedUpper`). Prints its URL, serves until stdin closes."""
    import socket
    import threading
    import uuid

    record = BareRecord(record_in)
    sandboxed = SandboxedUpper() if contract else None

    users = {f"Bearer {token_of(n)}": f"user-{n}" for n in range(clients)}
    sessions: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    limits = httpx.Limits(max_connections=clients + 8, keepalive_expiry=KEEPALIVE_SECS)
    llm = httpx.AsyncClient(base_url=llm_url, timeout=60, limits=limits)
    app = FastAPI()

    def user_of(request: Request) -> str:
        user = users.get(request.headers.get("authorization", ""))
        if user is None:
            raise HTTPException(401, "a valid bearer token is required")
        return user

    @app.post("/v1/sessions", status_code=201)
    async def create(request: Request) -> dict[str, str]:
        session = str(uuid.uuid4())
        instructions = {"role": "system", "content": "Answer briefly."}
        sessions[session] = (user_of(request), [instructions])
        record.session(session, sessions[session][0])
        return {"id": session}

    @app.post("/v1/sessions/{session}/messages")
    async def message(session: str, request: Request) -> StreamingResponse:
        owner, history = sessions.get(session, ("", []))
        if owner != user_of(request):
            raise HTTPException(404, "no such session")
        history.append({"role": "user", "content": (await request.json())["content"]})
        run = str(uuid.uuid4())
        record.step(session, run, history[-1], "running")
        return StreamingResponse(turn(session, run, history), media_type="text/event-stream")

    async def turn(session: str, run: str, history: list[dict[str, Any]]) -> AsyncIterator[bytes]:
        yield bare_frame("run", {"id": run})
        for _ in range(4):
            async for kind, value in bare_llm_call(llm, history):
                if kind == "token":
                    yield bare_frame("token", {"text": value})
                    continue
                if kind == "usage":
                    if contract:
                        record.usage(sessions[session][0], value)
                    continue
                history.append(value)
                if "tool_calls" not in value:
                    record.step(session, run, value, "ended")
                    yield bare_frame("reply", {"content": value["content"], "streamed": True})
                    yield bare_frame("done", {"reason": "job_done"})
                    return
                record.step(session, run, value)
                for call in value["tool_calls"]:
                    name, arguments = call["function"]["name"], json.loads(call["function"]["arguments"])
                    yield bare_frame("tool_call", {"id": call["id"], "tool": name, "args": arguments})
                    if sandboxed is None:
                        content = arguments["text"].upper()
                    else:
                        content = await asyncio.to_thread(sandboxed, arguments)
                    history.append({"role": "tool", "tool_call_id": call["id"], "content": content})
                    record.step(session, run, history[-1])
                    result = {"id": call["id"], "tool": name, "content": content, "success": True}
                    yield bare_frame("tool_result", result)
        record.step(session, run, {"role": "assistant", "content": None}, "max_turns")
        yield bare_frame("done", {"reason": "max_turns"})

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False))

    def stop_when_told() -> None:  # the benchmark closes our stdin when it is done (or dies)
        sys.stdin.read()
        server.should_exit = True

    threading.Thread(target=stop_when_told, daemon=True).start()
    print(f"bare agent: serving on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])


# -- the project and the two servers ----------------------------------------------------------


def token_of(client: int) -> str:
    """The bearer token of client number `client`: each client is a user of its own (`user-N`)."""
    return f"bench-token-{client}"


def auth(client: int) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_of(client)}"}


def make_project(
    root: Path,
    llm_url: str,
    clients: int,
    store_url: str | None = None,
    runs_yaml: str = "",
    rate: str = NEVER_MET_RATE,
) -> Path:
    """A project with tools `upper` and `paged`, a template `bench` using both, a user per client;
    its stores in the database at `store_url` when given, kernel.yaml's `runs:` section `runs_yaml`
    (S27.2), `server.requests_per_user_per_sec` `rate` (YAML; empty: the default)."""
    config = root / "config"
    tools = config / "scripts" / "tools"
    tools.mkdir(parents=True)
    (config / "scripts" / "hooks").mkdir(parents=True)
    (tools / "upper.js").write_text(UPPER_JS)
    (tools / "upper.yaml").write_text(
        TOOL_YAML.format(name="upper", description="Upper-case a text.", field="text", type="string")
    )
    (tools / "paged.js").write_text(PAGED_JS)
    (tools / "paged.yaml").write_text(
        TOOL_YAML.format(name="paged", description="Numbers, 20 per page.", field="page", type="integer")
    )
    (config / "templates").mkdir()
    (config / "templates" / "bench.yaml").write_text(
        "name: bench\ninstructions: Answer briefly.\ntools: [upper, paged]\nmax_turns: 4\n"
    )
    # llm.max_concurrency above the clients: the figures are the server's, not a throttle's
    tokens = "".join(f'    "{token_hash(token_of(n))}": user-{n}\n' for n in range(clients))
    (config / "kernel.yaml").write_text(
        "scripts:\n  tools: [config/scripts/tools]\n  hooks: [config/scripts/hooks]\n"
        f"llm:\n  base_url: {llm_url}\n  model: fake\n  max_retries: 0\n  timeout_secs: 60\n"
        f"  max_concurrency: {max(16, clients + 8)}\n"
        f"server:\n  tokens:\n{tokens}"
        + (f"  requests_per_user_per_sec: {rate}\n" if rate else "")
        + (f"store:\n  url: {store_url}\n" if store_url else "")
        + runs_yaml
    )
    return config / "kernel.yaml"


@contextlib.contextmanager
def process(command: list[str], first_line: str) -> Iterator[tuple[str, int]]:
    """Start `command`, wait for a stdout line starting with `first_line`; yield it and the pid; stop it."""
    child = subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith(first_line):
                yield line.strip(), child.pid
                break
        else:
            raise SystemExit(
                f"{' '.join(command)} ended (status {child.wait()}) before printing {first_line!r}"
            )
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.terminate()  # SIGTERM: the server stops gracefully (running turns finish)
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def serve_command(kernel_yaml: Path, profile: Path | None, workers: int = 1) -> list[str]:
    """`agentkernel serve` on a free port, optionally under cProfile (its event loop thread's CPU time)."""
    serve = ["serve", "--port", "0", "--config", str(kernel_yaml)]
    serve += ["--workers", str(workers)] if workers != 1 else []
    if profile is None:
        return [sys.executable, "-m", "agentkernel", *serve]
    return [sys.executable, "-c", PROFILED_SERVE, str(profile), *serve]


# the server under cProfile counting its event loop thread's CPU time (not the wall clock, which on a busy
# machine counts the waits for the GIL and for a core); the profile is written when the server stops
PROFILED_SERVE = """
import cProfile, sys, time
from agentkernel.cli.main import main
out, sys.argv = sys.argv[1], ["agentkernel", *sys.argv[2:]]
profiler = cProfile.Profile(time.thread_time)
profiler.enable()
try:
    main()
finally:
    profiler.disable()
    profiler.dump_stats(out)
"""


@dataclass(frozen=True)
class CpuClock:
    """CPU seconds (user + system) used so far by the server, the scripted LLM, this process and, when
    there, PostgreSQL, the `agentkernel worker` processes and the Temporal dev server (/proc)."""

    server_pid: int
    llm_pid: int
    database_pid: int | None = None  # PostgreSQL's postmaster, with --stores postgres
    worker_pids: tuple[int, ...] = ()  # `agentkernel worker` processes, with --runs temporal
    temporal_pid: int | None = None  # the Temporal dev server, with --runs temporal

    def read(self) -> dict[str, float]:
        """Each one's CPU seconds so far, by name (`clients`: this process)."""
        spent = {
            "server": cpu_seconds(self.server_pid) + sum(map(cpu_seconds, children(self.server_pid))),
            # of which its main thread's, the event loop's with one worker (the rest: worker threads)
            "its event loop": cpu_seconds(self.server_pid, thread=self.server_pid),
            "scripted LLM": cpu_seconds(self.llm_pid),
            "clients": time.process_time(),
        }
        if self.database_pid is not None:
            spent["database"] = sum(map(cpu_seconds, [self.database_pid, *children(self.database_pid)]))
        if self.worker_pids:
            spent["workers"] = sum(map(cpu_seconds, self.worker_pids))
        if self.temporal_pid is not None:
            spent["temporal"] = cpu_seconds(self.temporal_pid)
        return spent

    def server_ms(self, before: dict[str, float], turns: int) -> float:
        """The server's CPU milliseconds per turn since `before`."""
        return (self.read()["server"] - before["server"]) * 1000 / turns

    def per_turn(self, before: dict[str, float], turns: int, mine: str = "clients") -> str:
        """`server X ms, scripted LLM Y ms, clients Z ms[, database W ms][, workers V ms][, temporal U ms]`:
        each one's CPU since `before`, per turn (`mine`: this process's name)."""
        now = self.read()
        return ", ".join(
            f"{mine if name == 'clients' else name} {(now[name] - then) * 1000 / turns:.1f} ms"
            for name, then in before.items()
        )


def children(pid: int) -> list[int]:
    """The processes `pid` started (`serve --workers N`'s workers), from /proc."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """utime + stime of `pid` (of its thread `thread` when given), from /proc/PID/stat (fields 14 and 15,
    after the command's parentheses); 0 for a process that has ended (a database backend between two
    reads)."""
    stat = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    try:
        fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the clients -------------------------------------------------------------------------------


@dataclass
class Timings:
    """Milliseconds per timed turn: the whole round trip, and until the first event; turns per second."""

    round_trip: list[float] = field(default_factory=list)
    first_event: list[float] = field(default_factory=list)
    rate: float = 0.0
    busy: int = 0  # messages answered 409 (the session still answering after its `done`), sent again


@dataclass
class TurnSeen:
    """What one turn's stream showed: event types in order, the `done` reason, sealed table ids."""

    types: list[str] = field(default_factory=list)
    reason: str | None = None
    tools_failed: int = 0
    continuation_ids: list[str] = field(default_factory=list)
    busy: int = 0  # 409s before the message was taken

    def read(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "done":
            self.reason = data["reason"]
        elif kind == "tool_result":
            self.tools_failed += data["success"] is not True
            for block in data.get("visual") or []:
                if isinstance(block.get("continuation"), dict):
                    self.continuation_ids.append(block["continuation"]["id"])

    def check(self) -> None:
        """A timed turn must be what it claims: one tool call that worked, a reply, `done: job_done`."""
        ran = [kind for kind in self.types if kind in ("tool_call", "tool_result")]
        if self.reason != "job_done" or ran != ["tool_call", "tool_result"] or self.tools_failed:
            raise SystemExit(f"a turn went wrong: events {self.types}, done reason {self.reason!r}")
        if "reply" not in self.types:
            raise SystemExit(f"a turn ended without a reply: events {self.types}")


async def send(
    client: httpx.AsyncClient, session: str, text: str, headers: dict[str, str]
) -> tuple[float, float, TurnSeen]:
    """One message: (ms until `event: done`, ms until the first event, what the stream showed).

    The stream is read to its end (untimed), so the connection goes back to
    the pool: a body left unread would close it, and the next message would
    time a new connection too.
    """
    seen = TurnSeen()
    started = time.perf_counter()
    first = done = math.nan
    path = f"/v1/sessions/{session}/messages"
    while math.isnan(done):
        async with client.stream("POST", path, json={"content": text}, headers=headers) as answer:
            if answer.status_code == 409 and seen.busy < BUSY_TRIES:
                # runs on Temporal: the worker gives the session's lease back just after the run's end,
                # which the stream may have sent as `done` already; the wait counts in the round trip
                await answer.aread()
                seen.busy += 1
                await asyncio.sleep(BUSY_WAIT_SECS)
                continue
            if answer.status_code != 200:
                await answer.aread()
                raise SystemExit(f"message to {session}: HTTP {answer.status_code} {answer.text}")
            kind = ""
            async for line in answer.aiter_lines():
                if line.startswith("event: "):
                    kind = line.removeprefix("event: ")
                    first = time.perf_counter() if math.isnan(first) else first
                    done = time.perf_counter() if kind == "done" else done
                    seen.types.append(kind)
                elif line.startswith("data: "):
                    seen.read(kind, json.loads(line.removeprefix("data: ")))
            if math.isnan(done):
                raise SystemExit(f"message to {session}: the stream ended without `done`: {seen.types}")
    seen.check()
    return (done - started) * 1000, (first - started) * 1000, seen


async def new_session(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    answer = await client.post("/v1/sessions", json={"template": "bench"}, headers=headers)
    if answer.status_code != 201:
        raise SystemExit(f"POST /v1/sessions: HTTP {answer.status_code} {answer.text}")
    session: str = answer.json()["id"]
    return session


async def talk(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    turns: int,
    session_turns: int,
    timings: Timings,
    start: asyncio.Barrier,
) -> None:
    """One client (a user, by `headers`): `turns` timed messages, one after the other, a new session every
    `session_turns`.

    A session's first message opens its chat on the server, as a user's
    does; that turn is timed like the others. Making a session is not.
    """
    session = await new_session(client, headers)
    await start.wait()
    for number in range(turns):
        if number and number % session_turns == 0:
            session = await new_session(client, headers)
        text = f"message {number} of {session[:8]}"
        round_trip, first_event, seen = await send(client, session, text, headers)
        timings.round_trip.append(round_trip)
        timings.first_event.append(first_event)
        timings.busy += seen.busy


async def clients_level(url: str, clients: int, turns: int, session_turns: int) -> Timings:
    """`clients` clients at once, `turns` timed turns each: their timings and the turns per second."""
    timings = Timings()
    start = asyncio.Barrier(clients + 1)
    limits = httpx.Limits(max_connections=clients + 8, keepalive_expiry=KEEPALIVE_SECS)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        talking = asyncio.gather(
            *(talk(client, auth(n), turns, session_turns, timings, start) for n in range(clients))
        )
        await start.wait()
        started = time.perf_counter()
        await talking
        timings.rate = clients * turns / (time.perf_counter() - started)
    return timings


async def continuation_pages(url: str, pages: int) -> list[float]:
    """Milliseconds per POST /v1/continuations, for the id of a table that left a turn, `pages` times."""
    limits = httpx.Limits(keepalive_expiry=KEEPALIVE_SECS)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        session = await new_session(client, auth(0))
        _, _, seen = await send(client, session, f"a {TABLE_WORD}, please", auth(0))
        if len(seen.continuation_ids) != 1:
            raise SystemExit(f"the paged tool's table carried no continuation id: {seen}")
        timings = []
        for index in range(pages + 5):
            started = time.perf_counter()
            answer = await client.post(
                "/v1/continuations", json={"id": seen.continuation_ids[0]}, headers=auth(0)
            )
            elapsed = (time.perf_counter() - started) * 1000
            (table,) = answer.json()["visual"] if answer.status_code == 200 else (None,)
            if table is None or table["rows"][0]["n"] != 20 or "id" not in table["continuation"]:
                raise SystemExit(f"POST /v1/continuations: HTTP {answer.status_code} {answer.text[:300]}")
            if index >= 5:  # warm-up
                timings.append(elapsed)
    return timings


async def kernel_alone(
    kernel_yaml: Path, levels: list[int], cpu: CpuClock, options: argparse.Namespace
) -> dict[int, tuple[list[float], float, str]]:
    """The same turns through `Kernel.chat(...).send` in this process: the agent loop without HTTP or SSE.

    For each number of clients: the turns' milliseconds, the turns per second, the CPU per turn.
    """
    from agentkernel import Kernel
    from agentkernel.config import load_kernel_config

    timings: dict[int, tuple[list[float], float, str]] = {}
    async with Kernel(load_kernel_config(kernel_yaml)) as kernel:
        await kernel_level(kernel, 1, options.warmup, options.session_turns)
        for clients in levels:
            turns = max(options.session_turns, math.ceil(options.samples / clients))
            before = cpu.read()
            done, rate = await kernel_level(kernel, clients, turns, options.session_turns)
            timings[clients] = done, rate, cpu.per_turn(before, clients * turns, mine="kernel")
    return timings


async def kernel_level(
    kernel: Kernel, clients: int, turns: int, session_turns: int
) -> tuple[list[float], float]:
    """`clients` chats at once, as clients_level's (a user each) but in this process; a session's first
    turn opens it."""
    from agentkernel.agent.loop import LoopEvent

    async def quiet(event: LoopEvent) -> None:
        return None

    timings: list[float] = []

    async def chat_turns(user: str, start: asyncio.Barrier) -> None:
        await start.wait()
        chat = None
        for number in range(turns):
            started = time.perf_counter()
            if number % session_turns == 0:
                if chat is not None:
                    kernel.end_chat(chat)
                chat = kernel.chat("bench", user_id=user)
            assert chat is not None
            result = await chat.send(f"message {number}", quiet)
            timings.append((time.perf_counter() - started) * 1000)
            if result.reason.value != "job_done":
                raise SystemExit(f"a turn through the kernel alone went wrong: {result}")
        if chat is not None:
            kernel.end_chat(chat)

    start = asyncio.Barrier(clients + 1)
    chats = asyncio.gather(*(chat_turns(f"user-{n}", start) for n in range(clients)))  # as the server's
    await start.wait()
    started = time.perf_counter()
    await chats
    return timings, clients * turns / (time.perf_counter() - started)


# -- the figures -------------------------------------------------------------------------------


def percentile(values: list[float], which: int) -> float:
    """The `which`th percentile (inclusive method: defined for any number of values >= 1)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[which - 1]


def figure(label: str, values: list[float]) -> str:
    p50, p99 = percentile(values, 50), percentile(values, 99)
    return f"  {label:<22} p50 {p50:8.2f} ms   p99 {p99:8.2f} ms   (n={len(values)})"


@dataclass(frozen=True)
class Floor:
    """A bare FastAPI + uvicorn agent (`--bare`): what it is called, its URL and its CPU clock; `goal`:
    the floor issue 31's goals are set against (the plain one; the durable one is for the reader)."""

    name: str
    url: str
    cpu: CpuClock
    goal: bool


@dataclass
class FloorRatios:
    """The server over the floor at one number of clients, a pair per round: CPU per turn, turns/s."""

    cpu: list[float] = field(default_factory=list)
    rate: list[float] = field(default_factory=list)


async def server_levels(
    url: str, cpu: CpuClock, options: argparse.Namespace, floors: list[Floor]
) -> tuple[dict[int, Timings], dict[Floor, dict[int, FloorRatios]]]:
    """The server's figures at each number of clients, and a table's next page; with floors, the bare
    agents' beside them, `--rounds` rounds interleaved (server, then each floor) at each number of
    clients."""
    await clients_level(url, 1, options.warmup, options.session_turns)
    for floor in floors:
        await clients_level(floor.url, 1, options.warmup, options.session_turns)
    levels: dict[int, Timings] = {}
    ratios: dict[Floor, dict[int, FloorRatios]] = {floor: {} for floor in floors}
    for clients in options.clients:
        turns = max(options.session_turns, math.ceil(options.samples / clients))
        for _ in range(options.rounds if floors else 1):
            before = cpu.read()
            timings = await clients_level(url, clients, turns, options.session_turns)
            server_ms = cpu.server_ms(before, clients * turns)
            spent = cpu.per_turn(before, clients * turns)
            levels[clients] = timings  # the last round's: the ratios below take every round's
            print(f"{clients} concurrent client(s), {turns} turns each, {timings.rate:.0f} turns/s:")
            print(figure("message round trip", timings.round_trip))
            print(figure("first event", timings.first_event))
            print(f"  CPU per turn: {spent}")
            if timings.busy:
                print(
                    f"  answered 409 (session still answering after its `done`), sent again: {timings.busy}"
                )
            for floor in floors:
                cpu_ratio, rate_ratio = await floor_level(floor, clients, turns, options, server_ms, timings)
                pair = ratios[floor].setdefault(clients, FloorRatios())
                pair.cpu.append(cpu_ratio)
                pair.rate.append(rate_ratio)
    pages = await continuation_pages(url, options.pages)
    print(f"continuation page (20 rows), 1 client: p50 {statistics.median(pages):.2f} ms   (n={len(pages)})")
    return levels, ratios


async def floor_level(
    floor: Floor, clients: int, turns: int, options: argparse.Namespace, server_ms: float, server: Timings
) -> tuple[float, float]:
    """A bare agent at `clients` clients, just after the server: the server's CPU per turn over the
    bare agent's, and its turns/s over the bare agent's."""
    before = floor.cpu.read()
    bare = await clients_level(floor.url, clients, turns, options.session_turns)
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK") / (clients * turns)  # /proc counts CPU in clock ticks
    bare_ms = max(floor.cpu.server_ms(before, clients * turns), tick_ms)  # a few turns may not fill one
    p50 = percentile(bare.round_trip, 50)
    print(
        f"{floor.name} (FastAPI + uvicorn), {clients} client(s): {bare.rate:.0f} turns/s, round trip p50 "
        f"{p50:.2f} ms, CPU per turn {bare_ms:.2f} ms; server / bare: CPU {server_ms / bare_ms:.2f}x, "
        f"turns/s {server.rate / bare.rate:.2f}x"
    )
    return server_ms / bare_ms, server.rate / bare.rate


def rates(pair: FloorRatios) -> str:
    return f"turns/s {statistics.median(pair.rate):.2f}x ({spread(pair.rate)})"


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def print_floor_ratios(workers: int, ratios: dict[Floor, dict[int, FloorRatios]]) -> None:
    """The server over each bare agent, median of the rounds and their spread; over the plain one,
    against issue 31's goals."""
    goal_rate = GOAL_FLOOR_RATE[1] if workers == 1 else GOAL_FLOOR_RATE[2]
    for floor, by_clients in ratios.items():
        for clients, pair in by_clients.items():
            cpu, rate = statistics.median(pair.cpu), statistics.median(pair.rate)
            head = (
                f"server / {floor.name}, {workers} worker(s), {clients} client(s), {len(pair.cpu)} round(s)"
            )
            if not floor.goal:
                print(f"{head}: CPU per turn {cpu:.2f}x ({spread(pair.cpu)}); {rates(pair)}")
                continue
            print(
                f"{head}: CPU per turn {cpu:.2f}x ({spread(pair.cpu)}; goal <= {GOAL_FLOOR_CPU}x): "
                f"{verdict(cpu <= GOAL_FLOOR_CPU)}; turns/s {rate:.2f}x ({spread(pair.rate)}; "
                f"goal >= {goal_rate}x): {verdict(rate >= goal_rate)}"
            )


async def kernel_figures(
    levels: dict[int, Timings], kernel_yaml: Path, cpu: CpuClock, options: argparse.Namespace
) -> None:
    """The kernel alone's figures (this process then being idle), and what the server adds to it."""
    compared = sorted({1, max(levels)})
    alone = await kernel_alone(kernel_yaml, compared, cpu, options)
    for clients, (turns, rate, spent) in alone.items():
        print(
            f"kernel alone (Kernel.chat(...).send, no HTTP), {clients} chat(s) at once, {rate:.0f} turns/s:"
        )
        print(figure("kernel turn", turns))
        print(f"  CPU per turn: {spent}")
    print_ratios(levels, alone)


def print_ratios(levels: dict[int, Timings], alone: dict[int, tuple[list[float], float, str]]) -> None:
    """What the server adds to the kernel; how the round trip grows with the clients; the target."""
    one = levels.get(1)
    for clients, (turns, _, _) in alone.items():
        if clients in levels:
            added = percentile(levels[clients].round_trip, 50) / percentile(turns, 50)
            print(f"round trip p50 / kernel turn p50, {clients} client(s): {added:.2f}x")
    for clients, timings in levels.items():
        if one is not None and clients != 1:
            grown = percentile(timings.round_trip, 50) / percentile(one.round_trip, 50)
            print(f"round trip p50 at {clients} clients / at 1 client: {grown:.1f}x")
    most = max(levels)  # the target's verdict only at its own number of clients
    p99 = percentile(levels[most].round_trip, 99)
    verdict = ("PASS" if p99 <= TARGET_P99_MS else "MISS") if most == TARGET_CLIENTS else "no verdict"
    print(
        f"target round trip p99 <= {TARGET_P99_MS:.0f} ms at {TARGET_CLIENTS} clients; at {most}: "
        f"{p99:.1f} ms = {p99 / TARGET_P99_MS:.1f}x the target: {verdict}"
    )
    # each client waits for its answer before it sends again: clients = turns/s x mean round trip
    needed = TARGET_CLIENTS / (TARGET_P99_MS / 1000)
    print(
        f"{TARGET_CLIENTS} clients, each waiting for its answer, at a mean round trip under "
        f"{TARGET_P99_MS:.0f} ms means over {needed:.0f} turns/s; measured at {most}: {levels[most].rate:.0f}"
    )


def verdict(passed: bool) -> str:
    return "PASS" if passed else "MISS"


def print_worker_ratios(label: str, by_workers: dict[int, dict[int, Timings]]) -> None:
    """Turns per second with N workers over one worker's, at each number of clients, and the goal."""
    one = by_workers.get(1)
    for workers, levels in by_workers.items():
        if one is None or workers == 1:
            continue
        for clients, timings in levels.items():
            if clients in one:
                ratio = timings.rate / one[clients].rate
                print(
                    f"turns/s with {workers} workers / with 1, {label}, {clients} client(s): {ratio:.2f}x "
                    f"(goal >= {GOAL_WORKERS_RATIO}x): {verdict(ratio >= GOAL_WORKERS_RATIO)}"
                )


@dataclass(frozen=True)
class Stores:
    """Where a measured server keeps its stores: the project's files, or a database of `cluster`."""

    name: str  # embedded | postgres
    cluster: OwnCluster | None = None
    databases: list[int] = field(default_factory=lambda: [0])

    def fresh_url(self) -> str | None:
        """A new, empty database's URL (each server measured starts from nothing); None: embedded."""
        if self.cluster is None:
            return None
        import psycopg

        self.databases[0] += 1
        name = f"bench_{self.databases[0]}"
        with psycopg.connect(self.cluster.cluster.url(), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return self.cluster.cluster.url(name)

    def pid(self) -> int | None:
        """The postmaster's pid (its backends are its children), for the CPU it spends."""
        if self.cluster is None:
            return None
        return int((self.cluster.folder / "data" / "postmaster.pid").read_text().split()[0])


@dataclass(frozen=True)
class Deployment:
    """What a measured server runs on: its stores, and where its runs are driven (S27.2)."""

    stores: Stores
    runs: str = LOCAL  # local | temporal
    temporal: DevServer | None = None  # the dev server, with runs on Temporal
    queues: list[int] = field(default_factory=lambda: [0])

    @property
    def label(self) -> str:
        return self.stores.name if self.runs == LOCAL else f"{self.stores.name} + {self.runs}"

    def runs_yaml(self) -> str:
        """kernel.yaml's `runs:` section: none for local runs; on Temporal, a task queue of its own."""
        if self.temporal is None:
            return ""
        self.queues[0] += 1
        return (
            f"runs:\n  engine: {TEMPORAL}\n  address: '{self.temporal.address}'\n"
            f"  task_queue: bench-{os.getpid()}-{self.queues[0]}\n"
        )


@contextlib.contextmanager
def deployment_of(stores: Stores, runs: str) -> Iterator[Deployment]:
    """Local runs, or a Temporal dev server of tests/temporal.py started for these runs (the CLI's)."""
    if runs == LOCAL:
        yield Deployment(stores)
        return
    from tests.temporal import running_dev_server

    with running_dev_server() as server:
        yield Deployment(stores, runs, server)


def print_temporal_added(local: dict[int, dict[int, Timings]], now: dict[int, dict[int, Timings]]) -> None:
    """What Temporal adds to a turn's p50 over the same stores with local runs, same workers and clients."""
    for workers, levels in now.items():
        for clients, timings in levels.items():
            if clients in local.get(workers, {}):
                then = local[workers][clients]
                p50 = percentile(timings.round_trip, 50) - percentile(then.round_trip, 50)
                print(
                    f"Temporal's p50 added over local runs (postgres), {workers} worker(s), {clients} "
                    f"client(s): {p50:+.1f} ms (goal <= {GOAL_TEMPORAL_ADDED_MS:.0f} ms): "
                    f"{verdict(p50 <= GOAL_TEMPORAL_ADDED_MS)}; turns/s {timings.rate / then.rate:.2f}x"
                )


@contextlib.contextmanager
def stores_of(name: str) -> Iterator[Stores]:
    """`embedded`, or a PostgreSQL cluster of tests/pg.py started for the run (Debian's postgresql)."""
    if name == "embedded":
        yield Stores(name)
        return
    from tests.pg import running_cluster

    with running_cluster() as cluster:
        yield Stores(name, cluster)


def print_store_ratios(
    base: str, before: dict[int, dict[int, Timings]], name: str, now: dict[int, dict[int, Timings]]
) -> None:
    """Turns per second and p50 on these stores against the first stores', same workers and clients."""
    for workers, levels in now.items():
        for clients, timings in levels.items():
            if clients in before.get(workers, {}):
                then = before[workers][clients]
                p50 = percentile(timings.round_trip, 50) - percentile(then.round_trip, 50)
                print(
                    f"{name} / {base}, {workers} worker(s), {clients} client(s): turns/s "
                    f"{timings.rate / then.rate:.2f}x, p50 {p50:+.1f} ms"
                )


def serve_levels(
    llm_url: str,
    llm_pid: int,
    workers: int,
    options: argparse.Namespace,
    one: dict[int, Timings] | None,
    deployment: Deployment,
    kernel_alone: bool,
    floors: list[Floor],
) -> dict[int, Timings]:
    """`serve --workers N` (local runs) or `serve` and N `agentkernel worker` processes (runs on Temporal)
    on a fresh project: its levels; with `kernel_alone`, the kernel alone's too.

    `one`: one worker's levels, measured before, which the kernel alone is compared with.
    """
    stores = deployment.stores
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as running:
        kernel_yaml = make_project(
            Path(folder), llm_url, max(options.clients), stores.fresh_url(), deployment.runs_yaml()
        )
        on_temporal = deployment.temporal is not None
        command = serve_command(kernel_yaml, options.profile, 1 if on_temporal else workers)
        line, server_pid = running.enter_context(process(command, "agentkernel: serving on "))
        url = line.split()[3]
        worker_pids: list[int] = []
        if on_temporal:
            worker = [sys.executable, "-m", "agentkernel", "worker", "--config", str(kernel_yaml)]
            for _ in range(workers):
                worker_pids.append(running.enter_context(process(worker, "agentkernel: worker on "))[1])
        how = f"1 worker(s), stores: {stores.name}, runs: {deployment.runs}, {workers} agentkernel worker(s)"
        print(
            f"server {url} (agentkernel serve, "
            f"{how if on_temporal else f'{workers} worker(s), stores: {stores.name}'}), "
            f"scripted LLM {llm_url}; one script tool call a turn"
        )
        temporal_pid = deployment.temporal.process.pid if deployment.temporal is not None else None
        cpu = CpuClock(server_pid, llm_pid, stores.pid(), tuple(worker_pids), temporal_pid)
        levels, ratios = asyncio.run(server_levels(url, cpu, options, floors))
        print_floor_ratios(workers, ratios)
        if kernel_alone:  # the server idle meanwhile, as before --workers
            # on the loop `serve` runs on (uvloop when installed), so the difference is the server's layer
            with asyncio.Runner(loop_factory=uvicorn.Config(app="none:none").get_loop_factory()) as runner:
                runner.run(kernel_figures(one or levels, kernel_yaml, cpu, options))
    return levels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--clients",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 10, 100],
        help="numbers of concurrent clients, comma-separated (default 1,10,100)",
    )
    parser.add_argument("--session-turns", type=int, default=5, help="messages per session (default 5)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed turns before the first level")
    parser.add_argument("--samples", type=int, default=200, help="timed turns per level, at least")
    parser.add_argument("--pages", type=int, default=200, help="timed continuation pages")
    parser.add_argument(
        "--workers",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1],
        help="serve --workers counts to measure one after the other, comma-separated (default 1; e.g. 1,2)",
    )
    parser.add_argument(
        "--stores",
        type=lambda text: text.split(","),
        default=["embedded"],
        help="where the server keeps its stores, comma-separated: embedded (SQLite files, the default), "
        "postgres (a throw-away PostgreSQL cluster started for the run, a fresh database each server)",
    )
    parser.add_argument(
        "--runs",
        type=lambda text: text.split(","),
        default=[LOCAL],
        help="where the runs of the PostgreSQL stores' servers are driven, comma-separated: local (in the "
        "server's processes, the default), temporal (a Temporal dev server started for the run, "
        "--workers counting `agentkernel worker` processes); embedded stores always run locally",
    )
    parser.add_argument("--profile", type=Path, help="run the server under cProfile, writing this file")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="embedded stores: pairs of (server, bare agent) measured one after the other at each number "
        "of clients (default 3)",
    )
    parser.add_argument(
        "--kernel-alone",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure the kernel alone too (Kernel.chat(...).send in this process; default on)",
    )
    parser.add_argument("--llm", action="store_true", help=argparse.SUPPRESS)  # the LLM's own process
    parser.add_argument(
        "--bare", nargs="+", help=argparse.SUPPRESS
    )  # a floor's own process: LLM URL, clients[, the durable one's SQLite file[, contract]]
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args()
    if options.llm:
        serve_llm()
        return
    if options.bare:
        record_in = options.bare[2] if len(options.bare) > 2 else None
        serve_bare(options.bare[0], int(options.bare[1]), record_in, contract="contract" in options.bare[3:])
        return
    if options.smoke:
        # more clients than one user may run turns at once: the figures still come (a user per client)
        vars(options).update(clients=[1, USER_TURN_CAP + 1], session_turns=2, samples=2, pages=2, warmup=1)
        vars(options).update(rounds=1, kernel_alone=True)
        # every path, so none rots: each store, runs on Temporal, one worker and two
        vars(options).update(stores=["embedded", "postgres"], runs=[LOCAL, TEMPORAL], workers=[1, 2])
    if TEMPORAL in options.runs and "postgres" not in options.stores:
        parser.error("--runs temporal runs with the PostgreSQL stores: add postgres to --stores")
    deployments = [(name, runs) for name in options.stores for runs in runs_of(name, options.runs)]
    last_local = max((n for n, (_, runs) in enumerate(deployments) if runs == LOCAL), default=-1)
    with contextlib.ExitStack() as running:
        llm_url, llm_pid = running.enter_context(process([sys.executable, __file__, "--llm"], "http://"))
        floors = []
        if "embedded" in options.stores:  # the floors beside the embedded stores' server (issue 31)
            folder = running.enter_context(tempfile.TemporaryDirectory())
            for name, record in (
                ("bare agent", []),
                ("durable bare agent", [f"{folder}/bare.db"]),
                ("contract bare agent", [f"{folder}/contract.db", "contract"]),
            ):
                bare = [sys.executable, __file__, "--bare", llm_url, str(max(options.clients)), *record]
                line, bare_pid = running.enter_context(process(bare, "bare agent: serving on "))
                floors.append(Floor(name, line.split()[4], CpuClock(bare_pid, llm_pid), goal=not record))
        measured: dict[tuple[str, str], dict[int, dict[int, Timings]]] = {}
        for name in options.stores:
            with stores_of(name) as stores:
                for runs in runs_of(name, options.runs):
                    with deployment_of(stores, runs) as deployment:
                        by_workers: dict[int, dict[int, Timings]] = {}
                        for workers in options.workers:
                            alone = workers == options.workers[-1] and (name, runs) == deployments[last_local]
                            by_workers[workers] = serve_levels(
                                llm_url,
                                llm_pid,
                                workers,
                                options,
                                by_workers.get(1),
                                deployment,
                                alone and options.kernel_alone,
                                floors if name == "embedded" else [],
                            )
                    print_worker_ratios(deployment.label, by_workers)
                    first = measured.get((options.stores[0], LOCAL))
                    if runs == LOCAL and first is not None:
                        print_store_ratios(options.stores[0], first, name, by_workers)
                    if runs == TEMPORAL and (name, LOCAL) in measured:
                        print_temporal_added(measured[name, LOCAL], by_workers)
                    measured[name, runs] = by_workers


def runs_of(stores: str, runs: list[str]) -> list[str]:
    """Where the runs of servers on `stores` are driven: on Temporal only with PostgreSQL stores."""
    return runs if stores == "postgres" else [LOCAL]


if __name__ == "__main__":
    main()
