"""Runs (S25): a turn's status and answer, and its events read again from any position, on any process.

`GET /v1/runs/{id}` says where a run is; `GET /v1/runs/{id}/events` streams
its events from the store, after `Last-Event-ID` (or `?after=N`): what came
after the last event a client saw, whichever process it saw it from, then
the rest as it is recorded, until the run's `done`. Another user's run is
answered exactly as an unknown one (404).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import StreamingResponse

from agentkernel.kernel import Kernel
from agentkernel.server.events import StreamEvent
from agentkernel.server.identity import Parts, User
from agentkernel.server.parts import ServerParts
from agentkernel.server.problems import CALLER, documented
from agentkernel.server.routes.continuations import sealing_of
from agentkernel.server.run_streams import RunStreams, TooManyStreams
from agentkernel.server.sealing import Sealing, sealed_events
from agentkernel.server.sessions import SessionInfo
from agentkernel.services.turn_leases import Run

router = APIRouter(prefix="/v1/runs", tags=["runs"], responses=documented(*CALLER))

PAGE = 200
FIRST_RELEASE_POLL_SECS = 0.005
MOST_RELEASE_POLL_SECS = 0.1
"""Records read at once."""


def owned_run(parts: ServerParts, run_id: str, user: str) -> tuple[Run, SessionInfo]:
    """The caller's run and its session; 404 when it is unknown or someone else's (one answer for both)."""
    run = parts.kernel.run(run_id)
    info = None if run is None or run.user_id != user else parts.sessions.owned(run.session_id, user)
    if info is None and run is not None and run.user_id == user and run.one_off:  # a chat completion's
        info = SessionInfo(run.session_id, user, run.template, "")
    if run is None or info is None:
        raise HTTPException(404, f"no run {run_id!r}")
    return run, info


@router.get("/{run_id}", responses=documented(404))
async def get_run(run_id: str, user: User, parts: Parts) -> dict[str, Any]:
    """`{id, session_id, status, reason, answer, created_at, ended_at}`: `status` is `running` or `ended`
    (`reason` as in `done`); `answer` is the run's answer once it has one (null before, or without)."""
    run, _ = await asyncio.to_thread(owned_run, parts, run_id, user)
    answer = await asyncio.to_thread(_answer, parts.kernel, run.id)
    return {**run.to_json(), "answer": answer}


@router.get(
    "/{run_id}/events",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "the run's events"},
        **documented(404, 422, 429),
    },
)
async def run_events(
    run_id: str,
    request: Request,
    user: User,
    parts: Parts,
    after: Annotated[int | None, Query(ge=0, description="the id of the last event seen")] = None,
    # a plain string, "" when absent: a null would be a value to send
    last_event_id: Annotated[
        str, Header(pattern=r"^[0-9]{1,18}$", description="the id of the last event seen (SSE)")
    ] = "",
) -> StreamingResponse:
    """The run's events after the one whose id is `Last-Event-ID` (or `after`; from the start without
    either), as they were streamed, then the rest as they come, until `done`. Tokens are not kept:
    the `reply` after them holds the whole text."""
    since = after if after is not None else int(last_event_id or 0)
    return await stored_events(run_id, request, user, parts, since)


async def stored_events(
    run_id: str,
    request: Request,
    user: str,
    parts: ServerParts,
    since: int = 0,
    first: bytes = b"",
    *,
    released: bool = False,
) -> StreamingResponse:
    """The run's events from the store after `since` (see `run_events`), `first` before them: the
    response of a message whose run a worker drives (runs.engine: temporal) reads them so too, with
    `released`: its `done` waits until the worker has given the session back, so a next message sent
    on `done` is not 409 (the worker releases the session's lease just after the run's end)."""
    run, info = await asyncio.to_thread(owned_run, parts, run_id, user)
    try:
        parts.run_streams.check(user)
    except TooManyStreams as exc:
        raise HTTPException(429, str(exc)) from exc
    records = _frames(parts, sealing_of(request), run, info, since, first, released=released)
    frames = _held(parts.run_streams, user, records)
    return StreamingResponse(
        frames,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "X-Run-Id": run.id},
    )


async def _held(streams: RunStreams, user: str, frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """`frames`, counted as one of the user's open streams while they are read (a stream that got past
    the check with another at the same moment, over the cap, says so and ends)."""
    try:
        with streams.holding(user):
            async with contextlib.aclosing(frames) as events:  # type: ignore[type-var]
                async for frame in events:
                    yield frame
    except TooManyStreams as exc:
        yield StreamEvent("error", {"message": str(exc)}).frame()
        yield StreamEvent("done", {"reason": "error"}).frame()


async def _frames(
    parts: ServerParts,
    sealing: Sealing,
    run: Run,
    info: SessionInfo,
    since: int,
    first: bytes = b"",
    *,
    released: bool = False,
) -> AsyncIterator[bytes]:
    """The run's events from the store, after `since` (`first` before them), until its end (see the
    module docstring); between two reads, until the run may have more (run_wakeups.py)."""
    kernel, keepalive_secs = parts.kernel, parts.settings.keepalive_secs
    if first:
        yield first
    quiet_since = time.monotonic()
    while True:
        records = await asyncio.to_thread(kernel.run_records, run.id, since, PAGE)
        if records:
            quiet_since = time.monotonic()
            since = records[-1].id
            for event in await asyncio.to_thread(sealed_events, sealing, records, info):
                if event.type == "done" and released:
                    await _given_back(parts, run.session_id)
                yield event.frame()
                if event.type == "done":
                    return
            continue
        now = await asyncio.to_thread(kernel.run, run.id)
        if now is None or not now.running:
            if await asyncio.to_thread(kernel.run_records, run.id, since, 1):
                continue  # its last step committed between the two reads: its records first, then `done`
            if not await asyncio.to_thread(_saw_the_end, kernel, run.id, since):
                # ended without an end record (its turn failed): say so, once
                if released:
                    await _given_back(parts, run.session_id)
                yield StreamEvent("done", {"reason": (now.reason if now else None) or "error"}).frame()
            return
        await parts.run_wakeups.wait(run.id)
        if time.monotonic() - quiet_since >= keepalive_secs:
            quiet_since = time.monotonic()
            yield b": keep-alive\n\n"


async def _given_back(parts: ServerParts, session_id: str) -> None:
    """Until no turn holds the session (its worker released it), at most `server.turn_lease_secs`: by
    then a worker that died holding it has lost it too."""
    leases = parts.kernel.turn_leases()
    deadline = time.monotonic() + parts.settings.turn_lease_secs
    pause = FIRST_RELEASE_POLL_SECS
    while await asyncio.to_thread(leases.held, session_id) and time.monotonic() < deadline:
        await asyncio.sleep(pause)
        pause = min(pause * 2, MOST_RELEASE_POLL_SECS)


def _saw_the_end(kernel: Kernel, run_id: str, since: int) -> bool:
    """Whether the event the client saw last (`since`) is the run's end (blocking)."""
    last = kernel.run_records(run_id, since - 1, 1) if since > 0 else []
    return bool(last) and last[0].id == since and last[0].kind == "end"


def _answer(kernel: Kernel, run_id: str) -> str | None:
    """The run's last answer record, if it has one (blocking)."""
    answers = [record.content for record in kernel.run_journal(run_id) if record.kind == "agent"]
    return answers[-1] if answers else None


__all__ = ["router"]
