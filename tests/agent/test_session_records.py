"""A chat's history is a cache of its session's transcript: kept while only it writes, read
again once anything else has. Two kernels on one project stand for two processes (the server's test,
tests/server/test_turns_across_processes.py, runs real ones)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent
from agentkernel.agent.session import ChatSession
from agentkernel.agent.session_records import SessionRecords
from agentkernel.config import load_kernel_config
from agentkernel.ports import Entry
from agentkernel.services.lazy_messages import LazyMessageStore
from agentkernel.services.memory import SqliteMessageStore
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


def test_the_check_is_made_at_once_when_the_store_answers_so_else_left_to_a_worker_thread(
    tmp_path: Path,
) -> None:
    """`current_at_once` spares the event loop a worker thread's hop before a turn: True only when the
    store says, without waiting, that nothing but this chat wrote; False (the caller then asks
    `refreshed` on a worker thread) when another wrote, when the store is not open yet, and while
    another thread holds its reading connection."""
    path = tmp_path / "messages.db"
    store = LazyMessageStore(path)
    records = SessionRecords(store, "s1", "alice", 50)
    assert not records.current_at_once()  # not opened: opening reads (and may migrate) the file
    assert records.refreshed() is None  # opens it; nothing recorded yet
    records.append_step("s1", [Entry("user", "user", "hi")], user_id="alice")
    assert records.current_at_once()  # only this chat wrote
    with SqliteMessageStore(path) as other:  # another process's write into the session
        other.append("s1", "agent", "agent", "from elsewhere", user_id="alice")
    assert not records.current_at_once()
    fresh = records.refreshed()
    assert fresh is not None and [m.content for m in fresh] == ["hi", "from elsewhere"]
    assert records.current_at_once()
    opened = store.store
    assert isinstance(opened, SqliteMessageStore)
    try:
        with opened._reading():  # another thread reading: the loop does not wait for it
            assert not asyncio.run(asyncio.to_thread(records.current_at_once))
        assert records.current_at_once()
    finally:
        store.close()
