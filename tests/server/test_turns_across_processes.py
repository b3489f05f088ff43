"""Two `agentkernel serve` on one project: the store is the truth of a session (docs/server.md 3).

Real processes on one project folder (one message store, one sessions
file), the scripted LLM in the test's process. A session's history is read
from the transcript whichever process answers; one turn per session at a
time across processes (a lease in the store: 409 on the other process);
the per-user cap counts every process's turns; a killed holder's lease
lapses after server.turn_lease_secs and the session answers again; a holder
frozen past its lease loses it, and writes nothing into the turn that
replaced it. A turn is held running by an LLM answer that waits for the
test, never by sleeping; nothing asserts on time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkernel.config.server import token_hash
from tests.conftest import ctrl_c_default, wait_until
from tests.deployed import store_sql
from tests.fakes import FakeLLMServer, Reply
from tests.fakes.openai_server import CHAT_PATH, Exchange
from tests.server.conftest import make_project, sse_events

BIN = Path(sys.executable).parent
ALICE, BOB = {"Authorization": "Bearer alice-token"}, {"Authorization": "Bearer bob-token"}
LEASE_SECS = 1  # short, so a dead holder's lease lapses soon; the tests wait for it, never time it


@dataclass(frozen=True)
class Held:
    """An LLM answer that waits until the test opens `gate` (the fixture's `finally` opens it)."""

    gate: threading.Event
    reply: Reply = field(default_factory=lambda: Reply(text="after the gate"))

    def answer(self, exchange: Exchange) -> None:
        self.gate.wait()
        self.reply.answer(exchange)


@pytest.fixture
def gates() -> Iterator[tuple[threading.Event, threading.Event]]:
    opened = threading.Event(), threading.Event()
    try:
        yield opened
    finally:
        for gate in opened:
            gate.set()  # a held LLM answer never outlives its test


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str
    log: Path

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)


@contextmanager
def serving(root: Path, name: str, port: int = 0) -> Iterator[Server]:
    """`agentkernel serve --port PORT` in `root` (0: a free one), its log in a file; killed (and reaped)
    if still running."""
    env = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
    log = root / f"{name}.log"
    with log.open("w") as errors:
        process = subprocess.Popen(
            [str(BIN / "agentkernel"), "serve", "--port", str(port)],
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
        assert line.startswith("agentkernel: serving on http://127.0.0.1:"), (line, log.read_text())
        yield Server(process, line.split()[3], log)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)  # one the test froze must be able to die
            process.kill()
        process.wait()


@pytest.fixture
def project(tmp_path: Path, llm_server: FakeLLMServer) -> Path:
    tokens = f"    {token_hash('alice-token')}: alice\n    {token_hash('bob-token')}: bob\n"
    make_project(
        tmp_path,
        llm_server,
        f"server:\n  turn_lease_secs: {LEASE_SECS}\n  max_running_turns_per_user: 1\n  tokens:\n{tokens}",
    )
    return tmp_path


@pytest.fixture
def two(project: Path) -> Iterator[tuple[Server, Server]]:
    with serving(project, "a") as a, serving(project, "b") as b:
        yield a, b


def new_session(client: httpx.Client, headers: dict[str, str] = ALICE) -> str:
    made = client.post("/v1/sessions", json={"template": "tester"}, headers=headers)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def say(client: httpx.Client, session: str, text: str, headers: dict[str, str] = ALICE) -> httpx.Response:
    return client.post(f"/v1/sessions/{session}/messages", json={"content": text}, headers=headers)


def reply_of(answer: httpx.Response) -> Any:
    assert answer.status_code == 200, answer.text
    return dict(sse_events(answer.text))["reply"]["content"]


def asked(llm_server: FakeLLMServer) -> list[Any]:
    """The bodies of the chat requests the LLM received (each server also asks GET /models as it starts)."""
    return [r.body for r in llm_server.requests if r.path == CHAT_PATH]


def user_texts(llm_server: FakeLLMServer, index: int) -> list[str]:
    """The user messages the LLM received in its `index`-th chat request."""
    return [m["content"] for m in asked(llm_server)[index]["messages"] if m["role"] == "user"]


def test_each_turn_reads_the_history_from_the_store_whichever_process_answered_before(
    two: tuple[Server, Server], llm_server: FakeLLMServer
) -> None:
    """Message 1 to A, 2 to B, 3 to A: A's cached history is stale after B's turn, so it reads the
    store again (before, the LLM got ['one', 'three'] with message 3)."""
    a, b = two
    llm_server.add(Reply(text="first"), Reply(text="second"), Reply(text="third"), Reply(text="fourth"))
    with a.client() as to_a, b.client() as to_b:
        session = new_session(to_a)
        assert reply_of(say(to_a, session, "one")) == "first"
        assert reply_of(say(to_b, session, "two")) == "second"
        assert reply_of(say(to_a, session, "three")) == "third"
        assert user_texts(llm_server, 2) == ["one", "two", "three"]
        assert reply_of(say(to_a, session, "four")) == "fourth"  # A's own last turn: its cache stands
        assert user_texts(llm_server, 3) == ["one", "two", "three", "four"]


