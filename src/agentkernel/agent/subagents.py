"""The sub-agent service (S17): what `run_subagent` reaches to start a child agent and wait for it.

A sub-agent is a process like any other (agent/processes.py): a child of the
calling process, spending from its budget group, in its session, with the
tools its template (or the script) gives it, never more than the parent
may use. It runs the agent loop once on its task and is terminated at
the end, whatever the end was: an answer, a failure, the script's deadline.

The script waits on its worker thread; the child's loop runs on the
kernel's event loop (services/kernel_loop.py), where the LLM provider's
connections live, with a worker pool of its own for its tools and hooks
(not the kernel's script pool), so a script waiting for a sub-agent on a
worker of that pool never waits for a worker of it. The wait ends at the
script's deadline: the child's loop is then cancelled and the process
terminated, and every tool call it makes is bounded by that deadline too
(`Process.deadline`).

The service knows the kernel only through the parts it is handed (no
import of the `Kernel` face): the process table, a template lookup, a
maker of loop settings and of agent loops.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from agentkernel.agent.loop import AgentLoop, EndReason, LoopEvent, LoopResult, LoopSettings
from agentkernel.agent.processes import Process, ProcessError, ProcessTable
from agentkernel.budget import BUDGET_EXHAUSTED, earlier
from agentkernel.config import KernelLimits
from agentkernel.config.mcp_servers import allows, grant
from agentkernel.config.templates import TemplateSpec
from agentkernel.errors import ConfigError, HelperError
from agentkernel.identity import Caller
from agentkernel.llm.base import ChatMessage
from agentkernel.llm.structured import (
    ATTEMPTS,
    AnswerInvalid,
    StructuredOutputInvalid,
    ValidationStopped,
    correction_request,
    parse_valid,
    schema_instruction,
)
from agentkernel.ports import SubagentRequest
from agentkernel.services.kernel_loop import KernelLoop
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.fair_pool import FairPool

log = logging.getLogger("agentkernel.subagents")

HELPER = "run_subagent"
SUBAGENT_TEMPLATE = "subagent"  # the template name of a sub-agent made from `instructions`
WORKER_THREADS = 2  # a sub-agent's own threads for its tools and hooks (one call at a time, plus a hook)


@dataclass(frozen=True)
class SubagentResult:
    pid: str
    answer: str
    data: JSONValue = None

    def for_script(self) -> JSONObject:
        """`{pid, answer, data}` (S17)."""
        return {"pid": self.pid, "answer": self.answer, "data": self.data}


def _error(text: str) -> HelperError:
    return HelperError(f"{HELPER}: {text}")


class SubagentService:
    """Starts sub-agents for callers and waits for their answers; see the module docstring."""

    def __init__(
        self,
        *,
        processes: ProcessTable,
        temp_root: Path,
        limits: KernelLimits,
        home: KernelLoop,
        template: Callable[[str], TemplateSpec],
        tool_names: Callable[[], set[str]],
        settings: Callable[[TemplateSpec], LoopSettings],
        agent_loop: Callable[[FairPool], AgentLoop],
    ) -> None:
        self.processes = processes
        self.temp_root = temp_root
        self.limits = limits
        self.home = home
        self._template = template
        self._tool_names = tool_names
        self._settings = settings
        self._agent_loop = agent_loop

    # -- before the child starts ---------------------------------------------------------------

    def _parent(self, caller: Caller) -> Process | None:
        """The caller's process; None for the kernel itself (a tool run from the terminal: every tool).

        A caller limited to some tools whose process is not running (it
        ended, or never was) gets no sub-agent: a child without a parent
        would spend from no one's budget.
        """
        parent = self.processes.get(caller.pid) if caller.pid is not None else None
        if parent is None and caller.allowed_tools is not None:
            raise _error(f"the calling process {caller.pid} is not running")
        if parent is not None and parent.depth >= self.limits.max_subagent_depth:
            raise _error(
                f"sub-agents nested {parent.depth + 1} deep, more than limits.max_subagent_depth "
                f"({self.limits.max_subagent_depth}); does a sub-agent start sub-agents of itself?"
            )
        if parent is not None and parent.budget.exhausted:
            raise _error(BUDGET_EXHAUSTED)
        return parent

    def _tools(
        self, request: SubagentRequest, caller: Caller, template: TemplateSpec | None
    ) -> tuple[str, ...]:
        """The child's tools: `tools`, else the template's (or the parent's); never beyond the parent's."""
        allowed = caller.allowed_tools
        if request.tools is not None:
            known = self._tool_names() if allowed is None else allowed
            for index, name in enumerate(request.tools):
                if name not in known and not (allowed is not None and allows(allowed, name)):
                    whose = "loaded" if allowed is None else f"that {caller.template or 'the caller'} may use"
                    raise _error(f"tools[{index}]: {name!r} is not a tool {whose}")
            return request.tools
        if template is not None:
            return tuple(t for t in template.tools if allowed is None or t in allowed)
        return tuple(sorted(allowed if allowed is not None else self._tool_names()))

    def _child_template(self, request: SubagentRequest, caller: Caller) -> TemplateSpec:
        if request.template is None:
            assert request.instructions is not None  # the helper makes sure of one or the other
            spec = TemplateSpec(name=SUBAGENT_TEMPLATE, instructions=request.instructions)
            return replace(spec, tools=self._tools(request, caller, None))
        try:
            spec = self._template(request.template)
        except ConfigError as exc:
            raise _error(f"template: {exc.reason}") from None
        allowed = caller.allowed_tools  # its MCP servers too only narrow: those the parent may use
        servers = tuple(s for s in spec.mcp_servers if allowed is None or grant(s.name) in allowed)
        return replace(spec, tools=self._tools(request, caller, spec), mcp_servers=servers)

    # -- the run -------------------------------------------------------------------------------

    def run(self, caller: Caller, request: SubagentRequest, deadline: float | None) -> SubagentResult:
        """Start the child, wait for its answer until `deadline` (time.monotonic()), end it in any case."""
        parent = self._parent(caller)
        template = self._child_template(request, caller)
        settings = replace(self._settings(template), call_hooks=caller.hooks)  # its caller's guard too
        deadline = earlier(deadline, caller.deadline)
        try:
            child = self.processes.spawn(
                template,
                user_id=caller.user_id,
                session_id=caller.session_id,
                parent=parent,
                name=request.name,
                temp_root=self.temp_root,
                deadline=deadline,
            )
        except ProcessError as exc:
            raise _error(str(exc)) from None
        try:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            return self.home.run(lambda: self._converse(child, settings, request), timeout)
        except TimeoutError:
            raise _error(
                f"sub-agent {child.name} ({child.pid}) was stopped at the script's deadline (timeout_secs)"
            ) from None
        finally:
            self.processes.terminate(child.pid)

    async def _converse(
        self, child: Process, settings: LoopSettings, request: SubagentRequest
    ) -> SubagentResult:
        """The child's run on its task; with `output_schema`, up to ATTEMPTS answers until one validates."""

        errors: list[tuple[str, object]] = []  # each error event's message and code

        async def emit(event: LoopEvent) -> None:
            if event.kind == "error":
                errors.append((str(event.data.get("message")), event.data.get("code")))

        pool = FairPool(WORKER_THREADS, name=f"subagent-{child.name}")
        loop = self._agent_loop(pool)
        try:
            history: list[ChatMessage] = []  # the child's conversation so far
            text = _task_text(request)
            problem = ""
            for _ in range(ATTEMPTS if request.output_schema is not None else 1):
                result = await loop.run(child, settings, history, text, emit)
                answer = _answer(child, result, errors)
                if request.output_schema is None:
                    return SubagentResult(child.pid, answer)
                try:  # off the event loop, which serves everyone: a validation may take up to the deadline
                    valid = functools.partial(parse_valid, answer, request.output_schema, child.deadline)
                    data = await pool.run(child.user_id, valid)
                    return SubagentResult(child.pid, answer, data)
                except AnswerInvalid as exc:  # asked again as llm_json asks, the problem fed back
                    problem = str(exc)
                except ValidationStopped as exc:
                    raise _error(f"output_schema: {exc}") from None
                history, text = result.history, correction_request(problem)
            raise _error(str(StructuredOutputInvalid(ATTEMPTS, problem)))
        finally:
            pool.shutdown()


def _task_text(request: SubagentRequest) -> str:
    if request.output_schema is None:
        return request.task
    return f"{request.task}\n\n{schema_instruction(request.output_schema)}"


def _answer(child: Process, result: LoopResult, errors: list[tuple[str, object]]) -> str:
    """The run's answer; a run that ended without one is the script's error, saying why (a quota's
    refusal in its own words, `quota exhausted: …`, as `llm()` throws it)."""
    if result.reason is EndReason.JOB_DONE and result.answer is not None:
        return result.answer
    if result.reason is EndReason.BUDGET_EXHAUSTED:
        raise _error(BUDGET_EXHAUSTED)
    if errors and errors[-1][1] == "quota_exhausted":
        raise HelperError(errors[-1][0])
    why = f": {errors[-1][0]}" if errors else ""
    raise _error(f"sub-agent {child.name} ended with {result.reason.value}{why}")


__all__ = ["SUBAGENT_TEMPLATE", "SubagentRequest", "SubagentResult", "SubagentService"]
