"""The one path every tool call takes (DESIGN rule 6, S24.5).

An LLM's tool call, a script's `call_tool`, a sub-agent's, an MCP client's,
the tools panel's and a continuation all come here: look the tool up, check
access, ask the caller's `before_tool_call` hooks (deny, new arguments, a
question for a person), validate the arguments, wait for a person's
decision when the tool's YAML says `approval: always` or a hook asked, run
the script with its limits, normalise the result, apply warnings and
truncation, let `after_tool_call` hooks replace it, record it in the
session's history. Nothing escapes as an exception.

The agent loop takes the call in two parts when a person must decide
(`vet`, then `run_vetted`): its run waits for the decision journaled, across
restarts (agent/approvals.py). A caller on an event loop that can ask a
person itself passes an `Asker` to `acall` (our MCP server asks its client
through elicitation); every other path waits here, blocking, by its
caller's deadline (`ApprovalDesk`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Protocol

from agentkernel.config import CallBudget, KernelLimits, ToolSpec, describe_validation_error
from agentkernel.errors import ScriptError, ScriptLimitError
from agentkernel.helpers.table import ScriptCall
from agentkernel.identity import Caller
from agentkernel.schemas.bounds import ValidationStopped, bounded_errors
from agentkernel.schemas.plain import surely_valid
from agentkernel.scripting.host import ScriptHost
from agentkernel.services.kernel_loop import KernelLoop
from agentkernel.telemetry import genai, metrics
from agentkernel.telemetry.spans import Traced, current
from agentkernel.tools.call_guard import BeforeCall, CallGuard, Entries, ToolCallFacts
from agentkernel.tools.history import ToolResultHistory
from agentkernel.tools.isolated import WorkerPool
from agentkernel.tools.python_tools import pool_worker, run_python_tool
from agentkernel.tools.registry import ToolRegistry
from agentkernel.tools.results import ToolResult, finish, normalize
from agentkernel.tools.sources.mcp.outside import OutsideToolSpec
from agentkernel.types import JSONValue, NoValue
from agentkernel.util.fair_pool import FairPool
from agentkernel.util.lazy_log import LazyLogger

log = LazyLogger("agentkernel.dispatch")
MAX_REPORTED_ARG_ERRORS = 3
MAX_COUNTED_ARG_ERRORS = 100  # errors of one call's arguments counted for "and N more"; past it, "more than"
MIN_NESTED_STACK_BYTES = 64 << 10  # the least JS stack a nested call gets (limits.stack_limit_kb's minimum)
MIN_NESTED_MEMORY_BYTES = 8 << 20  # the least memory a nested call gets, however deep
APPROVAL_ASKED = "agentkernel.approval.asked"  # the events of a call's span while a person decides
APPROVAL_DECIDED = "agentkernel.approval.decided"


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
    Arguments schemas/plain.py proves valid (within its few steps) need no validator.
    """
    if certainly_valid(spec, args, deadline):
        return None
    found = bounded_errors(spec.validator, args, deadline, MAX_COUNTED_ARG_ERRORS + 1)
    if not found:
        return None
    errors = sorted(found[:MAX_COUNTED_ARG_ERRORS], key=lambda e: [str(p) for p in e.path])
    shown = "; ".join(describe_validation_error(e) for e in errors[:MAX_REPORTED_ARG_ERRORS])
    more = len(errors) - MAX_REPORTED_ARG_ERRORS
    if len(found) > MAX_COUNTED_ARG_ERRORS:
        return f"{shown}; and more than {more} more"
    return shown + (f"; and {more} more" if more > 0 else "")


def certainly_valid(spec: ToolSpec, args: JSONValue, deadline: float | None) -> bool:
    """Whether schemas/plain.py proves `args` valid against the tool's `parameters` (jsonschema would
    pass them too), before `deadline`, past which validating stops instead."""
    return surely_valid(spec.parameters, args) and (deadline is None or time.monotonic() <= deadline)


@dataclass(frozen=True)
class Vetted:
    """A call its hooks let through, its arguments valid: to run now, or once a person decides (`ask`)."""

    spec: ToolSpec
    call: ToolCallFacts  # with the arguments to run with (a hook's `replace_args` applied)
    ask: str | None = None  # the question for a person (a hook's `ask`, or the tool's `approval: always`)
    notices: tuple[str, ...] = ()
    entries: Entries = ()


@dataclass(frozen=True)
class Decision:
    """A person's decision on a call (S24.4): run it (with `args`, an edit's, else its own), or not."""

    approved: bool
    args: JSONValue = None
    reason: str = ""


