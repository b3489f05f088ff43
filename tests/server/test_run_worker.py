"""Runs on Temporal (S27.2): `agentkernel serve` records a run and starts its workflow; `agentkernel
worker` processes drive it from its journal, and a worker killed mid-run is replaced by another.

Real parts only: the CLI's Temporal dev server (tests/temporal.py), real
`agentkernel serve` and `agentkernel worker` processes on one project (one
message store), the scripted LLM server and a webhook receiver in the test
counting the tools' side effects. A tool call is held mid-effect by the
receiver (it answers once the test says so) and a worker is killed there
with SIGKILL: the next worker goes on from the journal, running the call
again only when its tool says `idempotent: true`, else telling the LLM it
was interrupted. The client's stream, read from the store, goes on across
the worker's death. Nothing waits on time: on the LLM's requests, the
receiver's, the store.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from agentkernel.agent.resume import INTERRUPTED
from agentkernel.config.runs import TEMPORAL_ADDRESS_ENV
from agentkernel.config.server import token_hash
from tests.conftest import ctrl_c_default, wait_until, write_kernel_yaml
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.fakes.webhook import WebhookReceiver
from tests.server.conftest import make_project, sse_events, sse_frames, write
from tests.server.test_approvals import decide, pending_calls
from tests.server.test_run_resume import effect_tool, ended, records, tool_messages
from tests.server.test_turns_across_processes import ALICE, BIN, Held, asked, new_session, serving


@dataclass
class Worker:
    process: subprocess.Popen[str]
    log: Path

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


@contextmanager
def working(root: Path, name: str, *options: str) -> Iterator[Worker]:
    """`agentkernel worker` in `root`, once it polls its task queue; killed (and reaped) if still running."""
    env = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
    log = root / f"{name}.log"
    with log.open("w") as errors:
        process = subprocess.Popen(
            [str(BIN / "agentkernel"), "-v", "worker", *options],  # -v: it logs each run it drives
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            preexec_fn=ctrl_c_default,
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("agentkernel: worker on "), (line, log.read_text())
        yield Worker(process, log)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


@pytest.fixture
def project(
    tmp_path: Path,
    llm_server: FakeLLMServer,
    receiver: WebhookReceiver,
    temporal_address: str,
    temporal_task_queue: str,
) -> Path:
    make_project(
        tmp_path,
        llm_server,
        f"http:\n  allow_private: true\nserver:\n  turn_lease_secs: 1\n"
        f"  tokens:\n    {token_hash('alice-token')}: alice\n"
        f"runs:\n  engine: temporal\n  address: '{temporal_address}'\n"
        f"  task_queue: {temporal_task_queue}\n  heartbeat_secs: 1\n",
    )
    effect_tool(tmp_path, "effect", receiver.url)
    effect_tool(tmp_path, "effect_again", receiver.url, idempotent=True)
    effect_tool(tmp_path, "effect_asked", receiver.url, approval="always")
    write(
        tmp_path / "config" / "templates" / "tester.yaml",
        "name: tester\ninstructions: Test.\ntools: [effect, effect_again, effect_asked]\nmax_turns: 4\n",
    )
    return tmp_path


def workflow_ended(address: str, run_id: str) -> str:
    """The run's workflow's status once it is no longer running (its worker must be up till then)."""
    wait_until(lambda: workflow_status(address, run_id) != "RUNNING", f"workflow {run_id} to end")
    return workflow_status(address, run_id)


def workflow_status(address: str, run_id: str) -> str:
    """The run's workflow's status, as Temporal has it."""
    from temporalio.client import Client

    async def described() -> str:
        client = await Client.connect(address)
        status = (await client.get_workflow_handle(run_id).describe()).status
        return "none" if status is None else status.name

    return asyncio.run(described())


@pytest.mark.across_deployments  # on PostgreSQL too: the worker finds the sessions where serve keeps them
def test_a_turn_with_a_tool_call_is_answered_by_a_worker(
    project: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver, temporal_address: str
) -> None:
    llm_server.add(Reply(tool_calls=(FakeToolCall("effect", '{"n": 1}', "c1"),)), Reply(text="done it"))
    with serving(project, "api") as api, working(project, "w1") as worker, api.client() as client:
        session = new_session(client)
        answer = client.post(f"/v1/sessions/{session}/messages", json={"content": "do"}, headers=ALICE)
        assert answer.status_code == 200, answer.text
        run_id = answer.headers["x-run-id"]
        events = sse_events(answer.text, runs=True)
        assert events[0] == ("run", {"id": run_id, "session_id": session})
        assert [kind for kind, _ in events][1:] == ["tool_call", "tool_result", "reply", "done"], events
        assert events[-2:] == [
            ("reply", {"content": "done it", "streamed": False}),
            ("done", {"reason": "job_done"}),
        ]
        assert ended(client, run_id)["answer"] == "done it"
        assert records(client, session) == [
            ("user", "do"),
            ("tool_call", '{"n": 1}'),
            ("tool_result", "effect 200 1"),
            ("agent", "done it"),
            ("end", "job_done"),
        ]
        # the worker is up until the workflow has ended: its last task is a worker's
        assert workflow_ended(temporal_address, run_id) == "COMPLETED"
    assert len(receiver.bodies) == 1 and len(asked(llm_server)) == 2
    assert f"run {run_id}: driven on this worker" in worker.log.read_text()  # the worker drove it


def test_a_worker_serves_its_own_metrics_behind_the_servers_tokens(
    project: Path, llm_server: FakeLLMServer
) -> None:
    """S26.2 on a worker: its turns and tool calls are counted where they run, on `--metrics-port`."""
    llm_server.add(Reply(tool_calls=(FakeToolCall("effect", '{"n": 1}', "c1"),)), Reply(text="done it"))
    with (
        serving(project, "api") as api,
        working(project, "w1", "--metrics-port", "0") as worker,
        api.client() as client,
    ):
        assert worker.process.stdout is not None
        line = worker.process.stdout.readline()
        assert line.startswith("agentkernel: worker metrics on http://127.0.0.1:"), line
        url = line.split()[-1]
        session = new_session(client)
        answer = client.post(f"/v1/sessions/{session}/messages", json={"content": "do"}, headers=ALICE)
        assert answer.status_code == 200, answer.text
        assert httpx.get(url).status_code == 401
        assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(url.replace("/metrics", "/other"), headers=ALICE).status_code == 404
        page = httpx.get(url, headers=ALICE)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
        assert 'agentkernel_turns_total{end_reason="job_done",template="tester"} 1.0' in page.text
        assert 'agentkernel_tool_calls_total{outcome="ok",tool="effect"} 1.0' in page.text
        assert "agentkernel_approvals_pending 0.0" in page.text


def test_a_metrics_page_caller_that_sends_nothing_is_dropped_and_others_still_answered() -> None:
    """A scraper (or anyone) holding connections open without a request never pins the page's threads."""
    from agentkernel.config.server import ServerSettings
    from agentkernel.config.telemetry import TelemetrySettings
    from agentkernel.server.worker_metrics import MetricsPage

    page = MetricsPage(
        "127.0.0.1", 0, ServerSettings(), TelemetrySettings(), lambda: 0, read_timeout_secs=0.3
    )
    try:
        host, port = page.url.split("//")[1].split("/")[0].split(":")
        idle = [socket.create_connection((host, int(port))) for _ in range(20)]
        assert httpx.get(page.url).status_code == 200  # loopback, no tokens configured
        for held in idle:
            held.settimeout(30)
            assert held.recv(1) == b""  # closed by the server, not by this test
            held.close()
    finally:
        page.close()


