"""S7.4 today: `after_turn`'s ctx has `turn`, how the turn went (what faq_cache and memory rely on).

The agent project's `gate` hook replies to `ping` and injects a message for
`shout`; a second hook here reports `ctx.turn` as its notice.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent
from agentkernel.agent.session import ChatSession
from agentkernel.config import load_kernel_config
from tests.agent.conftest import write
from tests.fakes import FakeLLMServer, FakeToolCall, HttpError, Reply


@pytest.fixture
def kernel(agent_project: Path) -> Kernel:
    hooks = agent_project / "config" / "scripts" / "hooks"
    write(
        hooks / "turnlog.yaml", "kind: script_hook\nname: turnlog\nscript: turnlog.js\nevents: [after_turn]\n"
    )
    write(hooks / "turnlog.js", "function after_turn(ctx) { return 'turn ' + JSON.stringify(ctx.turn); }\n")
    write(
        agent_project / "config" / "templates" / "logged.yaml",
        "name: logged\ninstructions: Test.\ntools: [upper]\nhooks: [gate, turnlog]\nmax_turns: 2\n",
    )
    return Kernel(load_kernel_config(agent_project / "config" / "kernel.yaml"))


def turn_of(chat: ChatSession, text: str) -> dict[str, Any]:
    notices: list[str] = []

    async def collect(event: LoopEvent) -> None:
        if event.kind == "notice" and str(event.data["text"]).startswith("turn "):
            notices.append(str(event.data["text"]))

    asyncio.run(chat.send(text, collect))
    (notice,) = notices
    return dict(json.loads(notice.removeprefix("turn ")))


def facts(reason: str = "job_done", **changed: object) -> dict[str, object]:
    base = {
        "tool_calls": 0,
        "replied_by_hook": False,
        "history_messages": 0,
        "injected_messages": 0,
        "subagent": False,
    }
    return {"reason": reason, **base, **changed}


def test_s7_4_after_turn_is_told_how_the_turn_went(kernel: Kernel, llm_server: FakeLLMServer) -> None:
    llm_server.add(
        Reply(text="hi"),
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "a"}'), FakeToolCall("upper", '{"text": "b"}'))),
        Reply(text="AB"),
        Reply(text="LOUD"),
        HttpError(500, "down"),
    )
    chat = kernel.chat("logged", user_id="u1", stream=False)
    assert turn_of(chat, "hello") == facts()
    assert turn_of(chat, "make it upper") == facts(tool_calls=2, history_messages=2)
    # the conversation keeps the tool exchange: user, assistant + its calls, 2 results, the answer
    assert turn_of(chat, "ping") == facts(replied_by_hook=True, history_messages=7)
    assert turn_of(chat, "shout") == facts(history_messages=9, injected_messages=1)
    assert turn_of(chat, "again") == facts("error", history_messages=11)  # the question stays, no answer
    assert turn_of(chat, "stop") == facts("blocked", history_messages=12)


def test_hook_tool_runs_say_no_llm_answered(kernel: Kernel) -> None:
    ping = kernel.run_hooks(["gate", "turnlog"], {"role": "user", "content": "ping"}, kernel.caller())
    assert ping.after_notices[-1] == "turn " + json.dumps(facts(replied_by_hook=True), separators=(",", ":"))
    stop = kernel.run_hooks(["gate", "turnlog"], {"role": "user", "content": "stop"}, kernel.caller())
    assert json.loads(stop.after_notices[-1].removeprefix("turn ")) == facts("blocked")
