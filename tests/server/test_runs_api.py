"""The runs API (S25.1, S25.4, S25.5): a turn's run id, its status and answer, its events read again
from any position, and a retried request (the same Idempotency-Key) that is the same run."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest

from agentkernel.config import ServerSettings, load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.kernel import Kernel
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import Gated, LiveServer, sse_events, sse_frames

ALICE, BOB = {"Authorization": "Bearer alice-token"}, {"Authorization": "Bearer bob-token"}
TOKENS = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}


@pytest.fixture
def server(kernel_yaml: Path) -> Iterator[LiveServer]:
    with LiveServer(Kernel(load_kernel_config(kernel_yaml)), ServerSettings(tokens=TOKENS)) as live:
        yield live


@pytest.fixture
def client(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as made:
        yield made


def session_of(client: httpx.Client, headers: dict[str, str] = ALICE) -> str:
    return str(client.post("/v1/sessions", json={"template": "tester"}, headers=headers).json()["id"])


def send(
    client: httpx.Client, session: str, text: str, headers: dict[str, str] = ALICE, key: str | None = None
) -> httpx.Response:
    extra = {} if key is None else {"Idempotency-Key": key}
    return client.post(
        f"/v1/sessions/{session}/messages", json={"content": text}, headers={**headers, **extra}
    )


def test_a_turn_says_its_run_and_the_run_says_how_it_ended(
    client: httpx.Client, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(text="hello"))
    answer = send(client, session_of(client), "hi")
    run_id = answer.headers["x-run-id"]
    (first, *_) = sse_events(answer.text, runs=True)
    assert first[0] == "run" and first[1]["id"] == run_id
    run = client.get(f"/v1/runs/{run_id}", headers=ALICE).json()
    assert (run["status"], run["reason"], run["answer"]) == ("ended", "job_done", "hello")
    assert client.get(f"/v1/runs/{run_id}", headers=BOB).status_code == 404  # another user's: unknown
    assert client.get(f"/v1/runs/{run_id}/events", headers=BOB).status_code == 404
    assert client.get("/v1/runs/no-such-run", headers=ALICE).status_code == 404


def test_a_run_s_events_resume_after_the_last_id_seen_exactly_once(
    client: httpx.Client, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(tool_calls=(FakeToolCall("upper", '{"text": "a"}', "c1"),)), Reply(text="A it is"))
    answer = send(client, session_of(client), "upper a")
    live = [(kind, seen, data) for kind, seen, data in sse_frames(answer.text) if seen is not None]
    assert [kind for kind, _, _ in live] == ["tool_call", "tool_result", "reply", "done"]
    ids = [seen for _, seen, _ in live]
    assert ids == sorted(ids)  # an event's id is never below one shown before it
    run_id = answer.headers["x-run-id"]
    for cut in range(len(live)):
        headers = {**ALICE, "Last-Event-ID": str(ids[cut])}
        rest = sse_frames(client.get(f"/v1/runs/{run_id}/events", headers=headers).text)
        assert [(kind, seen) for kind, seen, _ in rest] == [(kind, seen) for kind, seen, _ in live[cut + 1 :]]
    replayed = sse_frames(client.get(f"/v1/runs/{run_id}/events?after=0", headers=ALICE).text)
    assert [data for kind, _, data in replayed if kind == "reply"] == [
        {"content": "A it is", "streamed": False}
    ]
    assert [data["content"] for kind, _, data in replayed if kind == "tool_result"] == ["A"]
    bad = client.get(f"/v1/runs/{run_id}/events", headers={**ALICE, "Last-Event-ID": "seven"})
    assert bad.status_code == 422 and "last-event-id" in bad.text


def test_the_same_idempotency_key_is_the_same_run_never_a_second(
    client: httpx.Client, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(text="once"), Reply(text="bob's own"))
    session = session_of(client)
    first = send(client, session, "pay the bill", key="k-1")
    again = send(client, session, "pay the bill", key="k-1")
    assert again.status_code == 200
    assert again.headers["x-run-id"] == first.headers["x-run-id"]
    assert dict(sse_events(again.text))["reply"]["content"] == "once"
    assert len(llm_server.requests) == 1 + _models(llm_server)  # the retry asked nothing
    other = send(client, session, "pay another bill", key="k-1")
    assert other.status_code == 409 and "different request" in other.json()["detail"]
    theirs = send(client, session_of(client, BOB), "pay the bill", BOB, key="k-1")
    assert dict(sse_events(theirs.text))["reply"]["content"] == "bob's own"  # another user's key: another run
    assert theirs.headers["x-run-id"] != first.headers["x-run-id"]
    refused = send(client, session, "x", key="two words")  # a key is visible ASCII, no spaces
    assert refused.status_code == 422


def _models(llm_server: FakeLLMServer) -> int:
    """The LLM requests that were not chat calls (none here: the in-process server asks no /models)."""
    return sum(1 for r in llm_server.requests if not r.path.endswith("/chat/completions"))


def test_a_user_reads_at_most_max_run_streams_per_user_streams_at_once(
    kernel_yaml: Path, llm_server: FakeLLMServer
) -> None:
    """A stream of a run still going reads the store until its end: one token cannot open them without
    end (server.max_run_streams_per_user), and another user's streams are not counted with theirs."""
    gate = threading.Event()
    llm_server.add(Gated(gate, Reply(text="late")), Reply(text="bob's"))
    settings = ServerSettings(tokens=TOKENS, max_run_streams_per_user=1)
    try:
        with (
            LiveServer(Kernel(load_kernel_config(kernel_yaml)), settings) as live,
            live.client() as client,
            client.stream("POST", f"/v1/sessions/{session_of(client)}/messages", json={"content": "wait"},
                          headers=ALICE) as turn,
        ):  # fmt: skip
            run_id = turn.headers["x-run-id"]
            with client.stream("GET", f"/v1/runs/{run_id}/events", headers=ALICE) as first:
                assert first.status_code == 200
                again = client.get(f"/v1/runs/{run_id}/events", headers=ALICE)
                assert again.status_code == 429 and "server.max_run_streams_per_user (1)" in again.text
                theirs = send(client, session_of(client, BOB), "hi", BOB)
                bobs = client.get(f"/v1/runs/{theirs.headers['x-run-id']}/events", headers=BOB)
                assert bobs.status_code == 200 and ("done", {"reason": "job_done"}) in sse_events(bobs.text)
                gate.set()
                assert sse_events(first.read().decode())[-1] == ("done", {"reason": "job_done"})
            after = client.get(f"/v1/runs/{run_id}/events", headers=ALICE)  # the slot went back
            assert after.status_code == 200
    finally:
        gate.set()