def test_a_second_message_to_a_busy_session_is_409_on_the_other_process(
    two: tuple[Server, Server], llm_server: FakeLLMServer, gates: tuple[threading.Event, threading.Event]
) -> None:
    a, b = two
    gate = gates[0]
    llm_server.add(Held(gate, Reply(text="A's answer")), Reply(text="B's answer"))
    with a.client() as to_a, b.client() as to_b:
        session = new_session(to_a)
        url = f"/v1/sessions/{session}/messages"
        with to_a.stream("POST", url, json={"content": "one"}, headers=ALICE) as first:
            assert first.status_code == 200
            wait_until(lambda: len(asked(llm_server)) == 1, "A's turn to reach the LLM")
            busy = say(to_b, session, "two")
            assert busy.status_code == 409, busy.text
            assert "is still answering the previous message" in busy.json()["detail"]
            gate.set()
            assert dict(sse_events(first.read().decode()))["done"] == {"reason": "job_done"}
        assert reply_of(say(to_b, session, "two")) == "B's answer"  # the lease went back with A's turn
    assert len(asked(llm_server)) == 2  # the refused message never reached the LLM


def test_the_per_user_cap_counts_the_turns_of_every_process(
    two: tuple[Server, Server], llm_server: FakeLLMServer, gates: tuple[threading.Event, threading.Event]
) -> None:
    a, b = two
    gate = gates[0]
    llm_server.add(Held(gate), Reply(text="bob's answer"), Reply(text="alice again"))
    with a.client() as to_a, b.client() as to_b:
        first, second = new_session(to_a), new_session(to_b)
        with to_a.stream(
            "POST", f"/v1/sessions/{first}/messages", json={"content": "one"}, headers=ALICE
        ) as held:
            assert held.status_code == 200
            wait_until(lambda: len(asked(llm_server)) == 1, "A's turn to reach the LLM")
            refused = say(to_b, second, "two")
            assert refused.status_code == 429, refused.text
            assert "has 1 turns running" in refused.json()["detail"]
            assert "server.max_running_turns_per_user (1)" in refused.json()["detail"]
            assert reply_of(say(to_b, new_session(to_b, BOB), "hi", BOB)) == "bob's answer"
            gate.set()
            held.read()
        assert reply_of(say(to_b, second, "two")) == "alice again"


def test_a_turn_longer_than_its_lease_keeps_it_renewed(
    two: tuple[Server, Server], llm_server: FakeLLMServer, gates: tuple[threading.Event, threading.Event]
) -> None:
    a, b = two
    gate = gates[0]
    llm_server.add(Held(gate, Reply(text="A's answer")))
    expiries: set[float] = set()

    def renewed_twice() -> bool:
        rows = store_sql(a.log.parent / "data" / "messages.db", "SELECT expires_at FROM turn_leases")
        expiries.update(row[0] for row in rows)
        return len(expiries) >= 3  # taken, then renewed twice: held past its first expiry

    with a.client() as to_a, b.client() as to_b:
        session = new_session(to_a)
        url = f"/v1/sessions/{session}/messages"
        with to_a.stream("POST", url, json={"content": "one"}, headers=ALICE) as first:
            wait_until(lambda: len(asked(llm_server)) == 1, "A's turn to reach the LLM")
            wait_until(renewed_twice, "A to renew its lease twice")
            assert say(to_b, session, "two").status_code == 409
            gate.set()
            assert dict(sse_events(first.read().decode()))["reply"]["content"] == "A's answer"


def take_when_free(client: httpx.Client, session: str, text: str) -> httpx.Response:
    """Send `text` until the session's lease lets it in (409 while another holds it)."""
    answers: list[httpx.Response] = []

    def sent() -> bool:
        answers.append(say(client, session, text))
        return answers[-1].status_code != 409

    wait_until(sent, "the dead holder's lease to lapse")
    return answers[-1]


