"""A run's steps: the records one step writes together, and the events they become once written.

A turn is a run (S25.1): what happens in it is recorded before it is used —
the LLM's response before its tool calls run, a call's start before it runs,
its result before the LLM is told, the end before the client is. Each step
is one transaction of the message store (`append_step`), however many
records it holds (a response's tool calls, a result and its warnings, the
end and the hooks around it), and the events it shows the user go out after
it, each with the id of its record: a client that reconnects asks for what
came after the last id it saw (`GET /v1/runs/{id}/events`), so an event is
never shown before it can be read again.

Writing never breaks a turn: a store that fails is logged and the events
still go out (without ids); a turn whose lease was lost is refused by the
store, logged, and stopped by its runner.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from agentkernel.llm.base import Usage
from agentkernel.ports import Entry
from agentkernel.services.turn_leases import LeaseLost
from agentkernel.types import JSONObject

log = logging.getLogger("agentkernel.loop")


@dataclass(frozen=True)
class LoopEvent:
    """Something the user sees while the loop runs: `kind`, its data, and the id of its record.

    `id` is None for what is not recorded (the tokens of an answer being
    streamed) and when the store could not write it.
    """

    kind: str  # notice | token | tool_call | tool_result | visual | warning | answer | error | end
    data: JSONObject
    id: int | None = None


Emit = Callable[[LoopEvent], Awaitable[None]]


class Transcript(Protocol):
    """Where the loop records its steps (the message store, S23.5), each with the caller's user (S18)."""

    def append_step(
        self,
        session_id: str,
        entries: Sequence[Entry],
        *,
        user_id: str | None = None,
        run_update: Mapping[str, Any] | None = None,
        notes: Mapping[int, JSONObject] | None = None,
    ) -> list[int]: ...


@dataclass
class Step:
    """Records to write in one transaction, each with the events it becomes once written."""

    entries: list[Entry] = field(default_factory=list)
    shown: list[tuple[int, LoopEvent]] = field(default_factory=list)  # (index of its entry, event)
    notes: dict[int, JSONObject] = field(default_factory=dict)  # record id -> keys its meta gains

    def amend(self, record_id: int, meta: JSONObject) -> Step:
        """Add `meta`'s keys to an earlier record of the run (what a hook made of the user's message)."""
        self.notes[record_id] = {**self.notes.get(record_id, {}), **meta}
        return self

    def add(self, entry: Entry, *events: LoopEvent) -> Step:
        """Record `entry`; `events` go out once it is written, with its id."""
        self.entries.append(entry)
        self.shown.extend((len(self.entries) - 1, event) for event in events)
        return self

    def __bool__(self) -> bool:
        return bool(self.entries or self.notes)


class StepWriter:
    """Writes a run's steps to its transcript and then shows their events; see the module docstring."""

    def __init__(self, transcript: Transcript | None) -> None:
        self.transcript = transcript

    def write(
        self,
        session_id: str | None,
        user_id: str | None,
        step: Step,
        run_update: Mapping[str, Any] | None = None,
    ) -> list[int] | None:
        """The ids of the step's records, or None when there is no transcript or it could not write."""
        if self.transcript is None or session_id is None or (not step and run_update is None):
            return None
        try:
            return self.transcript.append_step(
                session_id, step.entries, user_id=user_id, run_update=run_update, notes=step.notes or None
            )
        except LeaseLost as exc:  # another turn holds the session now: this one's records are refused
            log.warning("not recorded (%s): %s", ", ".join(e.kind for e in step.entries) or "a step", exc)
        except Exception:  # the transcript must never break a turn
            log.exception("could not record a step (%s)", ", ".join(e.kind for e in step.entries))
        return None

    def run_id(self) -> str | None:
        """The run the steps are written for, when the transcript is a session's running turn's."""
        run_id = getattr(self.transcript, "run_id", None)
        return run_id if isinstance(run_id, str) else None

    async def commit(
        self,
        session_id: str | None,
        user_id: str | None,
        step: Step,
        emit: Emit,
        run_update: Mapping[str, Any] | None = None,
    ) -> list[int] | None:
        """Write the step, then emit its events in order, each with its record's id."""
        ids = self.write(session_id, user_id, step, run_update)
        for index, event in step.shown:
            await emit(event if ids is None else replace(event, id=ids[index]))
        return ids


def usage_meta(usage: Usage) -> JSONObject:
    """What a response's record keeps of its cost: `usage`, its total tokens, and `prompt_tokens`, so
    a run's usage can be told again from its records (a retried request answered from them)."""
    return {"usage": usage.total_tokens, "prompt_tokens": usage.prompt_tokens}


__all__ = ["Emit", "LoopEvent", "Step", "StepWriter", "Transcript", "usage_meta"]
