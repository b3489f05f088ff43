"""Where a run stood when its process died, read back from its records (S25.3).

A run's records are its journal (agent/steps.py): the user's message with
the hooks' verdicts on it (the run's `prompt`), each LLM response as its
tool calls, each call's result, the answer, the end. A process that takes
over a run left unfinished goes on from there (`AgentLoop.resume`):

- no prompt recorded: the hooks never finished, nothing of the run was
  used: it starts again from the user's message;
- a response whose calls have no recorded result: those calls are
  `pending`. The one that had started (`started`) may have had effects: it
  runs again only if its tool says `idempotent: true`; the ones after it
  never started and run as usual;
- everything recorded is reused as it is: a recorded result is never
  produced again, a recorded response never asked for again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentkernel.errors import AgentKernelError
from agentkernel.llm.base import ChatMessage, ToolCall
from agentkernel.ports import Record
from agentkernel.services.memory import KIND_AGENT, KIND_TOOL_CALL, KIND_TOOL_RESULT, chat_messages
from agentkernel.types import JSONObject

KIND_APPROVAL = "approval"
"""A run's record of a call's approval asked (agent/tool_steps.py)."""

MOST_TAKEOVERS = 3
"""A run whose process died this many times while it was being resumed is not resumed again: it ends
`error` (a tool that kills its server would otherwise take every server down as it starts)."""

INTERRUPTED = (
    "interrupted: the server running this call stopped before its result was recorded, so it may or "
    "may not have had its effects; check before calling it again"
)
"""The failed result of a started call of a tool that is not `idempotent: true` (S25.3)."""


class RunDamaged(AgentKernelError):
    """A run's journal cannot be read as it was written: it is not resumed, it ends `error`."""


class HandedOff(Exception):
    """The run was left for another process to resume (its server is stopping): nothing more of it
    is done or recorded here, and it stays `running` in the store (S25.3)."""


class Stop(asyncio.Event):
    """A run's stop: set, the run ends `terminated` at its next step; with `handing_off` too, it is
    left as it stands for another process to resume (`HandedOff`) instead of ended."""

    handing_off = False


def left_here(stop: asyncio.Event) -> bool:
    """Whether `stop` is set (the run stops at this step); HandedOff when the run is to be left for
    another process to go on with instead."""
    if handing_off(stop):
        raise HandedOff
    return stop.is_set()


def handing_off(stop: asyncio.Event) -> bool:
    """Whether `stop` says: leave the run here for another process (see `Stop`)."""
    return stop.is_set() and isinstance(stop, Stop) and stop.handing_off


@dataclass(frozen=True)
class Prompt:
    """What `before_user_message` made of the user's message: what the LLM is asked, or why not."""

    message: JSONObject
    inject: tuple[JSONObject, ...] = ()
    reply: str | None = None
    suppressed: bool = False

    def to_json(self) -> JSONObject:
        return {
            "message": self.message,
            "inject": list(self.inject),
            "reply": self.reply,
            "suppressed": self.suppressed,
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> Prompt:
        message = data.get("message")
        inject = data.get("inject") or []
        reply = data.get("reply")
        return cls(
            message if isinstance(message, dict) else {"role": "user", "content": ""},
            tuple(m for m in inject if isinstance(m, dict)) if isinstance(inject, list) else (),
            reply if isinstance(reply, str) else None,
            data.get("suppressed") is True,
        )


@dataclass(frozen=True)
class Resumed:
    """A run's progress as recorded: the conversation it added, and what is left of its last response.

    `steps`: the LLM's responses and the results of their calls, as the LLM
    saw them (a response whose calls are `pending` is among them; their
    results are not). `llm_calls`: responses recorded (they count against
    `max_turns`). `answer`: the final answer, when it was recorded.
    """

    prompt: Prompt
    steps: list[ChatMessage] = field(default_factory=list)
    llm_calls: int = 0
    pending: tuple[ToolCall, ...] = ()
    started: str | None = None
    answer: str | None = None
    asked: frozenset[str] = frozenset()  # calls whose approval is recorded (S24.4): not asked again

    def may_have_run(self, call: ToolCall) -> bool:
        """Whether a pending call had started (it and the pending ones before it): it may have run."""
        if self.started is None:
            return False
        ids = [c.id for c in self.pending]
        return self.started in ids and ids.index(call.id) <= ids.index(self.started)


def resumed(prompt: Prompt, records: Sequence[Record], started: str | None) -> Resumed:
    """The run's progress from its records (oldest first); see the module docstring."""
    answer: str | None = None
    llm_calls = 0
    last_calls: list[ToolCall] = []
    answered: set[str] = set()
    previous_kind = ""
    asked = frozenset(str(r.meta.get("id", "")) for r in records if r.kind == KIND_APPROVAL)
    for record in records:
        if record.kind == KIND_TOOL_CALL and not record.meta.get("client"):
            if previous_kind != KIND_TOOL_CALL:
                llm_calls += 1
                last_calls = []
            last_calls.append(
                ToolCall(str(record.meta.get("id", "")), str(record.meta.get("tool", "")), record.content)
            )
        elif record.kind == KIND_TOOL_RESULT:
            answered.add(str(record.meta.get("id", "")))
        elif record.kind == KIND_AGENT and not record.meta.get("from") and not record.meta.get("stopped"):
            answer = record.content
            llm_calls += 1
        previous_kind = record.kind
    pending = tuple(c for c in last_calls if c.id not in answered)
    steps = chat_messages([r for r in records if r.kind in (KIND_TOOL_CALL, KIND_TOOL_RESULT)])
    if pending:  # the last response, its calls waiting for results (chat_messages leaves it out)
        text = next(
            (
                r.meta.get("text")
                for r in records
                if r.kind == KIND_TOOL_CALL and r.meta.get("id") == last_calls[0].id
            ),
            None,
        )
        done = [c for c in last_calls if c.id in answered]
        if done:  # chat_messages kept it with its answered calls only: put the whole response back
            steps = steps[: -1 - len(done)]
        steps.append(ChatMessage.assistant(text if isinstance(text, str) else None, tuple(last_calls)))
        steps.extend(
            ChatMessage.tool(r.meta["id"], r.content, r.meta.get("tool"))
            for r in records
            if r.kind == KIND_TOOL_RESULT and r.meta.get("id") in {c.id for c in done}
        )
    return Resumed(prompt, steps, llm_calls, pending, started, answer, asked)


__all__ = [
    "INTERRUPTED",
    "MOST_TAKEOVERS",
    "HandedOff",
    "Prompt",
    "Resumed",
    "RunDamaged",
    "Stop",
    "handing_off",
    "left_here",
    "resumed",
]
