"""A project whose templates name outside MCP servers, and the `mcp_servers:` entry of the fake one."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import tests.fakes
from tests.conftest import write_kernel_yaml
from tests.fakes import FakeLLMServer

SERVER = Path(tests.fakes.__file__).with_name("mcp_server.py")  # run as a script: stdio, or http PORT_FILE


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def stdio_server(name: str = "outside", extra: str = "") -> str:
    """One `mcp_servers:` entry (YAML, indented for a template) running tests/fakes/mcp_server.py."""
    lines = [
        f"  - name: {name}",
        f"    command: {json.dumps(sys.executable)}",
        f"    args: [{json.dumps(str(SERVER))}]",
    ]
    lines += [f"    {line}" for line in textwrap.dedent(extra).strip().splitlines()]
    return "\n".join(lines) + "\n"


def make_project(root: Path, templates: dict[str, str], llm: FakeLLMServer | None = None) -> Path:
    extra = (
        f"llm:\n  base_url: {llm.base_url}\n  model: fake\n  max_retries: 0\n  timeout_secs: 30\n"
        if llm
        else ""
    )
    config = write_kernel_yaml(root, extra)
    tools = root / "config" / "scripts" / "tools"
    write(tools / "relay.yaml", """
        kind: script_tool
        name: relay
        description: Ask the outside server to echo a text.
        script: relay.js
        parameters: {type: object, properties: {text: {type: string}}, required: [text]}
        """)  # fmt: skip
    write(tools / "relay.js", """
        function run(args) {
          const r = call_tool('outside__echo', {text: args.text});
          return {content: r.success ? 'relayed: ' + r.content : r.content, success: r.success};
        }
        """)  # fmt: skip
    write(tools / "delegate.yaml", "kind: script_tool\nname: delegate\nscript: delegate.js\n")
    write(
        tools / "delegate.js",
        "function run(args) { const r = run_subagent(args); return {content: r.answer, data: r}; }",
    )
    for name, body in templates.items():
        write(root / "config" / "templates" / f"{name}.yaml", body)
    return config