@pytest.mark.across_deployments  # on PostgreSQL a step's NOTIFY wakes the stream at once: the race is widest
def test_a_message_sent_on_done_is_taken_the_worker_having_given_the_session_back(
    project: Path, llm_server: FakeLLMServer
) -> None:
    """The stream's `done` waits for the worker to release the session: the next message is never 409.

    The race it guards (the worker releases the lease just after the run's end is recorded) showed in
    7-13 % of turns under the load of benchmarks/server.py --runs temporal; alone, on a quiet machine, it
    is rarely lost, so this test is a guard of the path more than a proof of the fix."""
    turns = 20
    llm_server.add(*(Reply(text=f"answer {n}") for n in range(turns)))
    with serving(project, "api") as api, working(project, "w1"), api.client() as client:
        session = new_session(client)
        for n in range(turns):
            answer = client.post(f"/v1/sessions/{session}/messages", json={"content": f"q{n}"}, headers=ALICE)
            assert answer.status_code == 200, (n, answer.text)  # 409 "still answering" without the wait
            assert sse_events(answer.text, runs=True)[-1] == ("done", {"reason": "job_done"})


@pytest.mark.parametrize(
    ("tool", "runs", "seen"),
    [("effect", 1, INTERRUPTED), ("effect_again", 2, "effect 200 1")],
    ids=["not-idempotent", "idempotent"],
)
def test_a_worker_killed_during_a_tool_call_is_replaced_by_another_that_goes_on_from_the_journal(
    project: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver, tool: str, runs: int, seen: str
) -> None:
    llm_server.add(Reply(tool_calls=(FakeToolCall(tool, '{"n": 1}', "c1"),)), Reply(text="after the call"))
    receiver.hold = hold = threading.Event()
    with serving(project, "api") as api, api.client() as client:
        session = new_session(client)
        with client.stream(
            "POST", f"/v1/sessions/{session}/messages", json={"content": "do it"}, headers=ALICE
        ) as stream:
            run_id = stream.headers["x-run-id"]
            with working(project, "w1") as first:
                receiver.wait_for(1)  # the call reached its effect, and waits there
                first.kill()
            hold.set()
            with working(project, "w2") as second:
                events = sse_events(stream.read().decode())  # the stream goes on across the worker's death
                assert ended(client, run_id)["answer"] == "after the call"
        assert events[-1] == ("done", {"reason": "job_done"}), events
        assert run_id in second.log.read_text()
        assert len(receiver.bodies) == runs
        assert tool_messages(llm_server, 1) == [("c1", seen)]
        results = [content for kind, content in records(client, session) if kind == "tool_result"]
        assert results == [seen]  # one result of the call, whichever worker wrote it
        assert records(client, session).count(("user", "do it")) == 1


