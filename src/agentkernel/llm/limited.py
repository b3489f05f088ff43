"""The kernel-wide limit on concurrent LLM calls (S9.2), as a wrapper around any provider.

Composition rather than a flag on each provider: every backend gets the same
limit by being wrapped once, and the agent loop, the `llm()` helpers and
sub-agents all share the one wrapped provider, hence the one limit.

The slots are shared fairly between users (llm/fair_slots.py): a call
waits as its request's `user`, and a freed slot goes to the waiting user
with the fewest calls in flight. They belong to no event loop: one provider
may be called from several — the server's, a chat's, the loop a kernel
starts for itself when it has none (services/kernel_loop.py), another
kernel's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentkernel.llm.base import Completion, CompletionRequest, Provider, StreamDone, StreamEvent
from agentkernel.llm.fair_slots import FairSlots


class LimitedProvider:
    """At most `limit` calls to `inner` at a time; the rest wait their turn, user by user.

    A stream holds its slot from the request until the last chunk has been
    read, since that is how long the server is busy with it; the final
    `StreamDone` is handed over after the slot is released, so a consumer
    that stops there does not keep others waiting.
    """

    def __init__(self, inner: Provider, limit: FairSlots | int) -> None:
        """`limit` is a count, or slots to share with other providers."""
        self.inner = inner
        self.slots = FairSlots(limit) if isinstance(limit, int) else limit

    def __repr__(self) -> str:
        return f"LimitedProvider({self.inner!r})"

    async def complete(self, request: CompletionRequest) -> Completion:
        async with self.slots.slot(request.user):
            return await self.inner.complete(request)

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        done: StreamDone | None = None
        async with self.slots.slot(request.user):
            events = self.inner.stream(request)
            try:
                async for event in events:
                    if isinstance(event, StreamDone):
                        done = event
                        break
                    yield event
            finally:
                await _close(events)
        if done is not None:
            yield done

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _close(events: AsyncIterator[StreamEvent]) -> None:
    """Close the inner stream now, not at garbage collection, so its connection is freed."""
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


__all__ = ["LimitedProvider"]
