"""server.max_running_turns_per_user (S23.6, docs/server.md 3): one user's turns at once, on every route.

A token holder could start turns without end — new sessions, or chat
completions dropped after the first byte — each calling the LLM up to
`max_turns` and holding up to `max_stream_backlog_bytes` for its reader.
Past the cap a turn is refused with 429 before it starts; the count drops
however a turn ends. A chat completion's client that goes away stops its
turn: nobody else can read it or stop it.

Real uvicorn (LiveServer), the scripted LLM; a turn is held running by an
LLM answer that waits for the test, never by sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from agentkernel import Kernel
from agentkernel.agent.session import ChatSession
from agentkernel.config import ServerSettings, load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.llm.base import ChatMessage
from agentkernel.server.sessions import SessionInfo
from agentkernel.server.turns import Turn, TurnRunner
from agentkernel.services.turn_leases import Lease, NewRun, TurnLeases
from tests.conftest import wait_until
from tests.fakes import FakeLLMServer, HttpError, Reply
from tests.fakes.openai_server import Exchange
from tests.server.conftest import LiveServer, sse_events

ALICE, BOB = {"Authorization": "Bearer alice-token"}, {"Authorization": "Bearer bob-token"}
TOKENS = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}
COMPLETION = {"model": "tester", "messages": [{"role": "user", "content": "hi"}]}


@dataclass(frozen=True)
class Held:
    """An LLM answer that waits until the test opens `gate`, with no time limit of its own: a turn that
    goes on waiting here is one that was not stopped (the test's `finally` opens the gate)."""

    gate: threading.Event
    reply: Reply = field(default_factory=lambda: Reply(text="after the gate"))

    def answer(self, exchange: Exchange) -> None:
        self.gate.wait()
        self.reply.answer(exchange)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    opened = threading.Event()
    try:
        yield opened
    finally:
        opened.set()  # a held LLM answer never outlives its test


def serve(kernel_yaml: Path, most: int) -> LiveServer:
    kernel = Kernel(load_kernel_config(kernel_yaml))
    return LiveServer(kernel, ServerSettings(tokens=TOKENS, max_running_turns_per_user=most))


def new_session(client: httpx.Client, headers: dict[str, str]) -> str:
    made = client.post("/v1/sessions", json={"template": "tester"}, headers=headers)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def message(client: httpx.Client, session: str, headers: dict[str, str]) -> httpx.Response:
    return client.post(f"/v1/sessions/{session}/messages", json={"content": "go"}, headers=headers)


def assert_refused(answer: httpx.Response, running: int, most: int) -> None:
    assert answer.status_code == 429, answer.text
    detail = answer.json()["detail"]
    assert f"has {running} turns running" in detail
    assert f"server.max_running_turns_per_user ({most})" in detail
    assert answer.json()["error"]["type"] == "rate_limit_error"


def test_a_turn_past_the_cap_is_429_on_every_route_and_only_for_that_user(
    kernel_yaml: Path, llm_server: FakeLLMServer, gate: threading.Event
) -> None:
    llm_server.add(Held(gate), Held(gate), Reply(text="bob's answer"), Reply(text="alice again"))
    with serve(kernel_yaml, 2) as live, live.client() as client:
        first, second = new_session(client, ALICE), new_session(client, ALICE)
        url = f"/v1/sessions/{first}/messages"
        with (
            client.stream("POST", url, json={"content": "one"}, headers=ALICE) as session_turn,
            client.stream(
                "POST", "/v1/chat/completions", json={**COMPLETION, "stream": True}, headers=ALICE
            ) as completion_turn,
        ):
            assert session_turn.status_code == completion_turn.status_code == 200
            wait_until(lambda: len(llm_server.requests) == 2, "both turns to reach the LLM")
            assert_refused(message(client, second, ALICE), 2, 2)
            assert_refused(client.post("/v1/chat/completions", json=COMPLETION, headers=ALICE), 2, 2)
            streamed = {**COMPLETION, "stream": True}
            assert_refused(client.post("/v1/chat/completions", json=streamed, headers=ALICE), 2, 2)
            bob = message(client, new_session(client, BOB), BOB)  # another user is not held up
            assert dict(sse_events(bob.text))["reply"]["content"] == "bob's answer"
            gate.set()
            assert dict(sse_events(session_turn.read().decode()))["done"] == {"reason": "job_done"}
            assert b"[DONE]" in completion_turn.read()
        assert len(llm_server.requests) == 3  # the refused turns never reached the LLM
        assert dict(sse_events(message(client, second, ALICE).text))["reply"]["content"] == "alice again"


def test_the_count_drops_when_a_turn_ends_done_in_error_or_stopped(
    kernel_yaml: Path, llm_server: FakeLLMServer, gate: threading.Event
) -> None:
    llm_server.add(Reply(text="done"), HttpError(500), Held(gate), Reply(text="after all that"))
    with serve(kernel_yaml, 1) as live, live.client() as client:
        session = new_session(client, ALICE)
        assert dict(sse_events(message(client, session, ALICE).text))["done"] == {"reason": "job_done"}
        assert dict(sse_events(message(client, session, ALICE).text))["done"] == {"reason": "error"}
        with client.stream("POST", f"/v1/sessions/{session}/messages", json={"content": "go"}, headers=ALICE):
            wait_until(lambda: len(llm_server.requests) == 3, "the held turn to reach the LLM")
            assert_refused(message(client, new_session(client, ALICE), ALICE), 1, 1)
            assert client.post(f"/v1/sessions/{session}/stop", headers=ALICE).json() == {"stopped": True}
        wait_until(lambda: kinds(live, session)[-1:] == ["end"], "the stopped turn to be recorded")
        answer = client.post("/v1/chat/completions", json=COMPLETION, headers=ALICE)
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "after all that"


def test_a_session_turn_goes_on_and_counts_after_its_client_leaves(
    kernel_yaml: Path, llm_server: FakeLLMServer, gate: threading.Event
) -> None:
    """A session's turn outlives its client (docs/server.md 3), so it still counts until it ends."""
    llm_server.add(Held(gate, Reply(text="recorded anyway")), Reply(text="next"))
    with serve(kernel_yaml, 1) as live, live.client() as client:
        session = new_session(client, ALICE)
        with client.stream("POST", f"/v1/sessions/{session}/messages", json={"content": "go"}, headers=ALICE):
            wait_until(lambda: len(llm_server.requests) == 1, "the turn to reach the LLM")
        assert_refused(message(client, new_session(client, ALICE), ALICE), 1, 1)
        gate.set()
        wait_until(lambda: kinds(live, session)[-1:] == ["end"], "the turn to be recorded")
        assert dict(sse_events(message(client, session, ALICE).text))["reply"]["content"] == "next"


def test_a_streamed_completion_whose_client_leaves_stops_and_frees_its_slot(
    kernel_yaml: Path, llm_server: FakeLLMServer, gate: threading.Event
) -> None:
    """Before, the turn went on without its client (calling the LLM up to max_turns for nobody) and,
    not being a listed session, could not even be stopped: here the LLM call never answers, so only a
    stop ends the turn."""
    llm_server.add(Held(gate), Reply(text="next"))
    with serve(kernel_yaml, 1) as live, live.client() as client:
        streamed = {**COMPLETION, "stream": True}
        with client.stream("POST", "/v1/chat/completions", json=streamed, headers=ALICE) as stream:
            lines = stream.iter_lines()  # kept: a dropped one closes the stream when collected
            opening = json.loads(next(lines).removeprefix("data: "))
            wait_until(lambda: len(llm_server.requests) == 1, "the turn to reach the LLM")
        one_off = opening["agentkernel"]["session"]
        wait_until(lambda: kinds(live, one_off)[-1:] == ["end"], "the abandoned turn to end")
        assert live.kernel.transcript(one_off)[-1].content == "terminated"
        answer = message(client, new_session(client, ALICE), ALICE)  # its slot is free again
        assert dict(sse_events(answer.text))["reply"]["content"] == "next"
    assert not gate.is_set()


def test_a_plain_completion_whose_client_leaves_stops_and_frees_its_slot(
    kernel_yaml: Path, llm_server: FakeLLMServer, gate: threading.Event, caplog: pytest.LogCaptureFixture
) -> None:
    """A response that is not streamed notices no disconnect by itself: the server watches for it.
    (Its session id is in the answer nobody read, so the test finds it in the log.)"""
    caplog.set_level(logging.INFO, "agentkernel.server")
    llm_server.add(Held(gate), Reply(text="next"))
    with serve(kernel_yaml, 1) as live, live.client() as client:
        with raw_post(live.url, "/v1/chat/completions", COMPLETION, ALICE):
            wait_until(lambda: len(llm_server.requests) == 1, "the turn to reach the LLM")
            assert_refused(message(client, new_session(client, ALICE), ALICE), 1, 1)
        wait_until(lambda: stopped_one_offs(caplog) != [], "the turn to be stopped")
        one_off = stopped_one_offs(caplog)[0]
        wait_until(lambda: kinds(live, one_off)[-1:] == ["end"], "the abandoned turn to end")
        assert live.kernel.transcript(one_off)[-1].content == "terminated"
        answer = message(client, new_session(client, ALICE), ALICE)  # its slot is free again
        assert dict(sse_events(answer.text))["reply"]["content"] == "next"
    assert not gate.is_set()


def stopped_one_offs(caplog: pytest.LogCaptureFixture) -> list[str]:
    said = (record.getMessage() for record in caplog.records)
    return [m.split()[1].rstrip(":") for m in said if m.endswith("so its one-off turn stops")]


def test_a_reader_that_leaves_unread_abandons_the_turn_once_and_one_that_read_it_all_never() -> None:
    """`Turn.leave`, which a streamed completion's response calls however it ends: its client may go
    while the first chunk is sent, before the turn's events were ever opened (a window no test over
    sockets can aim at, so it is checked here)."""

    async def main() -> list[str]:
        left: list[str] = []
        unread = Turn("s1", "r1", on_abandoned=lambda: left.append("s1"))
        unread.leave()
        unread.leave()
        read = Turn("s2", "r2", on_abandoned=lambda: left.append("s2"))
        read.close()
        assert [event async for event in read.events(60.0)] == []
        read.leave()
        return left

    assert asyncio.run(main()) == ["s1"]


@contextlib.contextmanager
def raw_post(base_url: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> Iterator[None]:
    """A POST on a socket of its own, closed on exit without reading the answer: a client that left."""
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    data = json.dumps(body).encode()
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(data)}")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        yield


def kinds(live: LiveServer, session: str) -> list[str]:
    return [record.kind for record in live.kernel.transcript(session)]


def test_stopping_the_server_leaves_a_sessions_running_turn_to_the_next_and_ends_a_completions(
    kernel_yaml: Path, llm_server: FakeLLMServer, gate: threading.Event
) -> None:
    """Past shutdown_grace_secs a session's running turn is handed off, not ended: its run stays
    `running`, its lease goes back (none left counted), and the next server resumes it and answers
    once (S25.3). A chat completion's turn ends `terminated`: its client has its conversation."""
    llm_server.add(Held(gate))
    llm_server.add(Held(gate))
    settings = ServerSettings(tokens=TOKENS, max_running_turns_per_user=2, shutdown_grace_secs=0.01)
    live = LiveServer(Kernel(load_kernel_config(kernel_yaml)), settings).__enter__()
    with live.client() as client:
        session = new_session(client, ALICE)
        streamed = {**COMPLETION, "stream": True}
        with (
            client.stream(
                "POST", f"/v1/sessions/{session}/messages", json={"content": "go"}, headers=ALICE
            ) as stream,
            client.stream("POST", "/v1/chat/completions", json=streamed, headers=ALICE) as completion,
        ):
            run = stream.headers["X-Run-Id"]
            wait_until(lambda: len(llm_server.requests) == 2, "both turns to reach the LLM")
            live.stop()
            opening = json.loads(next(completion.iter_lines()).removeprefix("data: "))
            one_off = opening["agentkernel"]["run"]
    assert not gate.is_set()
    with Kernel(load_kernel_config(kernel_yaml)) as kernel:  # the store, as the next server reads it
        assert kernel.turn_leases().running("alice") == 0
        left = kernel.run(run)
        assert left is not None and left.status == "running"
        ended = kernel.run(one_off)
        assert ended is not None and (ended.status, ended.reason) == ("ended", "terminated")
    llm_server.add(Reply(text="answered by the next server"))
    with serve(kernel_yaml, 2) as again, again.client() as client:
        wait_until(lambda: getattr(again.kernel.run(run), "status", "") == "ended", "the resumed run's end")
        events = client.get(f"/v1/runs/{run}/events", headers=ALICE)
        shown = sse_events(events.text)
        assert [e[1]["content"] for e in shown if e[0] == "reply"] == ["answered by the next server"]
        assert shown[-1] == ("done", {"reason": "job_done"})
        assert [r.content for r in again.kernel.transcript(session) if r.kind == "user"] == ["go"]


def test_a_chat_asked_for_at_once_opens_once_and_one_lent_to_a_tool_run_is_never_closed_as_idle() -> None:
    """A message and tool runs of one session may open its chat at the same moment: one chat, or the
    other's budget group would be a stranger's; and closing a lent chat would end the run's process."""
    opened: list[str] = []
    ended: list[ChatSession] = []

    def open_chat(info: SessionInfo, history: list[ChatMessage] | None) -> ChatSession:
        opened.append(info.id)
        return cast(ChatSession, object())

    def info(session_id: str) -> SessionInfo:
        return SessionInfo(session_id, "alice", "tester", "2026-01-01T00:00:00+00:00")

    async def main() -> None:
        runner = TurnRunner(open_chat, ended.append, max_open_chats=1)

        async def lend(session_id: str) -> ChatSession:
            async with runner.lent(info(session_id)) as chat:
                return chat

        first, second = await asyncio.gather(lend("a"), lend("a"))
        assert first is second and opened == ["a"]
        async with runner.lent(info("a")) as lent_chat:
            await lend("b")  # past max_open_chats, but neither is idle: each was lent while it opened
            assert ended == []
        await lend("c")
        assert lent_chat in ended and len(ended) == 2  # both idle now

    asyncio.run(main())


def test_a_lease_taken_for_a_request_that_went_away_meanwhile_goes_back_at_once(tmp_path: Path) -> None:
    """The store answers on a worker thread; a request cancelled while it does (its client gone) must
    not leave the session's lease behind until it expires: the session would be 409 for nothing."""
    answering, held, taken = threading.Event(), threading.Event(), threading.Event()

    class Slow(TurnLeases):
        def take(
            self,
            session_id: str,
            user_id: str,
            secs: float,
            most_per_user: int | None = None,
            run: NewRun | None = None,
        ) -> Lease:
            held.set()
            answering.wait()
            try:
                return super().take(session_id, user_id, secs, most_per_user, run)
            finally:
                taken.set()

    leases = Slow(tmp_path / "messages.db")

    def open_chat(info: SessionInfo, history: list[ChatMessage] | None) -> ChatSession:
        raise AssertionError("no turn starts")

    async def main() -> None:
        runner = TurnRunner(open_chat, lambda _: None, leases=lambda: leases, lease_secs=600)
        info = SessionInfo("s1", "alice", "tester", "2026-01-01T00:00:00+00:00")
        asking = asyncio.create_task(runner.start(info, "hi", "r1"))
        await asyncio.to_thread(held.wait)
        asking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asking
        answering.set()
        await asyncio.to_thread(taken.wait)
        # given back by a worker thread once the store has answered, long before its 600 s are up
        await asyncio.to_thread(wait_until, lambda: leases.running("alice") == 0, "the lease to go back")
        assert not runner.running("s1")

    try:
        asyncio.run(main())
    finally:
        answering.set()
        leases.close()


def test_a_lease_is_taken_and_given_back_on_the_event_loop_unless_the_store_is_held(tmp_path: Path) -> None:
    """A worker thread's hop costs more than the lease's write: once the store is open, the lease is
    taken and given back on the loop when the file takes the write at once; while another process
    holds the file, on a worker thread, which waits for it, and the turn starts all the same."""
    path = tmp_path / "messages.db"
    leases = TurnLeases(path)
    written_on: list[tuple[str, bool]] = []  # (statement, on the loop's thread)
    asked_to_wait = threading.Event()

    def traced(statement: str) -> None:
        on_loop = threading.current_thread() is threading.main_thread()
        if statement.startswith(("INSERT OR REPLACE INTO turn_leases", "DELETE FROM turn_leases")):
            written_on.append((statement.split()[0], on_loop))
        elif statement == "BEGIN IMMEDIATE" and not on_loop:
            asked_to_wait.set()

    leases._conn.set_trace_callback(traced)

    def open_chat(info: SessionInfo, history: list[ChatMessage] | None) -> ChatSession:
        raise RuntimeError("no chat here: the turn fails at once and gives its lease back")

    async def turn(runner: TurnRunner, info: SessionInfo) -> None:
        started = await runner.start(info, "hi", "r1")
        assert started.task is not None
        await started.task

    async def main() -> None:
        runner = TurnRunner(open_chat, lambda _: None, leases=lambda: leases, lease_secs=600)
        info = SessionInfo("s1", "alice", "tester", "2026-01-01T00:00:00+00:00")
        await turn(runner, info)  # the first opens the store, on a worker thread
        await turn(runner, info)
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process writing the file
            third = asyncio.create_task(turn(runner, info))
            assert await asyncio.to_thread(asked_to_wait.wait, 30)  # the worker thread waits its turn
            other.execute("COMMIT")
            await third
        finally:
            other.close()

    try:
        asyncio.run(main())
        assert written_on == [
            ("INSERT", False),  # the store opened for it on a worker thread
            ("DELETE", True),
            ("INSERT", True),
            ("DELETE", True),
            ("INSERT", False),  # the file held: a worker thread waited
            ("DELETE", True),
        ]
        assert leases.running("alice") == 0
    finally:
        leases.close()
