"""`agentkernel cron run | list | cancel` as people run them: real subprocesses (S10.2, S10.3; issue 13 §7).

A job is set the way a script sets it (`agentkernel tool run` of a tool
calling `schedule_cron`, as a user), `cron list` shows it, `cron run` — a
scheduler alone, in its own process — fires it into a webhook receiver on
127.0.0.1 in this process, with the scripted LLM answering, and stops on
SIGINT with exit 0; `cron cancel` removes it. Every wait is on an event
(a POST arriving, a line printed, a process ending); the timeouts are
safety nets, never measurements.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ctrl_c_default, write_kernel_yaml
from tests.fakes import FakeLLMServer, Reply

BIN = Path(sys.executable).parent
WAIT_SECS = 120.0  # a safety net against a hang, not a speed check

SCHEDULER_JS = """
function run(args) {
    return schedule_cron({
        name: args.name,
        template: "pinger",
        interval_secs: 1,
        prompt: "Как цена?",
        notify: [{type: "webhook", url: args.url}, {type: "log"}],
    });
}
"""


class Receiver(ThreadingHTTPServer):
    """A webhook receiver on 127.0.0.1: each POST's JSON body and Idempotency-Key, in a queue."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ReceiverHandler)
        self.posts: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    def next_post(self) -> tuple[str, dict[str, Any]]:
        try:
            return self.posts.get(timeout=WAIT_SECS)
        except queue.Empty:
            raise AssertionError("no webhook arrived") from None


class _ReceiverHandler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.server.posts.put((self.headers.get("Idempotency-Key", ""), json.loads(body)))

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def cron_project(tmp_path: Path, llm_server: FakeLLMServer) -> Path:
    """A project whose scripted LLM answers every run and whose http rules reach loopback."""
    llm_server.respond_with(lambda _request: Reply(text="цена 42"))
    write_kernel_yaml(
        tmp_path,
        f"llm:\n  base_url: {llm_server.base_url}\n  model: fake\n  max_retries: 0\n"
        "http:\n  allow_private: true\n",  # the receiver is on 127.0.0.1, off limits by default
    )
    templates = tmp_path / "config" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    (templates / "pinger.yaml").write_text("name: pinger\ninstructions: Коротко сообщай цену.\n")
    tools = tmp_path / "config" / "scripts" / "tools"
    (tools / "plan.js").write_text(SCHEDULER_JS, encoding="utf-8")
    (tools / "plan.yaml").write_text("kind: script_tool\nname: plan\nscript: plan.js\n", encoding="utf-8")
    return tmp_path


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}


def agentkernel(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "agentkernel"), *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=WAIT_SECS,
        check=False,
    )


