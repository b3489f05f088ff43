"""Cron jobs in `agentkernel serve` as real processes (issue 13, "Tests"; S10).

Each server is `agentkernel serve --port 0` in a subprocess, on a project
wired to the scripted LLM (every run answers `price is 42`). A script tool
run through `POST /v1/tools/{name}/run` schedules the jobs; their webhook
sink posts to a receiver on 127.0.0.1 in this process
(tests/fakes/webhook.py), which wakes the test on each POST. Nothing
sleeps: the test waits on the receiver (bounded by generous timeouts), and
absence is shown by waiting for a later firing of another job, never by a
pause. Numbers such as S10 point to docs/contract.md.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkernel.config.server import token_hash
from tests.fakes import FakeLLMServer, RecordedRequest, Reply
from tests.fakes.webhook import WebhookReceiver
from tests.server.conftest import make_project, script_tool, write

BIN = Path(sys.executable).parent
WAIT_SECS = 120.0  # an upper bound for one thing to happen, never a measured time
ANSWER = "price is 42"
TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}


def of(hook: WebhookReceiver, job: str) -> list[dict[str, Any]]:
    """The POSTs of `job` so far (a snapshot taken under the receiver's lock)."""
    return [post for post in hook.wait_until(lambda _: True, "a snapshot") if post["job"] == job]


def wait_job(
    hook: WebhookReceiver, job: str, check: Callable[[list[dict[str, Any]]], bool], what: str
) -> list[dict[str, Any]]:
    """The POSTs of `job` once `check` holds for them; fails after WAIT_SECS."""
    posts = hook.wait_until(lambda bodies: check([b for b in bodies if b["job"] == job]), what, WAIT_SECS)
    return [post for post in posts if post["job"] == job]


def count(hook: WebhookReceiver, job: str, least: int) -> list[dict[str, Any]]:
    return wait_job(hook, job, lambda posts: len(posts) >= least, f"{least} POSTs of {job!r}")


def due_after(hook: WebhookReceiver, job: str, moment: float) -> list[dict[str, Any]]:
    """Wait for a POST of `job` whose due time is later than `moment` (epoch seconds)."""
    return wait_job(
        hook, job, lambda posts: any(due(p) > moment for p in posts), f"{job!r} due after {moment}"
    )


def due(post: dict[str, Any]) -> float:
    return datetime.fromisoformat(post["scheduled_at"].replace("Z", "+00:00")).timestamp()


class Served:
    """`agentkernel serve --port 0` on a project: its process, URL and stderr (a file: a pipe could fill)."""

    def __init__(self, root: Path, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
        self.log = log
        with log.open("ab") as stderr:
            self.process = subprocess.Popen(  # -v: the `log` sink's INFO lines say which due times it ran
                [str(BIN / "agentkernel"), "-v", "serve", "--port", "0"],
                cwd=root,
                env=env,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("agentkernel: serving on http://127.0.0.1:"), (line, log.read_text())
        self.url = line.split()[3]

    def client(self, headers: dict[str, str] = ALICE) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def ran(self, job: str) -> set[str]:
        """The due times of `job` this server ran, from its `log` sink's lines."""
        found = re.findall(rf"INFO agentkernel\.cron: cron alice/{job} \((\S+)\): ", self.log.read_text())
        return set(found)

    def alive(self) -> bool:
        return self.process.poll() is None and httpx.get(f"{self.url}/healthz", timeout=60).status_code == 200

    def kill(self) -> None:
        """`kill -9`: no shutdown, no cleanup, a claim or a run possibly cut in the middle."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=60)

    def stop(self) -> None:
        """SIGTERM: the server (and its scheduler) stop cleanly, exit 0, and logged no traceback."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                assert self.process.wait(timeout=WAIT_SECS) == 0, self.log.read_text()
            finally:
                if self.process.poll() is None:
                    self.process.kill()
                    self.process.wait()
        assert "Traceback" not in self.log.read_text()


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    def answer(_: RecordedRequest) -> Reply:
        return Reply(text=ANSWER)

    with FakeLLMServer(max_requests=2000) as server:
        server.respond_with(answer)
        yield server


@pytest.fixture
def project(tmp_path: Path, llm: FakeLLMServer) -> Path:
    """Tokens for alice and bob, loopback webhooks allowed, template `watcher`, tools cron_set/cancel/list."""
    tokens = "".join(f'    "{token_hash(token)}": {user}\n' for token, user in TOKENS.items())
    extra = f"server:\n  tokens:\n{tokens}http:\n  allow_private: true\ncron:\n  run_timeout_secs: 10\n"
    make_project(tmp_path, llm, extra)
    tools = tmp_path / "config" / "scripts" / "tools"
    script_tool(tools, "cron_set", "function run(args) { return JSON.stringify(schedule_cron(args)); }")
    script_tool(tools, "cron_cancel", "function run(args) { return String(cancel_cron(args.name)); }")
    script_tool(tools, "cron_list", "function run(args) { return JSON.stringify(list_cron()); }")
    write(
        tmp_path / "config" / "templates" / "watcher.yaml",
        "name: watcher\ninstructions: Report the price.\nmax_turns: 2\n",
    )
    return tmp_path


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Callable[[Path], Served]]:
    """Starts servers on a project; each still running at the end is stopped with SIGTERM (and checked)."""
    started: list[Served] = []

    def start(root: Path) -> Served:
        started.append(Served(root, tmp_path / f"serve-{len(started)}.log"))
        return started[-1]

    yield start
    for served in started:
        served.stop()


def run_tool(client: httpx.Client, name: str, args: dict[str, Any]) -> str:
    ran = client.post(f"/v1/tools/{name}/run", json={"args": args})
    assert ran.status_code == 200, ran.text
    assert ran.json()["success"] is True, ran.json()
    return str(ran.json()["content"])


def schedule(client: httpx.Client, receiver: WebhookReceiver, name: str, **timing: object) -> None:
    job = {"name": name, "template": "watcher", "prompt": "How is the price?", **timing}
    job["notify"] = [{"type": "log"}, {"type": "webhook", "url": receiver.url}]  # logged before posted
    assert json.loads(run_tool(client, "cron_set", job)) == {"name": name, "ok": True}


def listed(client: httpx.Client) -> dict[str, dict[str, Any]]:
    jobs = client.get("/v1/cron")
    assert jobs.status_code == 200, jobs.text
    return {job["name"]: job for job in jobs.json()}


def test_s10_2_a_job_fires_into_a_webhook_and_again_after_kill_9(
    project: Path, receiver: WebhookReceiver, servers: Callable[[Path], Served]
) -> None:
    """Scheduled by a script in a running server, it fires; killed and started again, it goes on."""
    server = servers(project)
    with server.client() as client:
        schedule(client, receiver, "tick", interval_secs=1)
        first = count(receiver, "tick", 2)[0]
        assert set(first) == {"job", "scheduled_at", "fired_at", "ok", "answer", "error"}
        assert (first["job"], first["ok"], first["answer"], first["error"]) == ("tick", True, ANSWER, None)
        key = receiver.headers[receiver.bodies.index(first)]["Idempotency-Key"]
        assert key == f"alice/tick@{first['scheduled_at']}"  # the same for every retry of it
        status = listed(client)["tick"]
        assert status["timing"] == {"interval_secs": 1.0} and status["last_ok"] is True
        assert status["runs"] >= 1 and status["last_error"] is None and status["done"] is False

    server.kill()
    before = of(receiver, "tick")
    latest = max(due(post) for post in before)
    again = servers(project)  # the same project: the same logs/cron.db
    fired = due_after(receiver, "tick", latest)
    assert fired[-1]["ok"] is True and fired[-1]["answer"] == ANSWER
    assert again.alive()
    dues = [post["scheduled_at"] for post in of(receiver, "tick")]
    assert len(dues) == len(set(dues)), f"a due time was delivered twice: {dues}"


@pytest.mark.parametrize("where", [pytest.param("sqlite", marks=pytest.mark.embedded_only), "postgres"])
def test_two_servers_on_one_store_fire_each_due_time_once(
    where: str,
    request: pytest.FixtureRequest,
    project: Path,
    receiver: WebhookReceiver,
    servers: Callable[[Path], Served],
) -> None:
    """S10 decision: each due time claimed in one transaction, so two live kernels never both run it; on
    the cron file, or with `store.url` in PostgreSQL (as two machines would: no cron file at all)."""
    if where == "postgres":
        with (project / "config" / "kernel.yaml").open("a", encoding="utf-8") as kernel_yaml:
            kernel_yaml.write(f"store:\n  url: {request.getfixturevalue('pg_url')}\n")
    one = servers(project)
    with one.client() as client:
        schedule(client, receiver, "shared", interval_secs=1)
    count(receiver, "shared", 1)
    two = servers(project)  # started with the job in the store: it wakes at each due time too
    both_up = time.time()
    wait_job(
        receiver,
        "shared",
        lambda posts: sum(due(p) > both_up for p in posts) >= 5,
        "5 due times with both up",
    )
    assert one.alive() and two.alive()  # both schedulers were running throughout
    posts = of(receiver, "shared")
    dues = [post["scheduled_at"] for post in posts]
    assert len(dues) == len(set(dues)), f"a due time was delivered twice: {dues}"
    moments = sorted(due(post) for post in posts)
    gaps = [later - earlier for earlier, later in itertools.pairwise(moments)]
    assert min(gaps) >= 0.998, f"due times closer than the interval: {gaps}"  # ms rounding of RFC 3339
    assert all(post["ok"] for post in posts)
    # each server's log says which due times it ran: none ran by both, none delivered unlogged
    by_one, by_two = one.ran("shared"), two.ran("shared")
    assert by_one.isdisjoint(by_two), f"run by both servers: {sorted(by_one & by_two)}"
    assert set(dues) <= by_one | by_two
    assert (project / "logs" / "cron.db").exists() == (where == "sqlite")


def test_s10_2_a_oneshot_fires_once_and_cancelled_jobs_stop(
    project: Path, receiver: WebhookReceiver, servers: Callable[[Path], Served]
) -> None:
    """A oneshot is kept as done; cancelled by DELETE /v1/cron/{name} or by cancel_cron, a job stops."""
    server = servers(project)
    with server.client() as client:
        schedule(client, receiver, "clock", interval_secs=1)  # shows the scheduler went on
        at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat().replace("+00:00", "Z")
        schedule(client, receiver, "once", oneshot_at=at)
        schedule(client, receiver, "by-api", interval_secs=1)
        schedule(client, receiver, "by-script", interval_secs=1)

        (fired,) = count(receiver, "once", 1)
        assert fired["scheduled_at"] == at[:23] + "Z" and fired["ok"] is True
        jobs = listed(client)
        assert jobs["once"]["done"] is True and jobs["once"]["next_run"] is None and jobs["once"]["runs"] == 1
        assert jobs["once"]["timing"] == {"oneshot_at": at[:23] + "Z"}

        count(receiver, "by-api", 1)
        count(receiver, "by-script", 1)
        gone = client.delete("/v1/cron/by-api")
        assert gone.status_code == 204 and gone.content == b""
        assert run_tool(client, "cron_cancel", {"name": "by-script"}) == "true"
        cancelled = time.time()
        assert set(listed(client)) == {"clock", "once"}
        again = client.delete("/v1/cron/by-api")
        assert again.status_code == 404 and again.json()["detail"] == "no job 'by-api'"
        assert run_tool(client, "cron_cancel", {"name": "by-script"}) == "false"

        # three due times of `clock` later, neither cancelled job has a due time after the cancel
        due_after(receiver, "clock", cancelled + 3)
        for name in ("by-api", "by-script"):
            late = [post["scheduled_at"] for post in of(receiver, name) if due(post) > cancelled]
            assert late == [], f"{name} fired after it was cancelled: {late}"
        assert len(of(receiver, "once")) == 1
        assert listed(client)["once"]["runs"] == 1


def test_another_user_can_neither_list_nor_cancel_a_job(
    project: Path, receiver: WebhookReceiver, servers: Callable[[Path], Served]
) -> None:
    """S10 decision, S23.6: a job is its user's, over HTTP and from scripts; another's is a 404."""
    server = servers(project)
    with server.client(ALICE) as alice, server.client(BOB) as bob:
        schedule(alice, receiver, "mine", interval_secs=3600)
        assert set(listed(alice)) == {"mine"}
        assert listed(bob) == {}
        assert json.loads(run_tool(bob, "cron_list", {})) == []
        refused = bob.delete("/v1/cron/mine")
        assert refused.status_code == 404 and refused.json()["detail"] == "no job 'mine'"
        assert run_tool(bob, "cron_cancel", {"name": "mine"}) == "false"
        assert set(listed(alice)) == {"mine"}  # still there, still alice's

        # bob's job of the same name is a different job
        schedule(bob, receiver, "mine", interval_secs=7200)
        assert listed(bob)["mine"]["timing"] == {"interval_secs": 7200.0}
        assert listed(alice)["mine"]["timing"] == {"interval_secs": 3600.0}
        assert alice.delete("/v1/cron/mine").status_code == 204
        assert set(listed(bob)) == {"mine"}
        nobody = httpx.get(f"{server.url}/v1/cron", timeout=60)
        assert nobody.status_code == 401


def test_s10_a_session_sink_set_in_a_new_chat_posts_into_that_chat(
    project: Path, receiver: WebhookReceiver, servers: Callable[[Path], Served]
) -> None:
    """A tool run in a chat with no messages yet schedules into the chat itself: the caller's own session
    always qualifies (scripts.md 8.14); another user naming that chat is still refused."""
    write(
        project / "config" / "templates" / "planner.yaml",
        "name: planner\ninstructions: Plan.\ntools: [cron_set]\n",
    )
    server = servers(project)
    with server.client(ALICE) as alice, server.client(BOB) as bob:
        made = alice.post("/v1/sessions", json={"template": "planner"})
        assert made.status_code == 201, made.text
        chat = made.json()["id"]
        job = {"name": "into-chat", "template": "watcher", "prompt": "How is the price?", "interval_secs": 1}
        job["notify"] = [{"type": "session"}, {"type": "webhook", "url": receiver.url}]
        ran = alice.post("/v1/tools/cron_set/run", json={"args": job, "session": chat})
        assert ran.status_code == 200, ran.text
        assert json.loads(ran.json()["content"]) == {"name": "into-chat", "ok": True}, ran.json()

        def answers() -> list[dict[str, Any]]:
            shown = alice.get(f"/v1/sessions/{chat}/messages")
            assert shown.status_code == 200, shown.text
            return [r for r in shown.json() if r["meta"] and r["meta"].get("cron") == "into-chat"]

        deadline = time.monotonic() + WAIT_SECS
        while not answers():
            assert time.monotonic() < deadline, "the job's answer never reached the chat"
            time.sleep(0.05)
        assert answers()[0]["content"] == ANSWER

        theirs = {**job, "name": "into-alices", "notify": [{"type": "session", "session_id": chat}]}
        refused = bob.post("/v1/tools/cron_set/run", json={"args": theirs})
        assert refused.json()["success"] is False
        assert f"{chat!r} is not a session of 'bob'" in refused.json()["content"], refused.json()
