"""A chat session: one process talking to one user, its conversation kept between messages.

A chat that follows its session's transcript (`records`, agent/session_records.py)
keeps its history only as a cache of the store: before each message it checks the
store for records it did not write and reads the history again when there are.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agentkernel.agent.loop import AgentLoop, Emit, LoopResult, LoopSettings, TurnOptions
from agentkernel.agent.processes import Process
from agentkernel.agent.session_records import SessionRecords
from agentkernel.llm.base import ChatMessage


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
    _stop: asyncio.Event | None = field(default=None, init=False, repr=False)

    async def send(
        self, text: str | None, emit: Emit, options: TurnOptions | None = None, lease: str | None = None
    ) -> LoopResult:
        """Answer `text` (None: go on from the history, which ends with the client's tool results).

        `lease`: the token of the turn lease the caller holds on the session
        (services/turn_leases.py); the turn's records are written only while
        it is still the session's.
        """
        async with self._lock:
            self._stop = stop = asyncio.Event()
            try:
                if self.records is not None:
                    self.records.lease = lease
                    if self.follows_store:
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
                self._stop = None
                if self.records is not None:
                    self.records.lease = None
            self.history, self.unvetted = result.history, 0
            return result

    def from_client(self, history: list[ChatMessage]) -> None:
        """The conversation so far is the one a client sent (a stateless API): each of its messages,
        whatever its role, passes the template's `before_user_message` hooks with the next message."""
        self.history, self.unvetted, self.follows_store = list(history), len(history), False

    def stop(self) -> bool:
        """Stop the message being handled now; False when there is none. Call it on the session's loop."""
        if self._stop is None:
            return False
        self._stop.set()
        return True


__all__ = ["ChatSession"]
