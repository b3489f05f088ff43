"""The agent loop against a scripted OpenAI-compatible server (S23.3, S7, S9.2): real HTTP, real scripts."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.agent.loop import MAX_RECORDED_VISUAL_BYTES, LoopEvent
from agentkernel.agent.session import ChatSession
from agentkernel.config import load_kernel_config
from agentkernel.llm import ChatMessage, Completion, CompletionRequest, StreamEvent, ToolCall, Usage
from agentkernel.llm.token_bound import MESSAGE_MARGIN, message_bound
from tests.fakes import Drop, FakeLLMServer, FakeToolCall, HttpError, Reply
from tests.tools.sources.mcp.conftest import SERVER, make_project


@pytest.fixture
def kernel_for(agent_project: Path) -> Kernel:
    return Kernel(load_kernel_config(agent_project / "config" / "kernel.yaml"))


def send(chat: ChatSession, text: str) -> tuple[Any, list[LoopEvent]]:
    events: list[LoopEvent] = []

    async def collect(event: LoopEvent) -> None:
        events.append(event)

    return asyncio.run(chat.send(text, collect)), events


def kinds(events: list[LoopEvent]) -> list[str]:
    return [e.kind for e in events if e.kind != "token"]


def test_a_plain_answer_streams_and_is_recorded(kernel_for: Kernel, llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="Привет! Чем помочь?", prompt_tokens=12, completion_tokens=8))
    chat = kernel_for.chat("tester", user_id="u1", session_id="s1")
    result, events = send(chat, "привет")
    assert (result.answer, result.reason.value) == ("Привет! Чем помочь?", "job_done")
    assert "".join(str(e.data["text"]) for e in events if e.kind == "token") == "Привет! Чем помочь?"
    assert kinds(events) == ["notice", "answer", "notice", "end"]
    assert [e.data for e in events if e.kind == "notice"] == [
        {"text": "gate saw привет"},
        {"text": "answered: Привет! Чем помочь?"},
    ]
    (body,) = llm_server.bodies
    assert body["messages"][0] == {"role": "system", "content": "You are a test agent."}
    assert body["messages"][-1] == {"role": "user", "content": "привет"}
    assert [t["function"]["name"] for t in body["tools"]] == ["upper"]  # the template's tools only
    assert chat.process.tokens_used == 20
    records = kernel_for.transcript("s1", 50)
    assert [(r.role, r.kind) for r in records][:3] == [
        ("user", "user"),
        ("hook", "hook"),
        ("system", "notice"),
    ]
    assert any(r.kind == "agent" and r.content == "Привет! Чем помочь?" for r in records)
    assert any(r.kind == "error" and "reason=job_done" in r.content for r in records)  # after_loop's reason


def test_tool_calls_go_through_dispatch_and_back_to_the_llm(
    kernel_for: Kernel, llm_server: FakeLLMServer
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "abc"}', id="c1"),)),
        Reply(text="Готово: ABC"),
    )
    chat = kernel_for.chat("tester", session_id="s2")
    result, events = send(chat, "сделай громче abc")
    assert result.answer == "Готово: ABC"
    assert kinds(events) == ["notice", "tool_call", "tool_result", "visual", "answer", "notice", "end"]
    tool_result = next(e for e in events if e.kind == "tool_result").data
    assert (tool_result["content"], tool_result["success"]) == ("ABC", True)
    second = llm_server.bodies[1]["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "upper"
    assert (second[-1]["role"], second[-1]["tool_call_id"], second[-1]["content"]) == ("tool", "c1", "ABC")
    kinds_recorded = [r.kind for r in kernel_for.transcript("s2", 50)]
    assert "tool_call" in kinds_recorded and "tool_result" in kinds_recorded
    # the record keeps the visual blocks for a person reading it again; the LLM never gets them (S6.1)
    (recorded,) = [r for r in kernel_for.transcript("s2", 50) if r.kind == "tool_result"]
    assert recorded.meta == {"tool": "upper", "id": "c1", "success": True, "visual": [
        {"type": "text", "text": "done: abc"}
    ]}  # fmt: skip
    # the conversation goes on with the tool exchange kept
    llm_server.add(Reply(text="ещё?"))
    send(chat, "и всё")
    third = llm_server.bodies[2]["messages"]
    assert [m["role"] for m in third] == ["system", "user", "assistant", "tool", "assistant", "user"]
    # nor does a chat resumed from the transcript
    llm_server.add(Reply(text="снова"))
    send(kernel_for.chat("tester", session_id="s2", resume=True), "снова")
    assert "done: abc" not in str(llm_server.bodies)


def test_visual_blocks_too_big_for_the_transcript_leave_the_record_whole(
    kernel_for: Kernel, llm_server: FakeLLMServer
) -> None:
    big = "x" * (MAX_RECORDED_VISUAL_BYTES + 1)
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", json.dumps({"text": big}), id="c1"),), chunk_chars=1 << 20),
        Reply(text="done"),
    )
    _, events = send(kernel_for.chat("tester", session_id="s-big"), "go")
    (shown,) = [e.data for e in events if e.kind == "visual"]
    assert shown["block"] == {"type": "text", "text": "done: " + big}  # the person still sees it now
    (recorded,) = [r for r in kernel_for.transcript("s-big", 50) if r.kind == "tool_result"]
    assert recorded.content.startswith("XXXX")  # the content as the LLM got it (cut to its limit)
    assert recorded.meta["visual_omitted_bytes"] > MAX_RECORDED_VISUAL_BYTES and "visual" not in recorded.meta


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (FakeToolCall("upper", "{not json"), "arguments are not valid JSON"),
        (FakeToolCall("nope", "{}"), "unknown tool 'nope'"),
        (FakeToolCall("secret", "{}"), "tool 'secret' is not allowed for tester"),
        (FakeToolCall("upper", '{"text": 5}'), "text: 5 is not of type 'string'"),
    ],
)
def test_bad_tool_calls_go_back_as_failed_results(
    kernel_for: Kernel, llm_server: FakeLLMServer, call: FakeToolCall, fragment: str
) -> None:
    llm_server.add(Reply(tool_calls=(call,)), Reply(text="sorry"))
    result, _ = send(kernel_for.chat("tester"), "go")
    assert result.answer == "sorry"
    tool_message = llm_server.bodies[1]["messages"][-1]
    assert tool_message["role"] == "tool" and fragment in tool_message["content"]


def test_hook_reply_skips_the_llm(kernel_for: Kernel, llm_server: FakeLLMServer) -> None:
    result, events = send(kernel_for.chat("tester"), "ping")
    assert (result.answer, result.reason.value) == ("pong", "job_done")
    assert llm_server.bodies == []
    assert kinds(events) == ["answer", "notice", "end"]


def test_hook_suppress_blocks_the_message(kernel_for: Kernel, llm_server: FakeLLMServer) -> None:
    result, events = send(kernel_for.chat("tester", session_id="s3"), "stop")
    assert (result.answer, result.reason.value) == (None, "blocked")
    assert llm_server.bodies == []
    assert [e.data for e in events if e.kind == "notice"] == [
        {"text": "suppressed"},
        {"text": "answered: nothing"},
    ]
    assert any("reason=blocked" in r.content for r in kernel_for.transcript("s3", 50))


def test_replace_and_inject_reach_the_llm_for_one_turn(kernel_for: Kernel, llm_server: FakeLLMServer) -> None:
    llm_server.add(Reply(text="OK!"), Reply(text="ok"))
    chat = kernel_for.chat("tester")
    send(chat, "shout")
    first = llm_server.bodies[0]["messages"]
    assert first[-2:] == [{"role": "system", "content": "be loud"}, {"role": "user", "content": "SHOUT"}]
    send(chat, "again")
    second = llm_server.bodies[1]["messages"]
    assert {"role": "system", "content": "be loud"} not in second
    assert {"role": "user", "content": "SHOUT"} in second


@pytest.mark.parametrize("failure", [HttpError(500, "upstream broke"), Drop()])
def test_llm_down_ends_with_error(kernel_for: Kernel, llm_server: FakeLLMServer, failure: Any) -> None:
    llm_server.add(failure)
    result, events = send(kernel_for.chat("tester", session_id="s4"), "hello")
    assert result.reason.value == "error"
    error = str(next(e for e in events if e.kind == "error").data["message"])
    assert error.startswith("the LLM is unavailable:")
    assert any("reason=error" in r.content for r in kernel_for.transcript("s4", 50))


def test_max_turns(kernel_for: Kernel, llm_server: FakeLLMServer) -> None:
    for _ in range(3):
        llm_server.add(Reply(tool_calls=(FakeToolCall("upper", '{"text": "x"}'),)))
    result, events = send(kernel_for.chat("tester"), "loop forever")
    assert result.reason.value == "max_turns"
    assert "max_turns (3)" in str(next(e for e in events if e.kind == "error").data["message"])


def test_budget_exhausted(kernel_for: Kernel, llm_server: FakeLLMServer) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "x"}'),), prompt_tokens=900, completion_tokens=200)
    )
    result, events = send(kernel_for.chat("tester"), "expensive")
    assert result.reason.value == "budget_exhausted"
    assert next(e for e in events if e.kind == "error").data["message"] == "caller budget exhausted"
    assert len(llm_server.bodies) == 1


def test_each_call_holds_its_bound_and_the_second_bound_is_the_servers_count(
    kernel_for: Kernel, llm_server: FakeLLMServer
) -> None:
    """S9.2 with a limited budget: the loop asks for at most what its budget has left beyond the prompt's
    bound; after one answer the bound is what the server counted plus the bytes added since."""
    llm_server.add(
        Reply(
            tool_calls=(FakeToolCall("upper", '{"text": "x"}', id="c1"),),
            prompt_tokens=100,
            completion_tokens=20,
        ),
        Reply(text="готово", prompt_tokens=150, completion_tokens=5),
    )
    chat = kernel_for.chat("tester")
    result, _ = send(chat, "go")
    assert result.reason.value == "job_done" and chat.process.budget.used == 275
    first, second = llm_server.bodies
    assert 0 < first["max_tokens"] < 1000 - len("You are a test agent.go")  # the tools' definitions count too
    tool_message = ChatMessage.tool("c1", "X", "upper")
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "X", "name": "upper"}
    bound = 120 + message_bound(tool_message) + MESSAGE_MARGIN
    assert second["max_tokens"] == 1000 - 120 - bound
    assert chat.process.budget.held == 0


def test_terminated_process(kernel_for: Kernel, llm_server: FakeLLMServer) -> None:
    chat = kernel_for.chat("tester")
    kernel_for.terminate(chat.process.pid)
    result, _ = send(chat, "anyone?")
    assert result.reason.value == "terminated"
    assert llm_server.bodies == []


def test_concurrent_sessions_respect_the_kernel_limit(kernel_for: Kernel, llm_server: FakeLLMServer) -> None:
    llm_server.respond_with(lambda request: Reply(text="ok", delay=0.1))
    chats = [kernel_for.chat("tester") for _ in range(6)]

    async def everyone() -> list[Any]:
        async def quiet(event: LoopEvent) -> None:
            return None

        return await asyncio.gather(*(chat.send(f"hi {i}", quiet) for i, chat in enumerate(chats)))

    results = asyncio.run(everyone())
    assert [r.answer for r in results] == ["ok"] * 6
    assert llm_server.max_in_flight <= 2


def test_unknown_template_and_bad_references(kernel_for: Kernel, agent_project: Path) -> None:
    from agentkernel.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown template 'nope'"):
        kernel_for.chat("nope")
    (agent_project / "config" / "templates" / "broken.yaml").write_text(
        "name: broken\ninstructions: x\ntools: [ghost]\n",
    )
    with pytest.raises(ConfigError, match="unknown tool 'ghost'"):
        kernel_for.chat("broken")


def test_replace_message_keeps_its_role(
    kernel_for: Kernel, llm_server: FakeLLMServer, agent_project: Path
) -> None:
    (agent_project / "config" / "scripts" / "hooks" / "gate.js").write_text(
        "function before_user_message(ctx, msg) {"
        " return {replace_message: {role: 'system', content: 'as system: ' + msg.content}}; }\n",
        encoding="utf-8",
    )
    llm_server.add(Reply(text="ok"))
    send(kernel_for.chat("tester"), "hi")
    assert llm_server.bodies[0]["messages"][-1] == {"role": "system", "content": "as system: hi"}


class _Whose:
    """A provider that answers by the last message, and records whose each request says it is."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str | None]] = []

    async def complete(self, request: CompletionRequest) -> Completion:
        last = request.messages[-1]
        said = str(last.content) if last.role == "user" else last.role
        self.asked.append((said, request.user))
        if said == "go":  # the turn's first call: use the tool
            call = ToolCall("c1", "asker", "{}")
            return Completion(None, (call,), Usage(), "tool_calls", None)
        return Completion(f"answer to {said}", (), Usage(), "stop", None)

    def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


