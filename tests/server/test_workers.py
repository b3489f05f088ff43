"""`agentkernel serve --workers 2`: two processes on one port answer as one (issue 27 item 5).

The server is a real `agentkernel serve --workers 2 --port 0` on a project
folder; the scripted LLM runs in the test's process. Which worker answered is
seen through a real tool: `pid` runs `echo $PPID` with the shell helper, and
the shell's parent is the worker that ran the tool. Each request goes on a
new connection, so the kernel hands it to whichever worker accepts first;
the tests send until both workers answered (bounded), never assuming an
order. Nothing sleeps: the tests wait on the parent's /proc children and on
answers.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkernel.server.workers import Supervisor, WorkerFailed
from tests.conftest import ctrl_c_default, wait_until
from tests.fakes import FakeLLMServer, RecordedRequest, Reply
from tests.fakes.openai_server import CHAT_PATH, FakeToolCall
from tests.server.conftest import make_project, script_tool, sse_events, write

BIN = Path(sys.executable).parent
WAIT_SECS = 60.0  # an upper bound for one answer, never a measured time
MOST_TRIES = 200  # requests sent before giving up on seeing both workers (a bound, not an expectation)

WORKER = "shell('echo $PPID').stdout.trim()"  # the shell's parent: the worker running the tool
PID = f"function run(args) {{ return {WORKER}; }}"
REMEMBER = f"function run(args) {{ return {WORKER} + ' ' + args.value; }}"
RECALL = f"function run(args) {{ return {WORKER} + ' ' + get_tool_result('remember').content; }}"
DUCK = f"""
function run(args) {{
  db_execute('shared.duckdb', 'CREATE TABLE IF NOT EXISTS hits (n INTEGER)');
  db_execute('shared.duckdb', 'INSERT INTO hits VALUES (?)', [args.n]);
  var counted = db_query('shared.duckdb', 'SELECT count(*) AS c FROM hits', 1).rows[0].c;
  return {WORKER} + ' ' + counted;
}}
"""


def llm_turn(request: RecordedRequest) -> Reply:
    """A user's message: call `pid`; the tool's result: say it."""
    messages = (request.body or {}).get("messages", [])
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return Reply(text=f"worker {last['content']}")
    return Reply(tool_calls=(FakeToolCall("pid", "{}", id=f"call-{len(messages)}"),))


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(max_requests=2000) as server:
        server.respond_with(llm_turn)
        yield server


@pytest.fixture
def project(tmp_path: Path, llm: FakeLLMServer) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    make_project(root, llm, "shell:\n  enabled: true\n")
    tools = root / "config" / "scripts" / "tools"
    script_tool(tools, "pid", PID)
    script_tool(
        tools,
        "remember",
        REMEMBER,
        parameters={"type": "object", "properties": {"value": {"type": "string"}}},
    )
    script_tool(tools, "recall", RECALL)
    script_tool(tools, "duck", DUCK, parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    write(
        root / "config" / "templates" / "worker.yaml",
        "name: worker\ninstructions: Say which worker.\ntools: [pid, remember, recall, duck]\n",
    )
    return root


class Workers:
    """`agentkernel serve --workers 2 --port 0` in a project: the parent, its URL, its log."""

    def __init__(self, root: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
        self.log = root / "serve.log"
        with self.log.open("w") as errors:
            self.parent = subprocess.Popen(
                [str(BIN / "agentkernel"), "serve", "--port", "0", "--workers", "2"],
                cwd=root,
                env=env,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                preexec_fn=ctrl_c_default,
            )
        assert self.parent.stdout is not None
        line = self.parent.stdout.readline()
        assert line.startswith("agentkernel: serving on http://127.0.0.1:"), (line, self.log.read_text())
        assert line.rstrip().endswith("with 2 workers (Ctrl-C stops)")
        self.url = line.split()[3]

    def children(self) -> set[int]:
        """The worker processes now (the parent's children)."""
        path = Path(f"/proc/{self.parent.pid}/task/{self.parent.pid}/children")
        try:
            return {int(pid) for pid in path.read_text().split()}
        except FileNotFoundError:
            return set()

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """One request on a connection of its own: any worker may take it."""
        with httpx.Client(base_url=self.url, timeout=WAIT_SECS) as client:
            return client.post(path, json=body)

    def run_tool(self, name: str, args: dict[str, Any], session: str | None = None) -> tuple[int, str]:
        """(the worker's pid, the rest of the tool's content)."""
        body: dict[str, Any] = {"args": args} if session is None else {"args": args, "session": session}
        answer = self.post(f"/v1/tools/{name}/run", body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["success"], answer.text
        pid, _, rest = answer.json()["content"].partition(" ")
        return int(pid), rest

    def stop(self) -> None:
        if self.parent.poll() is None:
            self.parent.terminate()
            try:
                self.parent.wait(WAIT_SECS)
            finally:
                if self.parent.poll() is None:
                    self.parent.kill()
                    self.parent.wait()


@pytest.fixture
def served(project: Path) -> Iterator[Workers]:
    workers = Workers(project)
    try:
        wait_until(lambda: len(workers.children()) == 2, "two workers")
        yield workers
    finally:
        workers.stop()
    assert "Traceback" not in workers.log.read_text(), workers.log.read_text()


def until_both(served: Workers, attempt: Callable[[int], int]) -> set[int]:
    """Call `attempt(i)` (it returns the worker's pid) until both workers answered."""
    seen: set[int] = set()
    for tried in range(MOST_TRIES):
        seen.add(attempt(tried))
        if len(seen) == 2:
            break
    assert seen == served.children(), (seen, served.children())
    return seen


def test_requests_land_on_both_workers(served: Workers) -> None:
    until_both(served, lambda _: served.run_tool("pid", {})[0])


def test_a_sessions_messages_across_workers_each_see_the_whole_history(
    served: Workers, llm: FakeLLMServer
) -> None:
    made = served.post("/v1/sessions", {"template": "worker"})
    assert made.status_code == 201, made.text
    session = made.json()["id"]
    said: list[str] = []

    def turn(n: int) -> int:
        said.append(f"message {n}")
        answer = served.post(f"/v1/sessions/{session}/messages", {"content": said[-1]})
        assert answer.status_code == 200, answer.text
        reply = dict(sse_events(answer.text))["reply"]["content"]
        return int(reply.removeprefix("worker "))

    until_both(served, turn)
    finals = [
        r.body for r in llm.requests if r.path == CHAT_PATH and r.body["messages"][-1]["role"] == "tool"
    ]
    assert len(finals) == len(said)
    for count, body in enumerate(finals, start=1):  # each turn's LLM saw every message before it
        assert [m["content"] for m in body["messages"] if m["role"] == "user"] == said[:count]


def test_get_tool_result_reads_a_result_another_worker_recorded(served: Workers) -> None:
    made = served.post("/v1/sessions", {"template": "worker"})
    assert made.status_code == 201, made.text
    session = made.json()["id"]
    recorded_by, _ = served.run_tool("remember", {"value": "kept"}, session)

    def recall(_: int) -> int:
        pid, found = served.run_tool("recall", {}, session)
        assert found == f"{recorded_by} kept"
        return pid

    assert until_both(served, recall) == served.children()


def test_a_duckdb_tool_used_through_both_workers_at_once_succeeds(served: Workers) -> None:
    """Four calls at a time (server.max_running_tool_runs_per_user), on one user's file, until both
    workers ran some: every call succeeds and every insert lands."""
    answers: list[tuple[int, str]] = []
    with ThreadPoolExecutor(4) as pool:
        for batch in range(MOST_TRIES // 4):
            numbers = range(batch * 4, batch * 4 + 4)
            answers += pool.map(lambda n: served.run_tool("duck", {"n": n}), numbers)
            if len({pid for pid, _ in answers}) == 2:
                break
    assert {pid for pid, _ in answers} == served.children(), answers
    assert max(int(count) for _, count in answers) == len(answers)  # every insert landed


def test_a_killed_worker_is_started_again_and_the_port_keeps_answering(served: Workers) -> None:
    before = served.children()
    killed = min(before)
    os.kill(killed, signal.SIGKILL)
    with httpx.Client(base_url=served.url, timeout=WAIT_SECS) as client:
        assert client.get("/healthz").status_code == 200  # the other worker answers meanwhile
    wait_until(lambda: len(served.children()) == 2 and killed not in served.children(), "a new worker")
    until_both(served, lambda _: served.run_tool("pid", {})[0])
    assert f"(pid {killed}) ended (killed by SIGKILL)" in served.log.read_text()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stopping_signal_stops_the_workers_and_the_parent_exits_0(served: Workers, stop: int) -> None:
    workers = served.children()
    served.parent.send_signal(stop)
    assert served.parent.wait(WAIT_SECS) == 0
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]


def test_a_worker_still_starting_when_the_parent_stops_stops_too(served: Workers) -> None:
    """Stopped before it could catch signals (just restarted): it stops once loaded, exit 0 for all."""
    killed = min(served.children())
    os.kill(killed, signal.SIGKILL)
    wait_until(lambda: len(served.children() - {killed}) == 2, "a new worker")
    starting = served.children() - {killed}
    served.parent.send_signal(signal.SIGTERM)
    assert served.parent.wait(WAIT_SECS) == 0, served.log.read_text()
    assert not [pid for pid in starting if _alive(pid)]


def test_a_parent_killed_with_9_leaves_no_worker_behind(served: Workers) -> None:
    workers = served.children()
    served.parent.kill()
    served.parent.wait()
    wait_until(lambda: not [pid for pid in workers if _alive(pid)], "the workers to stop")


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for init to reap it."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("given", ["0", "-1", "many", "1.5"])
def test_workers_must_be_a_number_of_processes(project: Path, given: str) -> None:
    ran = subprocess.run(
        [str(BIN / "agentkernel"), "serve", "--workers", given],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=WAIT_SECS,
    )
    assert ran.returncode == 2
    assert (
        f"argument --workers: expected a number of processes, 1 or more, or 'auto' (the cores), got {given!r}"
        in (ran.stderr)
    )


def test_a_worker_that_ends_while_starting_stops_the_start() -> None:
    """The parent's side alone, with a worker command that fails at once: WorkerFailed names it."""
    caught = (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)  # the supervisor's own: given back after
    handlers = {signum: signal.getsignal(signum) for signum in caught}
    try:
        _start_failing()
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def _start_failing() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        supervisor = Supervisor(listening, 2, lambda index, *fds: [sys.executable, "-c", "exit(3)"], 1.0)
        with pytest.raises(WorkerFailed, match=r"^worker 1 ended while starting \(status 3\)$"):
            supervisor.start()
    assert all(worker.process.poll() is not None for worker in supervisor.workers)
