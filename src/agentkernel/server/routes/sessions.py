"""Sessions and their messages: create, list the caller's, read a transcript, send a message (SSE).

Another user's session is answered exactly as an unknown one (404), so ids
cannot be probed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import sqlite3
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from agentkernel.errors import ConfigError
from agentkernel.server.events import StreamEvent
from agentkernel.server.identity import Parts, User
from agentkernel.server.parts import ServerParts, request_id
from agentkernel.server.problems import CALLER, documented
from agentkernel.server.routes.continuations import sealing_of
from agentkernel.server.routes.runs import run_events, stored_events
from agentkernel.server.sealing import seal_records
from agentkernel.server.sessions import SessionInfo
from agentkernel.server.turns import Retry, SameRun, TooManyTurns, Turn, TurnBusy
from agentkernel.services.run_engine import EngineUnavailable

MAX_KEY_CHARS = 255
KEY_PATTERN = r"^[!-~]+$"
"""An Idempotency-Key: visible ASCII, as Stripe's and the IETF draft's."""

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], responses=documented(*CALLER))
log = logging.getLogger(__name__)


class NewSession(BaseModel):
    template: str = Field(min_length=1, description="the agent's template, e.g. hello-agent")


class NewMessage(BaseModel):
    content: str = Field(description="the user's message (at most server.max_message_chars characters)")


def owned_session(parts: ServerParts, session_id: str, user: str) -> SessionInfo:
    """The caller's session; 404 when it is unknown or someone else's (one answer for both)."""
    info = parts.sessions.owned(session_id, user)
    if info is None:
        raise HTTPException(404, f"no session {session_id!r}")
    return info


@router.post("", status_code=201, responses=documented(413))
async def create_session(body: NewSession, user: User, parts: Parts) -> dict[str, str]:
    """A new session with `template`; 422 naming `body.template` when it does not load.

    Made here on the event loop when the sessions file takes the row at once (the template looked
    up as a turn looks up its tools: from what the folder's watch vouches for, a look at the files
    at most once a second); else on one worker thread, as a store that would wait (another
    writer, PostgreSQL's) needs.
    """
    _loaded(parts, body.template)
    made = parts.sessions.create_at_once(user, body.template)
    if made is None:
        made = await asyncio.to_thread(parts.sessions.create, user, body.template)
    return made.to_json()


def _loaded(parts: ServerParts, template: str) -> None:
    """Nothing if `template` loads; else 422 naming `body.template` and why."""
    try:
        parts.kernel.template(template)
    except ConfigError as exc:
        known = ", ".join(t.name for t in parts.kernel.list_templates()) or "none"
        loads = template in known.split(", ")
        why = "does not load (see `agentkernel check`)" if loads else f"is unknown (loaded: {known})"
        raise HTTPException(422, f"body.template: template {template!r} {why}") from exc


@router.get("")
def list_sessions(user: User, parts: Parts) -> list[dict[str, str]]:
    """The caller's sessions, oldest first; `title` is the first message, shortened ("" before one)."""
    return [info.to_json() for info in parts.sessions.of_user(user)]


@router.get("/{session_id}/messages", responses=documented(404))
def transcript(
    session_id: str,
    request: Request,
    user: User,
    parts: Parts,
    limit: Annotated[int | None, Query(ge=1, description="the last N records")] = None,
) -> list[dict[str, Any]]:
    """The session's transcript, oldest first: the last `limit` records (default server.transcript_limit).

    A tool result's visual blocks are in its `meta.visual`, tables and files sealed as everywhere
    (S6.2, S6.3).
    """
    info = owned_session(parts, session_id, user)
    most = parts.settings.transcript_limit
    shown = parts.kernel.transcript(info.id, min(limit or most, most), user_id=info.user_id)
    records = [record.to_json() for record in shown]
    return seal_records(sealing_of(request), records, info)


@router.post(
    "/{session_id}/messages",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "the turn's events"},
        **documented(404, 409, 413, 422, 429),
    },
)
async def send_message(
    session_id: str,
    body: NewMessage,
    request: Request,
    user: User,
    parts: Parts,
    # a plain string, "" when absent: a null would be a value to send
    idempotency_key: Annotated[
        str,
        Header(
            min_length=1,
            max_length=MAX_KEY_CHARS,
            pattern=KEY_PATTERN,
            description="the same key (1-255 visible ASCII characters, a UUID say) is the same run: S25.5",
        ),
    ] = "",
) -> StreamingResponse:
    """Answer `content` as a stream of events; the turn goes on if the client goes away.

    The turn is a run: its id is in the `X-Run-Id` header and the first event (`run`). With an
    `Idempotency-Key` already sent with the same message, the answer is that run's events (from the
    store, as GET /v1/runs/{id}/events gives them), never a second run; with another message, 409.
    413 past server.max_message_chars; 409 while the session answers its previous message;
    429 while the caller has server.max_running_turns_per_user turns running, or has spent a quota
    (kernel.yaml `quotas:`, S26.3).
    """
    info = owned_session(parts, session_id, user)
    most = parts.settings.max_message_chars
    if len(body.content) > most:
        raise HTTPException(413, f"body.content: {len(body.content):,} characters; at most {most:,}")
    retry = None if not idempotency_key else Retry(idempotency_key, _hash(info.id, body.content))
    try:
        turn = await parts.turns.start(info, body.content, request_id(request), retry=retry)
    except SameRun as exc:
        if not exc.same_body:
            raise HTTPException(409, str(exc)) from exc
        return await run_events(exc.run.id, request, user, parts)
    except TurnBusy as exc:
        raise HTTPException(409, str(exc)) from exc
    except TooManyTurns as exc:
        raise HTTPException(429, str(exc)) from exc
    except EngineUnavailable as exc:  # runs.engine: temporal, and Temporal does not answer: nothing runs
        raise HTTPException(503, str(exc)) from exc
    if not info.title:
        await _name(parts, info, body.content)
    if turn.remote:  # runs.engine: temporal: a worker answers; its events are read from the store
        begun = StreamEvent("run", {"id": turn.run_id, "session_id": turn.session_id}).frame()
        return await stored_events(turn.run_id, request, user, parts, first=begun, released=True)
    return StreamingResponse(
        _frames(turn, parts.settings.keepalive_secs),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "X-Run-Id": turn.run_id},
    )


