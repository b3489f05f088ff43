"""A response's tool calls as steps of its run: recorded, marked started, run, their results recorded.

The agent loop hands each LLM response that asks for tools to `ToolSteps`
(S25.1): the response is written first, every call of it in one step; each
call runs through the one dispatch path (DESIGN rule 6), marked started by
the step before it; its result and warnings are one step, shown after it.
A resumed run's calls left without results (resume.py) go the same way,
but a call that may have run already runs again only when its tool says
`idempotent: true` (S25.3). After a stop the rest are recorded as not run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from agentkernel.agent.resume import INTERRUPTED, HandedOff, Resumed, handing_off
from agentkernel.agent.steps import Emit, LoopEvent, Step, StepWriter, usage_meta
from agentkernel.identity import Caller
from agentkernel.llm.base import ChatMessage, Completion, ToolCall
from agentkernel.ports import Entry
from agentkernel.tools.dispatch import Dispatcher
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.fair_pool import FairPool
from agentkernel.util.short_text import clip

# the tool message for a call the model asked for but the user stopped first: the
# conversation must answer every tool call, or the next request is refused
NOT_RUN = "not run: the user stopped the turn"
# visual blocks a tool_result record keeps, within the transcript's 256 KiB meta cap (services/memory.py)
MAX_RECORDED_VISUAL_BYTES = 200 * 1024


class ToolSteps:
    """Runs a response's tool calls as steps of the run; see the module docstring."""

    def __init__(self, dispatcher: Dispatcher, pool: FairPool, steps: StepWriter) -> None:
        self.dispatcher = dispatcher
        self.pool = pool  # where the calls run, shared fairly between users (the loop's)
        self.steps = steps

    async def response(
        self,
        caller: Caller,
        completion: Completion,
        messages: list[ChatMessage],
        emit: Emit,
        stop: asyncio.Event,
    ) -> None:
        """The completion's tool calls in order, each result appended; after a stop, the rest are not run.

        The response is recorded first, every call of it in one step (the
        completion's text and tokens with the first), so a run resumed after
        a crash knows what was asked even of the calls that never started.
        The step marks the first call started (`_calls` says why).
        """
        step = Step()
        for index, call in enumerate(completion.tool_calls):
            meta: JSONObject = {"tool": call.name, "id": call.id}
            if index == 0:
                meta.update(usage_meta(completion.usage))
                if completion.text:
                    meta["text"] = completion.text
            shown = LoopEvent("tool_call", {"id": call.id, "name": call.name, "arguments": call.arguments})
            step.add(Entry("assistant", "tool_call", call.arguments, meta), shown)
        first = completion.tool_calls[0].id
        await self.steps.commit(caller.session_id, caller.user_id, step, emit, {"started_call": first})
        await self.calls(caller, completion.tool_calls, messages, emit, stop, marked=first)

    async def calls(
        self,
        caller: Caller,
        calls: Sequence[ToolCall],
        messages: list[ChatMessage],
        emit: Emit,
        stop: asyncio.Event,
        resumed: Resumed | None = None,
        marked: str | None = None,
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
                result = await self._tool_call(caller, call, emit, call.id == marked, following)
            marked = following
            messages.append(ChatMessage.tool(call.id, result.content, call.name))
        self.steps.write(caller.session_id, caller.user_id, not_run)

    def _idempotent(self, call: ToolCall, caller: Caller) -> bool:
        """Whether the call's tool, as loaded now, may run a call again that may have run (S25.3)."""
        spec = self.dispatcher.registry.get(call.name, caller)
        return spec is not None and spec.idempotent

    async def _tool_call(
        self, caller: Caller, call: ToolCall, emit: Emit, marked: bool, following: str | None
    ) -> ToolResult:
        """One tool call through the one dispatch path; bad arguments go back to the model.

        Its start is recorded before it runs (the run's `started_call`; by
        the step before it when `marked`), so a run resumed after a crash
        knows the call may have had effects.
        """
        args, problem = _parse_arguments(call.arguments)
        if problem is not None:
            result = ToolResult.failure(f"invalid arguments for {call.name}: {problem}")
        else:
            if not marked:
                self.steps.write(caller.session_id, caller.user_id, Step(), {"started_call": call.id})
            result = await self.dispatcher.acall(call.name, args, caller, self.pool)
        return await self._settled(caller, call, result, emit, following)

    async def _settled(
        self, caller: Caller, call: ToolCall, result: ToolResult, emit: Emit, following: str | None = None
    ) -> ToolResult:
        """A call's result and its warnings recorded in one step, then shown; the step marks the
        `following` call started (`_calls`)."""
        shown = LoopEvent("tool_result", {"id": call.id, "name": call.name, **result.to_json()})
        blocks = (LoopEvent("visual", {"tool": call.name, "block": block}) for block in result.visual)
        step = Step().add(
            Entry("tool", "tool_result", result.content, _result_meta(call, result)), shown, *blocks
        )
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


def _parse_arguments(text: str) -> tuple[JSONValue, str | None]:
    """The model's argument text as JSON, or why it is not (goes back to the model)."""
    if not text.strip():
        return {}, None
    try:
        value: Any = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, f"arguments are not valid JSON ({exc}): {clip(text, 200)}"
    return value, None


__all__ = ["MAX_RECORDED_VISUAL_BYTES", "NOT_RUN", "ToolSteps"]