def test_a_run_ending_between_two_reads_of_its_stream_still_shows_its_last_records() -> None:
    """A stream finds no new record, then finds its run ended: the run's last step (its answer, its
    end and the run's row, one transaction) committed between the two reads. It reads once more
    before saying `done`, so the answer is shown (it was lost under load, PostgreSQL + Temporal)."""
    from agentkernel.ports import Record
    from agentkernel.server.routes.runs import _frames
    from agentkernel.server.sessions import SessionInfo
    from agentkernel.services.turn_leases import Run

    ended = Run("r1", "s1", "alice", "ended", "job_done", "hi", None, None, False, None, None, 0.0, 1.0)
    last_step = [
        Record(7, "agent", "agent", "the answer", {}, "t"),
        Record(8, "system", "end", "job_done", {}, "t"),
    ]
    committed: list[Record] = []

    def run_records(run_id: str, since: int, limit: int) -> list[Record]:
        return [record for record in committed if record.id > since][:limit]

    def run(run_id: str) -> Run:
        committed[:] = last_step  # the last step commits just before the run's row is read
        return ended

    kernel = SimpleNamespace(run_records=run_records, run=run)
    parts = SimpleNamespace(kernel=kernel, settings=SimpleNamespace(keepalive_secs=15.0), run_wakeups=None)
    info = SessionInfo("s1", "alice", "tester", "t")

    async def read() -> str:
        frames = _frames(cast(Any, parts), cast(Any, None), ended, info, since=6)
        return b"".join([frame async for frame in frames]).decode()

    assert sse_events(asyncio.run(read())) == [
        ("reply", {"content": "the answer", "streamed": False}),
        ("done", {"reason": "job_done"}),
    ]
