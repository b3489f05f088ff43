"""A response's tool calls as steps of its run: recorded, marked started, run, their results recorded.

The agent loop hands each LLM response that asks for tools to `ToolSteps`
(S25.1): the response is written first, every call of it in one step; each
call runs through the one dispatch path (DESIGN rule 6), marked started by
the step before it; its result and warnings are one step, shown after it.
A resumed run's calls left without results (resume.py) go the same way,
but a call that may have run already runs again only when its tool says
`idempotent: true` (S25.3). After a stop the rest are recorded as not run.

A call a person must approve (S24.4) waits between its vetting and its run,
journaled (`_approved`). The calls of a client's own tools are not run
here: they pass the hooks (`handed`) and end the turn for the client to run
(`client_calls`), or, one refused, are answered with why (`refused`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentkernel.agent.approval_gate import ApprovalGate
from agentkernel.agent.resume import INTERRUPTED, HandedOff, Resumed, handing_off
from agentkernel.agent.steps import Emit, LoopEvent, Step, StepWriter, usage_meta
from agentkernel.identity import Caller
from agentkernel.llm.base import ChatMessage, Completion, ToolCall
from agentkernel.ports import Entry
from agentkernel.services.approval_values import Approval
from agentkernel.telemetry import genai
from agentkernel.telemetry.spans import OFF, Traced
from agentkernel.tools.call_guard import ToolCallFacts
from agentkernel.tools.dispatch import APPROVAL_ASKED, APPROVAL_DECIDED, Dispatcher, Vetted, told
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.fair_pool import FairPool
from agentkernel.util.short_text import clip

# the tool message for a call the model asked for but the user stopped first: the
# conversation must answer every tool call, or the next request is refused
NOT_RUN = "not run: the user stopped the turn"
# a client's tool call not handed to it because a hook refused another call of the same response
NOT_HANDED = "not handed to the client: a hook refused another call of the same response"
# visual blocks a tool_result record keeps, within the transcript's 256 KiB meta cap (services/memory.py)
MAX_RECORDED_VISUAL_BYTES = 200 * 1024


class ToolSteps:
    """Runs a response's tool calls as steps of the run; see the module docstring."""

    def __init__(
        self, dispatcher: Dispatcher, pool: FairPool, steps: StepWriter, gate: ApprovalGate | None = None
    ) -> None:
        self.dispatcher = dispatcher
        self.pool = pool  # where the calls run, shared fairly between users (the loop's)
        self.steps = steps
        self.gate = gate  # where a call a person must approve waits (None: such a call is denied)

    async def response(
        self,
        caller: Caller,
        completion: Completion,
        messages: list[ChatMessage],
        emit: Emit,
        stop: asyncio.Event,
        origin: str = "llm",
        wait_secs: float | None = None,
    ) -> None:
        """The completion's tool calls in order, each result appended; after a stop, the rest are not run.

        The response is recorded first, every call of it in one step (the
        completion's text and tokens with the first), so a run resumed after
        a crash knows what was asked even of the calls that never started.
        The step marks the first call started (`_calls` says why).
        """
        step = _response_step(completion, completion.tool_calls)
        first = completion.tool_calls[0].id
        await self.steps.commit(caller.session_id, caller.user_id, step, emit, {"started_call": first})
        await self.calls(
            caller,
            completion.tool_calls,
            messages,
            emit,
            stop,
            marked=first,
            origin=origin,
            wait_secs=wait_secs,
        )

    async def handed(
        self, caller: Caller, calls: tuple[ToolCall, ...]
    ) -> tuple[tuple[ToolCall, ...], dict[str, str]]:
        """The client's calls as its hooks let them be handed (`before_tool_call`, origin `client`), their
        arguments replaced where a hook said so; and why each refused one was, by call id."""
        handed: list[ToolCall] = []
        refused: dict[str, str] = {}
        for call in calls:
            args, problem = parsed_arguments(call.arguments)
            facts = ToolCallFacts(call.id, call.name, args if problem is None else call.arguments, "client")
            vet = functools.partial(self.dispatcher.before_handing, facts, caller)
            before = await self.pool.run(caller.user_id, vet)
            if before.deny is not None:
                refused[call.id] = before.deny
            elif before.replaced:
                handed.append(replace(call, arguments=json.dumps(before.args, ensure_ascii=False)))
            else:
                handed.append(call)
        return tuple(handed), refused

    def client_calls(self, caller: Caller, completion: Completion, calls: tuple[ToolCall, ...]) -> None:
        """Record the calls of the client's tools that end the turn (their results come with the next)."""
        step = Step()
        for index, call in enumerate(calls):
            meta: JSONObject = {"tool": call.name, "id": call.id, "client": True}
            if index == 0:
                meta.update(usage_meta(completion.usage))
            step.add(Entry("assistant", "tool_call", call.arguments, meta))
        self.steps.write(caller.session_id, caller.user_id, step)

    async def refused(
        self,
        caller: Caller,
        completion: Completion,
        calls: tuple[ToolCall, ...],
        refused: dict[str, str],
        messages: list[ChatMessage],
        emit: Emit,
    ) -> None:
        """A response whose calls of the client's tools were not all let through (S24.1, origin
        `client`): recorded, none handed; each refused call's result says why, the others' that they
        were not handed either, so the LLM asked again knows what happened."""
        await self.steps.commit(caller.session_id, caller.user_id, _response_step(completion, calls), emit)
        messages.append(ChatMessage.assistant(completion.text, calls))
        for call in calls:
            why = refused.get(call.id, NOT_HANDED)
            result = await self._settled(caller, call, ToolResult.failure(why), emit)
            messages.append(ChatMessage.tool(call.id, result.content, call.name))

    async def calls(
        self,
        caller: Caller,
        calls: Sequence[ToolCall],
        messages: list[ChatMessage],
        emit: Emit,
        stop: asyncio.Event,
        resumed: Resumed | None = None,
        marked: str | None = None,
        origin: str = "llm",
        wait_secs: float | None = None,
    ) -> None:
        """Run `calls` in order, each result appended; after a stop the rest are recorded as not run.

        A call is marked started (the run's `started_call`) before it runs:
        by the step before it, the response's or the previous call's result
        (`marked`: the call that step marked), so marking costs no write of
        its own. Between that step and the call nothing waits on the outside,
        and a crash there only makes a call that never ran look as if it may
        have: never a silent second run. In a `resumed` run, a call that had
        started before the crash runs again only when its tool is
        `idempotent: true`; otherwise its result is the failure INTERRUPTED
        (S25.3).
        """
        not_run = Step()
        for index, call in enumerate(calls):
            following = calls[index + 1].id if index + 1 < len(calls) else None
            if handing_off(stop):  # the call marked started never ran: the run goes on elsewhere from it
                self.steps.write(caller.session_id, caller.user_id, Step(), {"started_call": None})
                raise HandedOff
            if stop.is_set():
                meta: JSONObject = {"tool": call.name, "id": call.id, "success": False, "not_run": True}
                not_run.add(Entry("tool", "tool_result", NOT_RUN, meta))
                messages.append(ChatMessage.tool(call.id, NOT_RUN, call.name))
                continue
            if resumed is not None and resumed.may_have_run(call) and not self._idempotent(call, caller):
                result = await self._settled(caller, call, ToolResult.failure(INTERRUPTED), emit, following)
            else:
                asked = resumed is not None and call.id in resumed.asked
                result = await self._tool_call(
                    caller, _Calling(call, origin, call.id == marked, following, asked, wait_secs), emit, stop
                )
            marked = following
            messages.append(ChatMessage.tool(call.id, result.content, call.name))
        self.steps.write(caller.session_id, caller.user_id, not_run)

    def _idempotent(self, call: ToolCall, caller: Caller) -> bool:
        """Whether the call's tool, as loaded now, may run a call again that may have run (S25.3)."""
        spec = self.dispatcher.registry.get(call.name, caller)
        return spec is not None and spec.idempotent

    async def _tool_call(
        self, caller: Caller, calling: _Calling, emit: Emit, stop: asyncio.Event
    ) -> ToolResult:
        """One tool call through the one dispatch path; bad arguments go back to the model.

        Its start is recorded before it runs (the run's `started_call`; by
        the step before it when `marked`), so a run resumed after a crash
        knows the call may have had effects. A call a person must approve
        waits for the decision first (`_approved`).
        """
        call = calling.call
        args, problem = parsed_arguments(call.arguments)
        with genai.execute_tool(call.name, call.id, calling.origin, call.arguments) as traced:
            if problem is not None:
                result = ToolResult.failure(f"invalid arguments for {call.name}: {problem}")
            else:
                result = await self._dispatched(caller, calling, args, emit, stop, traced)
            told(traced, result)
        return await self._settled(caller, call, result, emit, calling.following)

    async def _dispatched(
        self,
        caller: Caller,
        calling: _Calling,
        args: JSONValue,
        emit: Emit,
        stop: asyncio.Event,
        traced: Traced,
    ) -> ToolResult:
        """The call vetted, approved when a person must decide, and run, through the one dispatch path."""
        call = calling.call
        # a call the step before it did not mark started (a resumed run's first) is marked only once
        # it is sure to run: one that waits for a person first must never look started
        vet = functools.partial(
            self.dispatcher.vet, call.name, args, caller, calling.origin, call.id, run=calling.marked
        )
        found = await self.pool.run(caller.user_id, vet)
        if isinstance(found, Vetted) and found.ask is not None:
            return await self._approved(caller, found, emit, stop, calling, traced)
        if isinstance(found, Vetted):
            self.steps.write(caller.session_id, caller.user_id, Step(), {"started_call": call.id})
            return await self.pool.run(
                caller.user_id, functools.partial(self.dispatcher.run_vetted, found, caller)
            )
        return found

    async def _approved(
        self,
        caller: Caller,
        vetted: Vetted,
        emit: Emit,
        stop: asyncio.Event,
        calling: _Calling,
        traced: Traced = OFF,
    ) -> ToolResult:
        """The call run once a person approved it (S24.4), or its failed result saying why not.

        While it waits the run is `waiting_approval` (its `waiting_call`) and
        not `started_call`: a run resumed meanwhile asks again, and finds the
        same approval in the store (`recorded`: its record is in the journal
        already, from before the restart). The decision is recorded, then
        the call runs, marked started, as any other.
        """
        call = vetted.call
        if self.gate is None:
            return ToolResult.failure(
                f"tool {call.tool!r} not run: it needs a person's approval, and none can be asked here"
            )
        run_id = self.steps.run_id() or f"run-{uuid.uuid4()}"  # a chat with no run journal (the terminal)
        # waiting, not started, before the approval exists: a crash once it does never finds the call
        # marked started (`interrupted`), only waiting, and the next server asks for the same approval
        self.steps.write(caller.session_id, caller.user_id, Step(), _waiting(call.id))
        asked = await self.pool.run(caller.user_id, functools.partial(self.gate.ask, vetted, caller, run_id))
        decision = asked.decision
        traced.event(APPROVAL_ASKED, {"agentkernel.approval.decided_already": decision is not None})
        if decision is None:
            assert asked.approval is not None
            if not calling.asked:  # a resumed run's is recorded already
                await self.steps.commit(caller.session_id, caller.user_id, _asking(asked.approval), emit)
            decision = await self.gate.wait(asked.approval, stop, calling.wait_secs)
        if decision is None:  # stopped while it waited; a run handed off waits again where it goes on
            if handing_off(stop):
                raise HandedOff
            self.steps.write(caller.session_id, caller.user_id, Step(), {"waiting_call": None})
            return ToolResult.failure(NOT_RUN)
        traced.event(APPROVAL_DECIDED, {"agentkernel.approval.approved": decision.approved})
        shown = LoopEvent(
            "approval_decided", {"call_id": call.id, "approved": decision.approved, "reason": decision.reason}
        )
        meta: JSONObject = {"id": call.id, "tool": call.tool, "approved": decision.approved}
        if decision.args is not None:
            meta["args"] = decision.args
        step = Step().add(Entry("system", "approval_decision", decision.reason, meta), shown)
        started = {"waiting_call": None, "started_call": call.id if decision.approved else None}
        await self.steps.commit(caller.session_id, caller.user_id, step, emit, started)
        run = functools.partial(self.dispatcher.run_vetted, vetted, caller, decision)
        return await self.pool.run(caller.user_id, run)

    async def _settled(
        self, caller: Caller, call: ToolCall, result: ToolResult, emit: Emit, following: str | None = None
    ) -> ToolResult:
        """A call's result and its warnings recorded in one step, then shown; the step marks the
        `following` call started (`_calls`)."""
        shown = LoopEvent("tool_result", {"id": call.id, "name": call.name, **result.to_json()})
        blocks = (LoopEvent("visual", {"tool": call.name, "block": block}) for block in result.visual)
        step = Step()
        for role, kind, content, meta in result.hook_entries:  # the tool-call hooks' calls (S24)
            step.add(Entry(role, kind, content, meta))
        step.add(Entry("tool", "tool_result", result.content, _result_meta(call, result)), shown, *blocks)
        for notice in result.notices:
            step.add(Entry("system", "notice", notice), LoopEvent("notice", {"text": notice}))
        for warning in result.warnings:
            said = LoopEvent("warning", {"tool": call.name, "message": warning})
            step.add(Entry("system", "warning", warning, {"tool": call.name}), said)
        await self.steps.commit(
            caller.session_id,
            caller.user_id,
            step,
            emit,
            None if following is None else {"started_call": following},
        )
        return result


