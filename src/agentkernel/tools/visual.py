"""Visual blocks (S6): what people see beside a tool result and the LLM never does.

Each block type has a JSON Schema; a malformed block is dropped with a warning
that names the block and the field, never a crash.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from agentkernel.config import describe_validation_error
from agentkernel.schemas.plain import surely_valid
from agentkernel.types import JSONValue, VisualBlock
from agentkernel.util.json_size import json_length
from agentkernel.util.short_text import json_preview

_CELL_LIST = {"type": "array"}
_ERRORS_WEIGHED = 20  # a block's first errors, of which the shallowest is reported

BLOCK_SCHEMAS: dict[str, dict[str, Any]] = {
    "text": {
        "type": "object",
        "required": ["type", "text"],
        "properties": {"text": {"type": "string"}},
    },
    "table": {
        "type": "object",
        "required": ["type", "columns", "rows"],
        "properties": {
            "title": {"type": "string"},
            "columns": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["key"],
                    "properties": {"key": {"type": "string"}, "title": {"type": "string"}},
                },
            },
            "rows": {"type": "array", "items": {"type": "object"}},
            "continuation": {
                "type": "object",
                "required": ["args"],
                "properties": {"args": {"type": "object"}},
            },
        },
    },
    "chart": {
        "type": "object",
        "required": ["type", "chart", "labels", "series"],
        "properties": {
            "chart": {"enum": ["bar", "line", "pie"]},
            "title": {"type": "string"},
            "labels": _CELL_LIST,
            "series": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["data"],
                    "properties": {
                        "name": {"type": "string"},
                        "data": {"type": "array", "items": {"type": ["number", "null"]}},
                    },
                },
            },
        },
    },
    "file": {
        "type": "object",
        "required": ["type", "name"],
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "mime": {"type": "string"},
            "url": {"type": "string"},
            "path": {"type": "string"},
        },
    },
}


@functools.cache
def _validator(kind: str) -> Any:
    """jsonschema's validator of a block of `kind`, made when a block is not surely valid."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(BLOCK_SCHEMAS[kind])


def block_problem(block: JSONValue) -> str | None:
    """Why this block cannot be shown, or None when it is well formed."""
    if not isinstance(block, dict):
        return f"expected an object with `type`, got {json_preview(block)}"
    kind = block.get("type")
    expected = ", ".join(BLOCK_SCHEMAS)
    if "type" not in block:
        return f"missing `type` (expected one of {expected})"
    schema = BLOCK_SCHEMAS.get(kind) if isinstance(kind, str) else None
    if schema is None or not isinstance(kind, str):
        return f"unknown block type {kind!r} (expected one of {expected})"
    if surely_valid(schema, block):
        error = None
    else:
        found = itertools.islice(
            _validator(kind).iter_errors(block), _ERRORS_WEIGHED
        )  # not one per bad row of a million
        error = next(iter(sorted(found, key=lambda e: len(e.path))), None)
    if error is not None:
        return f"{kind} block: {describe_validation_error(error)}"
    if kind == "chart":
        return _chart_shape_problem(block)
    if kind == "file" and "url" not in block and "path" not in block:
        return "file block: needs a download reference, `url` or `path`"
    return None


def _chart_shape_problem(block: dict[str, JSONValue]) -> str | None:
    labels = block["labels"]
    series = block["series"]
    assert isinstance(labels, list) and isinstance(series, list)
    for i, entry in enumerate(series):
        assert isinstance(entry, dict)
        data = entry["data"]
        assert isinstance(data, list)
        if len(data) != len(labels):
            return f"chart block: series[{i}] has {len(data)} values for {len(labels)} labels"
    return None


def validate_visual(visual: JSONValue, max_chars: int) -> tuple[list[VisualBlock], list[str]]:
    """Normalise `visual` (one block or a list) to the well-formed blocks, plus warnings.

    The size is measured before anything is checked, and measuring stops at
    `max_chars`: a visual far too big costs no more than one that just fits.
    """
    if visual is None:
        return [], []
    blocks = visual if isinstance(visual, list) else [visual]
    if json_length(blocks, max_chars) is None:
        return [], [
            f"visual dropped: more than {max_chars:,} characters of JSON in its blocks (max_visual_chars)"
        ]
    kept: list[VisualBlock] = []
    warnings: list[str] = []
    for index, block in enumerate(blocks):
        problem = block_problem(block)
        if problem is None:
            assert isinstance(block, dict)
            kept.append(block)
        else:
            warnings.append(f"visual[{index}] dropped: {problem}")
    return kept, warnings


__all__ = ["BLOCK_SCHEMAS", "block_problem", "validate_visual"]