class ApprovalDesk(Protocol):
    """Where a call waits for a person off the agent loop (a script's `call_tool`, the tools panel, an
    MCP client…): the decision, or a denial saying why none came, by `caller.deadline` at the latest."""

    def decide(self, vetted: Vetted, caller: Caller) -> Decision: ...


_BY_THE_CALLER = Decision(True, reason="run by the person it would ask")


Asker = Callable[[Vetted, Caller], Awaitable[Decision]]
"""Asks a person about a vetted call from the event loop (`Dispatcher.acall`): the decision, or a
denial saying why none came (its reason worded as the call's result ends: `denied: …`). Never raises
but to be cancelled."""


async def the_caller_approves(vetted: Vetted, caller: Caller) -> Decision:
    """The asker of a call its runner approves by running it (the tools panel, a table's next page of a
    call that ran): the person who would be asked is the one who asked for it."""
    return _BY_THE_CALLER


def approval_question(spec: ToolSpec) -> str:
    """The question a tool whose YAML says `approval: always` asks, when no hook asked its own."""
    return f"Run the tool {spec.name!r} with these arguments?"


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
        guard: CallGuard | None = None,
        desk: ApprovalDesk | None = None,
    ) -> None:
        self.registry = registry
        self.host = host
        self.limits = limits
        self.history = history
        self.workers = workers  # the processes python_tool built-ins do their work in
        self.pool = pool  # where asynchronous calls run, shared fairly between users
        self.home = home  # told which event loop runs the kernel's async work (services/kernel_loop.py)
        self.guard = guard  # the callers' tool-call hooks (S24.1); None: no hooks run
        self.desk = desk  # where a call off the agent loop waits for a person (None: it is denied)

    def call(
        self,
        name: str,
        args: JSONValue,
        caller: Caller,
        origin: str = "call_tool",
        call_id: str = "",
        *,
        approved: bool = False,
    ) -> ToolResult:
        """Dispatch a registered tool synchronously (scripts are sync: DESIGN rule 7); a call a person
        must approve waits for the decision at the desk, unless the caller is that person (`approved`)."""
        facts = ToolCallFacts(call_id, name, args, origin)
        given = _BY_THE_CALLER if approved else None
        with genai.execute_tool(name, call_id, origin, args) as traced:
            result = self._protected(
                name, lambda: self._decided(self._vet(name, facts, caller), caller, given), caller
            )
            told(traced, result)
        return result

    def call_spec(
        self,
        spec: ToolSpec,
        args: JSONValue,
        caller: Caller,
        origin: str = "panel",
        *,
        approved: bool = False,
    ) -> ToolResult:
        """Dispatch a tool loaded from a file outside the registry (`tool run PATH.yaml`)."""
        facts = ToolCallFacts("", spec.name, args, origin)
        given = _BY_THE_CALLER if approved else None
        with genai.execute_tool(spec.name, "", origin, args) as traced:
            result = self._protected(
                spec.name, lambda: self._decided(self._vet_spec(spec, facts, caller), caller, given), caller
            )
            told(traced, result)
        return result

    def vet(
        self, name: str, args: JSONValue, caller: Caller, origin: str, call_id: str, *, run: bool = True
    ) -> ToolResult | Vetted:
        """The first part of a call the agent loop makes: its failure, or it vetted. A vetted call
        that needs no person is run at once when `run` (one hop for the usual case); otherwise it is
        returned for the loop to wait on, journaled, or to mark started, and run with `run_vetted`."""
        facts = ToolCallFacts(call_id, name, args, origin)
        found = self._safely(name, lambda: self._vet(name, facts, caller))
        if run and isinstance(found, Vetted) and found.ask is None:
            return self.run_vetted(found, caller)
        if isinstance(found, ToolResult):
            self.history.record(caller, name, found)
            _count(name, found)
        return found

    def before_handing(self, call: ToolCallFacts, caller: Caller) -> BeforeCall:
        """A client's tool call about to be handed to the client (origin `client`, S24.1): its
        arguments as the hooks leave them, or why it is not handed. The client runs it, so no person
        can be asked first here: a hook's `ask` refuses it, saying so."""
        if self.guard is None or not self.guard.watches(caller, "before_tool_call"):
            return BeforeCall(call.args)
        try:
            before = self.guard.before(replace(call, origin="client"), caller)
        except Exception as exc:  # crash protection, as for any call
            log.exception("tool %s: its hooks crashed in the kernel", call.tool)
            return BeforeCall(call.args, deny=f"not handed to the client: {type(exc).__name__}: {exc}")
        if before.deny is None and before.ask is not None:
            why = f"it needs a person's approval ({before.ask}), and a client's tool cannot wait for one"
            return replace(before, deny=why)
        return before

    def run_vetted(self, vetted: Vetted, caller: Caller, decision: Decision | None = None) -> ToolResult:
        """Run a vetted call (after a person's `decision`, when one was asked): an edit's arguments are
        validated again; a denial is the call's failed result, with the reason."""
        name = vetted.spec.name
        return self._protected(name, lambda: self._decided(vetted, caller, decision), caller)

    def _protected(self, name: str, dispatch: Callable[[], ToolResult], caller: Caller) -> ToolResult:
        started = time.perf_counter()
        result = self._safely(name, dispatch)
        assert isinstance(result, ToolResult)
        self.history.record(caller, name, result)
        _count(name, result)
        log.debug(
            "tool %s: success=%s in %.2f ms",
            name,
            result.success,
            (time.perf_counter() - started) * 1000,
        )
        return result

    @staticmethod
    def _safely(name: str, dispatch: Callable[[], ToolResult | Vetted]) -> ToolResult | Vetted:
        try:
            return dispatch()
        except Exception as exc:  # crash protection: a kernel bug must not end the turn
            log.exception("tool %s crashed in the kernel", name)
            return ToolResult.failure(f"tool {name!r} failed inside the kernel: {type(exc).__name__}: {exc}")

    async def acall(
        self,
        name: str,
        args: JSONValue,
        caller: Caller,
        pool: FairPool | None = None,
        origin: str = "call_tool",
        *,
        asker: Asker | None = None,
    ) -> ToolResult:
        """Dispatch from the event loop on a worker (S21.3): `pool`, else the dispatcher's.

        The call waits in its user's queue of the pool (fair_pool.py): never
        on the event loop's default threads, which every other user shares.
        With an `asker`, a call a person must approve is vetted on a worker,
        the asker awaited on the event loop (no worker held while a person
        thinks), then the call run on a worker; without one it waits at the
        desk, blocking its worker.
        """
        import asyncio  # only the agent loop dispatches asynchronously; `tool run` never needs it

        if self.home is not None:
            self.home.adopt(asyncio.get_running_loop())
        workers = pool or self.pool
        user = caller.user_id
        if asker is None:
            return await workers.run(user, functools.partial(self.call, name, args, caller, origin))
        with genai.execute_tool(name, "", origin, args) as traced:
            result = await self._asked(name, args, caller, workers, origin, asker, traced)
            told(traced, result)
        return result

    async def _asked(
        self,
        name: str,
        args: JSONValue,
        caller: Caller,
        workers: FairPool,
        origin: str,
        asker: Asker,
        traced: Traced,
    ) -> ToolResult:
        """`acall`'s call with an asker: vetted, the asker awaited when a person must decide, then run."""
        user = caller.user_id
        found = await workers.run(user, functools.partial(self.vet, name, args, caller, origin, ""))
        if isinstance(found, ToolResult):  # failed, or run at once: nobody needed asking
            return found
        traced.event(APPROVAL_ASKED)
        try:
            decision = await asker(found, caller)
        except Exception as exc:  # an asker's bug denies the call; it must not end the caller's turn
            log.exception("tool %s: asking a person about the call failed", name)
            decision = Decision(False, reason=f"denied: asking a person failed: {type(exc).__name__}: {exc}")
        traced.event(APPROVAL_DECIDED, {"agentkernel.approval.approved": decision.approved})
        return await workers.run(user, functools.partial(self.run_vetted, found, caller, decision))

    def _vet(self, name: str, facts: ToolCallFacts, caller: Caller) -> ToolResult | Vetted:
        spec = self.registry.get(name, caller)
        if spec is None:
            reason = self.registry.unavailable(name, caller)
            # asking why compiles the scripts again: one whose check was cut short by its deadline (a
            # busy machine) may load now, and is run rather than called `unknown`
            spec = self.registry.get(name, caller) if reason is None else None
            if spec is None:
                return ToolResult.failure(reason or f"unknown tool {name!r}")
        return self._vet_spec(spec, facts, caller)

    def _vet_spec(self, spec: ToolSpec, facts: ToolCallFacts, caller: Caller) -> ToolResult | Vetted:
        """Access, the `before_tool_call` hooks, the arguments (after any hook replaced them), and
        whether a person must decide first."""
        name = spec.name
        refusal = depth_refusal(name, caller, self.limits) or self.registry.access.refusal(caller, spec)
        if refusal is not None:
            return ToolResult.failure(refusal)
        facts = facts.of_tool(spec.raw)
        if isinstance(spec, OutsideToolSpec):  # a consumed MCP server's tool, whoever asked for it
            facts = replace(facts, origin="outside_mcp")
        ask: str | None = None
        notices: tuple[str, ...] = ()
        entries: Entries = ()
        if self.guard is not None and self.guard.watches(caller, "before_tool_call"):
            before = self.guard.before(facts, caller)
            notices, entries = before.notices, before.entries
            if before.deny is not None:
                return _hooked(self._failed(spec, before.deny), notices, entries)
            facts, ask = replace(facts, args=before.args), before.ask
        problem = self._argument_problem(spec, facts.args, caller)
        if problem is not None:
            return _hooked(self._failed(spec, problem), notices, entries)
        if ask is None and spec.approval == "always":
            ask = approval_question(spec)
        return Vetted(spec, facts, ask, notices, entries)

    def _failed(self, spec: ToolSpec, message: str) -> ToolResult:
        """A call of `spec` that did not run, its `warnings:` rules applied (S5) as to any failure."""
        return finish(ToolResult.failure(message), spec.warnings, self.limits)

    def _argument_problem(self, spec: ToolSpec, args: JSONValue, caller: Caller) -> str | None:
        # the call's own deadline is later than now: only its caller's can have passed
        if certainly_valid(spec, args, caller.deadline):
            return None
        try:
            problem = argument_problem(spec, args, self._budget(spec, caller).deadline)
        except ValidationStopped as exc:
            return f"tool {spec.name!r} not run: its arguments could not be validated: {exc}"
        return None if problem is None else f"invalid arguments for {spec.name}: {problem}"

    def _decided(
        self, vetted: ToolResult | Vetted, caller: Caller, decision: Decision | None = None
    ) -> ToolResult:
        """A vetted call run (asked of the desk first when a person must decide and nobody has)."""
        if isinstance(vetted, ToolResult):
            return vetted
        if vetted.ask is not None and decision is None:
            traced = current()
            traced.event(APPROVAL_ASKED)
            decision = (
                self.desk.decide(vetted, caller)
                if self.desk is not None
                else Decision(
                    False, reason="denied: it needs a person's approval, and nobody can be asked here"
                )
            )
            traced.event(APPROVAL_DECIDED, {"agentkernel.approval.approved": decision.approved})
        spec, facts = vetted.spec, vetted.call
        if decision is not None and not decision.approved:
            refused = self._failed(spec, f"tool {spec.name!r} not run: {decision.reason}")
            return _hooked(refused, vetted.notices, vetted.entries)
        if decision is not None and decision.args is not None and decision.args != facts.args:
            facts = replace(facts, args=decision.args)
            problem = self._argument_problem(spec, facts.args, caller)
            if problem is not None:
                return _hooked(self._failed(spec, problem), vetted.notices, vetted.entries)
        result = finish(
            self._run(spec, facts.args, caller, self._budget(spec, caller)), spec.warnings, self.limits
        )
        result = _hooked(result, vetted.notices, vetted.entries)
        if self.guard is None or not self.guard.watches(caller, "after_tool_call"):
            return result
        after = self.guard.after(facts, result, caller)
        return _hooked(after.result, after.notices, after.entries)

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
                value = self.host.call(spec.script, "run", [args], [spec.raw], call, spec.script_stamp)
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


