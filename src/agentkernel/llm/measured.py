"""Each LLM call's time and tokens in the metrics (S26.2), as a wrapper around any provider.

Composition, like `LimitedProvider`: the kernel's provider is wrapped once
(llm/config.py `build_provider`, and assembly.py for one handed to
`Kernel(provider=...)`), so every path — turns, `llm()` in scripts,
sub-agents, cron runs — is measured the same. A call is labelled with its
request's template and the model it asked for (the template's, else the
provider's own), never the name a server reports back, which is any text.
A call stopped by its caller (a stream closed early) is not counted.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from agentkernel.llm.base import (
    Completion,
    CompletionRequest,
    Provider,
    ProviderError,
    StreamDone,
    StreamEvent,
)
from agentkernel.telemetry import metrics


class MeasuredProvider:
    """`inner`, its calls' durations and tokens counted; `model`: what it asks when a request names none."""

    def __init__(self, inner: Provider, model: str | None = None) -> None:
        self.inner = inner
        self.model = model

    def __repr__(self) -> str:
        return f"MeasuredProvider({self.inner!r})"

    async def complete(self, request: CompletionRequest) -> Completion:
        started = time.perf_counter()
        try:
            completion = await self.inner.complete(request)
        except ProviderError:
            self._failed(request, started)
            raise
        self._answered(request, started, completion)
        return completion

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        started = time.perf_counter()
        events = self.inner.stream(request)
        try:
            async for event in events:
                if isinstance(event, StreamDone):
                    self._answered(request, started, event.completion)
                yield event
        except ProviderError:
            self._failed(request, started)
            raise
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:  # closed now, not at garbage collection: its connection is freed
                await aclose()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _answered(self, request: CompletionRequest, started: float, completion: Completion) -> None:
        usage = completion.usage
        secs = time.perf_counter() - started
        model = request.model or self.model
        metrics.llm_called(request.template, model, secs, usage.prompt_tokens, usage.completion_tokens)

    def _failed(self, request: CompletionRequest, started: float) -> None:
        secs = time.perf_counter() - started
        metrics.llm_called(request.template, request.model or self.model, secs, 0, 0, ok=False)


__all__ = ["MeasuredProvider"]
