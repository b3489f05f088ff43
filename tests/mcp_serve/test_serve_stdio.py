"""`agentkernel mcp serve` as a real subprocess, driven by the official SDK's client (issue 16).

Both protocol eras are exercised: `legacy` (the 2025 initialize handshake,
what Claude Desktop, Claude Code and Cursor speak today) and `auto` (the
SDK's default, which reaches 2026-07-28). The contract numbers cited: S16.3
(a caller sees the tools it may call), S2.5 (arguments checked, fields
named), S6.1 (visual blocks are for people, never in the model's text),
S1.4 (edits apply on the next use).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ElicitationFnT
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.exceptions import MCPError

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.store import STORE_URL_ENV
from tests.mcp_serve.conftest import WAIT_SECS, ListChanged, add_tool, text_of
from tests.server.conftest import ROW_SECRET

AGENTKERNEL = str(Path(sys.executable).parent / "agentkernel")
MODES = ["legacy", "auto"]


def served(project: Path, *flags: str) -> StdioServerParameters:
    """`agentkernel mcp serve` over stdio; the store database's URL passed on when the deployment sets one
    (the SDK hands a stdio server only a few variables of its own, as an MCP client's config would)."""
    config = str(project / "config" / "kernel.yaml")
    url = os.environ.get(STORE_URL_ENV)
    env = {**get_default_environment(), STORE_URL_ENV: url} if url else None
    return StdioServerParameters(
        command=AGENTKERNEL, args=["mcp", "serve", "--config", config, *flags], env=env
    )


def run(
    project: Path,
    body: Callable[[Client], Awaitable[None]],
    *flags: str,
    mode: str = "legacy",
    elicitation_callback: ElicitationFnT | None = None,
) -> None:
    async def main() -> None:
        with anyio.fail_after(WAIT_SECS * 2):
            server = served(project, *flags)
            async with Client(server, mode=mode, elicitation_callback=elicitation_callback) as client:
                await body(client)

    anyio.run(main)


@pytest.mark.parametrize("mode", MODES)
def test_tools_are_listed_with_their_schemas_and_descriptions(mcp_project: Path, mode: str) -> None:
    async def body(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert sorted(tools) == ["boom", "other", "recall", "remember", "table", "upper"]
        assert tools["upper"].description == "Upper-case a text."
        assert tools["upper"].input_schema == {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
        assert tools["other"].input_schema == {"type": "object"}  # the default `parameters`
        assert client.server_capabilities.tools is not None

    run(mcp_project, body, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_a_call_gives_the_content_as_text_and_visual_blocks_as_structured_content(
    mcp_project: Path, mode: str
) -> None:
    async def body(client: Client) -> None:
        upper = await client.call_tool("upper", {"text": "hi"})
        assert not upper.is_error
        assert upper.content == [types.TextContent(text="HI")]
        assert upper.structured_content is None  # no blocks, no structured content
        table = await client.call_tool("table", {"n": 2})
        assert not table.is_error
        assert text_of(table) == "2 rows shown to the user"
        assert ROW_SECRET not in str(table.content)  # S6.1: the rows are for people, not the model
        (block,) = table.structured_content["blocks"]
        assert block["type"] == "table"
        assert block["rows"] == [{"id": 0, "secret": ROW_SECRET}, {"id": 1, "secret": ROW_SECRET}]

    run(mcp_project, body, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_failures_are_tool_errors_and_an_unknown_tool_a_protocol_error(mcp_project: Path, mode: str) -> None:
    async def body(client: Client) -> None:
        boom = await client.call_tool("boom", {})
        assert boom.is_error
        assert "the fuse was lit" in text_of(boom)
        bad = await client.call_tool("upper", {"text": 5})  # S2.5: the field at fault is named
        assert bad.is_error
        assert text_of(bad).startswith("invalid arguments for upper:")
        assert "5 is not of type 'string'" in text_of(bad)
        with pytest.raises(MCPError, match=r"unknown tool 'nope'"):
            await client.call_tool("nope", {})

    run(mcp_project, body, mode=mode)


def test_a_template_limits_the_tools_listed_and_callable(mcp_project: Path) -> None:
    async def body(client: Client) -> None:
        assert sorted(t.name for t in (await client.list_tools()).tools) == ["table", "upper"]
        with pytest.raises(MCPError, match=r"unknown tool 'other' in template 'tester'"):
            await client.call_tool("other", {})
        assert text_of(await client.call_tool("upper", {"text": "ok"})) == "OK"

    run(mcp_project, body, "--template", "tester")


def test_calls_run_as_the_user_in_one_session_per_connection(mcp_project: Path) -> None:
    seen: list[str] = []

    async def body(client: Client) -> None:
        seen.append(text_of(await client.call_tool("remember", {"note": "from mcp"})))
        seen.append(text_of(await client.call_tool("remember", {"note": "from mcp"})))

    run(mcp_project, body, "--user", "alice")
    run(mcp_project, body, "--user", "alice")
    assert all(line.count("|") == 2 for line in seen), seen
    users, sessions, scratch = zip(*(line.split("|") for line in seen), strict=True)
    assert set(users) == {"alice"} and set(scratch) == {"scratch"}
    assert sessions[0] == sessions[1] != sessions[2] == sessions[3]  # one session per connection
    with Kernel(load_kernel_config(mcp_project / "config" / "kernel.yaml")) as kernel:
        assert kernel.run_tool("recall", {}, kernel.caller(user_id="alice")).content == "from mcp"
        assert kernel.run_tool("recall", {}, kernel.caller(user_id="local")).content == "null"


def test_a_template_s_before_tool_call_hook_sees_and_denies_a_call_from_the_client(mcp_project: Path) -> None:
    """S24.1, S24.5: `mcp serve --template` carries the template's hooks; the call's origin is mcp_client."""
    hooks = mcp_project / "config" / "scripts" / "hooks"
    (hooks / "guard.js").write_text(
        "function before_tool_call(ctx, call) {"
        " if (call.tool === 'remember') return {deny: 'no ' + call.tool + ' from ' + call.origin}; }"
    )
    (hooks / "guard.yaml").write_text("kind: script_hook\nname: guard\nscript: guard.js\n")
    (mcp_project / "config" / "templates" / "guarded.yaml").write_text(
        "name: guarded\ninstructions: Test.\ntools: [remember, upper]\nhooks: [guard]\n"
    )
    seen: list[types.CallToolResult] = []

    async def body(client: Client) -> None:
        seen.append(await client.call_tool("remember", {"note": "denied"}))
        seen.append(await client.call_tool("upper", {"text": "let through"}))

    run(mcp_project, body, "--template", "guarded", "--user", "alice")
    denied, allowed = seen
    assert denied.is_error and text_of(denied) == "denied by hook guard: no remember from mcp_client"
    assert text_of(allowed) == "LET THROUGH"
    with Kernel(load_kernel_config(mcp_project / "config" / "kernel.yaml")) as kernel:
        assert kernel.run_tool("recall", {}, kernel.caller(user_id="alice")).content == "null"  # never kept


def test_an_edited_yaml_is_announced_as_list_changed_on_a_handshake_connection(mcp_project: Path) -> None:
    changed = ListChanged()

    async def main() -> None:
        with anyio.fail_after(WAIT_SECS * 2):
            async with Client(served(mcp_project), mode="legacy", message_handler=changed) as client:
                assert "added" not in {t.name for t in (await client.list_tools()).tools}
                add_tool(mcp_project, "added")
                await changed.wait()
                assert "added" in {t.name for t in (await client.list_tools()).tools}
                assert text_of(await client.call_tool("added", {})) == "added ran"

    anyio.run(main)


def test_a_removed_tool_is_announced_on_a_listen_stream(mcp_project: Path) -> None:
    async def body(client: Client) -> None:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(tools_list_changed=True) as subscription:
            (mcp_project / "config" / "scripts" / "tools" / "other.yaml").unlink()
            with anyio.fail_after(WAIT_SECS):
                event = await anext(aiter(subscription))
            assert type(event).__name__ == "ToolsListChanged"
        assert "other" not in {t.name for t in (await client.list_tools()).tools}

    run(mcp_project, body, mode="auto")


def test_an_unknown_template_or_user_is_refused_before_serving(mcp_project: Path) -> None:
    import subprocess

    config = str(mcp_project / "config" / "kernel.yaml")
    for flags, code, said in [
        (["--template", "nobody"], 1, "unknown template 'nobody' (loaded: tester)"),
        (["--user", "a b"], 2, "--user 'a b' is not a user id"),
    ]:
        done = subprocess.run(
            [AGENTKERNEL, "mcp", "serve", "--config", config, *flags],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == code, done.stderr
        assert said in done.stderr
        assert done.stdout == ""  # stdout is the protocol's alone
