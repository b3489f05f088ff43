"""`before_llm_call` in a run (S24.3): what the LLM is sent, masked or refused by the template's hooks.

A real project, the scripted LLM, hooks in Rhai and JS: a `replace_messages`
changes what this request carries (the transcript keeps what was said); a
`deny` ends the turn `blocked`, with why; a hook that fails is recorded and
the call goes out as it was (S7.5).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent
from agentkernel.agent.session import ChatSession
from agentkernel.config import load_kernel_config
from tests.agent.conftest import write
from tests.fakes import FakeLLMServer, FakeToolCall, Reply

MASK = """
fn before_llm_call(ctx, request) {
    let out = [];
    for m in request.messages {
        let text = m.content;
        if type_of(text) == "string" { text.replace("4111-1111", "****-****"); }
        out.push(#{role: m.role, content: text});
    }
    if request.messages[request.messages.len() - 1].content == "forbidden" {
        return #{deny: "not this one"};
    }
    #{replace_messages: out, notice: "masked " + request.messages.len() + " messages for " + request.model}
}
"""


def kernel_with_hook(project: Path, name: str, source: str, ext: str = "rhai") -> Kernel:
    hooks = project / "config" / "scripts" / "hooks"
    write(hooks / f"{name}.yaml", f"kind: script_hook\nname: {name}\nscript: {name}.{ext}\n")
    write(hooks / f"{name}.{ext}", source)
    template = project / "config" / "templates" / "tester.yaml"
    template.write_text(template.read_text().replace("hooks: [gate]", f"hooks: [{name}]"))
    return Kernel(load_kernel_config(project / "config" / "kernel.yaml"))


def send(chat: ChatSession, text: str) -> tuple[Any, list[LoopEvent]]:
    events: list[LoopEvent] = []

    async def collect(event: LoopEvent) -> None:
        events.append(event)

    return asyncio.run(chat.send(text, collect)), events


def sent_messages(llm_server: FakeLLMServer, index: int) -> list[tuple[str, str | None]]:
    body = [r.body for r in llm_server.requests if r.path.endswith("/chat/completions")][index]
    return [(m["role"], m.get("content")) for m in body["messages"]]


def test_replace_messages_masks_what_the_llm_is_sent_but_not_what_the_transcript_keeps(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "4111-1111"}', "c1"),)), Reply(text="done")
    )
    with kernel_with_hook(agent_project, "mask", MASK) as kernel:
        chat = kernel.chat("tester", user_id="u1", session_id="s1")
        result, events = send(chat, "my card is 4111-1111")
        assert result.answer == "done"
        first, second = sent_messages(llm_server, 0), sent_messages(llm_server, 1)
        assert first[-1] == ("user", "my card is ****-****")
        assert ("tool", "****-****") in second  # the tool's result too, on its way out
        notices = [e.data["text"] for e in events if e.kind == "notice"]
        assert "masked 2 messages for fake" in notices and "masked 4 messages for fake" in notices
        said = [r.content for r in kernel.transcript("s1", user_id="u1") if r.kind in ("user", "tool_result")]
        assert said == ["my card is 4111-1111", "4111-1111"]


def test_a_deny_ends_the_turn_blocked_without_asking_the_llm(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    with kernel_with_hook(agent_project, "mask", MASK) as kernel:
        chat = kernel.chat("tester", user_id="u1", session_id="s2")
        result, events = send(chat, "forbidden")
        assert result.reason.value == "blocked"
        assert llm_server.requests == [] or all(
            not r.path.endswith("/chat/completions") for r in llm_server.requests
        )
        assert any("not this one" in str(e.data["text"]) for e in events if e.kind == "notice")
        kinds = [r.kind for r in kernel.transcript("s2", user_id="u1")]
        assert kinds[-1] == "end" and "hook" in kinds


def test_a_failing_hook_is_recorded_and_the_call_goes_out_as_it_was(
    agent_project: Path, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(text="fine"))
    broken = "function before_llm_call(ctx, request) { throw new Error('mask broke'); }"
    with kernel_with_hook(agent_project, "broken", broken, "js") as kernel:
        chat = kernel.chat("tester", user_id="u1", session_id="s3")
        result, _ = send(chat, "4111-1111")
        assert result.answer == "fine"
        assert sent_messages(llm_server, 0)[-1] == ("user", "4111-1111")
        errors = [r.content for r in kernel.transcript("s3", user_id="u1") if r.kind == "error"]
        assert any("mask broke" in e for e in errors)
