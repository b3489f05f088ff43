"""Shared fixtures: the scripted LLM server and a project with a test agent wired to it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import write_kernel_yaml
from tests.fakes import FakeLLMServer


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def agent_project(tmp_path: Path, llm_server: FakeLLMServer) -> Path:
    write_kernel_yaml(
        tmp_path,
        f"llm:\n  base_url: {llm_server.base_url}\n  model: fake\n  max_retries: 0\n"
        "  timeout_secs: 5\n  max_concurrency: 2\n",
    )
    tools = tmp_path / "config" / "scripts" / "tools"
    write(tools / "upper.yaml", """
        kind: script_tool
        name: upper
        description: Upper-case a text.
        script: upper.js
        parameters: {type: object, properties: {text: {type: string}}, required: [text]}
        """)  # fmt: skip
    write(
        tools / "upper.js",
        """
        function run(args) {
          return {content: args.text.toUpperCase(), visual: {type: 'text', text: 'done: ' + args.text}};
        }
        """,
    )
    write(tools / "secret.yaml", "kind: script_tool\nname: secret\nscript: secret.js\n")
    write(tools / "secret.js", "function run() { return 'classified'; }")
    hooks = tmp_path / "config" / "scripts" / "hooks"
    write(hooks / "gate.yaml", "kind: script_hook\nname: gate\nscript: gate.js\n")
    write(
        hooks / "gate.js",
        """
        function before_user_message(ctx, msg) {
          if (msg.content === 'stop') return {suppress: true, notice: 'suppressed'};
          if (msg.content === 'ping') return {reply: 'pong'};
          if (msg.content === 'shout') return {replace_message: {role: 'user', content: 'SHOUT'},
                                               inject: [{role: 'system', content: 'be loud'}]};
          return {notice: 'gate saw ' + msg.content};
        }
        function after_turn(ctx, q, a) { return 'answered: ' + (a ? a.content : 'nothing'); }
        function after_loop(ctx, reason) { throw new Error('reason=' + reason); }
        """,
    )
    templates = tmp_path / "config" / "templates"
    write(
        templates / "tester.yaml",
        """
        name: tester
        instructions: You are a test agent.
        tools: [upper]
        hooks: [gate]
        max_turns: 3
        budget: {tokens: 1000}
        """,
    )
    return tmp_path
