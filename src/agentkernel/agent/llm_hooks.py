"""`before_llm_call` (S24.3): what the LLM is sent, as the template's hooks let it go.

Before each LLM call of a run the hooks see `request = {messages, tools,
model}`; a `replace_messages` swaps the contents of the messages of this
request only (the conversation and the transcript keep what was said: a
hook masking PII on the way out does not rewrite history), a `deny` ends
the turn `blocked`, saying why. The hooks' calls are recorded as one step,
their notices shown. A caller with no hook taking part costs one check.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace

from agentkernel.agent.hooks import HookPipeline
from agentkernel.agent.steps import Emit, LoopEvent, Step, StepWriter
from agentkernel.config import HookSpec
from agentkernel.identity import Caller
from agentkernel.llm.base import ChatMessage, ToolSchema
from agentkernel.ports import Entry
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.fair_pool import FairPool

EVENT = "before_llm_call"


def request_json(
    messages: Sequence[ChatMessage], tools: Sequence[ToolSchema], model: str | None
) -> JSONObject:
    """The request as the hooks see it: messages in the chat-completions shape, the tools' names."""
    shown: list[JSONValue] = []
    for message in messages:
        item: JSONObject = {"role": message.role, "content": message.content}
        if message.tool_calls:
            item["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.tool_calls
            ]
        if message.tool_call_id is not None:
            item["tool_call_id"] = message.tool_call_id
        shown.append(item)
    return {"messages": shown, "tools": [t.name for t in tools], "model": model}


class LlmCallHooks:
    """Runs `before_llm_call` for a loop; see the module docstring."""

    def __init__(self, pipeline: HookPipeline, steps: StepWriter, pool: FairPool) -> None:
        self.pipeline = pipeline
        self.steps = steps
        self.pool = pool

    async def outgoing(
        self,
        caller: Caller,
        hooks: Sequence[HookSpec],
        messages: list[ChatMessage],
        tools: Sequence[ToolSchema],
        model: str | None,
        emit: Emit,
    ) -> list[ChatMessage] | None:
        """The messages to send, their contents as the hooks replaced them; None when a hook denied the
        call (recorded and shown: the turn ends `blocked`)."""
        if not hooks or not self.pipeline.takes_part(hooks, EVENT, caller):
            return messages
        request = request_json(messages, tools, model)
        ask = functools.partial(self.pipeline.before_llm_call, hooks, caller, request)
        verdicts = await self.pool.run(caller.user_id, ask)
        step = Step()
        for record in verdicts.records:
            step.add(Entry(*record.transcript_entry()))
        shown = [*verdicts.notices, *([verdicts.deny] if verdicts.deny is not None else [])]
        for notice in shown:
            step.add(Entry("system", "notice", notice), LoopEvent("notice", {"text": notice}))
        await self.steps.commit(caller.session_id, caller.user_id, step, emit)
        if verdicts.deny is not None:
            return None
        if verdicts.contents is None:
            return messages
        return [replace(m, content=c) for m, c in zip(messages, verdicts.contents, strict=True)]


__all__ = ["EVENT", "LlmCallHooks", "request_json"]
