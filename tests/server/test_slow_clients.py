"""Clients that read a turn's stream slowly, or never (issue 11 section 5; docs/server.md, "A slow client").

The slow clients speak HTTP over a plain socket with a small receive buffer
(h11 parses what they read), so the test decides exactly when and how much
they read; nothing here sleeps: a reader waits on the bytes it asked for,
and the test on the transcript or on the server having let go of a turn.
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h11
import httpx
import pytest

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent
from agentkernel.config import load_kernel_config
from agentkernel.server.events import StreamEvent
from agentkernel.server.turns import Turn
from tests.conftest import wait_until
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.fakes.openai_server import RecordedRequest
from tests.server.conftest import Gated, LiveServer, make_project, sse_events
from tests.server.test_api import kinds, new_session

ROWS = 30_000  # a tool_result frame of about 1.5 MB: far more than the sockets between hold
LONG_TEXT = "".join(f"word{n} " for n in range(2_000))  # then thousands of token events


class RawStream:
    """`POST url/path body` over a socket, read only when and as much as the test says."""

    def __init__(self, url: str, path: str, body: dict[str, Any], receive_buffer: int = 4096) -> None:
        where = urlsplit(url)
        assert where.hostname is not None and where.port is not None
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer
        )  # before connect: the window
        self.sock.settimeout(60)
        self.sock.connect((where.hostname, where.port))
        self.http = h11.Connection(h11.CLIENT)
        data = json.dumps(body).encode()
        headers = [
            ("host", where.netloc),
            ("content-type", "application/json"),
            ("content-length", str(len(data))),
        ]
        request = h11.Request(method="POST", target=path, headers=headers)
        self.sock.sendall(self.http.send(request) + self.http.send(h11.Data(data=data)))
        self.sock.sendall(self.http.send(h11.EndOfMessage()))
        self.status: int | None = None
        self.body = bytearray()
        self.ended = False

    def read(self, most: int) -> None:
        """Take up to `most` bytes off the socket (waiting for at least one), and parse what is complete."""
        chunk = self.sock.recv(most)
        assert chunk, "the server closed the connection before the response ended"
        self.http.receive_data(chunk)
        while (event := self.http.next_event()) is not h11.NEED_DATA:
            if isinstance(event, h11.Response):
                self.status = event.status_code
            elif isinstance(event, h11.Data):
                self.body += event.data
            elif isinstance(event, h11.EndOfMessage):
                self.ended = True
                return

    def read_until(self, marker: bytes, step: int) -> None:
        while marker not in self.body:
            self.read(step)

    def events(self) -> list[tuple[str, Any]]:
        assert self.ended and self.status == 200
        frames = [f for f in self.body.decode().split("\n\n") if f and not f.startswith(":")]
        return sse_events("\n\n".join(frames))

    def close(self) -> None:
        self.sock.close()


def answer(request: RecordedRequest) -> Reply:
    """`slow` gets a huge table, then a long streamed answer; anything else an echo."""
    last = request.body["messages"][-1]
    if last["role"] == "user" and last["content"] == "slow":
        return Reply(tool_calls=(FakeToolCall("table", json.dumps({"n": ROWS}), id="big"),))
    if last["role"] == "tool":
        return Reply(text=LONG_TEXT)
    return Reply(text="answer to " + last["content"])


def turns_of(session: str) -> list[Turn]:
    """The server's Turn objects of `session` still alive anywhere (the server runs in this process)."""
    gc.collect()
    return [t for t in gc.get_objects() if isinstance(t, Turn) and t.session_id == session]


def served_normally(client: httpx.Client, n: int) -> None:
    """Another user's turn, start to end, while the slow client holds its stream open."""
    events = dict(
        sse_events(
            client.post(f"/v1/sessions/{new_session(client)}/messages", json={"content": f"q{n}"}).text
        )
    )
    assert events["reply"]["content"] == f"answer to q{n}" and events["done"] == {"reason": "job_done"}


def assert_the_whole_slow_turn(events: list[tuple[str, Any]]) -> None:
    types = [t for t, _ in events]
    tokens = [d["text"] for t, d in events if t == "token"]
    assert types == ["tool_call", "tool_result"] + ["token"] * len(tokens) + ["reply", "done"]
    assert [row["id"] for row in events[1][1]["visual"][0]["rows"]] == list(range(ROWS))
    assert "".join(tokens) == LONG_TEXT == events[-2][1]["content"]
    assert events[-1][1] == {"reason": "job_done"}


@pytest.fixture
def echo_live(kernel_yaml: Path, llm_server: FakeLLMServer) -> Iterator[LiveServer]:
    llm_server.respond_with(answer)
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as server:
        yield server


def test_a_slow_reader_gets_every_event_in_order_while_others_are_served(echo_live: LiveServer) -> None:
    with echo_live.client() as client:
        session = new_session(client)
        slow = RawStream(echo_live.url, f"/v1/sessions/{session}/messages", {"content": "slow"})
        try:
            slow.read_until(b"event: tool_call", step=16)
            # the slow client stops reading; the turn does not wait for it, and nobody else does
            wait_until(lambda: "end" in kinds(client, session), "the slow client's turn to be recorded")
            for n in range(5):
                served_normally(client, n)
            read = 0
            while not slow.ended:  # then it reads on, a few bytes at a time, others served in between
                slow.read(61)
                read += 61
                if read % (61 * 8192) == 0:
                    served_normally(client, read)
        finally:
            slow.close()
        assert_the_whole_slow_turn(slow.events())
        assert kinds(client, session) == ["user", "tool_call", "tool_result", "agent", "end"]
    wait_until(lambda: not turns_of(session), "the server to let go of the finished turn")


