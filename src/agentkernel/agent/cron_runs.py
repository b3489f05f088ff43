"""A cron job's run and its delivery (S10): the scheduler's `run` and `deliver`, made of the kernel's parts.

A run is a chat of its own: a process spawned from the job's template for
the job's owner (their identity for every tool; the template's budget, new
each run), in the job's session (`job_session`, so the job's tools see the
earlier runs through `memory_*`), given the prompt once; the answer, or the
error the loop ended with, is the outcome.

Delivery, one sink at a time, each its own task: `log` writes one line;
`webhook` POSTs `{job, scheduled_at, fired_at, ok, answer, error}` through
the kernel's `http` service (so the `http:` allow and deny rules hold for
the address it resolves to at that moment), retried with growing pauses
while the receiver fails or is unreachable; `session` appends the answer to
that chat's transcript as an agent message, shown when the chat is opened.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentkernel.agent.loop import EndReason, LoopEvent
from agentkernel.agent.session import ChatSession
from agentkernel.ports import Http, MessageStore
from agentkernel.services.cron import RunOutcome, job_session
from agentkernel.services.cron_jobs import Sink, rfc3339
from agentkernel.services.cron_store import Claim
from agentkernel.services.memory import KIND_AGENT
from agentkernel.util.fair_pool import FairPool

log = logging.getLogger("agentkernel.cron")

FIRST_PAUSE_SECS = 1.0
"""The pause before a webhook's second attempt; each next one doubles, up to `LONGEST_PAUSE_SECS`."""
LONGEST_PAUSE_SECS = 60.0
WEBHOOK_TIMEOUT_SECS = 10.0
_RETRIED = {408, 425, 429}


@dataclass
class CronRuns:
    """The kernel's parts a run needs: a chat opened and ended, the transcript, the http service, the pool."""

    open_chat: Callable[..., ChatSession]
    end_chat: Callable[[ChatSession], None]
    messages: Callable[[], MessageStore]
    http: Callable[[], Http]
    webhook_attempts: int
    pool: FairPool  # a webhook's wait, in its owner's queue: never the loop's default threads

    async def run(self, claim: Claim) -> RunOutcome:
        """The job's agent on its prompt, to the loop's end; cancelled with the run's timeout."""
        errors: list[str] = []

        async def collect(event: LoopEvent) -> None:
            if event.kind == "error":
                errors.append(str(event.data.get("message")))

        chat = self.open_chat(
            claim.spec.template,
            user_id=claim.owner,
            session_id=job_session(claim.owner, claim.name),
            stream=False,
        )
        try:
            result = await chat.send(claim.spec.prompt, collect)
        finally:
            self.end_chat(chat)
        if result.reason is EndReason.JOB_DONE:
            return RunOutcome(True, answer=result.answer or "")
        why = errors[-1] if errors else f"the agent ended with {result.reason.value}"
        return RunOutcome(False, answer=result.answer, error=why)

    async def deliver(self, claim: Claim, sink: Sink, outcome: RunOutcome, fired_at: float) -> None:
        """Send one run's outcome to one sink; a failure is logged, never raised."""
        try:
            if sink.type == "webhook":
                await self._post(claim, sink, outcome, fired_at)
            elif sink.type == "session":
                await asyncio.to_thread(self._record, claim, sink, outcome)
            else:
                _log_outcome(claim, outcome)
        except Exception:
            log.exception("cron %s/%s: delivery to %s failed", claim.owner, claim.name, sink.type)

    async def _post(self, claim: Claim, sink: Sink, outcome: RunOutcome, fired_at: float) -> None:
        assert sink.url is not None
        body = json.dumps(_payload(claim, outcome, fired_at), ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json", "Idempotency-Key": _delivery_key(claim)}
        pause = FIRST_PAUSE_SECS
        for attempt in range(1, self.webhook_attempts + 1):
            post = functools.partial(
                self.http().request,
                "POST",
                sink.url,
                content=body,
                headers=headers,
                timeout=WEBHOOK_TIMEOUT_SECS,
            )
            result = await self.pool.run(claim.owner, post)
            if 200 <= result.status < 300:
                return
            why = result.error or f"HTTP {result.status}"
            final = attempt == self.webhook_attempts or not _worth_retrying(result.status)
            log.warning(
                "cron %s/%s: webhook attempt %d of %d failed: %s%s",
                claim.owner,
                claim.name,
                attempt,
                self.webhook_attempts,
                why,
                "" if not final else " (giving up)",
            )
            if final:
                return
            await asyncio.sleep(pause)  # a backoff between deliveries, not a wait for an event
            pause = min(pause * 2, LONGEST_PAUSE_SECS)

    def _record(self, claim: Claim, sink: Sink, outcome: RunOutcome) -> None:
        assert sink.session_id is not None
        text = outcome.answer if outcome.ok else f"cron job {claim.name!r} failed: {outcome.error}"
        meta: dict[str, Any] = {
            "cron": claim.name,
            "scheduled_at": rfc3339(claim.scheduled_at),
            "ok": outcome.ok,
        }
        self.messages().append(
            sink.session_id, "assistant", KIND_AGENT, text or "", meta, user_id=claim.owner
        )


def _payload(claim: Claim, outcome: RunOutcome, fired_at: float) -> dict[str, Any]:
    return {
        "job": claim.name,
        "scheduled_at": rfc3339(claim.scheduled_at),
        "fired_at": rfc3339(fired_at),
        "ok": outcome.ok,
        "answer": outcome.answer,
        "error": outcome.error,
    }


def _delivery_key(claim: Claim) -> str:
    """The same for every attempt at one due time's delivery: a receiver can drop repeats."""
    return f"{claim.owner}/{claim.name}@{rfc3339(claim.scheduled_at)}"


def _worth_retrying(status: int) -> bool:
    """Not reached (0), a server error, or a "come back later": another attempt may succeed."""
    return status == 0 or status >= 500 or status in _RETRIED


def _log_outcome(claim: Claim, outcome: RunOutcome) -> None:
    when = rfc3339(claim.scheduled_at)
    if outcome.ok:
        log.info("cron %s/%s (%s): %s", claim.owner, claim.name, when, outcome.answer)
    else:
        log.warning("cron %s/%s (%s) failed: %s", claim.owner, claim.name, when, outcome.error)


__all__ = ["CronRuns"]
