"""An outside MCP tool's result (`CallToolResult`) → our ToolResult (consuming).

Text blocks are what the agent reads, joined in order; a result with no
text but `structuredContent` is read as that JSON's text. Images, audio and
resources cannot go into a text context: each is named in a short note, so
the agent knows something was left out rather than seeing nothing.
`isError` is a failed result. `structuredContent` is also kept as `data`,
what a script's `call_tool` receives (S16.1). The result object then takes
the path every script's result takes (`normalize`), so the same size
limits apply.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentkernel.tools.results import ToolResult, normalize
from agentkernel.types import JSONValue

if TYPE_CHECKING:
    from mcp_types import CallToolResult


def _left_out(block: Any) -> str:
    """`an image (image/png)`, `a resource (file:///x)`: one block that is not text, named."""
    kind = str(getattr(block, "type", type(block).__name__))
    detail = getattr(block, "mime_type", None) or getattr(block, "uri", None)
    resource = getattr(block, "resource", None)
    if detail is None and resource is not None:
        detail = getattr(resource, "uri", None)
    article = "an" if kind[:1] in "aeiou" else "a"
    return f"{article} {kind.replace('_', ' ')}" + (f" ({detail})" if detail else "")


def _content(result: CallToolResult) -> str:
    from mcp_types import TextContent

    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    others = [_left_out(block) for block in result.content if not isinstance(block, TextContent)]
    text = "\n".join(texts)
    if not texts and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    if others:
        note = f"[left out, not text: {', '.join(others)}]"
        text = f"{text}\n{note}" if text else note
    return text


def outside_result(result: CallToolResult, *, max_visual_chars: int, max_result_chars: int) -> ToolResult:
    """The ToolResult of one outside tool call, bounded like a script's result."""
    content = _content(result)
    data: JSONValue = result.structured_content
    shaped: dict[str, JSONValue] = {"content": content, "success": not result.is_error, "data": data}
    if result.is_error:
        shaped["error"] = content or "the MCP tool reported an error and said nothing more"
    return normalize(shaped, max_visual_chars=max_visual_chars, max_result_chars=max_result_chars)


__all__ = ["outside_result"]
