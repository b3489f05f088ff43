"""Stopping a turn (`ChatSession.stop`, Ctrl-C in the chat): it ends `terminated`, recorded (S7.3, S23.5)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.agent.loop import NOT_RUN, LoopEvent, LoopResult
from agentkernel.agent.session import ChatSession
from agentkernel.config import load_kernel_config
from tests.fakes import FakeLLMServer, FakeToolCall, RecordedRequest, Reply
from tests.fakes.openai_server import Turn

WAIT_SECS = 30  # a bound for a broken stop, never a measure of a working one


@pytest.fixture
def kernel_for(agent_project: Path) -> Kernel:
    return Kernel(load_kernel_config(agent_project / "config" / "kernel.yaml"))


def records(kernel: Kernel, session: str) -> list[tuple[str, str, str]]:
    return [(r.role, r.kind, r.content) for r in kernel.transcript(session, 200)]


def send_stopping_at(chat: ChatSession, text: str, kind: str) -> tuple[LoopResult, list[LoopEvent]]:
    """Send `text`; the first event of `kind` stops the turn, as Ctrl-C would."""
    events: list[LoopEvent] = []

    async def collect(event: LoopEvent) -> None:
        events.append(event)
        if event.kind == kind:
            chat.stop()

    return asyncio.run(chat.send(text, collect)), events


def test_stop_while_streaming_keeps_what_was_shown(kernel_for: Kernel, llm_server: FakeLLMServer) -> None:
    # the model sends "Раз " and then hangs: only the stop can end this answer
    llm_server.add(Reply(text="Раз два три", chunk_chars=4, stall_after_chunks=2), Reply(text="Ладно"))
    chat = kernel_for.chat("tester", session_id="s-stream")
    result, events = send_stopping_at(chat, "считай", "token")
    assert (result.reason.value, result.answer) == ("terminated", "Раз ")
    assert (events[-1].kind, events[-1].data) == ("end", {"reason": "terminated"})
    assert "answer" not in [e.kind for e in events]
    kept = records(kernel_for, "s-stream")
    assert ("assistant", "agent", "Раз ") in kept and kept[-1] == ("system", "end", "terminated")
    assert next(r for r in kernel_for.transcript("s-stream", 200) if r.kind == "agent").meta == {
        "stopped": True
    }
    assert any("answered: Раз " in content for _, _, content in kept)  # after_turn saw the partial answer
    # the conversation goes on, and the model sees what it had said
    result, _ = send_stopping_at(chat, "дальше", "never")
    assert result.reason.value == "job_done"
    assert [(m["role"], m["content"]) for m in llm_server.bodies[1]["messages"][1:]] == [
        ("user", "считай"),
        ("assistant", "Раз "),
        ("user", "дальше"),
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_stop_while_the_server_is_silent(kernel_for: Kernel, llm_server: FakeLLMServer, stream: bool) -> None:
    """Nothing has come yet (a model loading, a stalled server): the stop does not wait for it."""
    asked = threading.Event()

    def hang(request: RecordedRequest) -> Turn:
        asked.set()
        return Reply(text="поздно", stall_after_chunks=0) if stream else Reply(text="поздно", delay=10.0)

    llm_server.respond_with(hang)
    chat = kernel_for.chat("tester", session_id="s-silent", stream=stream)

    async def stop_once_asked() -> LoopResult:
        async def quiet(event: LoopEvent) -> None:
            return None

        turn = asyncio.create_task(chat.send("алло", quiet))
        assert await asyncio.to_thread(asked.wait, WAIT_SECS)
        assert chat.stop()
        return await turn

    result = asyncio.run(stop_once_asked())
    assert (result.reason.value, result.answer) == ("terminated", None)
    assert [k for _, k, _ in records(kernel_for, "s-silent")][-1] == "end"
    assert "agent" not in [k for _, k, _ in records(kernel_for, "s-silent")]


def test_stop_during_tool_calls_skips_the_rest(kernel_for: Kernel, llm_server: FakeLLMServer) -> None:
    """A stop after the first call's result: the next call is not run, and no further LLM call is made.

    Both calls are announced (`tool_call`) before the first runs: the response is one recorded step.
    """
    calls = (FakeToolCall("upper", '{"text": "a"}', "c1"), FakeToolCall("upper", '{"text": "b"}', "c2"))
    llm_server.add(Reply(tool_calls=calls), Reply(text="после"))
    chat = kernel_for.chat("tester", session_id="s-tools")
    result, events = send_stopping_at(chat, "два вызова", "tool_result")
    shown = [e.kind for e in events if e.kind.startswith("tool_")]
    assert shown[:3] == ["tool_call", "tool_call", "tool_result"]
    assert result.reason.value == "terminated"
    assert [e.data["content"] for e in events if e.kind == "tool_result"] == ["A"]
    assert len(llm_server.bodies) == 1
    # every tool call is answered in the conversation, or the next request would be refused
    send_stopping_at(chat, "и что", "never")
    sent = llm_server.bodies[1]["messages"]
    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in sent if m["role"] == "tool"] == [
        ("tool", "c1", "A"),
        ("tool", "c2", NOT_RUN),
    ]


def test_stop_with_no_turn_running_does_nothing(kernel_for: Kernel, llm_server: FakeLLMServer) -> None:
    chat = kernel_for.chat("tester", session_id="s-idle")
    assert chat.stop() is False
    llm_server.add(Reply(text="ок"))
    result, _ = send_stopping_at(chat, "привет", "never")
    assert result.reason.value == "job_done"  # an earlier stop does not carry over
    assert records(kernel_for, "s-idle")[-1] == ("system", "end", "job_done")