def test_stopping_a_run_cancels_its_workflow_and_the_worker_ends_it(
    project: Path, llm_server: FakeLLMServer, temporal_address: str
) -> None:
    gate = threading.Event()
    llm_server.add(Held(gate))
    try:
        with serving(project, "api") as api, working(project, "w1"), api.client() as client:
            session = new_session(client)
            with client.stream(
                "POST", f"/v1/sessions/{session}/messages", json={"content": "one"}, headers=ALICE
            ) as stream:
                run_id = stream.headers["x-run-id"]
                wait_until(lambda: len(asked(llm_server)) == 1, "the worker's run to reach the LLM")
                stopped = client.post(f"/v1/sessions/{session}/stop", headers=ALICE)
                assert stopped.json() == {"stopped": True}
                events = sse_events(stream.read().decode())
            assert events[-1] == ("done", {"reason": "terminated"}), events
            assert ended(client, run_id)["reason"] == "terminated"
            assert workflow_ended(temporal_address, run_id) == "CANCELED"
            assert client.post(f"/v1/sessions/{session}/stop", headers=ALICE).json() == {"stopped": False}
    finally:
        gate.set()


def test_a_message_while_temporal_does_not_answer_is_refused_and_leaves_the_session_free(
    project: Path, llm_server: FakeLLMServer
) -> None:
    config = project / "config" / "kernel.yaml"
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    text = config.read_text()
    config.write_text(re.sub(r"address: '[^']*'", f"address: '127.0.0.1:{port}'", text))
    with serving(project, "api") as api, api.client() as client:
        session = new_session(client)
        for _ in range(2):  # the first run ended `error`, its lease given back: the second is refused alike
            answer = client.post(f"/v1/sessions/{session}/messages", json={"content": "hi"}, headers=ALICE)
            assert answer.status_code == 503, answer.text
            assert f"runs.address: Temporal at 127.0.0.1:{port}" in answer.json()["detail"]
    assert asked(llm_server) == []


SDK_PROBE = """
import sys
from agentkernel import Kernel
from agentkernel.config import find_kernel_config, load_kernel_config
from agentkernel.server.app import create_app
with Kernel(load_kernel_config(find_kernel_config(None))) as kernel:
    create_app(kernel)
    print(sorted({m.split(".")[0] for m in sys.modules if m.startswith("temporalio")}))
"""


