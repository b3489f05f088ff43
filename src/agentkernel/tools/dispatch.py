"""The one path every tool call takes (DESIGN rule 6).

An LLM's tool call, a script's `call_tool` and a continuation all come here:
look the tool up, check access, validate the arguments, run the script with
its limits, normalise the result, apply warnings and truncation, record it
in the session's history. Nothing escapes as an exception.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable

from agentkernel.config import CallBudget, KernelLimits, ToolSpec, describe_validation_error
from agentkernel.errors import ScriptError, ScriptLimitError
from agentkernel.helpers.table import ScriptCall
from agentkernel.identity import Caller
from agentkernel.schemas.bounds import ValidationStopped, bounded_errors
from agentkernel.scripting.host import ScriptHost
from agentkernel.services.kernel_loop import KernelLoop
from agentkernel.tools.history import ToolResultHistory
from agentkernel.tools.isolated import WorkerPool
from agentkernel.tools.python_tools import pool_worker, run_python_tool
from agentkernel.tools.registry import ToolRegistry
from agentkernel.tools.results import ToolResult, finish, normalize
from agentkernel.tools.sources.mcp.outside import OutsideToolSpec
from agentkernel.types import JSONValue, NoValue
from agentkernel.util.fair_pool import FairPool

log = logging.getLogger("agentkernel.dispatch")
MAX_REPORTED_ARG_ERRORS = 3
MAX_COUNTED_ARG_ERRORS = 100  # errors of one call's arguments counted for "and N more"; past it, "more than"
MIN_NESTED_STACK_BYTES = 64 << 10  # the least JS stack a nested call gets (limits.stack_limit_kb's minimum)
MIN_NESTED_MEMORY_BYTES = 8 << 20  # the least memory a nested call gets, however deep


def depth_refusal(name: str, caller: Caller, limits: KernelLimits) -> str | None:
    """Why a call nested through `call_tool` is not run: too deep (S16.2), or None.

    Counted apart from `max_operations`, which is per call: a tool calling
    itself would otherwise nest until its deadline or the thread's stack.
    """
    if caller.call_depth <= limits.max_call_depth:
        return None
    return (
        f"tool {name!r} not run: calls nested {caller.call_depth} deep through call_tool, more than "
        f"limits.max_call_depth ({limits.max_call_depth}); does a tool call itself?"
    )


def nested_memory_bytes(limits: KernelLimits, depth: int) -> int:
    """The memory of a call nested `depth` deep: half its caller's, at least MIN_NESTED_MEMORY_BYTES.

    Every level of a call_tool chain holds its heap while the next runs: with
    the full `memory_limit_mb` at each level, a tool calling itself held a
    heap per level at once (495 MB resident in one `tool run`, nine levels
    of 50 MB); halved each level, the chain holds about twice one call's.
    """
    return max(MIN_NESTED_MEMORY_BYTES, (limits.memory_limit_mb << 20) >> depth)


def nested_stack_bytes(limits: KernelLimits, depth: int) -> int:
    """The JS stack of a call nested `depth` deep: half its caller's, at least MIN_NESTED_STACK_BYTES.

    Nested calls run on their caller's thread, each on top of the one that
    called it, so the whole chain fits in about twice `stack_limit_kb` plus
    MIN_NESTED_STACK_BYTES a level, far inside a thread's stack, whatever the depth limit.
    """
    return max(MIN_NESTED_STACK_BYTES, (limits.stack_limit_kb << 10) >> depth)


def argument_problem(spec: ToolSpec, args: JSONValue, deadline: float | None = None) -> str | None:
    """Why `args` do not match the tool's `parameters`, naming the fields (S2.5).

    Validated by `deadline` (time.monotonic(); schemas/bounds.py): the schema
    and the arguments may both come from outside. ValidationStopped past it.
    """
    found = bounded_errors(spec.validator, args, deadline, MAX_COUNTED_ARG_ERRORS + 1)
    if not found:
        return None
    errors = sorted(found[:MAX_COUNTED_ARG_ERRORS], key=lambda e: [str(p) for p in e.path])
    shown = "; ".join(describe_validation_error(e) for e in errors[:MAX_REPORTED_ARG_ERRORS])
    more = len(errors) - MAX_REPORTED_ARG_ERRORS
    if len(found) > MAX_COUNTED_ARG_ERRORS:
        return f"{shown}; and more than {more} more"
    return shown + (f"; and {more} more" if more > 0 else "")


class Dispatcher:
    """Runs tools for callers; every outcome, even a kernel bug, is a ToolResult."""

    def __init__(
        self,
        registry: ToolRegistry,
        host: ScriptHost,
        limits: KernelLimits,
        history: ToolResultHistory,
        workers: WorkerPool,
        *,
        pool: FairPool,
        home: KernelLoop | None = None,
    ) -> None:
        self.registry = registry
        self.host = host
        self.limits = limits
        self.history = history
        self.workers = workers  # the processes python_tool built-ins do their work in
        self.pool = pool  # where asynchronous calls run, shared fairly between users
        self.home = home  # told which event loop runs the kernel's async work (services/kernel_loop.py)

    def call(self, name: str, args: JSONValue, caller: Caller) -> ToolResult:
        """Dispatch a registered tool synchronously (scripts are sync: DESIGN rule 7)."""
        return self._protected(name, lambda: self._dispatch(name, args, caller), caller)

    def call_spec(self, spec: ToolSpec, args: JSONValue, caller: Caller) -> ToolResult:
        """Dispatch a tool loaded from a file outside the registry (`tool run PATH.yaml`)."""
        return self._protected(spec.name, lambda: self._dispatch_spec(spec, args, caller), caller)

    def _protected(self, name: str, dispatch: Callable[[], ToolResult], caller: Caller) -> ToolResult:
        started = time.perf_counter()
        try:
            result = dispatch()
        except Exception as exc:  # crash protection: a kernel bug must not end the turn
            log.exception("tool %s crashed in the kernel", name)
            result = ToolResult.failure(
                f"tool {name!r} failed inside the kernel: {type(exc).__name__}: {exc}"
            )
        self.history.record(caller, name, result)
        log.debug(
            "tool %s: success=%s in %.2f ms",
            name,
            result.success,
            (time.perf_counter() - started) * 1000,
        )
        return result

    async def acall(
        self, name: str, args: JSONValue, caller: Caller, pool: FairPool | None = None
    ) -> ToolResult:
        """Dispatch from the event loop on a worker (S21.3): `pool`, else the dispatcher's.

        The call waits in its user's queue of the pool (fair_pool.py): never
        on the event loop's default threads, which every other user shares.
        """
        import asyncio  # only the agent loop dispatches asynchronously; `tool run` never needs it

        if self.home is not None:
            self.home.adopt(asyncio.get_running_loop())
        return await (pool or self.pool).run(caller.user_id, functools.partial(self.call, name, args, caller))

    def _dispatch(self, name: str, args: JSONValue, caller: Caller) -> ToolResult:
        spec = self.registry.get(name, caller)
        if spec is None:
            reason = self.registry.unavailable(name, caller)
            # asking why compiles the scripts again: one whose check was cut short by its deadline (a
            # busy machine) may load now, and is run rather than called `unknown`
            spec = self.registry.get(name, caller) if reason is None else None
            if spec is None:
                return ToolResult.failure(reason or f"unknown tool {name!r}")
        return self._dispatch_spec(spec, args, caller)

    def _dispatch_spec(self, spec: ToolSpec, args: JSONValue, caller: Caller) -> ToolResult:
        name = spec.name
        refusal = depth_refusal(name, caller, self.limits) or self.registry.access.refusal(caller, spec)
        if refusal is not None:
            return ToolResult.failure(refusal)
        budget = self._budget(spec, caller)
        try:
            problem = argument_problem(spec, args, budget.deadline)
        except ValidationStopped as exc:
            return ToolResult.failure(f"tool {name!r} not run: its arguments could not be validated: {exc}")
        if problem is not None:
            result = ToolResult.failure(f"invalid arguments for {name}: {problem}")
        else:
            result = self._run(spec, args, caller, budget)
        return finish(result, spec.warnings, self.limits)

    def _budget(self, spec: ToolSpec, caller: Caller) -> CallBudget:
        """The call's limits and deadline, starting now; a nested call's within its caller's."""
        budget = spec.call_budget(self.limits)
        if caller.call_depth or caller.deadline is not None:
            depth = caller.call_depth
            stack, memory = nested_stack_bytes(self.limits, depth), nested_memory_bytes(self.limits, depth)
            budget = budget.bounded(caller.deadline, stack, memory)
        return budget

    def _run(self, spec: ToolSpec, args: JSONValue, caller: Caller, budget: CallBudget) -> ToolResult:
        if isinstance(spec, OutsideToolSpec):  # an outside MCP server's tool: its server runs it
            return spec.call(args, budget.deadline)
        call = ScriptCall.limited(caller, f"tool {spec.name}", self.limits, budget)
        value: JSONValue | NoValue
        try:
            if spec.function is not None:
                value = run_python_tool(
                    spec, args, call, pool_worker(self.workers, spec.name, budget, caller.user_id)
                )
            else:
                value = self.host.call(spec.script, "run", [args], [spec.raw], call)
        except ScriptLimitError as exc:
            log.warning("tool %s stopped: %s", spec.name, exc)
            return ToolResult.failure(str(exc))
        except ScriptError as exc:
            log.info("tool %s failed: %s%s", spec.name, exc, f"\n{exc.stack}" if exc.stack else "")
            return ToolResult.failure(exc.describe(spec.yaml_path.parent))
        return normalize(
            value,
            max_visual_chars=self.limits.max_visual_chars,
            max_result_chars=self.limits.max_result_chars,
        )


__all__ = ["Dispatcher", "argument_problem", "depth_refusal", "nested_memory_bytes", "nested_stack_bytes"]
