"""Model fallback and routing (S26.4): the providers `llm:` lists, tried in order on a retryable
failure only, each answer saying which one gave it.

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

A request naming a provider (`CompletionRequest.provider`: a template's
`model.provider`, or a script's `llm({provider})`) asks that one first,
then the others in their order. Every answer carries the name of the
provider that gave it (`Completion.provider`), for usage and traces.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from agentkernel.llm.base import (
    Completion,
    CompletionRequest,
    Provider,
    ProviderError,
    StreamDone,
    StreamEvent,
)

log = logging.getLogger("agentkernel.llm")


class FallbackProvider:
    """`providers` as one, each a `(name, provider)`, tried in order; see the module docstring."""

    def __init__(self, providers: Sequence[tuple[str, Provider]]) -> None:
        if not providers:
            raise ValueError("a fallback needs at least one provider")
        self.providers = tuple(providers)
        self.names = tuple(name for name, _ in self.providers)

    def __repr__(self) -> str:
        return f"FallbackProvider({', '.join(self.names)})"

    async def complete(self, request: CompletionRequest) -> Completion:
        chain = self._order(request)
        for index, (name, provider) in enumerate(chain):
            try:
                return replace(await provider.complete(_for(request, index)), provider=name)
            except ProviderError as exc:
                _fall_back(chain, index, exc)
        raise AssertionError("unreachable: the last provider's failure is raised")

    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        chain = self._order(request)
        for index, (name, provider) in enumerate(chain):
            events = provider.stream(_for(request, index))
            started = False
            try:
                async for event in events:
                    started = True
                    if isinstance(event, StreamDone):
                        event = StreamDone(replace(event.completion, provider=name))
                    yield event
                return
            except ProviderError as exc:
                if started:
                    raise
                _fall_back(chain, index, exc)
            finally:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()

    def _order(self, request: CompletionRequest) -> tuple[tuple[str, Provider], ...]:
        """The providers in the order this request asks them: the one it names first."""
        if request.provider is None or request.provider == self.names[0]:
            return self.providers
        if request.provider not in self.names:
            raise ProviderError(
                f"no LLM provider is named {request.provider!r} (kernel.yaml `llm:` names: "
                f"{', '.join(self.names)})"
            )
        named = self.names.index(request.provider)
        return (self.providers[named], *self.providers[:named], *self.providers[named + 1 :])

    async def aclose(self) -> None:
        failures: list[BaseException] = []
        for _, provider in self.providers:
            try:
                await provider.aclose()
            except Exception as exc:  # the others must close too
                failures.append(exc)
        if failures:
            raise failures[0]


def _fall_back(chain: Sequence[tuple[str, Provider]], index: int, exc: ProviderError) -> None:
    """Go on to the next provider, or raise `exc`: the last one failed, or the request is at fault."""
    if index + 1 >= len(chain) or not exc.retryable:
        raise exc
    log.warning("llm %s failed (%s); asking the next, %s", chain[index][0], exc, chain[index + 1][0])


def _for(request: CompletionRequest, index: int) -> CompletionRequest:
    """The request as provider `index` gets it: a fallback with its own model."""
    return request if index == 0 or request.model is None else replace(request, model=None)


__all__ = ["FallbackProvider"]
