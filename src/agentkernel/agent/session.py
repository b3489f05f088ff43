"""A chat session: one process talking to one user, its conversation kept between messages."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agentkernel.agent.loop import AgentLoop, Emit, LoopResult, LoopSettings
from agentkernel.llm.base import ChatMessage
from agentkernel.process import Process


@dataclass
class ChatSession:
    """Sends user messages through the agent loop, one at a time, keeping the history.

    Messages of one session are handled in order (a lock), while different
    sessions run concurrently on the same kernel.
    """

    process: Process
    loop: AgentLoop
    settings: LoopSettings
    history: list[ChatMessage] = field(default_factory=list)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def send(self, text: str, emit: Emit) -> LoopResult:
        async with self._lock:
            result = await self.loop.run(self.process, self.settings, self.history, text, emit)
            self.history = result.history
            return result


__all__ = ["ChatSession"]
