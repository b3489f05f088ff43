"""A ToolResult's JSON as an MCP CallToolResult (issue 16): text for the model, blocks apart (S6.1)."""

from __future__ import annotations

import mcp_types as types

from agentkernel.mcp_serve.results import WARNINGS_META_KEY, call_result
from agentkernel.tools.results import ToolResult
from agentkernel.types import VisualBlock

TABLE: VisualBlock = {"type": "table", "columns": [{"key": "a"}], "rows": [{"a": 1}]}
CHART: VisualBlock = {"type": "chart", "chart": "bar", "labels": ["x"], "series": [{"data": [1]}]}


def test_content_is_the_one_text_block_and_blocks_are_structured_content() -> None:
    shown = call_result(ToolResult(content="two blocks", visual=[TABLE, CHART]).to_json())
    assert shown.content == [types.TextContent(text="two blocks")]
    assert shown.structured_content == {"blocks": [TABLE, CHART]}
    assert not shown.is_error and shown.meta is None
    wire = shown.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert wire["structuredContent"] == {"blocks": [TABLE, CHART]} and wire["isError"] is False


def test_no_blocks_no_structured_content() -> None:
    shown = call_result(ToolResult(content="plain").to_json())
    assert shown.structured_content is None
    assert "structuredContent" not in shown.model_dump(by_alias=True, mode="json", exclude_none=True)


def test_a_failure_is_a_tool_error_whose_text_says_why() -> None:
    failed = call_result(ToolResult.failure("tool 'x' stopped: timeout after 5 s").to_json())
    assert failed.is_error
    assert failed.content == [types.TextContent(text="tool 'x' stopped: timeout after 5 s")]
    # a script's {success: false, error: …} with no content still says why
    quiet = call_result(ToolResult(content="", success=False, error="no such city").to_json())
    assert quiet.is_error and quiet.content == [types.TextContent(text="no such city")]


def test_warnings_for_the_user_ride_in_meta_not_in_the_text() -> None:
    shown = call_result(ToolResult(content="ok", warnings=["content truncated"]).to_json())
    assert shown.content == [types.TextContent(text="ok")]
    assert shown.meta == {WARNINGS_META_KEY: ["content truncated"]}
