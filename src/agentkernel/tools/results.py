"""ToolResult and the rules that turn any script return into one (S4, S5, S6).

The order is: normalise the returned value (S4) and check its visual blocks
(S6), repair invalid Unicode, apply the `warnings:` rules (S5), then cut
content that is too long.

A returned value is untrusted in size as well as in shape: its JSON text is
never built past the limit that applies to it (`max_result_chars` for
content, error and data, `max_visual_chars` for the blocks), see json_size.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agentkernel.config import KernelLimits, WarningRule
from agentkernel.tools.visual import validate_visual
from agentkernel.types import JSONObject, JSONValue, NoValue, VisualBlock
from agentkernel.util.json_size import json_length, json_prefix
from agentkernel.util.short_text import clip, json_preview
from agentkernel.util.valid_unicode import repair_text, repair_value, surrogate_warning

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
    content_cut: bool = field(default=False, compare=False, repr=False)  # already cut, with its note
    # what the tool-call hooks said of the call (S24): their notices for the user, and their calls as
    # transcript entries `(role, kind, content, meta)`, recorded with the result
    notices: list[str] = field(default_factory=list, compare=False, repr=False)
    hook_entries: list[tuple[str, str, str, JSONObject]] = field(
        default_factory=list, compare=False, repr=False
    )

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


def _as_text(value: JSONValue, max_chars: int) -> tuple[str, str | None]:
    """A string as it is; any other value as its JSON text, cut (with a note) past `max_chars`.

    The second item is the warning of a cut, or None.
    """
    if isinstance(value, str):
        return value, None
    text, cut = json_prefix(value, max_chars)
    if not cut:
        return text, None
    note = f"\n…[truncated: {max_chars:,} characters of JSON shown; the rest was not encoded]"
    return text + note, f"truncated to {max_chars:,} characters (its JSON text is longer)"


def normalize(
    value: JSONValue | NoValue,
    *,
    max_visual_chars: int,
    max_result_chars: int = KernelLimits.max_result_chars,
    function: str = "run",
) -> ToolResult:
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
        content, cut = _as_text(value, max_result_chars)
        return ToolResult(content=content, warnings=[f"content {cut}"] if cut else [], content_cut=bool(cut))
    return _from_result_object(value, max_visual_chars, max_result_chars)


def _from_result_object(
    value: dict[str, JSONValue], max_visual_chars: int, max_result_chars: int
) -> ToolResult:
    visual, warnings = validate_visual(value.get("visual"), max_visual_chars)
    error_value = value.get("error")
    error, error_cut = (None, None) if error_value is None else _as_text(error_value, max_result_chars)
    if error_cut:
        warnings.append(f"error {error_cut}")
    success_value = value.get("success")
    if success_value is None:
        success = not error
    elif isinstance(success_value, bool):
        success = success_value
    else:
        success = bool(success_value)
        shown = clip(success_value, 80) if isinstance(success_value, str) else json_preview(success_value)
        warnings.append(f"`success` should be true or false, got {shown}")
    content_value = value.get("content")
    content_cut: str | None = None
    if content_value is None:
        content = error if error and not success else ""
        content_cut = error_cut if error and not success else None
    else:
        content, content_cut = _as_text(content_value, max_result_chars)
        if content_cut:
            warnings.append(f"content {content_cut}")
    return ToolResult(
        content=content,
        success=success,
        error=error,
        visual=visual,
        warnings=warnings,
        data=_bounded_data(value.get("data"), max_result_chars, warnings),
        content_cut=content_cut is not None,
    )


def _bounded_data(data: JSONValue, max_chars: int, warnings: list[str]) -> JSONValue:
    """`data` when its JSON fits in `max_chars`; None, with a warning, when it does not."""
    if data is None or json_length(data, max_chars) is not None:
        return data
    warnings.append(f"data dropped: its JSON text is longer than {max_chars:,} characters (max_result_chars)")
    return None


def repair_unicode(result: ToolResult) -> bool:
    """Replace lone surrogates in every field a script filled; True when there were any."""
    content, error = repair_text(result.content), result.error and repair_text(result.error)
    repaired = content is not result.content or error is not result.error
    result.content, result.error = content, error
    for index, warning in enumerate(result.warnings):
        fixed = repair_text(warning)
        if fixed is not warning:
            result.warnings[index], repaired = fixed, True
    for part in (result.visual, result.data):
        repaired = repair_value(part)[1] or repaired  # type: ignore[arg-type]  # list of blocks
    return repaired


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


def finish(result: ToolResult, rules: Sequence[WarningRule], limits: KernelLimits) -> ToolResult:
    """Repair invalid Unicode, apply the `warnings:` rules, then truncate: the result as delivered."""
    if repair_unicode(result):
        result.warnings.append(surrogate_warning("the result"))
    result.warnings.extend(rule.message for rule in rules if rule_matches(rule, result))
    if not result.content_cut:
        result.content, cut = truncate(result.content, limits.max_result_chars)
        if cut:
            result.warnings.append(cut)
    return result


__all__ = ["ToolResult", "finish", "normalize", "repair_unicode", "rule_matches", "truncate"]
