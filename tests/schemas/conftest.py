"""Schemas the schema tests build, shared with the tests of what takes one (helpers, outside MCP tools)."""

from __future__ import annotations

from typing import Any


def nested_any_of(levels: int) -> dict[str, Any]:
    """The issue's schema: `levels` nested pairs of `anyOf` branches through `$defs`, 2^levels leaves."""
    defs: dict[str, Any] = {}
    for level in range(levels):
        below = {"$ref": f"#/$defs/l{level + 1}"} if level + 1 < levels else {"type": "string"}
        defs[f"l{level}"] = {"anyOf": [below, below]}
    return {"$defs": defs, "$ref": "#/$defs/l0"}
