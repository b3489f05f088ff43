"""A chat's history is a cache of its session's transcript: kept while only it writes, read
again once anything else has. Two kernels on one project stand for two processes (the server's test,
tests/server/test_turns_across_processes.py, runs real ones)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent
from agentkernel.agent.session import ChatSession
from agentkernel.config import load_kernel_config
from tests.fakes import FakeLLMServer, FakeToolCall, Reply


def send(chat: ChatSession, text: str) -> None:
    async def ignore(_: LoopEvent) -> None:
        pass

    asyncio.run(chat.send(text, ignore))


def roles(llm_server: FakeLLMServer, index: int) -> list[str]:
    return [m["role"] for m in llm_server.bodies[index]["messages"]]


def test_a_chat_keeps_its_cache_until_another_writes_into_its_session(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    config = load_kernel_config(agent_project / "config" / "kernel.yaml")
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "abc"}', id="c1"),)),
        Reply(text="ABC"),
        Reply(text="again"),
        Reply(text="elsewhere"),
        Reply(text="read back"),
    )
    with Kernel(config) as here, Kernel(config) as there:
        chat = here.chat("tester", user_id="alice", session_id="s1", resume=True)
        send(chat, "one")
        send(chat, "two")  # only this chat wrote: its cache stands, the tool exchange with it
        assert roles(llm_server, 2) == ["system", "user", "assistant", "tool", "assistant", "user"]
        send(there.chat("tester", user_id="alice", session_id="s1", resume=True), "three")
        send(chat, "four")  # the other kernel wrote: read again from the transcript
        texts = [m["content"] for m in llm_server.bodies[4]["messages"] if m["role"] == "user"]
        assert texts == ["one", "two", "three", "four"]
