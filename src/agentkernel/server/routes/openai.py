"""`POST /v1/chat/completions` and `GET /v1/models`: an agent for any OpenAI client (openai_shapes.py).

Each completion is a turn of a one-off session of the caller's (a fresh
session id, not in `GET /v1/sessions`: the client keeps the conversation,
and sends it whole each time). It runs like any turn — a task of its own,
the template's hooks and tools, recorded in the transcript, tables sealed
(S6.3), counted in server.max_running_turns_per_user. Unlike a session's
turn, nobody can read it later or stop it through `/stop`, so a client that
goes away stops it (it ends `terminated`, recorded) rather than leaving it
calling the LLM for nobody. The session id is in the extension field, to
find the turn in the transcript and the logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from agentkernel.config import ServerSettings
from agentkernel.errors import ConfigError
from agentkernel.llm.base import ChatMessage
from agentkernel.server.failures import error_body
from agentkernel.server.identity import Parts, User
from agentkernel.server.openai_shapes import ChunkStream, Completion, CompletionRequest, Refused, conversation
from agentkernel.server.parts import ServerParts, request_id
from agentkernel.server.problems import CALLER, documented
from agentkernel.server.routes.sessions import KEEPALIVE
from agentkernel.server.sessions import SessionInfo
from agentkernel.server.turns import TooManyTurns, Turn

router = APIRouter(prefix="/v1", tags=["openai"], responses=documented(*CALLER))
AGENT_ERROR_STATUS = 502  # the agent (its LLM, most often) could not answer: a bad gateway, not a bad request


@router.get("/models")
def list_models(user: User, parts: Parts) -> dict[str, Any]:
    """The templates that load, as OpenAI models (`{object: list, data: [{id, object, owned_by, …}]}`)."""
    models = [
        {"id": t.name, "object": "model", "created": 0, "owned_by": "agentkernel"}
        for t in parts.kernel.list_templates()
    ]
    return {"object": "list", "data": models}


@router.post(
    "/chat/completions",
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "a completion, or its chunks"},
        **documented(404, 413, 429, 502),
    },
)
async def chat_completions(body: CompletionRequest, request: Request, user: User, parts: Parts) -> Any:
    """A `chat.completion` (or, with `stream`, its chunks then `[DONE]`) answering the last user message.

    404 for an unknown `model`; 422 naming a field the agent cannot honour;
    413 naming the setting when the conversation is over one of its caps
    (`_within_caps`); 429 while the caller has
    server.max_running_turns_per_user turns running; 502 when the agent
    ends in error without an answer (no LLM reachable, say).
    """
    _within_count(len(body.messages), parts.settings)
    try:
        history, text = conversation(body)
    except Refused as exc:
        raise HTTPException(422, str(exc)) from exc
    except ValidationError as exc:  # as FastAPI reports a body that does not fit the schema
        problems = [{**e, "loc": ("body", "messages", *e["loc"])} for e in exc.errors()]
        raise RequestValidationError(problems) from exc
    _within_caps(history, text, parts.settings)
    session = await asyncio.to_thread(_one_off_session, parts, user, body.model)
    try:
        turn = parts.turns.start(session, text, request_id(request), history)
    except TooManyTurns as exc:
        raise HTTPException(429, str(exc)) from exc
    completion = Completion(body.model, session.id)
    if body.stream:
        return _TurnStream(
            turn,
            _chunks(turn, ChunkStream(completion), parts.settings.keepalive_secs),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    await _collect(turn, completion, request, parts.settings.keepalive_secs)
    if completion.failed:
        error = completion.error_body()
        shown = error_body(
            AGENT_ERROR_STATUS, error["message"], request_id(request), **_extension(completion)
        )
        return JSONResponse({**shown, "error": error}, status_code=AGENT_ERROR_STATUS)
    return completion.body()


def _within_count(count: int, settings: ServerSettings) -> None:
    """413 past server.max_completion_messages, before any message is looked at."""
    most = settings.max_completion_messages
    if count > most:
        raise HTTPException(
            413, f"body.messages: {count:,} messages; at most {most:,} (server.max_completion_messages)"
        )


def _within_caps(history: list[ChatMessage], text: str, settings: ServerSettings) -> None:
    """413 for a last message over server.max_message_chars, or earlier ones over their bytes' cap.

    Each earlier message passes the template's hooks before the LLM is
    asked (loop.py, `_vetted`), so what a request may carry is bounded in
    messages (`_within_count`) and in bytes: past that, the hooks' work
    and the LLM's prompt would be the client's to choose.
    """
    most = settings.max_message_chars
    if len(text) > most:
        raise HTTPException(
            413,
            f"body.messages: the last message has {len(text):,} characters; "
            f"at most {most:,} (server.max_message_chars)",
        )
    cap = settings.max_completion_history_bytes
    size = sum(len(m.content.encode("utf-8", "surrogatepass")) for m in history if m.content)
    if size > cap:
        raise HTTPException(
            413,
            f"body.messages: the earlier messages hold {size:,} bytes of text; "
            f"at most {cap:,} (server.max_completion_history_bytes)",
        )


def _one_off_session(parts: ServerParts, user: str, model: str) -> SessionInfo:
    """A fresh session of `user` with template `model`; 404 (the protocol's answer) when it does not load."""
    try:
        parts.kernel.template(model)
    except ConfigError as exc:
        known = ", ".join(t.name for t in parts.kernel.list_templates()) or "none"
        raise HTTPException(404, f"body.model: no model {model!r} (the templates: {known})") from exc
    return SessionInfo(str(uuid.uuid4()), user, model, datetime.now(UTC).isoformat())


class _TurnStream(StreamingResponse):
    """The chunks' response, which leaves the turn however it ends.

    A client gone while the first chunk (written before the turn's events
    are read) is being sent cancels the response with `_chunks` never
    having opened the events, so their own `finally` never runs; this one
    does, and the turn stops (a turn read to its end is not touched).
    """

    def __init__(self, turn: Turn, content: AsyncIterator[bytes], **options: Any) -> None:
        super().__init__(content, **options)
        self._turn = turn

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._turn.leave()


async def _collect(turn: Turn, completion: Completion, request: Request, keepalive_secs: float) -> None:
    """The turn's events into `completion`, or until the client goes away (then the turn stops).

    A plain response notices no disconnect by itself (a streamed one does:
    Starlette cancels it), so without watching for `http.disconnect` the
    handler would wait out a turn that goes on calling the LLM for nobody.
    """
    reading = asyncio.create_task(_take(turn, completion, keepalive_secs))
    watching = asyncio.create_task(_disconnected(request))
    try:
        await asyncio.wait((reading, watching), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watching.cancel()
        reading.cancel()  # nothing when it has ended; else its reader leaves, which stops the turn
        await asyncio.wait((reading, watching))
    if not reading.cancelled():
        reading.result()  # its failure, if any, is this request's


async def _take(turn: Turn, completion: Completion, keepalive_secs: float) -> None:
    async with contextlib.aclosing(turn.events(keepalive_secs)) as events:
        async for event in events:
            if event is not None:
                completion.take(event)


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (the body was read already, so nothing else comes)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _extension(completion: Completion) -> dict[str, Any]:
    return {"agentkernel": completion.body()["agentkernel"]}


def _data(payload: object) -> bytes:
    return f"data: {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


async def _chunks(turn: Turn, stream: ChunkStream, keepalive_secs: float) -> AsyncIterator[bytes]:
    """The chunks as the turn goes; an agent that failed without an answer ends with an error object."""
    yield _data(stream.opening())
    # closed with the response, so a client gone leaves the turn's events at once, which stops the turn
    async with contextlib.aclosing(turn.events(keepalive_secs)) as events:
        async for event in events:
            if event is None:
                yield KEEPALIVE
                continue
            for chunk in stream.chunks(event):
                yield _data(chunk)
    if stream.completion.failed:  # what OpenAI SDKs raise from, mid-stream
        yield _data({"error": stream.completion.error_body()})
    yield b"data: [DONE]\n\n"


__all__ = ["AGENT_ERROR_STATUS", "router"]