def _count(name: str, result: ToolResult) -> None:
    """The call in the metrics (S26.2): by its tool's name, or `unknown` for a name no tool has (an LLM's
    invention must not become a label)."""
    unknown = not result.success and result.error == f"unknown tool {name!r}"
    metrics.tool_called("unknown" if unknown else name, result.success)


def told(traced: Traced, result: ToolResult) -> None:
    """A tool call's span told its outcome: `success` or `error`, its warnings (their texts, and its
    result, only with `telemetry.capture_content`)."""
    if not traced.recording:
        return
    traced.set(
        {
            "agentkernel.tool.outcome": "success" if result.success else "error",
            "agentkernel.tool.warnings": len(result.warnings),
            "agentkernel.tool.warning_texts": genai.content(result.warnings) if result.warnings else None,
            "gen_ai.tool.call.result": genai.content(result.content),
        }
    )
    if not result.success:
        traced.fail("tool_error")


def _hooked(result: ToolResult, notices: tuple[str, ...], entries: Entries) -> ToolResult:
    """`result` carrying what the hooks said of its call (recorded and shown with it)."""
    if notices or entries:
        result.notices.extend(notices)
        result.hook_entries.extend(entries)
    return result


__all__ = [
    "APPROVAL_ASKED",
    "APPROVAL_DECIDED",
    "ApprovalDesk",
    "Asker",
    "Decision",
    "Dispatcher",
    "Vetted",
    "approval_question",
    "argument_problem",
    "depth_refusal",
    "nested_memory_bytes",
    "nested_stack_bytes",
    "the_caller_approves",
    "told",
]
