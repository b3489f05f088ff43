"""Cron jobs on Temporal (S10, S27.2): Schedules fire them on `agentkernel worker` processes.

Real parts: the CLI's Temporal dev server (tests/temporal.py), a real
`agentkernel serve` (where a script tool schedules the jobs: it fires
nothing itself with `runs.engine: temporal`) and real workers, the scripted
LLM and a webhook receiver in the test that wakes it on each delivery. A
firing while every worker is down runs once when one comes back (`misfire:
run_once`), or is skipped (`misfire: skip`) — Temporal's overlap policy
coalescing the due times in between. Nothing sleeps: the test waits on the
receiver, on the store and on the Schedule as Temporal describes it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, ScheduleActionExecutionStartWorkflow, ScheduleDescription
from temporalio.service import RPCError, RPCStatusCode

from agentkernel.config.server import token_hash
from agentkernel.services.cron import job_session
from tests.fakes import FakeLLMServer, RecordedRequest, Reply
from tests.fakes.webhook import WebhookReceiver
from tests.server.conftest import make_project, script_tool, write
from tests.server.test_cron_serving import ANSWER, Served, count, due, listed, of, run_tool, schedule
from tests.server.test_run_worker import working

WAIT_SECS = 120.0  # an upper bound for one thing to happen, never a measured time


@pytest.fixture
def project(
    tmp_path: Path, llm_server: FakeLLMServer, temporal_address: str, temporal_task_queue: str
) -> Path:
    """alice's token, loopback webhooks, template `watcher`, tool cron_set; runs (and cron) on Temporal."""
    extra = (
        f"server:\n  tokens:\n    {token_hash('alice-token')}: alice\nhttp:\n  allow_private: true\n"
        "cron:\n  run_timeout_secs: 10\n  misfire_grace_secs: 1\n"
        f"runs:\n  engine: temporal\n  address: '{temporal_address}'\n  task_queue: {temporal_task_queue}\n"
        "  heartbeat_secs: 1\n"
    )
    llm_server.respond_with(lambda _: Reply(text=ANSWER))
    make_project(tmp_path, llm_server, extra)
    tools = tmp_path / "config" / "scripts" / "tools"
    script_tool(tools, "cron_set", "function run(args) { return JSON.stringify(schedule_cron(args)); }")
    write(
        tmp_path / "config" / "templates" / "watcher.yaml",
        "name: watcher\ninstructions: Report the price.\nmax_turns: 2\n",
    )
    return tmp_path


@pytest.fixture
def serve(project: Path, tmp_path: Path) -> Iterator[Served]:
    served = Served(project, tmp_path / "serve.log")
    try:
        yield served
    finally:
        served.stop()


def described(address: str, queue: str, name: str) -> ScheduleDescription | None:
    """alice's job's Schedule as Temporal describes it; None when there is none."""

    async def describe() -> ScheduleDescription | None:
        client = await Client.connect(address)
        try:
            return await client.get_schedule_handle(f"{queue}.{job_session('alice', name)}").describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise

    return asyncio.run(describe())


def wait_until(check: Callable[[], bool], what: str) -> None:
    """Wait for something a worker or Temporal brings about, asking at a gentle pace (bounded)."""
    deadline = time.monotonic() + WAIT_SECS
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.2)


def schedule_of(
    address: str, queue: str, name: str, check: Callable[[ScheduleDescription], bool], what: str
) -> None:
    wait_until(lambda: (found := described(address, queue, name)) is not None and check(found), what)


def test_a_job_scheduled_in_serve_fires_on_a_worker_and_its_schedule_goes_with_it(
    project: Path, serve: Served, receiver: WebhookReceiver, temporal_address: str, temporal_task_queue: str
) -> None:
    kernel_yaml = project / "config" / "kernel.yaml"
    static = (
        "  jobs:\n    - {name: static, template: watcher, interval_secs: 1, prompt: Цена?,\n"
        f"       notify: [{{type: webhook, url: '{receiver.url}'}}]}}\n"
    )
    kernel_yaml.write_text(
        kernel_yaml.read_text().replace("  misfire_grace_secs: 1\n", "  misfire_grace_secs: 1\n" + static)
    )
    with working(project, "w1") as worker, serve.client() as client:
        count(receiver, "static", 1)  # kernel.yaml's jobs: written to the store and placed by the worker
        schedule(client, receiver, "tick", interval_secs=1)
        at = time.time() + 3
        moment = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
        schedule(client, receiver, "once", oneshot_at=moment)
        first = count(receiver, "tick", 2)[0]
        assert (first["job"], first["ok"], first["answer"], first["error"]) == ("tick", True, ANSWER, None)
        (fired,) = count(receiver, "once", 1)
        assert fired["scheduled_at"] == moment.replace("Z", ".000Z") and fired["ok"] is True
        status = listed(client)
        assert status["tick"]["last_ok"] is True and status["tick"]["runs"] >= 1
        assert status["once"]["done"] is True and status["once"]["runs"] == 1
        assert serve.ran("tick") == set()  # serve fired nothing: the worker did, from the Schedule
        assert "cron alice/tick (" in worker.log.read_text()

        gone = client.delete("/v1/cron/tick")
        assert gone.status_code == 204
        cancelled = time.time()
        wait_until(
            lambda: described(temporal_address, temporal_task_queue, "tick") is None, "its Schedule gone"
        )
        wait_until(
            lambda: described(temporal_address, temporal_task_queue, "once") is None, "the oneshot's gone"
        )
    late = [post["scheduled_at"] for post in of(receiver, "tick") if due(post) > cancelled]
    assert late == [], f"tick fired after it was cancelled: {late}"
    assert len(of(receiver, "once")) == 1


