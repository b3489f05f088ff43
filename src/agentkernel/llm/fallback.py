"""Model fallback (S26.4): the providers `llm:` lists, tried in order on a retryable failure only.

A call goes to the first provider; when it fails for a cause the next one
may not share — no connection, a timeout, 408, 429, a 5xx (`ProviderError.
retryable`, after that provider's own retries) — it goes to the next, and
so on; the last one's failure is the call's. A failure that is the
request's fault (400, 401, 404, 413…) is raised at once: another server
would refuse it too, or be asked what the first rightly refused. A stream
falls back only before its first event: once text reached the reader, a
second server's answer cannot take its place unseen.

A fallback answers with its own model: the model a template names is the
first provider's (`CompletionRequest.model` is dropped for the others).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from agentkernel.llm.base import Completion, CompletionRequest, Provider, ProviderError, StreamEvent

log = logging.getLogger("agentkernel.llm")


class FallbackProvider:
    """`providers` as one, each a `(name, provider)`, tried in order; see the module docstring."""

    def __init__(self, providers: Sequence[tuple[str, Provider]]) -> None:
        if not providers:
            raise ValueError("a fallback needs at least one provider")
        self.providers = tuple(providers)

    def __repr__(self) -> str:
        return f"FallbackProvider({', '.join(name for name, _ in self.providers)})"

    async def complete(self, request: CompletionRequest) -> Completion:
        for index, (name, provider) in enumerate(self.providers):
            try:
                return await provider.complete(_for(request, index))
            except ProviderError as exc:
                self._fall_back(index, name, exc)
        raise AssertionError("unreachable: the last provider's failure is raised")

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        for index, (name, provider) in enumerate(self.providers):
            events = provider.stream(_for(request, index))
            started = False
            try:
                async for event in events:
                    started = True
                    yield event
                return
            except ProviderError as exc:
                if started:
                    raise
                self._fall_back(index, name, exc)
            finally:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()

    def _fall_back(self, index: int, name: str, exc: ProviderError) -> None:
        """Go on to the next provider, or raise `exc`: the last one failed, or the request is at fault."""
        if index + 1 >= len(self.providers) or not exc.retryable:
            raise exc
        following = self.providers[index + 1][0]
        log.warning("llm %s failed (%s); asking the next, %s", name, exc, following)

    async def aclose(self) -> None:
        failures: list[BaseException] = []
        for _, provider in self.providers:
            try:
                await provider.aclose()
            except Exception as exc:  # the others must close too
                failures.append(exc)
        if failures:
            raise failures[0]


def _for(request: CompletionRequest, index: int) -> CompletionRequest:
    """The request as provider `index` gets it: a fallback with its own model."""
    return request if index == 0 or request.model is None else replace(request, model=None)


__all__ = ["FallbackProvider"]