def _hash(*parts: str) -> str:
    """What a retry must repeat to be the same request: a hash of its session and message."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


@router.post("/{session_id}/stop", responses=documented(404))
async def stop_turn(session_id: str, user: User, parts: Parts) -> dict[str, bool]:
    """`{stopped}`: stop the answer being made now; it ends with `done` reason `terminated`, recorded.

    A running tool call is waited for; no further LLM or tool call is made.
    `stopped` is false when the session was not answering. A turn another
    server process runs stops within a second (it looks in the store).
    """
    info = owned_session(parts, session_id, user)
    return {"stopped": await parts.turns.stop_anywhere(info.id)}


async def _name(parts: ServerParts, info: SessionInfo, message: str) -> None:
    """Title the session after its first message; the turn runs on whether or not the store takes it.

    On the event loop when the store takes the write at once (a worker
    thread's hop costs more than the write), else on a worker thread.
    """
    try:
        if parts.sessions.name_at_once(info.id, message) is None:
            await asyncio.to_thread(parts.sessions.name, info.id, message)
    except sqlite3.Error as exc:
        log.warning("session %s keeps no title: the sessions file refused it: %s", info.id, exc)


KEEPALIVE = b": keep-alive\n\n"  # an SSE comment: clients ignore it, proxies see traffic


async def _frames(turn: Turn, keepalive_secs: float) -> AsyncIterator[bytes]:
    """The turn's frames, those waiting together in one write; closed with the response, so a client
    gone drops the turn's queue at once (turns.py)."""
    async with contextlib.aclosing(turn.batches(keepalive_secs)) as batches:
        async for batch in batches:
            yield KEEPALIVE if batch is None else b"".join(event.frame() for event in batch)