@pytest.mark.parametrize(
    ("extra", "imported"), [("", "[]"), ("runs: {engine: temporal}\n", "['temporalio']")]
)
def test_the_temporal_sdk_is_imported_only_with_engine_temporal(
    tmp_path: Path, extra: str, imported: str
) -> None:
    write_kernel_yaml(tmp_path, extra)
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTKERNEL_CONFIG", TEMPORAL_ADDRESS_ENV)}
    done = subprocess.run(
        [sys.executable, "-c", SDK_PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == imported


def test_a_worker_killed_during_the_llm_call_is_replaced_and_the_llm_asked_again(
    project: Path, llm_server: FakeLLMServer
) -> None:
    gate = threading.Event()
    llm_server.add(Held(gate), Reply(text="resumed answer"))
    try:
        with serving(project, "api") as api, api.client() as client:
            session = new_session(client)
            with client.stream(
                "POST", f"/v1/sessions/{session}/messages", json={"content": "one"}, headers=ALICE
            ) as stream:
                run_id = stream.headers["x-run-id"]
                with working(project, "w1") as first:
                    wait_until(lambda: len(asked(llm_server)) == 1, "the first worker's run to reach the LLM")
                    first.kill()
                gate.set()  # its answer goes to a connection nobody reads
                with working(project, "w2"):
                    events = sse_events(stream.read().decode())
            assert events[-2:] == [
                ("reply", {"content": "resumed answer", "streamed": False}),
                ("done", {"reason": "job_done"}),
            ]
            assert ended(client, run_id)["answer"] == "resumed answer"
            assert records(client, session).count(("user", "one")) == 1
        assert len(asked(llm_server)) == 2
    finally:
        gate.set()


def test_a_worker_stopped_gracefully_hands_its_run_to_another_at_its_next_call(
    project: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    """SIGTERM past shutdown_grace_secs: the running call is waited for and recorded, the run handed
    off (the activity fails, so Temporal retries it elsewhere), and the next worker makes the next call."""
    kernel_yaml = project / "config" / "kernel.yaml"
    kernel_yaml.write_text(
        kernel_yaml.read_text().replace("server:\n", "server:\n  shutdown_grace_secs: 0\n")
    )
    calls = (FakeToolCall("effect", '{"n": 1}', "c1"), FakeToolCall("effect", '{"n": 2}', "c2"))
    llm_server.add(Reply(tool_calls=calls), Reply(text="after both"))
    receiver.hold = hold = threading.Event()
    with serving(project, "api") as api, api.client() as client:
        session = new_session(client)
        with client.stream(
            "POST", f"/v1/sessions/{session}/messages", json={"content": "do both"}, headers=ALICE
        ) as stream:
            run_id = stream.headers["x-run-id"]
            with working(project, "w1") as first:
                receiver.wait_for(1)  # the first call reached its effect, and waits there
                first.process.send_signal(signal.SIGTERM)
                wait_until(lambda: "running turn(s)" in first.log.read_text(), "w1 to stop its running turn")
                hold.set()
                assert first.process.wait() == 0
            assert [body["n"] for body in receiver.bodies] == [1]
            with working(project, "w2") as second:
                events = sse_events(stream.read().decode())
        assert events[-1] == ("done", {"reason": "job_done"}), events
        assert ended(client, run_id)["answer"] == "after both"
        assert run_id in second.log.read_text()
        results = [content for kind, content in records(client, session) if kind == "tool_result"]
    assert [body["n"] for body in receiver.bodies] == [1, 2]
    assert results == ["effect 200 1", "effect 200 2"]


def test_two_workers_on_one_queue_drive_each_run_once(
    project: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("effect", '{"n": 1}', "c1"),)),
        Reply(text="first done"),
        Reply(tool_calls=(FakeToolCall("effect", '{"n": 2}', "c2"),)),
        Reply(text="second done"),
    )
    with (
        serving(project, "api") as api,
        working(project, "w1") as one,
        working(project, "w2") as two,
        api.client() as client,
    ):
        run_ids = []
        for text in ("first", "second"):
            session = new_session(client)
            answer = client.post(f"/v1/sessions/{session}/messages", json={"content": text}, headers=ALICE)
            assert dict(sse_events(answer.text))["done"] == {"reason": "job_done"}, answer.text
            run_ids.append(answer.headers["x-run-id"])
    assert sorted(body["n"] for body in receiver.bodies) == [1, 2]
    logs = one.log.read_text() + two.log.read_text()
    for run_id in run_ids:
        assert logs.count(f"run {run_id}: driven on this worker") == 1, logs


def test_a_worker_killed_while_an_approval_waits_is_replaced_and_the_call_runs_once_when_approved(
    project: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    """The wait is the run's, in the store (S24.4): the next worker waits on the same approval, not
    asking again; approved, the call runs once."""
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("effect_asked", '{"n": 1}', "c1"),)), Reply(text="approved, sent")
    )
    with serving(project, "api") as api, api.client() as client:
        session = new_session(client)
        with client.stream(
            "POST", f"/v1/sessions/{session}/messages", json={"content": "send it"}, headers=ALICE
        ) as stream:
            run_id = stream.headers["x-run-id"]
            with working(project, "w1") as first:
                wait_until(lambda: bool(pending_calls(client)), "the call to wait for a decision")
                first.kill()
            with working(project, "w2") as second:
                driving = f"run {run_id}: driven on this worker"
                wait_until(lambda: driving in second.log.read_text(), "the second worker to take the run")
                assert pending_calls(client) == [(run_id, "c1")]  # the same approval, still pending
                assert decide(client, run_id, ALICE, decision="approve").status_code == 200
                events = sse_events(stream.read().decode())
        assert events[-1] == ("done", {"reason": "job_done"}), events
        assert [kind for kind, _ in events].count("approval_required") == 1
        assert ended(client, run_id)["answer"] == "approved, sent"
    assert len(receiver.bodies) == 1
    assert len(asked(llm_server)) == 2  # the recorded response was never asked for again


