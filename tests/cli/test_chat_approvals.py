"""`agentkernel chat` asks its user about a call that needs approval (S24.4): y / n / e, in the terminal.

A real subprocess fed stdin (a pipe: the plain line reader), the scripted
LLM over loopback, a tool whose YAML says `approval: always`. The answer
is a decision in the store, as the API's would be; the LLM reads what came
of the call.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent.conftest import agent_project, write
from tests.agent.test_chat_cli import chat, chat_requests, transcript
from tests.fakes import FakeLLMServer, FakeToolCall, Reply

__all__ = ["agent_project"]  # the fixture, shared with tests/agent

SEND = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}


@pytest.fixture
def project(agent_project: Path) -> Path:
    tools = agent_project / "config" / "scripts" / "tools"
    write(tools / "send.yaml", f"kind: script_tool\nname: send\nscript: send.js\napproval: always\n"
          f"parameters: {json.dumps(SEND)}\n")  # fmt: skip
    write(tools / "send.js", "function run(args) { return 'sent to ' + args.to; }")
    template = agent_project / "config" / "templates" / "tester.yaml"
    template.write_text(template.read_text().replace("tools: [upper]", "tools: [upper, send]"))
    return agent_project


def asks_to_send(llm_server: FakeLLMServer) -> None:
    call = FakeToolCall("send", '{"to": "bob"}', "c1")
    llm_server.add(Reply(tool_calls=(call,)), Reply(text="over"))


def tool_message(llm_server: FakeLLMServer) -> str:
    return str(next(m["content"] for m in chat_requests(llm_server)[1]["messages"] if m["role"] == "tool"))


def test_y_approves_and_the_call_runs(project: Path, llm_server: FakeLLMServer) -> None:
    asks_to_send(llm_server)
    done = chat(project, "send it\ny\n", "--session", "s1")
    assert done.returncode == 0, done.stderr
    assert "? Run the tool 'send' with these arguments?" in done.stdout
    assert '  send({"to": "bob"})' in done.stdout
    assert tool_message(llm_server) == "sent to bob"
    kinds = [kind for _, kind, _ in transcript(project, "s1")]
    assert kinds.count("approval") == 1 and kinds.count("approval_decision") == 1


def test_n_denies_with_the_reason_the_agent_reads(project: Path, llm_server: FakeLLMServer) -> None:
    asks_to_send(llm_server)
    done = chat(project, "send it\nn\nnot bob\n")
    assert done.returncode == 0, done.stderr
    assert tool_message(llm_server) == "tool 'send' not run: denied: not bob"


def test_e_edits_the_arguments_checked_against_the_tools_parameters(
    project: Path, llm_server: FakeLLMServer
) -> None:
    asks_to_send(llm_server)
    done = chat(project, 'send it\ne\n{oops\ne\n{"to": 5}\ne\n{"to": "carol"}\n')
    assert done.returncode == 0, done.stderr
    assert "not JSON" in done.stdout and "args: to: 5 is not of type 'string'" in done.stdout
    assert tool_message(llm_server) == "sent to carol"


def test_an_input_that_ends_before_an_answer_denies_the_call(
    project: Path, llm_server: FakeLLMServer
) -> None:
    asks_to_send(llm_server)
    done = chat(project, "send it\n")
    assert done.returncode == 0, done.stderr
    assert "the terminal's input ended before an answer" in tool_message(llm_server)