def test_a_killed_holders_run_is_resumed_by_the_other_process_and_the_session_answers_again(
    project: Path, llm_server: FakeLLMServer, gates: tuple[threading.Event, threading.Event]
) -> None:
    """A dies mid-turn: once its lease lapses B takes the run over and finishes it (S25.3); a message
    meanwhile is 409, saying which run is being resumed; then B answers the session as usual."""
    llm_server.add(Held(gates[0]), Reply(text="resumed by B"), Reply(text="B's answer"))
    with serving(project, "a") as a, serving(project, "b") as b, a.client() as to_a, b.client() as to_b:
        session = new_session(to_a)
        with to_a.stream(
            "POST", f"/v1/sessions/{session}/messages", json={"content": "one"}, headers=ALICE
        ) as first:
            run_id = first.headers["x-run-id"]
            wait_until(lambda: len(asked(llm_server)) == 1, "A's turn to reach the LLM")
            assert say(to_b, session, "two").status_code == 409
            a.process.send_signal(signal.SIGKILL)
            a.process.wait()
        assert reply_of(take_when_free(to_b, session, "two")) == "B's answer"
        run = to_b.get(f"/v1/runs/{run_id}", headers=ALICE).json()
        assert (run["status"], run["answer"]) == ("ended", "resumed by B")
        assert user_texts(llm_server, 1) == ["one"]  # the run resumed: A recorded "one" before it died
        assert user_texts(llm_server, 2) == ["one", "two"]
        said = [m["content"] for m in asked(llm_server)[2]["messages"] if m["role"] == "assistant"]
        assert said == ["resumed by B"]


def test_a_holder_frozen_past_its_lease_loses_it_and_writes_nothing_into_the_run_taken_over(
    project: Path, llm_server: FakeLLMServer, gates: tuple[threading.Event, threading.Event]
) -> None:
    """A frozen past its lease: B takes its run over and resumes it; A, woken, finds its lease lost,
    stops, and the store refuses whatever A still tries to write (the fence)."""
    a_gate, b_gate = gates
    llm_server.add(Held(a_gate, Reply(text="A's late answer")), Held(b_gate, Reply(text="B's answer")))
    with ExitStack() as stack:
        a, b = stack.enter_context(serving(project, "a")), stack.enter_context(serving(project, "b"))
        to_a, to_b = stack.enter_context(a.client()), stack.enter_context(b.client())
        session = new_session(to_a)
        url = f"/v1/sessions/{session}/messages"
        a_turn = stack.enter_context(to_a.stream("POST", url, json={"content": "one"}, headers=ALICE))
        run_id = a_turn.headers["x-run-id"]
        wait_until(lambda: len(asked(llm_server)) == 1, "A's turn to reach the LLM")
        a.process.send_signal(signal.SIGSTOP)
        wait_until(lambda: len(asked(llm_server)) == 2, "B to take the run over and ask the LLM")
        a.process.send_signal(signal.SIGCONT)
        a_events = sse_events(a_turn.read().decode())  # A finds its lease lost and stops its turn
        assert a_events[-1] == ("done", {"reason": "terminated"}), a_events
        lost = [data["message"] for kind, data in a_events if kind == "error"]
        assert lost and "another turn holds the session now" in lost[0], a_events
        a_gate.set()  # A's LLM answer comes too late: A's turn is over and records nothing
        b_gate.set()
        wait_until(
            lambda: to_b.get(f"/v1/runs/{run_id}", headers=ALICE).json()["status"] == "ended", "B's end"
        )
        records = to_b.get(url, headers=ALICE).json()
    said = [(r["kind"], r["content"]) for r in records]
    assert ("agent", "A's late answer") not in said
    assert said.count(("end", "terminated")) == 0, said  # A's end of turn was refused by the store
    assert said[-1] == ("end", "job_done") and ("agent", "B's answer") in said
    assert "this turn's record was not written" in a.log.read_text() or "not recorded" in a.log.read_text()


def test_a_stop_asked_on_the_other_process_stops_the_turn(
    two: tuple[Server, Server], llm_server: FakeLLMServer, gates: tuple[threading.Event, threading.Event]
) -> None:
    """POST /v1/sessions/{id}/stop reaches the turn whichever process runs it: the holder finds the
    stop in the store (before, B answered `stopped: false` and A's turn ran on)."""
    a, b = two
    llm_server.add(Held(gates[0]))
    with a.client() as to_a, b.client() as to_b:
        session = new_session(to_a)
        with to_a.stream(
            "POST", f"/v1/sessions/{session}/messages", json={"content": "one"}, headers=ALICE
        ) as first:
            wait_until(lambda: len(asked(llm_server)) == 1, "A's turn to reach the LLM")
            stopped = to_b.post(f"/v1/sessions/{session}/stop", headers=ALICE)
            assert stopped.json() == {"stopped": True}
            events = sse_events(first.read().decode())
        assert events[-1] == ("done", {"reason": "terminated"}), events
        assert to_b.post(f"/v1/sessions/{session}/stop", headers=ALICE).json() == {"stopped": False}
