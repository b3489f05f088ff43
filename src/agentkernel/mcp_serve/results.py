"""A ToolResult as an MCP tool result: text for the model, blocks as structured content.

The split follows S5 and S6: `content` is what an LLM reads, so it is the
one text content block; visual blocks (tables, charts, files) are for
people, so they travel as `structuredContent = {"blocks": [...]}` and are
never mixed into the text. A failed result is an MCP tool error
(`isError`), its failure text the content, so a client's model can read
why and correct itself. Warnings, meant for the user too, ride in `_meta`.
"""

from __future__ import annotations

from mcp_types import CallToolResult, TextContent

from agentkernel.types import JSONObject, JSONValue

WARNINGS_META_KEY = "agentkernel/warnings"  # `_meta` key of the result's warnings (S5), absent when none


def call_result(result: JSONObject) -> CallToolResult:
    """`ToolResult.to_json()` (after any sealing of its blocks) → CallToolResult.

    Takes the JSON shape rather than the ToolResult so that a server which
    seals blocks first (`agentkernel serve` turns file paths and table
    continuations into opaque ids) hands over exactly what it would send.
    """
    success = result.get("success") is True
    text = _text_of(result, success)
    visual = result.get("visual")
    blocks: list[JSONValue] = list(visual) if isinstance(visual, list) else []
    warnings = result.get("warnings")
    meta = {WARNINGS_META_KEY: warnings} if isinstance(warnings, list) and warnings else None
    return CallToolResult(
        content=[TextContent(text=text)],
        structured_content={"blocks": blocks} if blocks else None,
        is_error=not success,
        _meta=meta,
    )


def _text_of(result: JSONObject, success: bool) -> str:
    """The content; for a failure with no content, its error, so `isError` never comes without a reason."""
    content = result.get("content")
    text = content if isinstance(content, str) else ""
    error = result.get("error")
    if not success and not text and isinstance(error, str):
        return error
    return text


__all__ = ["WARNINGS_META_KEY", "call_result"]
