"""An OpenAI SDK's retry of a chat completion is the run it retries, never a second one (S25.5).

The SDKs retry a request that got no answer (a timeout, a dropped
connection) or a retryable status, with the same body and the header
`x-stainless-retry-count` counting the retries. Each completion's run keeps
a hash of its user and body; a retry (count 1 or more) within
RETRY_WINDOW_SECS finds the user's latest run of that hash and, when that
run ran a tool or is still going (so running it again could repeat an
effect), is answered from that run's records, once it has ended: its
answer, the calls of the client's tools, or its failure. A run that asked
the LLM only and failed is run again, as the SDK meant (the server answered
it with a retryable status).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time

from fastapi import Request

from agentkernel.kernel import Kernel
from agentkernel.llm.base import ToolCall
from agentkernel.ports import Record
from agentkernel.server.events import StreamEvent
from agentkernel.server.openai_shapes import CompletionRequest
from agentkernel.server.sealing import Sealing, sealed_events
from agentkernel.server.sessions import SessionInfo
from agentkernel.services.memory import KIND_TOOL_CALL
from agentkernel.services.turn_leases import Run
from agentkernel.types import JSONObject

RETRY_HEADER = "x-stainless-retry-count"
RETRY_WINDOW_SECS = 3600.0
"""How long after a request its retry finds its run (the SDKs retry within minutes)."""
POLL_SECS = 0.25


def body_hash(user: str, body: CompletionRequest) -> str:
    """What a retry repeats: the user and the whole request body, its keys in order."""
    text = json.dumps(body.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{user}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


def is_retry(request: Request) -> bool:
    """Whether the SDK says this request retries an earlier one (its retry count is 1 or more)."""
    count = request.headers.get(RETRY_HEADER, "0").strip()
    return count.isdigit() and int(count) >= 1


def earlier_run(kernel: Kernel, user: str, digest: str) -> Run | None:
    """The run this retry repeats, when running it again could repeat an effect (blocking)."""
    run = kernel.turn_leases().latest_of_body(user, digest, time.time() - RETRY_WINDOW_SECS)
    if run is None:
        return None
    return run if run.running or _ran_tools(kernel, run.id) else None


def _ran_tools(kernel: Kernel, run_id: str) -> bool:
    return any(r.kind == KIND_TOOL_CALL and not r.meta.get("client") for r in kernel.run_journal(run_id))


async def ended_records(kernel: Kernel, run: Run) -> list[Record]:
    """The run's records once it has ended (a run still going is waited for: it ends by its limits)."""
    while True:
        now = await asyncio.to_thread(kernel.run, run.id)
        if now is None or not now.running:
            return await asyncio.to_thread(kernel.run_journal, run.id)
        await asyncio.sleep(POLL_SECS)


def recorded_usage(records: list[Record]) -> JSONObject:
    """The tokens the run's LLM calls cost, summed from its responses' records (agent/steps.py
    `usage_meta`): what the retried request's answer reports, as the first would have."""
    total = sum(_count(r.meta.get("usage")) for r in records)
    prompt = sum(_count(r.meta.get("prompt_tokens")) for r in records)
    return {"prompt_tokens": prompt, "completion_tokens": total - prompt, "total_tokens": total}


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def replayed(
    sealing: Sealing, records: list[Record], session: SessionInfo
) -> tuple[list[StreamEvent], tuple[ToolCall, ...]]:
    """The run's events as its stream showed them (tables and files sealed for its user), and the calls
    of the client's tools that ended it (blocking)."""
    events = sealed_events(sealing, records, session)
    theirs = tuple(
        ToolCall(str(r.meta.get("id", "")), str(r.meta.get("tool", "")), r.content)
        for r in records
        if r.kind == KIND_TOOL_CALL and r.meta.get("client")
    )
    return events, theirs


__all__ = [
    "RETRY_HEADER",
    "body_hash",
    "earlier_run",
    "ended_records",
    "is_retry",
    "recorded_usage",
    "replayed",
]