@dataclass(frozen=True)
class _Calling:
    """One call of a response as it is about to be made: where from, and what the journal has of it."""

    call: ToolCall
    origin: str  # as its hooks see it (S24.1): `llm`, or `subagent` for a sub-agent's LLM
    marked: bool  # marked started by the step before it
    following: str | None  # the call its result's step marks started
    asked: bool  # its approval is recorded in the run's journal already (a resumed run)
    wait_secs: float | None = None  # how long it may wait for a person's decision (None: the timeout)


def _response_step(completion: Completion, calls: Sequence[ToolCall]) -> Step:
    """The step that records an LLM response asking for `calls`, and shows each: the completion's text
    and tokens ride on the first call's record."""
    step = Step()
    for index, call in enumerate(calls):
        meta: JSONObject = {"tool": call.name, "id": call.id}
        if index == 0:
            meta.update(usage_meta(completion.usage))
            if completion.text:
                meta["text"] = completion.text
        shown = LoopEvent("tool_call", {"id": call.id, "name": call.name, "arguments": call.arguments})
        step.add(Entry("assistant", "tool_call", call.arguments, meta), shown)
    return step


def _waiting(call_id: str) -> dict[str, Any]:
    """The run's columns while `call_id` waits: waiting on it, no call started."""
    return {"waiting_call": call_id, "started_call": None}


