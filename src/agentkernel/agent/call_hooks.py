"""The dispatcher's guard (tools/call_guard.py) made of the caller's hooks: S24.1–S24.3 on every path.

A caller carries its template's hooks (`Caller.hooks`, as its process
opened them); the dispatcher asks this guard before and after each call it
makes for that caller, whatever the call's origin. `before_tool_call`
verdicts become the call's arguments, its denial or its question for a
person; `after_tool_call`'s `replace_result` is normalized as a tool's own
return (its visual blocks checked, its text cut to the limits), so a hook
can scrub a result but not smuggle in what a tool could not return.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agentkernel.config import HookSpec, KernelLimits
from agentkernel.errors import ScriptError
from agentkernel.identity import Caller
from agentkernel.tools.call_guard import AfterCall, BeforeCall, Entries, ToolCallFacts
from agentkernel.tools.results import ToolResult, finish, normalize
from agentkernel.types import JSONObject

if TYPE_CHECKING:  # the hook pipeline is built by the first caller with hooks: a tool run never imports it
    from agentkernel.agent.hooks import HookPipeline, HookRecord

_EVENTS = ("before_tool_call", "after_tool_call")


class CallHooks:
    """`CallGuard` over a HookPipeline; see the module docstring."""

    def __init__(self, pipeline: Callable[[], HookPipeline], limits: KernelLimits) -> None:
        self._pipeline = pipeline  # built by the first caller with hooks
        self.limits = limits

    @property
    def pipeline(self) -> HookPipeline:
        return self._pipeline()

    def watches(self, caller: Caller, event: str | None = None) -> bool:
        if not caller.hooks:  # a caller with no template (or hooks): nothing is asked
            return False
        events = _EVENTS if event is None else (event,)
        return any(self._takes_part(spec, name, caller) for spec in caller.hooks for name in events)

    def _takes_part(self, spec: HookSpec, event: str, caller: Caller) -> bool:
        try:
            return self.pipeline.handles(spec, event, caller)
        except ScriptError:  # a hook that no longer compiles: the pipeline records it (and denies)
            return True

    def before(self, call: ToolCallFacts, caller: Caller) -> BeforeCall:
        verdicts = self.pipeline.before_tool_call(caller.hooks, caller, call.to_json())
        return BeforeCall(
            args=verdicts.args,
            deny=verdicts.deny,
            ask=verdicts.ask,
            replaced=verdicts.replaced,
            notices=tuple(verdicts.notices),
            entries=_entries(verdicts.records),
        )

    def after(self, call: ToolCallFacts, result: ToolResult, caller: Caller) -> AfterCall:
        shown = {**result.to_json(), "data": result.data}
        verdicts = self.pipeline.after_tool_call(caller.hooks, caller, call.to_json(), shown)
        kept = self._replaced(verdicts.result, result) if verdicts.replaced else result
        return AfterCall(kept, tuple(verdicts.notices), _entries(verdicts.records))

    def _replaced(self, value: JSONObject, was: ToolResult) -> ToolResult:
        """A hook's `replace_result` as a tool's own return would be kept (S4–S6), its `success: false`
        a failure; what the hooks said of the call before stays with it."""
        limits = self.limits
        result = normalize(
            value, max_visual_chars=limits.max_visual_chars, max_result_chars=limits.max_result_chars
        )
        if value.get("success") is False and result.success:
            result.success, result.error = False, result.content
        result.notices.extend(was.notices)
        result.hook_entries.extend(was.hook_entries)
        return finish(result, (), limits)


def _entries(records: list[HookRecord]) -> Entries:
    return tuple(record.transcript_entry() for record in records)


__all__ = ["CallHooks"]
