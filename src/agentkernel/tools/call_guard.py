"""What the one dispatch path asks before and after a tool call (S24.1–S24.5): the guard's seam.

Every tool call — the LLM's, a script's `call_tool`, a sub-agent's, an MCP
client's, an outside MCP server's tool, the tools panel's, a continuation's,
a client's tool handed back — passes the caller's tool-call hooks here, in
dispatch, so no path can skip them. The hooks themselves run in the agent
layer (agent/call_hooks.py implements `CallGuard`); this module holds the
values that cross the seam and the Protocol the dispatcher calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from agentkernel.identity import Caller
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONObject, JSONValue

ORIGINS = ("llm", "call_tool", "subagent", "mcp_client", "outside_mcp", "panel", "continuation", "client")
"""Where a tool call comes from (`call.origin`, S24.1)."""

Entries = tuple[tuple[str, str, str, JSONObject], ...]
"""Hook calls as transcript entries `(role, kind, content, meta)` (agent/hooks.py `HookRecord`)."""


@dataclass(frozen=True)
class ToolCallFacts:
    """One tool call as its hooks see it: `{id, tool, args, origin, config}`; `config` is the tool's
    YAML as its own script gets it (S3.2), so a hook can act on a tool's own fields (`risky: true`)."""

    id: str
    tool: str
    args: JSONValue
    origin: str
    config: JSONObject = field(default_factory=dict)

    def of_tool(self, config: JSONObject) -> ToolCallFacts:
        """The call with its tool's YAML (found once the tool is): made directly, as every call
        does it (`dataclasses.replace` costs a microsecond more)."""
        return ToolCallFacts(self.id, self.tool, self.args, self.origin, config)

    def to_json(self) -> JSONObject:
        return {
            "id": self.id,
            "tool": self.tool,
            "args": self.args,
            "origin": self.origin,
            "config": self.config,
        }


@dataclass(frozen=True)
class BeforeCall:
    """What `before_tool_call` decided: the arguments to run with, or a denial, or a question."""

    args: JSONValue
    deny: str | None = None
    ask: str | None = None
    replaced: bool = False
    notices: tuple[str, ...] = ()
    entries: Entries = ()


@dataclass(frozen=True)
class AfterCall:
    """What `after_tool_call` made of a result: the result to keep, its notices and hook calls."""

    result: ToolResult
    notices: tuple[str, ...] = ()
    entries: Entries = field(default=())


class CallGuard(Protocol):
    """The caller's tool-call hooks, as the dispatcher asks them (never raises: failures are verdicts)."""

    def watches(self, caller: Caller, event: str | None = None) -> bool:
        """Whether any hook of the caller takes part in a tool call (in `event`, `before_tool_call` or
        `after_tool_call`, when given); dispatch skips the guard otherwise."""
        ...

    def before(self, call: ToolCallFacts, caller: Caller) -> BeforeCall: ...

    def after(self, call: ToolCallFacts, result: ToolResult, caller: Caller) -> AfterCall: ...


__all__ = ["ORIGINS", "AfterCall", "BeforeCall", "CallGuard", "Entries", "ToolCallFacts"]