def _asking(approval: Approval) -> Step:
    """The step that records an approval asked, and shows it: `approval_required` (S24.6)."""
    call: JSONObject = {"id": approval.call_id, "tool": approval.tool, "args": approval.args}
    shown = LoopEvent(
        "approval_required",
        {
            "run_id": approval.run_id,
            "call": call,
            "question": approval.question,
            "expires_at": approval.expires_at,
        },
    )
    meta: JSONObject = {**call, "run_id": approval.run_id, "expires_at": approval.expires_at}
    return Step().add(Entry("system", "approval", approval.question, meta), shown)


def _result_meta(call: ToolCall, result: ToolResult) -> JSONObject:
    """A tool result's transcript meta: its visual blocks too, for a person reading the session again.

    They are never replayed to the LLM (S6.1). Blocks too big for a record's
    meta (the transcript caps it, services/memory.py) are left out and their
    size noted, so the record itself is never lost.
    """
    meta: JSONObject = {"tool": call.name, "id": call.id, "success": result.success}
    if result.visual:
        size = len(json.dumps(result.visual, ensure_ascii=False).encode())
        if size <= MAX_RECORDED_VISUAL_BYTES:
            meta["visual"] = list(result.visual)
        else:
            meta["visual_omitted_bytes"] = size
    return meta


def parsed_arguments(text: str) -> tuple[JSONValue, str | None]:
    """The model's argument text as JSON, or why it is not (goes back to the model)."""
    if not text.strip():
        return {}, None
    try:
        value: Any = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, f"arguments are not valid JSON ({exc}): {clip(text, 200)}"
    return value, None


__all__ = ["MAX_RECORDED_VISUAL_BYTES", "NOT_RUN", "ToolSteps", "parsed_arguments"]
