"""`limits:` of kernel.yaml, the limits a tool or hook YAML sets for itself, and the budget of one call."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agentkernel.config.schema import Schema
from agentkernel.schemas.cost import SchemaBounds

LIMIT_FIELDS: Schema = {
    "max_operations": {"type": "integer", "minimum": 1},
    "timeout_secs": {"type": "number", "exclusiveMinimum": 0},
    "memory_limit_mb": {"type": "integer", "minimum": 1},
}
"""The limits a tool or hook YAML may set for itself (S2.3), up to `limits.ceilings`."""

LIMITS_SCHEMA: Schema = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        **LIMIT_FIELDS,
        "ceilings": {"type": "object", "additionalProperties": False, "properties": LIMIT_FIELDS},
        "stack_limit_kb": {"type": "integer", "minimum": 64},
        "max_result_chars": {"type": "integer", "minimum": 100},
        "max_visual_chars": {"type": "integer", "minimum": 100},
        "max_log_lines": {"type": "integer", "minimum": 0},
        "max_log_line_chars": {"type": "integer", "minimum": 100},
        "max_log_chars": {"type": "integer", "minimum": 100},
        "history_per_tool": {"type": "integer", "minimum": 1},
        "history_sessions": {"type": "integer", "minimum": 1},
        "max_call_depth": {"type": "integer", "minimum": 0},
        "max_subagent_depth": {"type": "integer", "minimum": 0},
        "max_schema_nodes": {"type": "integer", "minimum": 1},
        "max_schema_depth": {"type": "integer", "minimum": 1},
        "max_schema_chars": {"type": "integer", "minimum": 100},
    },
}


@dataclass(frozen=True)
class Ceilings:
    """`limits.ceilings`: the most a tool or hook YAML may ask for, limit by limit.

    A script's YAML may lower the kernel's limits for itself, and raise them
    only up to these, so an operator's bound holds whatever a script's author
    writes. None means the default ceiling: the kernel's own value for
    `timeout_secs` and `memory_limit_mb` (nothing may be raised unless the
    operator allows it), and none for `max_operations`, which only ends
    runaway loops early: every call is still bounded by its `timeout_secs`.
    """

    max_operations: int | None = None
    timeout_secs: float | None = None
    memory_limit_mb: int | None = None


def shown_number(value: int | float) -> str:
    """`100,000,000` or `2.5`: a limit as error texts show it."""
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


@dataclass(frozen=True)
class KernelLimits:
    """Bounds on one script call and on what its result may carry."""

    max_operations: int = 100_000_000
    timeout_secs: float = 30.0
    memory_limit_mb: int = 64
    stack_limit_kb: int = 1024
    max_result_chars: int = 50_000
    max_visual_chars: int = 2_000_000
    max_log_lines: int = 200
    max_log_line_chars: int = 10_000
    max_log_chars: int = 200_000
    history_per_tool: int = 20
    history_sessions: int = 1000
    max_call_depth: int = 8  # tool calls nested through call_tool (S16.2): ends recursion early
    max_subagent_depth: int = 3  # sub-agents started by sub-agents (S17)
    # schemas from tool YAML, outside MCP servers and scripts' output schemas (schema_cost.py)
    max_schema_nodes: int = SchemaBounds.max_nodes
    max_schema_depth: int = SchemaBounds.max_depth
    max_schema_chars: int = SchemaBounds.max_chars
    ceilings: Ceilings = field(default_factory=Ceilings)

    @classmethod
    def from_section(cls, section: dict[str, Any]) -> KernelLimits:
        """The validated `limits:` mapping as KernelLimits."""
        own = dict(section)
        ceilings = Ceilings(**own.pop("ceilings", {}))
        return cls(**own, ceilings=ceilings)

    @property
    def schema_bounds(self) -> SchemaBounds:
        """`max_schema_nodes`, `max_schema_depth` and `max_schema_chars`, as schema_cost.py takes them."""
        return SchemaBounds(self.max_schema_nodes, self.max_schema_depth, self.max_schema_chars)

    def ceiling(self, name: str) -> int | float | None:
        """The highest value a script's YAML may give the limit `name`; None: no ceiling."""
        own: int | float | None = getattr(self.ceilings, name)
        if own is not None or name == "max_operations":
            return own
        default: int | float = getattr(self, name)
        return default

    def ceiling_problem(self, name: str, wanted: int | float | None) -> str | None:
        """Why a script's YAML may not set `name: wanted`, or None when it may."""
        top = self.ceiling(name)
        if wanted is None or top is None or wanted <= top:
            return None
        if getattr(self.ceilings, name) is not None:
            where = f"limits.ceilings.{name}: {shown_number(top)} in kernel.yaml"
        else:
            where = (
                f"the kernel's own limits.{name}: {shown_number(top)}; an operator allows more "
                f"with limits.ceilings.{name} in kernel.yaml"
            )
        return f"{name}: {shown_number(wanted)} is above the ceiling ({where})"

    def low_ceiling(self) -> tuple[str, str] | None:
        """A ceiling below the kernel's own default, which would refuse every script that sets nothing:
        its name and why."""
        for name in LIMIT_FIELDS:
            top = getattr(self.ceilings, name)
            default = getattr(self, name)
            if top is not None and top < default:
                return name, (
                    f"limits.ceilings.{name}: {shown_number(top)} is below limits.{name} "
                    f"({shown_number(default)}), the value every script gets unless its YAML says otherwise"
                )
        return None