def schedule(project: Path, name: str, url: str, user: str) -> None:
    done = agentkernel(
        "tool", "run", "plan", json.dumps({"name": name, "url": url}), "--user", user, cwd=project
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["success"] is True, done.stdout


def jobs(project: Path, *user: str) -> list[dict[str, Any]]:
    done = agentkernel("cron", "list", "--json", *(("--user", user[0]) if user else ()), cwd=project)
    assert done.returncode == 0, done.stderr
    listed: list[dict[str, Any]] = json.loads(done.stdout)
    return listed


def test_list_shows_every_users_jobs_or_one_users(cron_project: Path, receiver: Receiver) -> None:
    empty = agentkernel("cron", "list", cwd=cron_project)
    assert empty.returncode == 0 and empty.stdout == "no cron jobs in logs/cron.db\n", empty
    assert not (cron_project / "logs" / "cron.db").exists(), "listing made no store"
    schedule(cron_project, "price", receiver.url, "anna")
    schedule(cron_project, "price", receiver.url, "boris")
    table = agentkernel("cron", "list", cwd=cron_project)
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["OWNER", "NAME", "TIMING", "NEXT", "RUN", "LAST", "RUN", "OK", "RUNS"]
    assert [row.split()[:2] for row in rows] == [["anna", "price"], ["boris", "price"]]
    assert all(" every 1 s " in row and row.split()[-2:] == ["-", "0"] for row in rows), rows
    (anna,) = jobs(cron_project, "anna")
    assert (anna["owner"], anna["name"], anna["timing"], anna["runs"]) == (
        "anna",
        "price",
        {"interval_secs": 1},
        0,
    )
    nobody = agentkernel("cron", "list", "--user", "vera", cwd=cron_project)
    assert nobody.stdout == "no cron jobs of 'vera' in logs/cron.db\n", nobody.stdout


def test_cron_run_fires_a_job_into_a_webhook_and_stops_on_sigint(
    cron_project: Path, receiver: Receiver, llm_server: FakeLLMServer
) -> None:
    schedule(cron_project, "price", receiver.url, "anna")
    worker = subprocess.Popen(
        [str(BIN / "agentkernel"), "cron", "run"],
        cwd=cron_project,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_default,
    )
    try:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line == "agentkernel: scheduling the jobs of logs/cron.db (Ctrl-C stops)\n", line
        key, payload = receiver.next_post()
        assert payload["job"] == "price" and payload["ok"] is True and payload["answer"] == "цена 42", payload
        assert payload["error"] is None and payload["fired_at"] >= payload["scheduled_at"]
        assert key == f"anna/price@{payload['scheduled_at']}"
        worker.send_signal(signal.SIGINT)  # Ctrl-C
        assert worker.wait(timeout=WAIT_SECS) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    log = worker.stderr.read() if worker.stderr else ""
    assert "Traceback" not in log and "cron anna/price (" in log and "цена 42" in log, log  # the log sink
    assert llm_server.bodies, "the job's agent asked the LLM"
    (job,) = jobs(cron_project, "anna")
    assert job["runs"] >= 1 and job["last_ok"] is True and job["running"] is False, job


def test_cancel_removes_only_the_owners_job(cron_project: Path, receiver: Receiver) -> None:
    schedule(cron_project, "price", receiver.url, "anna")
    other = agentkernel("cron", "cancel", "price", "--user", "boris", cwd=cron_project)
    assert other.returncode == 1 and other.stdout == ""
    assert "'boris' has no job named 'price'" in other.stderr, other.stderr
    assert [job["name"] for job in jobs(cron_project)] == ["price"]
    done = agentkernel("cron", "cancel", "price", "--user", "anna", cwd=cron_project)
    assert done.returncode == 0 and done.stdout == "cancelled anna/price\n", done
    assert jobs(cron_project) == []
    again = agentkernel("cron", "cancel", "price", "--user", "anna", cwd=cron_project)
    assert again.returncode == 1 and "'anna' has no job named 'price'" in again.stderr


def test_cancel_needs_the_owner(cron_project: Path) -> None:
    done = agentkernel("cron", "cancel", "price", cwd=cron_project)
    assert done.returncode == 2 and "--user" in done.stderr


def test_a_wrong_static_job_stops_cron_run_naming_the_field(cron_project: Path) -> None:
    kernel_yaml = cron_project / "config" / "kernel.yaml"
    kernel_yaml.write_text(
        kernel_yaml.read_text()
        + "cron:\n  jobs:\n    - {name: nightly, template: pinger, schedule: '0 0 9 * *', prompt: Отчёт}\n"
    )
    done = agentkernel("cron", "run", cwd=cron_project)
    assert done.returncode == 1, done
    assert (
        "agentkernel cron run: cron.jobs[0].schedule: must be a cron expression of six fields" in done.stderr
    )
    assert "Traceback" not in done.stderr


def test_cron_run_refuses_when_runs_are_on_temporal(cron_project: Path) -> None:
    """With runs.engine: temporal the workers fire the jobs from Temporal Schedules (kernel.md 14.1)."""
    kernel_yaml = cron_project / "config" / "kernel.yaml"
    kernel_yaml.write_text(kernel_yaml.read_text() + "runs:\n  engine: temporal\n  address: 127.0.0.1:1\n")
    done = agentkernel("cron", "run", cwd=cron_project)
    assert done.returncode == 1, done
    assert "runs.engine is `temporal`: the jobs fire from Temporal Schedules" in done.stderr
    assert "scheduling the jobs" not in done.stdout
