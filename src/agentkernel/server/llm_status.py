"""Whether the configured LLM answers: `serve`'s start-up warning and the page's status line.

`agentkernel serve` starts whatever the LLM does, and a chat whose LLM is not
there failed only at its first message. So the LLM server is asked as
`agentkernel chat` asks it (llm/probe.py: `GET {base_url}/models`, one
request, no retries, at most CHECK_TIMEOUT_SECS): once in the background
when `serve` starts, which logs a warning saying how to fix it, and again
for `GET /v1/llm/status` once the last answer is older than FRESH_SECS.

One check at a time, whoever asks: pages polling, or a user with a token in
a loop, make at most one request to the LLM server every FRESH_SECS, each
bounded by CHECK_TIMEOUT_SECS; nobody waits longer than one check.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Final

from agentkernel.llm.config import LLMConfig
from agentkernel.llm.openai_compat import shown_url
from agentkernel.llm.probe import LLMCheckFailed, check_llm

CHECK_TIMEOUT_SECS: Final = 3.0  # `GET /models` needs no model loaded: any server up answers at once
FRESH_SECS: Final = 2.0
FIX: Final = (
    "start your LLM server (Ollama, vLLM, llama.cpp…), or try things out with the scripted one: "
    "`agentkernel dev llm` prints its URL; then restart with `agentkernel serve --llm-url URL`, "
    "or set llm.base_url in kernel.yaml"
)
NOT_CONFIGURED: Final = "no LLM is configured: kernel.yaml has no `llm:` section"
NOT_CONFIGURED_FIX: Final = (
    "add an `llm:` section (base_url, model) to kernel.yaml, or try things out with the scripted LLM: "
    "`agentkernel dev llm` prints its URL; then restart with `agentkernel serve --llm-url URL`. "
    "The tools work without one"
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LLMStatus:
    """What the last check found: `ok` when the LLM answered; otherwise `problem`, `hint` and `fix` say why.

    `problem` may also be set when `ok` (a model the server does not list).
    """

    ok: bool
    configured: bool
    url: str | None
    model: str | None
    problem: str | None
    hint: str | None
    fix: str | None
    checked_at: str

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    def warning(self) -> str | None:
        """One line for the log: what is wrong and how to fix it; None when nothing is."""
        if self.problem is None:
            return None
        parts = [self.problem, self.hint, f"to fix: {self.fix}" if self.fix else None]
        return " ".join(_sentence(p) for p in parts if p)


class LLMWatch:
    """The configured LLM's status, checked at most once every `fresh_secs`, one check at a time."""

    def __init__(
        self,
        config: LLMConfig | None,
        *,
        timeout_secs: float = CHECK_TIMEOUT_SECS,
        fresh_secs: float = FRESH_SECS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._timeout = timeout_secs
        self._fresh = fresh_secs
        self._clock = clock
        self._last: LLMStatus | None = None
        self._last_at = 0.0
        self._pending: asyncio.Future[LLMStatus] | None = None

    async def status(self) -> LLMStatus:
        """The last status if fresh, else a new check's (joining the one under way, if any)."""
        if self._last is not None and self._clock() - self._last_at < self._fresh:
            return self._last
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._check())
        pending = self._pending
        return await asyncio.shield(pending)

    async def close(self) -> None:
        """Stop a check under way (the app is shutting down)."""
        pending = self._pending
        if pending is not None:
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)

    async def warn(self) -> None:
        """Check now and log a warning if the LLM cannot be used (serve's start-up check)."""
        warning = (await self.status()).warning()
        if warning is not None:
            log.warning("chats will not be answered. %s", warning)

    async def _check(self) -> LLMStatus:
        try:
            status = await self._ask()
        finally:
            self._pending = None
        self._last, self._last_at = status, self._clock()
        return status

    async def _ask(self) -> LLMStatus:
        config = self._config
        now = datetime.now(UTC).isoformat()
        if config is None:
            return LLMStatus(False, False, None, None, NOT_CONFIGURED, None, NOT_CONFIGURED_FIX, now)
        url = shown_url(config.base_url)
        try:
            async with asyncio.timeout(self._timeout):
                server = await check_llm(config)
        except TimeoutError:
            problem = f"{url} did not answer within {self._timeout:g} s"
            hint = "is the LLM server up and not overloaded?"
            return LLMStatus(False, True, url, config.model, problem, hint, FIX, now)
        except LLMCheckFailed as failed:
            return LLMStatus(False, True, url, config.model, failed.problem, failed.hint, FIX, now)
        missing = server.missing_model(config.model)
        return LLMStatus(True, True, url, config.model, missing, None, None, now)


def _sentence(text: str) -> str:
    """`text` as a sentence: a capital first letter, a full stop unless it ends in one already."""
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else text + "."


__all__ = ["CHECK_TIMEOUT_SECS", "FIX", "FRESH_SECS", "LLMStatus", "LLMWatch"]
