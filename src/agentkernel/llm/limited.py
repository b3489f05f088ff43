"""The kernel-wide limit on concurrent LLM calls (S9.2), as a wrapper around any provider.

Composition rather than a flag on each provider: every backend gets the same
limit by being wrapped once, and the agent loop, the `llm()` helpers and
sub-agents all share the one wrapped provider, hence the one limit.

The slots are an `aiologic.Semaphore`, not an `asyncio.Semaphore`: one
provider may be called from several event loops — the server's, a chat's,
the loop a kernel starts for itself when it has none (services/
kernel_loop.py), another kernel's — and an asyncio semaphore belongs to one
loop (waiting on it from a second raises RuntimeError).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

from agentkernel.llm.base import Completion, CompletionRequest, Provider, StreamDone, StreamEvent


class LimitedProvider:
    """At most `limit` calls to `inner` at a time; the rest wait their turn.

    A stream holds its slot from the request until the last chunk has been
    read, since that is how long the server is busy with it; the final
    `StreamDone` is handed over after the slot is released, so a consumer
    that stops there does not keep others waiting.
    """

    def __init__(self, inner: Provider, limit: AbstractAsyncContextManager[Any] | int) -> None:
        """`limit` is a count, or slots to share with other providers (any async context manager)."""
        if isinstance(limit, int):
            if limit < 1:
                raise ValueError(f"limit must be at least 1, got {limit}")
            import aiologic  # only a kernel that talks to an LLM builds one of these

            limit = aiologic.Semaphore(limit)
        self.inner = inner
        self._slots = limit

    def __repr__(self) -> str:
        return f"LimitedProvider({self.inner!r})"

    async def complete(self, request: CompletionRequest) -> Completion:
        async with self._slots:
            return await self.inner.complete(request)

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        done: StreamDone | None = None
        async with self._slots:
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
