"""A JSON answer checked against a JSON Schema: the check `run_subagent`'s `output_schema` makes (S17).

Kept apart and small so that it can become one with `llm_json`'s (S9.3),
which validates an LLM's answer the same way: parse the text as JSON (a
fenced code block around it is accepted, as models add one), validate it,
and say in one line what is wrong, for the next attempt's prompt.
jsonschema is imported here, when a schema is first checked (issue 8).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentkernel.short_text import clip
from agentkernel.types import JSONObject, JSONValue

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(?P<body>.*?)\n\s*```\s*$", re.DOTALL)
MAX_ERRORS_SHOWN = 3


def schema_problem(schema: JSONObject) -> str | None:
    """Why `schema` is not a valid JSON Schema (its own meta-schema's words), or None."""
    from jsonschema import SchemaError, validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"{where}: {exc.message}" if where else exc.message
    return None


def parse_answer(text: str) -> tuple[JSONValue, str | None]:
    """The answer's JSON value, or why it is not JSON (the text quoted, cut)."""
    match = _FENCE.match(text)
    body = match["body"] if match else text
    try:
        value: Any = json.loads(body)
    except (ValueError, RecursionError) as exc:
        return None, f"the answer is not JSON ({exc}): {clip(text, 200)}"
    return value, None


def answer_problem(text: str, schema: JSONObject) -> tuple[JSONValue, str | None]:
    """The answer parsed, and why it does not validate against `schema` (None when it does)."""
    from jsonschema import validators

    value, problem = parse_answer(text)
    if problem is not None:
        return None, problem
    validator = validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return value, None
    shown = "; ".join(_described(e.absolute_path, e.message) for e in errors[:MAX_ERRORS_SHOWN])
    more = len(errors) - MAX_ERRORS_SHOWN
    return value, shown + (f"; and {more} more" if more > 0 else "")


def _described(path: Any, message: str) -> str:
    where = "/".join(str(p) for p in path)
    return f"{where}: {message}" if where else message


__all__ = ["answer_problem", "parse_answer", "schema_problem"]
