"""What `before_tool_call`, `after_tool_call` and `before_llm_call` may return (S24.2, S24.3), field by field.

As with S7's verdicts (verdicts.py), a malformed or unknown field is a
problem, reported and ignored, and the well-formed rest takes effect; the
pipeline (hooks.py) makes any problem of a `before_tool_call` verdict a
failure of the hook, which denies the call unless it says `on_error: allow`.

`replace_messages` keeps the request's shape: a list as long as
`request.messages`, whose item at each position is `{role, content}` with
the role of the request's message there and a string content (null only
where that message's content was null). Only contents change: a message's
`tool_calls` and `tool_call_id` stay the kernel's, so an item may repeat
them unchanged but not alter them. Anything else refuses the whole list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentkernel.agent.verdicts import text_field
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.short_text import json_preview

_KEPT_FIELDS = (
    "tool_calls",
    "tool_call_id",
)  # a message's own, which replace_messages may repeat as they are


@dataclass(frozen=True)
class ToolCallVerdict:
    """A `before_tool_call` verdict (S24.2); every field optional."""

    deny: str | None = None
    replace_args: JSONObject | None = None
    ask: str | None = None
    notice: str | None = None
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolResultVerdict:
    """An `after_tool_call` verdict (S24.3): `replace_result` as the hook gave it, checked only for its shape.

    The rest of the result object (`visual`, `warnings`, …) is the
    dispatcher's to normalize as a tool's own return (tools/results.py).
    """

    replace_result: JSONObject | None = None
    notice: str | None = None
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class LlmCallVerdict:
    """A `before_llm_call` verdict (S24.3): `contents` the new content of each message, in order."""

    contents: tuple[str | None, ...] | None = None
    deny: str | None = None
    notice: str | None = None
    problems: tuple[str, ...] = ()


def _show(value: JSONValue) -> str:
    return json_preview(value)


def _fields(value: JSONValue, known: tuple[str, ...], problems: list[str]) -> JSONObject | None:
    """The verdict object, or None for no verdict; not an object, or an unknown field, is a problem."""
    if value is None:
        return None
    if not isinstance(value, dict):
        problems.append(f"expected an object or nothing, got {_show(value)}")
        return None
    for key in sorted(set(value) - set(known)):
        problems.append(f"unknown field {key!r} (expected one of {', '.join(known)})")
    return value


def parse_before_tool_call(value: JSONValue) -> ToolCallVerdict:
    """`{deny, replace_args, ask, notice}` or nothing; `deny: ""` still denies (with no reason)."""
    problems: list[str] = []
    verdict = _fields(value, ("ask", "deny", "notice", "replace_args"), problems)
    if verdict is None:
        return ToolCallVerdict(problems=tuple(problems))
    args = verdict.get("replace_args")
    if args is not None and not isinstance(args, dict):
        problems.append(f"replace_args: expected an object (the tool's arguments), got {_show(args)}")
        args = None
    deny = text_field(verdict, "deny", problems)
    ask = text_field(verdict, "ask", problems)
    notice = text_field(verdict, "notice", problems)
    return ToolCallVerdict(deny, args, ask, notice, tuple(problems))


def _result_problem(value: JSONValue) -> str | None:
    shape = "an object {content: string, success?: true|false, …}"
    if not isinstance(value, dict):
        return f"replace_result: expected {shape}, got {_show(value)}"
    content = value.get("content")
    if not isinstance(content, str):
        return f"replace_result.content: expected a string, got {_show(content)}"
    success = value.get("success")
    if success is not None and not isinstance(success, bool):
        return f"replace_result.success: expected true or false, got {_show(success)}"
    return None


def parse_after_tool_call(value: JSONValue) -> ToolResultVerdict:
    """`{replace_result, notice}`, a plain string (a notice, as S7.2's), or nothing."""
    if isinstance(value, str):
        return ToolResultVerdict(notice=value)
    problems: list[str] = []
    verdict = _fields(value, ("notice", "replace_result"), problems)
    if verdict is None:
        return ToolResultVerdict(problems=tuple(problems))
    replacement = verdict.get("replace_result")
    if replacement is not None:
        problem = _result_problem(replacement)
        if problem is not None:
            problems.append(problem)
            replacement = None
    notice = text_field(verdict, "notice", problems)
    result = replacement if isinstance(replacement, dict) else None
    return ToolResultVerdict(result, notice, tuple(problems))


def _item_problem(index: int, item: JSONValue, original: JSONObject) -> str | None:
    """Why `item` cannot replace the request's message at `index`, or None (the module docstring's rule)."""
    where = f"replace_messages[{index}]"
    if not isinstance(item, dict):
        return f"{where}: expected {{role, content}}, got {_show(item)}"
    role = original.get("role")
    if item.get("role") != role:
        got = _show(item.get("role"))
        return f"{where}.role: expected {role!r} (the role of the request's message {index}), got {got}"
    content = item.get("content")
    if not isinstance(content, str) and not (content is None and original.get("content") is None):
        return f"{where}.content: expected a string, got {_show(content)}"
    for key in sorted(set(item) - {"role", "content"}):
        if key not in _KEPT_FIELDS:
            return f"{where}: unknown field {key!r} (only content may change)"
        if item[key] != original.get(key):
            return f"{where}.{key}: differs from the request's message {index}; only content may change"
    return None


def _contents(
    value: JSONValue, messages: Sequence[JSONObject]
) -> tuple[tuple[str | None, ...] | None, str | None]:
    """The new contents `replace_messages` gives, or the first problem that refuses it whole."""
    count = len(messages)
    if not isinstance(value, list):
        return None, f"replace_messages: expected a list of {count} {{role, content}}, got {_show(value)}"
    if len(value) != count:
        return None, (
            f"replace_messages: expected {count} message{'' if count == 1 else 's'}"
            " (one for each of the request's, in order),"
            f" got {len(value)}"
        )
    contents: list[str | None] = []
    for index, (item, original) in enumerate(zip(value, messages, strict=True)):
        problem = _item_problem(index, item, original)
        if problem is not None:
            return None, problem
        assert isinstance(item, dict)  # _item_problem said so
        content = item.get("content")
        contents.append(content if isinstance(content, str) else None)
    return tuple(contents), None


def parse_before_llm_call(value: JSONValue, messages: Sequence[JSONObject]) -> LlmCallVerdict:
    """`{replace_messages, deny, notice}` or nothing, `replace_messages` checked against `messages`."""
    problems: list[str] = []
    verdict = _fields(value, ("deny", "notice", "replace_messages"), problems)
    if verdict is None:
        return LlmCallVerdict(problems=tuple(problems))
    contents: tuple[str | None, ...] | None = None
    if verdict.get("replace_messages") is not None:
        contents, problem = _contents(verdict["replace_messages"], messages)
        if problem is not None:
            problems.append(problem)
    deny = text_field(verdict, "deny", problems)
    notice = text_field(verdict, "notice", problems)
    return LlmCallVerdict(contents, deny, notice, tuple(problems))


__all__ = [
    "LlmCallVerdict",
    "ToolCallVerdict",
    "ToolResultVerdict",
    "parse_after_tool_call",
    "parse_before_llm_call",
    "parse_before_tool_call",
]
