"""A project to serve over MCP: the server tests' tools and template, plus a failing and a stateful tool.

And the clients of `/mcp` that the server's tests and the outside-tool tests share.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from tests.server.conftest import LiveServer, make_project, script_tool

WAIT_SECS = 30  # how long a test waits for an MCP answer or notification before failing (never a sleep)
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def add_mcp_tools(root: Path) -> None:
    """`boom` (its script throws), `remember` (a state_* write, saying who it ran as), `recall`."""
    tools = root / "config" / "scripts" / "tools"
    fails = "function run() { throw new Error('the fuse was lit'); }"
    script_tool(tools, "boom", fails, description="Fails.")
    script_tool(
        tools,
        "remember",
        """
        function run(args) {
          state_set('user', 'note', args.note);
          var me = caller();
          return me.user_id + '|' + me.session_id + '|' + (me.temp_dir ? 'scratch' : 'none');
        }
        """,
        description="Keep a note for the user.",
        parameters={"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]},
    )
    script_tool(tools, "recall", "function run() { return state_get('user', 'note'); }")


@pytest.fixture
def mcp_project(tmp_path: Path) -> Path:
    """A project folder: `upper`, `table`, `other`, template `tester`, the tools above, a state store."""
    make_project(tmp_path, None, "state:\n  db_path: data/state.db\n")
    add_mcp_tools(tmp_path)
    return tmp_path


def add_tool(project: Path, name: str) -> None:
    script_tool(project / "config" / "scripts" / "tools", name, f"function run() {{ return '{name} ran'; }}")


def text_of(result: types.CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, types.TextContent)
    return content.text


class ListChanged:
    """A client's `message_handler` that notes `notifications/tools/list_changed` (handshake era)."""

    def __init__(self) -> None:
        self.heard = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.heard.set()

    async def wait(self) -> None:
        with anyio.fail_after(WAIT_SECS):
            await self.heard.wait()


def live_server(project: Path, extra: str = "") -> LiveServer:
    config = project / "config" / "kernel.yaml"
    if extra:
        config.write_text(config.read_text() + extra)
    return LiveServer(Kernel(load_kernel_config(config)))


def run(
    url: str,
    body: Callable[[Client], Awaitable[None]],
    *,
    token: str | None = None,
    mode: str = "auto",
    elicitation_callback: ElicitationFnT | None = None,
) -> None:
    async def main() -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        async with httpx2.AsyncClient(headers=headers, timeout=WAIT_SECS) as http:
            transport = streamable_http_client(url, http_client=http)
            with anyio.fail_after(WAIT_SECS * 2):
                async with Client(transport, mode=mode, elicitation_callback=elicitation_callback) as client:
                    await body(client)

    anyio.run(main)
