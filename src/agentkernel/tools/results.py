"""ToolResult and the rules that turn any script return into one (S4, S5, S6).

The order is: normalise the returned value (S4) and check its visual blocks
(S6), apply the `warnings:` rules (S5), then cut content that is too long.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentkernel.config import Limits, WarningRule
from agentkernel.scripting.engine import NoValue
from agentkernel.tools.visual import validate_visual
from agentkernel.types import JSONObject, JSONValue, VisualBlock

_RESULT_KEYS = ("content", "error", "visual")


@dataclass
class ToolResult:
    """One tool call's outcome, whatever the script returned or did.

    `content` goes into the agent's context; `visual` and `warnings` go to the
    user only (S5, S6); `data` is structured output some tools carry (S16.1).
    """

    content: str
    success: bool = True
    error: str | None = None
    visual: list[VisualBlock] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    data: JSONValue = None

    @classmethod
    def failure(cls, message: str) -> ToolResult:
        return cls(content=message, success=False, error=message)

    def to_json(self) -> JSONObject:
        """The five fields the CLI prints and the API sends."""
        return {
            "content": self.content,
            "success": self.success,
            "error": self.error,
            "visual": list(self.visual) if self.visual else None,
            "warnings": list(self.warnings),
        }

    def for_script(self) -> JSONObject:
        """What `call_tool` and `get_tool_result` hand a script (S16.1)."""
        return {
            "content": self.content,
            "success": self.success,
            "data": self.data,
            "visual": list(self.visual) if self.visual else None,
        }


def _as_text(value: JSONValue) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def normalize(value: JSONValue | NoValue, *, max_visual_chars: int, function: str = "run") -> ToolResult:
    """Any script return → ToolResult (S4.1–S4.5).

    A string is content; an object with `content`, `error` or `visual` is a
    result object; anything else is its JSON text; no value at all is a
    failure, since a tool that forgot `return` should say so.
    """
    if isinstance(value, NoValue):
        return ToolResult.failure(
            f"{function}() returned undefined: return a string or an object with `content`"
        )
    if isinstance(value, str):
        return ToolResult(content=value)
    if not isinstance(value, dict) or not any(k in value for k in _RESULT_KEYS):
        return ToolResult(content=_as_text(value))
    return _from_result_object(value, max_visual_chars)


def _from_result_object(value: dict[str, JSONValue], max_visual_chars: int) -> ToolResult:
    visual, warnings = validate_visual(value.get("visual"), max_visual_chars)
    error_value = value.get("error")
    error = None if error_value is None else _as_text(error_value)
    success_value = value.get("success")
    if success_value is None:
        success = not error
    elif isinstance(success_value, bool):
        success = success_value
    else:
        success = bool(success_value)
        warnings.append(f"`success` should be true or false, got {_as_text(success_value)}")
    content_value = value.get("content")
    if content_value is None:
        content = error if error and not success else ""
    else:
        content = _as_text(content_value)
    return ToolResult(
        content=content,
        success=success,
        error=error,
        visual=visual,
        warnings=warnings,
        data=value.get("data"),
    )


def rule_matches(rule: WarningRule, result: ToolResult) -> bool:
    """S5.1: every condition the rule states must hold."""
    if rule.failed is not None and rule.failed == result.success:
        return False
    return rule.contains is None or rule.contains in result.content


def truncate(text: str, max_chars: int) -> tuple[str, str | None]:
    """Cut text to `max_chars`, saying so both in the text and as a warning."""
    if len(text) <= max_chars:
        return text, None
    note = f"\n…[truncated: {max_chars:,} of {len(text):,} characters shown]"
    return text[:max_chars] + note, f"content truncated from {len(text):,} to {max_chars:,} characters"


def finish(result: ToolResult, rules: Sequence[WarningRule], limits: Limits) -> ToolResult:
    """Apply the `warnings:` rules, then truncate: the result as delivered."""
    result.warnings.extend(rule.message for rule in rules if rule_matches(rule, result))
    result.content, cut = truncate(result.content, limits.max_result_chars)
    if cut:
        result.warnings.append(cut)
    return result


__all__ = ["ToolResult", "finish", "normalize", "rule_matches", "truncate"]