@dataclass(frozen=True)
class ScriptLimits:
    """The limits an engine enforces on one call (S21.1, S2.3)."""

    max_operations: int
    timeout_secs: float
    memory_limit_bytes: int
    stack_limit_bytes: int


@dataclass(frozen=True)
class CallBudget(ScriptLimits):
    """The limits of one script call and the moment it must end, fixed once when the call starts.

    The dispatcher (or the hook runner) makes it; compiling the script, the
    engine's clock and a helper's own timeout all read this one `deadline`
    (a `time.monotonic()` value), so `timeout_secs` bounds the whole call.
    """

    deadline: float

    @classmethod
    def starting_now(cls, limits: ScriptLimits) -> CallBudget:
        return cls(
            max_operations=limits.max_operations,
            timeout_secs=limits.timeout_secs,
            memory_limit_bytes=limits.memory_limit_bytes,
            stack_limit_bytes=limits.stack_limit_bytes,
            deadline=time.monotonic() + limits.timeout_secs,
        )

    def remaining_secs(self) -> float:
        """Seconds left before the deadline; 0 once it passed."""
        return max(0.0, self.deadline - time.monotonic())

    def bounded(
        self, deadline: float | None, stack_limit_bytes: int, memory_limit_bytes: int | None = None
    ) -> CallBudget:
        """This budget, ending no later than `deadline` (its calling script's), its JS stack at most
        `stack_limit_bytes` and its memory at most `memory_limit_bytes` (a call nested in another's);
        itself when none of them bounds it.

        Cut short, its `timeout_secs` is the time it has left (to the
        millisecond), so "exceeded timeout_secs" names the time it was given.
        """
        cut = deadline if deadline is not None and deadline < self.deadline else None
        memory = self.memory_limit_bytes if memory_limit_bytes is None else memory_limit_bytes
        if cut is None and stack_limit_bytes >= self.stack_limit_bytes and memory >= self.memory_limit_bytes:
            return self
        timeout = self.timeout_secs if cut is None else round(max(cut - time.monotonic(), 0.001), 3)
        return CallBudget(
            max_operations=self.max_operations,
            timeout_secs=timeout,
            memory_limit_bytes=min(memory, self.memory_limit_bytes),
            stack_limit_bytes=min(stack_limit_bytes, self.stack_limit_bytes),
            deadline=self.deadline if cut is None else cut,
        )


__all__ = [
    "LIMITS_SCHEMA",
    "LIMIT_FIELDS",
    "CallBudget",
    "Ceilings",
    "KernelLimits",
    "ScriptLimits",
    "shown_number",
]
