"""A chat session: one process talking to one user, its conversation kept between messages.

A chat that follows its session's transcript (`records`, agent/session_records.py)
keeps its history only as a cache of the store: before each message it checks the
store for records it did not write and reads the history again when there are.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from agentkernel.agent.loop import AgentLoop, Emit, LoopResult, LoopSettings, RunState, TurnOptions
from agentkernel.agent.processes import Process
from agentkernel.agent.resume import MOST_TAKEOVERS, Prompt, RunDamaged, Stop
from agentkernel.agent.session_records import SessionRecords
from agentkernel.llm.base import ChatMessage
from agentkernel.ports import Entry
from agentkernel.services.memory import DAMAGED, chat_messages
from agentkernel.services.turn_leases import Run
from agentkernel.telemetry.log_lines import RUN_ID


@dataclass
class ChatSession:
    """Sends user messages through the agent loop, one at a time, keeping the history.

    Messages of one session are handled in order (a lock), while different
    sessions run concurrently on the same kernel. `stop()` ends the message
    being handled now (Ctrl-C in the terminal chat, a stop button in a UI):
    its run ends `terminated`, and the session goes on with the next one.
    """

    process: Process
    loop: AgentLoop
    settings: LoopSettings
    history: list[ChatMessage] = field(default_factory=list)
    unvetted: int = 0  # leading messages of `history` a client sent, not yet past the hooks (`from_client`)
    records: SessionRecords | None = None  # the session's transcript: the truth `history` caches
    follows_store: bool = True  # False once a client gave the history (`from_client`): it is the client's
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _stop: Stop | None = field(default=None, init=False, repr=False)

    async def send(
        self,
        text: str | None,
        emit: Emit,
        options: TurnOptions | None = None,
        lease: str | None = None,
        run_id: str | None = None,
    ) -> LoopResult:
        """Answer `text` (None: go on from the history, which ends with the client's tool results).

        `lease`: the token of the turn lease the caller holds on the session
        (services/turn_leases.py); the turn's records are written only while
        it is still the session's. `run_id`: the run the turn is (S25.1),
        started with the lease: its records are its steps.
        """
        async with self._lock:
            self._stop = stop = Stop()
            logged = RUN_ID.set(run_id)  # its log lines name it (--log-format json)
            try:
                if self.records is not None:
                    self.records.lease, self.records.run_id = lease, run_id
                    if self.follows_store and not self.records.current_at_once():
                        fresh = await asyncio.to_thread(self.records.refreshed)
                        if fresh is not None:
                            self.history = fresh
                result = await self.loop.run(
                    self.process,
                    self.settings,
                    self.history,
                    text,
                    emit,
                    stop,
                    unvetted=self.unvetted,
                    options=options,
                )
            finally:
                RUN_ID.reset(logged)
                self._stop = None
                if self.records is not None:
                    self.records.lease = self.records.run_id = None
            self.history, self.unvetted = result.history, 0
            return result

    async def resume(self, run: Run, emit: Emit, lease: str) -> LoopResult:
        """Go on with `run`, which a dead process left unfinished in this session (S25.3, resume.py).

        The conversation before it and its steps so far are read from the
        transcript; it goes on under `lease`, as a message would.
        """
        assert self.records is not None, "a run is resumed in a chat that follows its session's transcript"
        records = self.records
        async with self._lock:
            self._stop = stop = Stop()
            logged = RUN_ID.set(run.id)
            try:
                records.lease, records.run_id = lease, run.id
                history, state = await asyncio.to_thread(_where_it_stood, records, run)
                result = await self.loop.resume(self.process, self.settings, history, state, emit, stop)
            finally:
                RUN_ID.reset(logged)
                self._stop = None
                records.lease = records.run_id = None
            self.history = await asyncio.to_thread(records.history)
            return result

    def record_failure(self, run_id: str, lease: str, message: str) -> None:
        """End a run the loop could not (it failed, or its journal is damaged): an `error` record saying
        why, then its end, `error`, in one step under `lease` (blocking: a worker thread)."""
        self._record_end(run_id, lease, [Entry("system", "error", message)], "error")

    def record_stop(self, run_id: str, lease: str) -> None:
        """End a run stopped before anything of it ran (its workflow cancelled before a worker took it):
        its end, `terminated`, under `lease` (blocking: a worker thread)."""
        self._record_end(run_id, lease, [], "terminated")

    def _record_end(self, run_id: str, lease: str, before: list[Entry], reason: str) -> None:
        if self.records is None:
            return
        entries = [*before, Entry("system", "end", reason)]
        ended = {"status": "ended", "reason": reason, "ended_at": time.time()}
        previous = self.records.lease, self.records.run_id
        self.records.lease, self.records.run_id = lease, run_id
        try:
            self.records.append_step(
                self.records.session_id, entries, user_id=self.records.user_id, run_update=ended
            )
        finally:
            self.records.lease, self.records.run_id = previous

    def gave_back(self, lease: str) -> bool:
        """Whether the run's end, written under `lease`, gave the lease back with it
        (SessionRecords.gave_back): the caller has no lease left to release."""
        return self.records is not None and self.records.gave_back(lease)

    def from_client(self, history: list[ChatMessage]) -> None:
        """The conversation so far is the one a client sent (a stateless API): each of its messages,
        whatever its role, passes the template's `before_user_message` hooks with the next message."""
        self.history, self.unvetted, self.follows_store = list(history), len(history), False

    def stop(self, hand_off: bool = False) -> bool:
        """Stop the message being handled now; False when there is none. Call it on the session's loop.

        `hand_off`: its run is left as it stands, `running`, for another
        process to resume (its server is stopping, S25.3): the loop raises
        HandedOff at its next step instead of ending it `terminated`.
        """
        if self._stop is None:
            return False
        self._stop.handing_off = hand_off
        self._stop.set()
        return True


def _where_it_stood(records: SessionRecords, run: Run) -> tuple[list[ChatMessage], RunState]:
    """The conversation before `run`, and the run as its records have it (blocking: a worker thread).

    RunDamaged when they cannot be read as they were written: going on
    from a guess could run a tool twice.
    """
    if run.damaged is not None:
        raise RunDamaged(run.damaged)
    if run.taken_over > MOST_TAKEOVERS:
        raise RunDamaged(
            f"run {run.id} was taken over {run.taken_over - 1} times after its server died, and its server "
            "died each time; it is not resumed again"
        )
    steps = records.run_records(run.id)
    for step in steps:
        if step.meta.get(DAMAGED):
            raise RunDamaged(f"run {run.id}: its record {step.id} ({step.kind}) has a meta that is not JSON")
    before = [r for r in records.records() if not steps or r.id < steps[0].id]
    prompt = None if run.prompt is None else Prompt.from_json(run.prompt)
    return chat_messages(before), RunState(run.text, prompt, steps, run.started_call, run.traceparent)


__all__ = ["ChatSession"]
