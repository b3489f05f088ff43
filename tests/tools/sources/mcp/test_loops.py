"""A template whose MCP server serves that same template is refused at once, not awaited (S23.7).

Without the chain (tools/sources/mcp/nesting.py) `agentkernel mcp serve --template
loop` named in `loop`'s own `mcp_servers:` starts itself again and again,
each level waiting on the next until the start timeout; and `/mcp/loop`
asked by `loop`'s own server waits on itself. Real subprocesses and the real
server on 127.0.0.1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

from agentkernel import Kernel
from agentkernel.cli.main import main
from agentkernel.config import load_kernel_config
from agentkernel.tools.sources.mcp.nesting import CHAIN_HEADER, CHAIN_VARIABLE, encoded, template_entry
from tests.mcp_serve.conftest import ACCEPT, INITIALIZE, live_server
from tests.tools.sources.mcp.conftest import make_project, write

LOOP_MESSAGE = "MCP server loop: template 'loop' is already being served up the chain"


def serving(name: str, config: Path, template: str) -> str:
    """An `mcp_servers:` entry that runs `agentkernel mcp serve --template T` of this same project."""
    args = ["-m", "agentkernel", "mcp", "serve", "--config", str(config), "--template", template]
    return f"  - name: {name}\n    command: {json.dumps(sys.executable)}\n    args: {json.dumps(args)}\n"


def test_a_template_serving_itself_is_a_problem_check_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = make_project(tmp_path, {})
    loop = f"name: loop\ninstructions: x\ntools: [relay]\nmcp_servers:\n{serving('again', config, 'loop')}"
    write(tmp_path / "config" / "templates" / "loop.yaml", loop)
    assert main(["check", "--config", str(config)]) == 1
    said = capsys.readouterr()
    assert "template loop: MCP server 'again'" in said.out + said.err, said
    assert LOOP_MESSAGE in said.out + said.err, said
    with Kernel(load_kernel_config(config)) as kernel:  # the agent keeps its own tools
        assert [s.name for s in kernel.list_tools(kernel.spawn("loop"))] == ["relay"]


def test_a_loop_through_two_templates_ends_one_level_down(tmp_path: Path) -> None:
    """x serves y's tools, y serves x's: x gets y's own tools, and the server it starts stops there."""
    config = make_project(tmp_path, {})
    templates = tmp_path / "config" / "templates"
    write(
        templates / "x.yaml",
        f"name: x\ninstructions: x\ntools: [relay]\nmcp_servers:\n{serving('y', config, 'y')}",
    )
    y = f"name: y\ninstructions: y\ntools: [delegate]\nmcp_servers:\n{serving('x', config, 'x')}"
    write(templates / "y.yaml", y)
    with Kernel(load_kernel_config(config)) as kernel:
        names = sorted(s.name for s in kernel.list_tools(kernel.spawn("x")))
    assert names == ["relay", "y__delegate"]  # not y__x__relay: x is already served up the chain


def test_mcp_serve_refuses_a_template_its_chain_already_serves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_project(tmp_path, {"loop": "name: loop\ninstructions: x\ntools: [relay]\n"})
    monkeypatch.setenv(CHAIN_VARIABLE, encoded(("0123456789abcdef", template_entry(tmp_path, "loop"))))
    assert main(["mcp", "serve", "--config", str(config), "--template", "loop"]) == 2
    assert LOOP_MESSAGE in capsys.readouterr().err


def test_the_server_refuses_mcp_for_a_template_its_chain_already_serves(tmp_path: Path) -> None:
    """`/mcp/loop` asked on behalf of `loop` (the header our MCP client sends) is 508, at once."""
    config = make_project(tmp_path, {"loop": "name: loop\ninstructions: x\ntools: [relay]\n"})
    with live_server(config.parent.parent) as live, httpx.Client(timeout=30) as http:
        url = f"{live.url}/mcp/loop"
        chain = encoded((template_entry(tmp_path, "loop"),))
        refused = http.post(url, json=INITIALIZE, headers={**ACCEPT, CHAIN_HEADER: chain})
        assert refused.status_code == 508 and LOOP_MESSAGE in refused.text, refused.text
        other = encoded((template_entry(tmp_path, "other"),))
        accepted = http.post(url, json=INITIALIZE, headers={**ACCEPT, CHAIN_HEADER: other})
        assert accepted.status_code == 200, accepted.text


def test_a_template_consuming_its_own_server_s_mcp_path_is_a_problem(tmp_path: Path) -> None:
    """`loop` names this very server's `/mcp/loop`: the server it would wait on is itself."""
    config = make_project(tmp_path, {"loop": "name: loop\ninstructions: x\ntools: [relay]\n"})
    with live_server(config.parent.parent) as live:
        server = f"  - name: self\n    url: {live.url}/mcp/loop\n"
        loop = f"name: loop\ninstructions: x\ntools: [relay]\nmcp_servers:\n{server}"
        write(tmp_path / "config" / "templates" / "loop.yaml", loop)
        problems, offered = live.kernel.check_mcp_servers()
    assert offered == {} and len(problems) == 1, problems
    said = str(problems[0])
    assert "template loop: MCP server 'self'" in said and "HTTP 508 Loop Detected" in said, said
    assert LOOP_MESSAGE in said, said