def test_every_llm_request_says_whose_it_is(agent_project: Path) -> None:
    """The turn's, its tool's `llm()`, and its tool's sub-agent's: the LLM's slots are shared by user."""
    tools = agent_project / "config" / "scripts" / "tools"
    (tools / "asker.yaml").write_text("kind: script_tool\nname: asker\nscript: asker.js\n", encoding="utf-8")
    (tools / "asker.js").write_text(
        "function run() { return llm('inner') + run_subagent({task: 'sub', instructions: 'x'}).answer; }",
        encoding="utf-8",
    )
    (agent_project / "config" / "templates" / "whose.yaml").write_text(
        "name: whose\ninstructions: test\ntools: [asker]\n", encoding="utf-8"
    )
    provider = _Whose()
    kernel = Kernel(load_kernel_config(agent_project / "config" / "kernel.yaml"), provider=provider)
    with kernel:
        result, _ = send(kernel.chat("whose", user_id="alice", stream=False), "go")
    assert result.answer == "answer to tool"
    assert provider.asked == [("go", "alice"), ("inner", "alice"), ("sub", "alice"), ("tool", "alice")]


def test_an_event_a_hook_comes_to_define_mid_chat_fires_at_the_next_turn(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    """An event no hook takes part in goes to no worker thread (the loop asks first); the question is
    asked at each event, so a hook script edited to define it between turns is heard at the next one."""
    gate = agent_project / "config" / "scripts" / "hooks" / "gate.js"
    gate.write_text("function before_llm_call(ctx, request) { return null; }\n", encoding="utf-8")
    llm_server.add(Reply(text="one"), Reply(text="two"))
    with Kernel(load_kernel_config(agent_project / "config" / "kernel.yaml")) as kernel:
        chat = kernel.chat("tester", user_id="u1", session_id="s1")
        first, events = send(chat, "hello")
        assert (first.answer, kinds(events)) == ("one", ["answer", "end"])
        gate.write_text(
            "function before_user_message(ctx, msg) { return {notice: 'heard ' + msg.content}; }\n"
            "function after_turn(ctx, q, a) { return 'after ' + a.content; }\n"
            "function after_loop(ctx, reason) { throw new Error('ended ' + reason); }\n",
            encoding="utf-8",
        )
        second, events = send(chat, "again")
        assert second.answer == "two"
        assert [e.data["text"] for e in events if e.kind == "notice"] == ["heard again", "after two"]
        failed = [
            r for r in kernel.transcript("s1", 50) if r.kind == "error" and "ended job_done" in r.content
        ]
        assert len(failed) == 1  # after_loop ran, and its failure was recorded


def test_a_listing_that_starts_an_mcp_server_leaves_the_event_loop_free(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """The tools of a template granted an MCP server are listed on a worker thread (listing starts the
    server: a wait), so another session's turn goes on meanwhile; a template granted none lists them on
    the event loop (its script tools: the catalog's lookup). The server here starts once the test lets it."""
    started, gate = tmp_path / "started", tmp_path / "gate"
    script = (
        f"touch {shlex.quote(str(started))}; while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.02; done; "
    )
    script += f"exec {shlex.quote(sys.executable)} {shlex.quote(str(SERVER))}"
    entry = f"  - name: outside\n    command: /bin/sh\n    args: {json.dumps(['-c', script])}\n"
    templates = {
        "slow": f"name: slow\ninstructions: x\nmcp_servers:\n{entry}",
        "quick": "name: quick\ninstructions: y\n",
    }
    config = make_project(tmp_path, templates, llm_server)
    llm_server.respond_with(lambda request: Reply(text="ok"))

    async def ignore(event: LoopEvent) -> None:
        pass

    async def both() -> tuple[Any, Any, bool]:
        async with Kernel(load_kernel_config(config)) as kernel:
            slow, quick = kernel.chat("slow"), kernel.chat("quick")
            waiting = asyncio.create_task(slow.send("a", ignore))
            while not started.exists():  # the slow turn's listing is starting the server
                await asyncio.sleep(0.01)
            answered = await quick.send("b", ignore)
            still_waiting = not waiting.done()
            gate.touch()
            return answered, await waiting, still_waiting

    quick_result, slow_result, still_waiting = asyncio.run(both())
    assert still_waiting
    assert (quick_result.answer, slow_result.answer) == ("ok", "ok")
    slow_body = next(body for body in llm_server.bodies if body["messages"][0]["content"] == "x")
    assert "outside__echo" in [t["function"]["name"] for t in slow_body["tools"]]  # the server's, listed


def test_an_after_turn_hook_finds_the_answer_in_the_transcript(
    agent_project: Path, kernel_for: Kernel, llm_server: FakeLLMServer
) -> None:
    """The answer is written before the hooks after the turn run: one that reads the transcript finds
    it there (with no such hook, the answer is written with the run's end, in one transaction)."""
    hooks = agent_project / "config" / "scripts" / "hooks"
    (hooks / "reader.yaml").write_text("kind: script_hook\nname: reader\nscript: reader.js\n")
    (hooks / "reader.js").write_text(
        "function after_turn(ctx, q, a) { const h = memory_history(1); return 'last: ' + h[0].kind + ' '"
        " + h[0].content; }"
    )
    (agent_project / "config" / "templates" / "reading.yaml").write_text(
        "name: reading\ninstructions: x\nhooks: [reader]\n"
    )
    llm_server.add(Reply(text="the answer"))
    result, events = send(kernel_for.chat("reading", session_id="s-reading"), "hi")
    assert result.answer == "the answer"
    assert [e.data for e in events if e.kind == "notice"] == [{"text": "last: agent the answer"}]


def test_with_no_hook_after_the_turn_the_answer_and_the_end_are_recorded_in_order(
    agent_project: Path, kernel_for: Kernel, llm_server: FakeLLMServer
) -> None:
    """Written together, the answer and the end keep their order: records, events and their ids."""
    (agent_project / "config" / "templates" / "plain.yaml").write_text("name: plain\ninstructions: x\n")
    llm_server.add(Reply(text="the answer"))
    result, events = send(kernel_for.chat("plain", session_id="s-plain"), "hi")
    assert result.answer == "the answer"
    answer, end = (e for e in events if e.kind in ("answer", "end"))
    assert (answer.data["content"], end.data["reason"]) == ("the answer", "job_done")
    assert answer.id is not None and end.id == answer.id + 1
    records = kernel_for.transcript("s-plain", 10)
    assert [(r.id, r.kind, r.content) for r in records[-2:]] == [
        (answer.id, "agent", "the answer"),
        (end.id, "end", "job_done"),
    ]
