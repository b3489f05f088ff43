"""The tool-call service (S16): what `call_tool` and `list_tools` reach, over the one dispatch path.

A script's `call_tool` is an LLM's tool call in every way that matters
(DESIGN rule 6): the same access check against the caller's template, the
same argument validation, crash protection, truncation and record in the
session's history. What differs is where the call stands: one deeper
(`Caller.call_depth`, bounded by `limits.max_call_depth`) and never past
its calling script's deadline. The identity is the original caller's, so a
tool can never reach through another tool what its template does not allow.
"""

from __future__ import annotations

from agentkernel.config import CallBudget
from agentkernel.identity import Caller
from agentkernel.tools.dispatch import Dispatcher
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONObject, JSONValue


class ToolCallService:
    """Calls and lists tools for a script's caller, through `dispatcher`."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    def call(self, name: str, args: JSONValue, caller: Caller, budget: CallBudget | None) -> ToolResult:
        """Run tool `name` for `caller`, from a script spending `budget` (None: no deadline)."""
        nested = caller.one_deeper(budget.deadline if budget is not None else None)
        return self.dispatcher.call(name, args, nested)

    def visible(self, caller: Caller) -> list[JSONObject]:
        """`[{name, description, parameters}]`: what the caller's LLM is offered (S16.3)."""
        return self.dispatcher.registry.list_for(caller)


__all__ = ["ToolCallService"]
