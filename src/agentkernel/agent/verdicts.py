"""What hooks may return (S7.1–S7.3), checked field by field.

A hook's return value is untrusted: first as a whole (`received`: its size
is bounded, its text made valid Unicode), then each field on its own; a
malformed field is reported (and recorded as an error, S7.5) and ignored,
and the well-formed rest still takes effect.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.json_size import json_length
from agentkernel.util.short_text import json_preview
from agentkernel.util.valid_unicode import repair_value, surrogate_warning

ROLES = frozenset({"system", "user", "assistant"})


@dataclass(frozen=True)
class Verdict:
    """A `before_user_message` verdict (S7.1); every field optional."""

    notice: str | None = None
    reply: str | None = None
    suppress: bool = False
    inject: tuple[JSONObject, ...] = ()
    replace_message: JSONObject | None = None
    problems: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Received:
    """A hook's return value as the kernel keeps it, or the problem that refused it."""

    value: JSONValue = None
    warnings: tuple[str, ...] = ()
    problem: str | None = None


def received(value: JSONValue, max_chars: int, setting: str = "max_result_chars") -> Received:
    """The value a hook returned, once it is known to be safe to keep, show and record.

    Its JSON text may have at most `max_chars` characters (measuring stops
    there: a value whose text would be gigabytes is refused for the cost of
    `max_chars`); a lone surrogate in any string becomes U+FFFD, with a
    warning. The value is the hook's own, so it is repaired in place.
    """
    if value is not None and json_length(value, max_chars) is None:
        problem = f"returned more than {max_chars:,} characters of JSON ({setting}); its verdict is ignored"
        return Received(problem=problem)
    value, repaired = repair_value(value)
    return Received(value, (surrogate_warning("the hook's return value"),) if repaired else ())


def _message(value: JSONValue, where: str, problems: list[str]) -> JSONObject | None:
    if (
        isinstance(value, dict)
        and isinstance(value.get("content"), str)
        and value.get("role") in ROLES
        and set(value) <= {"role", "content"}
    ):
        return {"role": value["role"], "content": value["content"]}
    problems.append(f"{where}: expected {{role: system|user|assistant, content: string}}, got {_show(value)}")
    return None


def _show(value: JSONValue) -> str:
    return json_preview(value)


def parse_before_user_message(value: JSONValue) -> Verdict:
    """The verdict of `before_user_message`; None (no return) means no verdict."""
    if value is None:
        return Verdict()
    if not isinstance(value, dict):
        return Verdict(problems=(f"expected an object or nothing, got {_show(value)}",))
    problems: list[str] = []
    known = {"notice", "reply", "suppress", "inject", "replace_message"}
    for key in sorted(set(value) - known):
        problems.append(f"unknown field {key!r} (expected one of {', '.join(sorted(known))})")
    notice = text_field(value, "notice", problems)
    reply = text_field(value, "reply", problems)
    suppress = value.get("suppress", False)
    if not isinstance(suppress, bool):
        problems.append(f"suppress: expected true or false, got {_show(suppress)}")
        suppress = False
    inject: list[JSONObject] = []
    raw_inject = value.get("inject")
    if raw_inject is not None:
        if isinstance(raw_inject, list):
            for index, item in enumerate(raw_inject):
                message = _message(item, f"inject[{index}]", problems)
                if message is not None:
                    inject.append(message)
        else:
            problems.append(f"inject: expected a list of messages, got {_show(raw_inject)}")
    replace = value.get("replace_message")
    replacement = _message(replace, "replace_message", problems) if replace is not None else None
    return Verdict(notice, reply, suppress, tuple(inject), replacement, tuple(problems))


def text_field(value: JSONObject, key: str, problems: list[str]) -> str | None:
    """`value[key]` when it is a string or absent (None); anything else is a problem, and None."""
    item = value.get(key)
    if item is None or isinstance(item, str):
        return item
    problems.append(f"{key}: expected a string, got {_show(item)}")
    return None


def parse_after_turn(value: JSONValue) -> tuple[str | None, tuple[str, ...]]:
    """`after_turn` returns `{notice}` or a plain string (a notice), or nothing (S7.2)."""
    if value is None:
        return None, ()
    if isinstance(value, str):
        return value, ()
    if isinstance(value, dict) and set(value) <= {"notice"}:
        notice = value.get("notice")
        if notice is None or isinstance(notice, str):
            return notice, ()
    return None, (f"expected a string or {{notice}}, got {_show(value)}",)


__all__ = [
    "Received",
    "Verdict",
    "parse_after_turn",
    "parse_before_user_message",
    "received",
    "text_field",
]
