"""Metering (S26.3): the kernel's provider, each completed call counted in the usage ledger.

Why the provider is the one place: every path that asks an LLM — an agent
turn, a sub-agent, a cron run, a hook or tool run's `llm()` / `llm_json()`
— passes the kernel's provider (assembly.py `KernelParts.llm`, whether
built from kernel.yaml's `llm:` or handed to `Kernel(provider=…)`), so one
wrapper sees each call exactly once, and none goes unseen. A run resumed
after a crash replays the answers its journal recorded and does not call
the LLM again for them, so nothing is counted twice; a call made is
counted even when its run dies before writing it to the journal (the
tokens were spent).

What is counted: one call per `complete`, and per `stream` that reached
its `StreamDone` (a stream the caller stopped early has no final usage and
is not counted), with the request's `user` and `template` and the answer's
`model` (else the request's, else the default) and `provider`. Tokens are
the server's (`Completion.usage`); a server that reported none (zeros) is
counted with the kernel's bound (llm/token_bound.py: the prompt's bytes,
the answer's bytes) and marked `estimated`.

The write is awaited, so the ledger holds the call once its answer is
handed on; a failed write is logged, never the caller's failure. It is
made on the event loop when the ledger is open and nothing holds it (a
SQLite upsert of some 30 µs, where a worker thread's hop costs 60 µs of
CPU more), else on a worker thread: a busy SQLite file, or the PostgreSQL
ledger's round trip, never holds the event loop.

The quota check before each call (S26.3) wraps this one, for the same
reason: services/quota_gate.py, reading the ledger's `totals`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from agentkernel.llm.base import Completion, CompletionRequest, Provider, StreamDone, StreamEvent
from agentkernel.llm.token_bound import message_bound, prompt_bound
from agentkernel.ports import UsageStore

log = logging.getLogger("agentkernel.usage")


def counted_tokens(request: CompletionRequest, completion: Completion) -> tuple[int, int, bool]:
    """The call's input and output tokens, and whether they are the kernel's estimate.

    The server's figures when it reported any; otherwise the prompt's bound
    and the answer's (its text and tool calls in bytes, with the margin).
    """
    usage = completion.usage
    if usage.prompt_tokens > 0 or usage.completion_tokens > 0:
        return usage.prompt_tokens, usage.completion_tokens, False
    prompt = prompt_bound(request.messages, request.json_schema, request.tools)
    return prompt, message_bound(completion.message()), True


class MeteredProvider:
    """A provider whose completed calls are recorded in the ledger `ledger()` gives (None: not metered)."""

    def __init__(
        self,
        inner: Provider,
        ledger: Callable[[], UsageStore | None],
        default_model: str | None = None,
        opened: Callable[[], UsageStore | None] | None = None,
    ) -> None:
        """`ledger()` opens the ledger if need be (on a worker thread); `opened()` is it when open already,
        else None (default: `ledger`, for one open from the start)."""
        self.inner = inner
        self._ledger = ledger
        self._opened = opened or ledger
        self._default_model = default_model

    def __repr__(self) -> str:
        return f"MeteredProvider({self.inner!r})"

    async def complete(self, request: CompletionRequest) -> Completion:
        completion = await self.inner.complete(request)
        await self._count(request, completion)
        return completion

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        events = self.inner.stream(request)
        try:
            async for event in events:
                if isinstance(event, StreamDone):
                    await self._count(request, event.completion)
                yield event
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:  # the inner stream's slot is freed when the caller stops early
                await close()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def _count(self, request: CompletionRequest, completion: Completion) -> None:
        import asyncio  # a caller of an async provider has it already; a tool run never imports it

        try:
            if not self._record_at_once(request, completion):
                await asyncio.to_thread(self.record, request, completion)
        except Exception:  # the call succeeded: a ledger that cannot be written is the operator's to see
            log.exception("usage: a call of user %r could not be recorded in the ledger", request.user)

    def record(self, request: CompletionRequest, completion: Completion) -> None:
        """Count `completion` (the answer to `request`) in the ledger, now, on this thread."""
        ledger = self._ledger()
        if ledger is not None:
            ledger.record(**self._counted(request, completion))

    def _record_at_once(self, request: CompletionRequest, completion: Completion) -> bool:
        """Count it here if the ledger is open and takes it without waiting; False if it was not counted."""
        ledger = self._opened()
        return ledger is not None and ledger.record(**self._counted(request, completion), at_once=True)

    def _counted(self, request: CompletionRequest, completion: Completion) -> dict[str, Any]:
        """What the ledger counts of one call (`UsageStore.record`'s arguments)."""
        inputs, outputs, estimated = counted_tokens(request, completion)
        return {
            "user": request.user,
            "template": request.template,
            "model": completion.model or request.model or self._default_model or "",
            "provider": completion.provider,
            "input_tokens": inputs,
            "output_tokens": outputs,
            "estimated": estimated,
        }


__all__ = ["MeteredProvider", "counted_tokens"]