@pytest.mark.parametrize(("misfire", "runs"), [("run_once", 1), ("skip", 0)])
def test_a_schedule_firing_while_every_worker_is_down_runs_once_when_one_comes_back(
    project: Path,
    serve: Served,
    receiver: WebhookReceiver,
    temporal_address: str,
    temporal_task_queue: str,
    misfire: str,
    runs: int,
) -> None:
    """Due times while no worker runs are one firing waiting (the others skipped as overlapping): it
    runs once when a worker is back — or, `misfire: skip` and later than the grace, is skipped."""
    with serve.client() as client:
        with working(project, "w1") as first:
            schedule(client, receiver, "tick", interval_secs=3, misfire=misfire)
            schedule_of(temporal_address, temporal_task_queue, "tick", lambda _: True, "its Schedule placed")
            first.kill()
        placed = described(temporal_address, temporal_task_queue, "tick")
        assert placed is not None and placed.info.num_actions == 0, "it fired before the worker was killed"
        schedule_of(
            temporal_address,
            temporal_task_queue,
            "tick",
            lambda found: found.info.num_actions >= 1 and found.info.num_actions_skipped_overlap >= 1,
            "a firing waiting and another skipped while no worker runs",
        )
        with working(project, "w2"):
            back = time.time()
            if runs:
                count(receiver, "tick", 1)
            else:
                wait_until(
                    lambda: "(misfire: skip)" in str(listed(client)["tick"]["last_error"]),
                    "the late due time skipped",
                )
            later: list[dict[str, Any]] = receiver.wait_until(
                lambda bodies: any(due(post) > back for post in bodies),
                "a due time after the worker came back",
                WAIT_SECS,
            )
    # no firing was started while the first worker lived (num_actions was 0 after its kill; Temporal may
    # take a due time a little late, so its nominal time can even precede the kill): every due time up to
    # the second worker's start fired while no worker ran
    while_down = [post["scheduled_at"] for post in later if due(post) <= back]
    assert len(while_down) == runs, while_down
    dues = [post["scheduled_at"] for post in of(receiver, "tick")]
    assert len(dues) == len(set(dues)), f"a due time was delivered twice: {dues}"


def pending_activities(address: str, queue: str, name: str) -> int | None:
    """How many activities the job's running firing has pending (None: no firing runs)."""

    async def count() -> int | None:
        client = await Client.connect(address)
        found = await client.get_schedule_handle(f"{queue}.{job_session('alice', name)}").describe()
        running = [
            a for a in found.info.running_actions if isinstance(a, ScheduleActionExecutionStartWorkflow)
        ]
        if not running:
            return None
        firing = client.get_workflow_handle(running[0].workflow_id)
        return len((await firing.describe()).raw_description.pending_activities)

    return asyncio.run(count())


def test_a_firing_past_its_owners_cap_waits_on_a_timer_and_runs_when_the_other_ends(
    project: Path,
    serve: Served,
    receiver: WebhookReceiver,
    llm_server: FakeLLMServer,
    temporal_address: str,
    temporal_task_queue: str,
) -> None:
    """cron.max_running_per_user across a worker: the second job's firing is held (its status says why)
    while the first runs, holding no worker slot, and runs once the first has ended."""
    release = threading.Event()
    slow_running = threading.Event()

    def answer(request: RecordedRequest) -> Reply:
        if "slow" in json.dumps(request.body, ensure_ascii=False):
            slow_running.set()
            release.wait(WAIT_SECS)  # the first job's run holds its owner's only slot until the test says
        return Reply(text=ANSWER)

    llm_server.respond_with(answer)
    kernel_yaml = project / "config" / "kernel.yaml"
    kernel_yaml.write_text(
        kernel_yaml.read_text().replace(
            "run_timeout_secs: 10", "run_timeout_secs: 120\n  max_running_per_user: 1"
        )
    )
    try:
        with working(project, "w1"), serve.client() as client:
            # the quick one is set only once the slow one's run holds the slot: on a busy machine a
            # firing can start seconds late, and two set 2 s apart could run in either order
            for name in ("slow", "quick"):
                moment = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
                job: dict[str, Any] = {"name": name, "template": "watcher", "oneshot_at": moment}
                job |= {"prompt": f"{name} price?", "notify": [{"type": "webhook", "url": receiver.url}]}
                assert run_tool(client, "cron_set", job)
                if name == "slow":
                    assert slow_running.wait(WAIT_SECS), "the slow job's run never asked the LLM"
            wait_until(
                lambda: listed(client)["quick"]["waiting"] is not None, "the second job held by the cap"
            )
            assert "cron.max_running_per_user (1)" in listed(client)["quick"]["waiting"]
            wait_until(  # between its asks it waits on a timer: no activity, no worker's slot
                lambda: pending_activities(temporal_address, temporal_task_queue, "quick") == 0,
                "the held firing to wait with no activity pending",
            )
            assert of(receiver, "quick") == []
            release.set()
            (slow,) = count(receiver, "slow", 1)
            (quick,) = count(receiver, "quick", 1)
            assert quick["ok"] and quick["fired_at"] >= slow["fired_at"]
            assert listed(client)["quick"]["waiting"] is None and listed(client)["quick"]["runs"] == 1
    finally:
        release.set()
