"""The quota check (S26.3) as a wrapper around the kernel's provider: before each LLM call of every path.

Every path that asks an LLM — a turn, a sub-agent, a cron run, `llm()` and
`llm_json()` in a tool or hook — passes the kernel's one provider
(assembly.py `KernelParts.llm`, metered there too), so this is the one
place a call is checked. A call whose user has reached a limit is refused
with QuotaExhausted before anything is sent; it is not a ProviderError, so
no retry or fallback takes it. The ledger is read on a worker thread (a
busy SQLite file never blocks the event loop); with no limit configured
nothing is read at all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentkernel.llm.base import Completion, CompletionRequest, Provider, StreamEvent
from agentkernel.services.quotas import QuotaBook


class QuotaGate:
    """`inner`, each call checked against `book` first; see the module docstring."""

    def __init__(self, inner: Provider, book: QuotaBook) -> None:
        self.inner = inner
        self.book = book

    def __repr__(self) -> str:
        return f"QuotaGate({self.inner!r})"

    async def complete(self, request: CompletionRequest) -> Completion:
        await self._check(request)
        return await self.inner.complete(request)

    def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        """The inner stream itself when nothing is to be checked (no user, no limit): a layer that would
        only hand on each event costs every streamed call; else the inner one once the check passed."""
        if not self._checks(request):
            return self.inner.stream(request)
        return self._checked_stream(request)

    async def _checked_stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        await self._check(request)
        events = self.inner.stream(request)
        try:
            async for event in events:
                yield event
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:  # the inner stream's slot is freed when the caller stops early
                await close()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _checks(self, request: CompletionRequest) -> bool:
        """Whether `request` is checked: a user's call, with limits configured."""
        return request.user is not None and self.book.enabled

    async def _check(self, request: CompletionRequest) -> None:
        if self._checks(request):
            import asyncio  # a caller of an async provider has it already; a tool run never imports it

            await asyncio.to_thread(self.book.check, user=request.user, template=request.template)


__all__ = ["QuotaGate"]
