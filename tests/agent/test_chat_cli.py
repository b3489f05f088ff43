"""`agentkernel chat` as a person uses it: a real subprocess, stdin, the scripted LLM over loopback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fakes import FakeLLMServer, FakeToolCall, Reply

BIN = Path(sys.executable).parent


def chat(project: Path, stdin: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "agentkernel"), "chat", "--template", "tester", "--config",
         str(project / "config" / "kernel.yaml"), *extra],
        input=stdin, capture_output=True, text=True, timeout=60, cwd=project,
    )  # fmt: skip


def test_chat_streams_answers_notices_tools_and_tables(
    agent_project: Path,
    llm_server: FakeLLMServer,
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "мир"}'),)),
        Reply(text="Готово: МИР"),
        Reply(text="Пока!"),
    )
    done = chat(agent_project, "громче мир\nping\nпока\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "ℹ gate saw громче мир" in out
    assert '→ upper({"text": "мир"})' in out and "✓ upper: МИР" in out
    assert "done: мир" in out  # the visual text block
    assert "Готово: МИР" in out and "pong" in out and "Пока!" in out
    assert out.index("Готово: МИР") < out.index("pong") < out.index("Пока!")


def test_chat_reports_an_unreachable_llm(agent_project: Path, llm_server: FakeLLMServer) -> None:
    done = chat(agent_project, "hello\n", "--llm-url", "http://127.0.0.1:9/v1")
    assert done.returncode == 0
    assert "error: the LLM is unavailable" in done.stdout
    assert "(ended: error)" in done.stdout


def test_chat_unknown_template(agent_project: Path) -> None:
    done = subprocess.run(
        [str(BIN / "agentkernel"), "chat", "--template", "nope", "--config",
         str(agent_project / "config" / "kernel.yaml")],
        input="", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and "unknown template 'nope'" in done.stderr
