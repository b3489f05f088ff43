"""Issue 9 item 9 in `agentkernel chat`: lone surrogates from a tool, a hook or the LLM never crash it.

The tool's result and the hook's verdict are repaired where they enter the
kernel (U+FFFD, with a warning); text the LLM server sends as half a
surrogate pair (`"\\ud800"` in its JSON) is repaired where the chat prints
it; the transcript stores only valid UTF-8.
"""

from __future__ import annotations

from pathlib import Path

from tests.agent.conftest import write
from tests.agent.test_chat_cli import chat, transcript
from tests.fakes import FakeLLMServer, FakeToolCall, Reply

FFFD = "\ufffd"


def test_chat_shows_and_records_repaired_text(agent_project: Path, llm_server: FakeLLMServer) -> None:
    tools = agent_project / "config" / "scripts" / "tools"
    write(tools / "odd.yaml", "kind: script_tool\nname: odd\ndescription: Odd text.\nscript: odd.js\n")
    write(
        tools / "odd.js",
        r'function run() { return {content: "c\ud800", visual: {type: "text", text: "v\udc00"}}; }',
    )
    hooks = agent_project / "config" / "scripts" / "hooks"
    write(hooks / "odd_gate.yaml", "kind: script_hook\nname: odd_gate\nscript: odd_gate.js\n")
    write(hooks / "odd_gate.js", r'function before_user_message(ctx, msg) { return {notice: "n\udbff"}; }')
    write(
        agent_project / "config" / "templates" / "tester.yaml",
        "name: tester\ninstructions: test\ntools: [odd]\nhooks: [odd_gate]\nmax_turns: 3\n",
    )
    llm_server.add(Reply(tool_calls=(FakeToolCall("odd", "{}"),)), Reply(text="answer \ud800 half"))
    done = chat(agent_project, "go\n", "--session", "s-odd")
    assert done.returncode == 0, done.stderr  # was: UnicodeEncodeError
    out = done.stdout
    assert f"ℹ n{FFFD}" in out
    assert f"✓ odd: c{FFFD}" in out and f"v{FFFD}" in out
    assert "⚠ the result contained invalid Unicode (lone surrogate); replaced with U+FFFD" in out
    assert f"answer {FFFD} half" in out
    records = transcript(agent_project, "s-odd")
    assert any(kind == "tool_result" and content == f"c{FFFD}" for _, kind, content in records)
    assert all(content.encode("utf-8") for _, _, content in records)