def test_a_client_that_never_reads_then_leaves_loses_nothing_and_holds_nothing(
    kernel_yaml: Path, llm_server: FakeLLMServer
) -> None:
    gate = threading.Event()
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("table", json.dumps({"n": ROWS}), id="big"),)),
        Gated(gate, Reply(text=LONG_TEXT)),
    )
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live, live.client() as client:
        session = new_session(client)
        silent = RawStream(live.url, f"/v1/sessions/{session}/messages", {"content": "huge"})
        wait_until(lambda: len(llm_server.requests) == 2, "the turn to run its tool and ask again")
        silent.close()  # it never read a byte
        wait_until(
            lambda: not any(turn.streaming for turn in turns_of(session)),
            "the server to drop the stream of the client that left",
        )
        assert "end" not in kinds(client, session)  # while the turn still waits for the LLM
        gate.set()
        wait_until(lambda: "end" in kinds(client, session), "the turn to be recorded")
        records = client.get(f"/v1/sessions/{session}/messages").json()
        assert [r["kind"] for r in records] == ["user", "tool_call", "tool_result", "agent", "end"]
        assert records[-2]["content"] == LONG_TEXT and records[-1]["content"] == "job_done"
        wait_until(lambda: not turns_of(session), "the server to let go of the turn")


def test_a_client_too_far_behind_is_cut_off_and_the_turn_goes_on(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    bound = 64 * 1024
    kernel_yaml = make_project(tmp_path, llm_server, f"server:\n  max_stream_backlog_bytes: {bound}\n")
    llm_server.respond_with(answer)
    kernel = Kernel(load_kernel_config(kernel_yaml))
    # the sockets between hold a fixed 128 KiB or so, far less than the 1.5 MB table frame: whatever
    # the machine's TCP autotuning, the tokens after it pile up in the turn's backlog and pass the bound
    with LiveServer(kernel, send_buffer=64 * 1024) as live, live.client() as client:
        session = new_session(client)
        behind = RawStream(live.url, f"/v1/sessions/{session}/messages", {"content": "slow"})
        try:
            wait_until(lambda: "end" in kinds(client, session), "the turn to be recorded")
            served_normally(client, 0)
            while not behind.ended:
                behind.read(65536)
        finally:
            behind.close()
        events = behind.events()
        assert [t for t, _ in events[:2]] == ["tool_call", "tool_result"]
        assert [t for t, _ in events[-2:]] == ["error", "done"]
        assert f"fell more than {bound:,} bytes behind" in events[-2][1]["message"]
        assert f"GET /v1/sessions/{session}/messages" in events[-2][1]["message"]
        streamed = "".join(d["text"] for t, d in events[2:-2] if t == "token")  # what came before the cut
        assert [t for t, _ in events[2:-2]] == ["token"] * len(events[2:-2])
        assert LONG_TEXT.startswith(streamed) and streamed != LONG_TEXT
        records = client.get(f"/v1/sessions/{session}/messages").json()
        assert records[-2]["content"] == LONG_TEXT and records[-1]["content"] == "job_done"


# -- the bound itself, on a Turn alone -------------------------------------------------------------


def token(text: str) -> LoopEvent:
    return LoopEvent("token", {"text": text})


def tokened(text: str) -> StreamEvent:
    return StreamEvent("token", {"text": text})


def frame_size(text: str) -> int:
    return len(tokened(text).frame())


def test_the_backlog_is_bounded_and_a_reader_cut_off_is_told_why() -> None:
    async def scenario() -> list[StreamEvent]:
        turn = Turn("s1", "r1", max_backlog_bytes=3 * frame_size("aa"))
        for text in ("aa", "bb", "cc", "dd"):  # "dd" finds 3 frames waiting, not more: it is queued
            await turn.emit(token(text))
        reader = turn.events(idle_secs=60)
        assert [await anext(reader) for _ in range(2)] == [tokened("aa"), tokened("bb")]
        for text in ("ee", "ff", "gg", "hh"):  # two read: "ee", "ff" fit; "gg" finds 4 waiting: cut off
            await turn.emit(token(text))
        turn.close()
        return [event async for event in reader if event is not None]

    events = asyncio.run(scenario())
    assert events[:4] == [tokened("cc"), tokened("dd"), tokened("ee"), tokened("ff")]
    assert [e.type for e in events[4:]] == ["error", "done"]
    assert "fell more than 105 bytes behind the answer" in events[4].data["message"]  # type: ignore[operator]


def test_one_event_bigger_than_the_bound_still_goes_out() -> None:
    async def scenario() -> list[StreamEvent | None]:
        turn = Turn("s1", "r1", max_backlog_bytes=10)
        await turn.emit(token("x" * 1000))
        turn.close()
        return [event async for event in turn.events(idle_secs=60)]

    assert asyncio.run(scenario()) == [tokened("x" * 1000)]


def test_a_reader_that_leaves_stops_the_queue_and_the_sealing() -> None:
    sealed: list[StreamEvent] = []

    async def seal(event: StreamEvent) -> StreamEvent:
        sealed.append(event)
        return event

    async def scenario() -> None:
        turn = Turn("s1", "r1", seal=seal)
        await turn.emit(token("a"))
        reader = turn.events(idle_secs=60)
        assert await anext(reader) == tokened("a")
        await reader.aclose()  # the client went away
        await turn.emit(token("b"))
        turn.close()

    asyncio.run(scenario())
    assert sealed == [tokened("a")]
