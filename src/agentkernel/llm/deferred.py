"""A provider built on its first call, so a kernel that never talks to an LLM never loads one.

Every live kernel attaches its provider (S9.2: `llm()` goes through it), but
building the OpenAI-compatible one imports httpx and its TLS stack, which a
`tool run` of a word counter should not pay for.
Composition, like `LimitedProvider`: the real provider is wrapped once.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable

from agentkernel.llm.base import Completion, CompletionRequest, Provider, StreamEvent


class DeferredProvider:
    """Calls `build()` once, on the first request, and forwards everything to its result."""

    def __init__(self, build: Callable[[], Provider]) -> None:
        self._build = build
        self._inner: Provider | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DeferredProvider({self._inner!r})"

    @property
    def built(self) -> bool:
        """Whether the real provider exists: closing one that was never built has nothing to do."""
        return self._inner is not None

    @property
    def inner(self) -> Provider:
        """The real provider, built now if it was not yet."""
        if self._inner is None:
            with self._lock:
                if self._inner is None:
                    self._inner = self._build()
        return self._inner

    async def complete(self, request: CompletionRequest) -> Completion:
        return await self.inner.complete(request)

    def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        return self.inner.stream(request)

    async def aclose(self) -> None:
        """Close the real provider if it was ever built; never build one just to close it."""
        if self._inner is not None:
            await self._inner.aclose()


__all__ = ["DeferredProvider"]
