"""What an outside server's tool list becomes (issue 16, S23.7): names, and what may enter every LLM request.

A server's list is untrusted text that is sent with every LLM request of
the template's agents: a description is cut past MAX_DESCRIPTION_CHARS
(saying so), and a tool whose input schema is too long, or refers outside
itself, is not offered. The list is the SDK client's, turned into
ListedTools exactly as client_pool.py does.
"""

from __future__ import annotations

import pytest

from agentkernel.config import KernelLimits
from agentkernel.config.mcp_servers import McpServerSpec
from agentkernel.tools.sources.mcp.client_pool import ListedTool
from agentkernel.tools.sources.mcp.outside import MAX_DESCRIPTION_CHARS, MAX_SCHEMA_CHARS, OutsideTools
from agentkernel.types import JSONObject

SERVER = McpServerSpec(name="far", command="far-server")
SMALL: JSONObject = {"type": "object", "properties": {"q": {"type": "string"}}}


def offered(*listed: ListedTool) -> tuple[dict[str, str], list[str]]:
    """The tools offered (name → description) and the reasons for the ones refused."""
    outside = OutsideTools(lambda: {"far": SERVER}, lambda: ["local_tool"], KernelLimits())
    offer = outside._build(SERVER, list(listed))
    return {name: spec.description for name, spec in offer.tools.items()}, offer.refused


def test_a_long_description_is_cut_saying_how_long_it_was() -> None:
    tools, refused = offered(ListedTool("wordy", "w" * 100_000, SMALL), ListedTool("terse", "Short.", SMALL))
    assert refused == [] and tools["far__terse"] == "Short."
    cut = tools["far__wordy"]
    assert cut.startswith(
        "w" * MAX_DESCRIPTION_CHARS + " … [cut: the server's description has 100,000 characters]"
    )
    assert len(cut) < MAX_DESCRIPTION_CHARS + 80


def test_a_huge_or_far_reaching_schema_is_not_offered_and_the_rest_are() -> None:
    huge: JSONObject = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(400)},
    }
    remote: JSONObject = {"type": "object", "properties": {"q": {"$ref": "http://169.254.169.254/latest/"}}}
    tools, refused = offered(
        ListedTool("huge", "", huge), ListedTool("remote", "", remote), ListedTool("fine", "", SMALL)
    )
    assert list(tools) == ["far__fine"]
    assert refused == [
        f"MCP server 'far': tool 'huge': its inputSchema is longer than {MAX_SCHEMA_CHARS:,} characters"
        " of JSON; not offered",
        "MCP server 'far': tool 'remote': its inputSchema's $ref 'http://169.254.169.254/latest/' points"
        " outside the schema; the kernel never fetches schemas (put the definition under $defs and refer"
        " to it as '#/$defs/…'); not offered",
    ]


def test_names_are_made_safe_and_clashes_are_refused() -> None:
    tools, refused = offered(
        ListedTool("a.b", "", SMALL), ListedTool("a_b", "", SMALL), ListedTool("x" * 70, "", SMALL),
        ListedTool("ok-1", "", SMALL),
    )  # fmt: skip
    assert list(tools) == ["far__ok-1"]
    assert (
        "MCP server 'far': tool 'a.b', 'a_b': their names all become 'far__a_b'; none of them is offered"
        in refused
    )
    assert any("is longer than 64 characters" in r for r in refused)


def test_a_server_that_lists_without_end_is_cut_at_max_listed_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cursor that never ends (a broken or hostile server) stops at MAX_LISTED_TOOLS, not at memory's."""
    import anyio
    import mcp_types as types
    from mcp import Client
    from mcp.server.lowlevel.server import Server

    from agentkernel.tools.sources.mcp import client_pool

    pages: list[str | None] = []

    async def endless(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        pages.append(params.cursor if params is not None else None)
        tools = [types.Tool(name=f"t{len(pages)}_{i}", input_schema={"type": "object"}) for i in range(7)]
        return types.ListToolsResult(tools=tools, next_cursor=f"page-{len(pages)}")

    async def main() -> list[ListedTool]:
        async with Client(Server("endless", on_list_tools=endless)) as client:
            return await client_pool._listed(client)

    monkeypatch.setattr(client_pool, "MAX_LISTED_TOOLS", 20)
    listed = anyio.run(main)
    assert len(listed) == 20 and len(pages) == 3 and pages[1:] == ["page-1", "page-2"]


def test_a_schema_too_costly_to_validate_against_is_not_offered_naming_server_tool_and_setting() -> None:
    """Measured before any call is validated (schemas/bounds.py): the issue's nested anyOf pairs, a bad
    pattern; the rest of the server's tools are offered."""
    from tests.schemas.conftest import nested_any_of

    nested: JSONObject = {"type": "object", **nested_any_of(16)}
    bad_pattern: JSONObject = {"type": "object", "properties": {"q": {"type": "string", "pattern": "(?<"}}}
    tools, refused = offered(
        ListedTool("nested", "", nested), ListedTool("bad", "", bad_pattern), ListedTool("fine", "", SMALL)
    )
    assert list(tools) == ["far__fine"]
    assert refused == [
        "MCP server 'far': tool 'nested': its inputSchema at $defs.l15.anyOf[1]: subschemas "
        "nest more than 32 deep, counting each $ref followed (limits.max_schema_depth: 32 in kernel.yaml); "
        "not offered",
        "MCP server 'far': tool 'bad': its inputSchema at properties.q.pattern: the pattern '(?<' is not a "
        "regular expression the kernel runs: unexpected end of pattern at position 3; not offered",
    ]