def test_a_client_whose_api_replica_dies_reads_the_rest_of_the_run_from_another(
    project: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    """The run is the worker's and its events the store's: a replica killed while its client streams
    loses nothing; the client asks another with Last-Event-ID and reads the rest, once."""
    llm_server.add(Reply(tool_calls=(FakeToolCall("effect", '{"n": 1}', "c1"),)), Reply(text="all done"))
    receiver.hold = hold = threading.Event()
    with (
        serving(project, "a") as a,
        serving(project, "b") as b,
        working(project, "w1"),
        a.client() as to_a,
        b.client() as to_b,
    ):
        session = new_session(to_a)
        with to_a.stream(
            "POST", f"/v1/sessions/{session}/messages", json={"content": "do"}, headers=ALICE
        ) as stream:
            run_id = stream.headers["x-run-id"]
            text = ""
            lines = stream.iter_lines()
            while "event: tool_call" not in text or not text.endswith("\n\n"):
                text += next(lines) + "\n"
            receiver.wait_for(1)  # the call waits at its effect
            a.process.send_signal(signal.SIGKILL)
            a.process.wait()
        seen = sse_frames(text)
        assert [kind for kind, _, _ in seen] == ["run", "tool_call"]
        last = seen[-1][1]
        assert last is not None
        hold.set()
        rest = to_b.get(f"/v1/runs/{run_id}/events", headers={**ALICE, "Last-Event-ID": str(last)})
        assert [kind for kind, _ in sse_events(rest.text)] == ["tool_result", "reply", "done"], rest.text
        assert sse_events(rest.text)[-2:] == [
            ("reply", {"content": "all done", "streamed": False}),
            ("done", {"reason": "job_done"}),
        ]
    assert len(receiver.bodies) == 1


def test_a_run_stopped_before_any_worker_took_it_ends_terminated_without_asking_the_llm(
    project: Path, llm_server: FakeLLMServer, temporal_address: str
) -> None:
    with serving(project, "api") as api, api.client() as client:
        session = new_session(client)
        with client.stream(
            "POST", f"/v1/sessions/{session}/messages", json={"content": "never"}, headers=ALICE
        ) as stream:
            run_id = stream.headers["x-run-id"]
            stopped = client.post(f"/v1/sessions/{session}/stop", headers=ALICE)  # no worker runs yet
            assert stopped.json() == {"stopped": True}
            with working(project, "w1"):  # up until the workflow has ended: its last task is a worker's
                events = sse_events(stream.read().decode())
                assert ended(client, run_id)["reason"] == "terminated"
                assert workflow_ended(temporal_address, run_id) == "CANCELED"
        assert events == [("done", {"reason": "terminated"})], events
        assert records(client, session) == [("end", "terminated")]
    assert asked(llm_server) == []
