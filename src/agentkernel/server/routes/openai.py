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

Every refusal here is OpenAI's error object (`OpenAIRoute`): a request
that does not fit is 400 naming the `param`, as OpenAI answers, and a
failed turn has its cause's status, with `x-should-retry: false` where the
SDKs' retry would run the turn's tools again (openai_shapes.Failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from agentkernel.agent.loop import TurnOptions
from agentkernel.config import ServerSettings
from agentkernel.config.templates import TemplateSpec
from agentkernel.errors import ConfigError
from agentkernel.llm.base import ChatMessage, ToolCall
from agentkernel.server.completion_retries import (
    body_hash,
    earlier_run,
    ended_records,
    is_retry,
    recorded_usage,
    replayed,
)
from agentkernel.server.events import StreamEvent
from agentkernel.server.failures import error_body, field_problems
from agentkernel.server.identity import Parts, User
from agentkernel.server.openai_shapes import (
    Bounds,
    ChunkStream,
    Completion,
    CompletionRequest,
    Refused,
    conversation,
)
from agentkernel.server.parts import ServerParts, request_id
from agentkernel.server.problems import documented
from agentkernel.server.routes.continuations import sealing_of
from agentkernel.server.routes.sessions import KEEPALIVE
from agentkernel.server.sessions import SessionInfo
from agentkernel.server.turns import Retry, TooManyTurns, Turn
from agentkernel.services.turn_leases import Run

NO_RETRY = {"x-should-retry": "false"}  # what OpenAI's SDKs obey: a retry would run the turn's tools again


def openai_error(
    request: Request,
    status: int,
    message: str,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An error in OpenAI's shape, `{"error": {message, type, param, code}}`, beside the API's own fields."""
    body = error_body(status, message, request_id(request))
    error = body["error"]
    assert isinstance(error, dict)
    body["error"] = {**error, "param": param, "code": None}
    return JSONResponse(body, status_code=status, headers=headers)


class OpenAIRoute(APIRoute):
    """A route whose every refusal is OpenAI's error object, a request that does not fit the schema a 400.

    OpenAI answers a malformed request with 400 `invalid_request_error`
    naming the `param`, which its SDKs raise as BadRequestError; FastAPI's
    422 would be an UnprocessableEntityError no client expects.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                problems = field_problems(exc, request)
                text = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
                return openai_error(request, 400, text, problems[0]["field"] if problems else None)
            except StarletteHTTPException as exc:
                param = exc.detail.split(":", 1)[0] if exc.detail.startswith("body.") else None
                return openai_error(request, exc.status_code, exc.detail, param, exc.headers)

        return answer


# a request that does not fit is 400 here, where CALLER's other routes answer 422
router = APIRouter(
    prefix="/v1", tags=["openai"], responses=documented(401, 403, 400, 500), route_class=OpenAIRoute
)


@router.get("/models")
def list_models(user: User, parts: Parts) -> dict[str, Any]:
    """The templates that load, as OpenAI models (`{object: list, data: [{id, object, owned_by, …}]}`)."""
    return {"object": "list", "data": [_model(t.name) for t in parts.kernel.list_templates()]}


@router.get("/models/{model_id}", responses=documented(404))
def retrieve_model(model_id: str, user: User, parts: Parts) -> dict[str, Any]:
    """One template as an OpenAI model; 404 for a name that is no template that loads."""
    known = [t.name for t in parts.kernel.list_templates()]
    if model_id not in known:
        raise HTTPException(
            404, f"model_id: no model {model_id!r} (the templates: {', '.join(known) or 'none'})"
        )
    return _model(model_id)


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "agentkernel"}


@router.post(
    "/chat/completions",
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "a completion, or its chunks"},
        **documented(404, 413, 429, 502, 503),
    },
)
async def chat_completions(body: CompletionRequest, request: Request, user: User, parts: Parts) -> Any:
    """A `chat.completion` (or, with `stream`, its chunks then `[DONE]`) answering the last user message.

    400 naming the field for a request the agent cannot honour; 404 for an
    unknown `model`; 413 naming the setting when the conversation is over
    one of its caps (`_within_caps`); 429 while the caller has
    server.max_running_turns_per_user turns running. A turn that ends in
    error without an answer has the status of its cause (openai_shapes.py,
    `Failure`): 400 for a request the LLM refused, 502 when it is down, …,
    with `x-should-retry: false` once a tool ran.
    """
    _within_count(len(body.messages), parts.settings)
    template = await asyncio.to_thread(_template, parts, body.model)
    limits = parts.kernel.config.limits
    bounds = Bounds(parts.settings.max_completion_tools, limits.schema_bounds, limits.timeout_secs)
    try:
        asked = conversation(body, template.allowed_tools(), bounds)
    except Refused as exc:
        return openai_error(request, 400, str(exc), exc.field)
    except ValidationError as exc:  # as FastAPI reports a body that does not fit the schema
        problems = [{**e, "loc": ("body", "messages", *e["loc"])} for e in exc.errors()]
        raise RequestValidationError(problems) from exc
    _within_caps(asked.history, asked.text or "", parts.settings)
    digest = body_hash(user, body)
    if is_retry(request):  # the SDK's retry: the run it repeats, when running it again could repeat an effect
        earlier = await asyncio.to_thread(earlier_run, parts.kernel, user, digest)
        if earlier is not None:
            return await _answered_before(request, body, earlier, parts)
    session = SessionInfo(str(uuid.uuid4()), user, body.model, datetime.now(UTC).isoformat())
    try:
        turn = await parts.turns.start(
            session,
            asked.text,
            request_id(request),
            asked.history,
            _options(asked.options, body, parts),
            Retry(None, digest),
        )
    except TooManyTurns as exc:
        raise HTTPException(429, str(exc)) from exc
    completion = Completion(body.model, session.id, turn.run_id)
    if body.stream:
        include_usage = bool((body.stream_options or {}).get("include_usage"))
        return _TurnStream(
            turn,
            _chunks(turn, ChunkStream(completion, include_usage), parts.settings.keepalive_secs),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    await _collect(turn, completion, request, parts.settings.keepalive_secs)
    completion.end(turn.result)
    if completion.failed:
        failure = completion.failure()
        shown = error_body(
            failure.status, failure.error["message"], request_id(request), **_extension(completion)
        )
        headers = None if failure.retry else NO_RETRY
        return JSONResponse({**shown, "error": failure.error}, status_code=failure.status, headers=headers)
    return completion.body()


def _options(options: TurnOptions, body: CompletionRequest, parts: ServerParts) -> TurnOptions:
    """A non-streamed request holds its client while a call waits for a person: that long at most
    (approvals.completion_wait_secs), then the call is denied, saying so. A stream waits on (kept alive)."""
    if body.stream:
        return options
    return replace(options, approval_wait_secs=parts.kernel.config.approvals.completion_wait_secs)


async def _answered_before(request: Request, body: CompletionRequest, run: Run, parts: ServerParts) -> Any:
    """A retry's answer: the run it repeats, once ended, as its own request would have been answered."""
    records = await ended_records(parts.kernel, run)
    session = SessionInfo(run.session_id, run.user_id, run.template or body.model, "")
    events, theirs = await asyncio.to_thread(replayed, sealing_of(request), records, session)
    completion = Completion(body.model, run.session_id, run.id)
    completion.usage = recorded_usage(records)
    if body.stream:
        stream = ChunkStream(completion, bool((body.stream_options or {}).get("include_usage")))
        return StreamingResponse(
            _replayed_chunks(stream, events, theirs),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Run-Id": run.id},
        )
    for event in events:
        completion.take(event)
    completion.client_calls = theirs
    if completion.failed:
        failure = completion.failure()
        shown = error_body(
            failure.status, failure.error["message"], request_id(request), **_extension(completion)
        )
        return JSONResponse({**shown, "error": failure.error}, status_code=failure.status, headers=NO_RETRY)
    return JSONResponse(completion.body(), headers={"X-Run-Id": run.id})


async def _replayed_chunks(
    stream: ChunkStream, events: list[StreamEvent], theirs: tuple[ToolCall, ...]
) -> AsyncIterator[bytes]:
    yield _data(stream.opening())
    for event in events:
        for chunk in stream.chunks(event):
            yield _data(chunk)
    stream.completion.client_calls = theirs
    for chunk in stream.closing(None):
        yield _data(chunk)
    if stream.completion.failed:
        yield _data({"error": stream.completion.failure().error})
    yield b"data: [DONE]\n\n"


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


def _template(parts: ServerParts, model: str) -> TemplateSpec:
    """The template `model` names; 404 (the protocol's answer) when it does not load."""
    try:
        return parts.kernel.template(model)
    except ConfigError as exc:
        known = ", ".join(t.name for t in parts.kernel.list_templates()) or "none"
        raise HTTPException(404, f"body.model: no model {model!r} (the templates: {known})") from exc


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
    for chunk in stream.closing(turn.result):
        yield _data(chunk)
    if stream.completion.failed:  # what OpenAI SDKs raise from, mid-stream
        yield _data({"error": stream.completion.failure().error})
    yield b"data: [DONE]\n\n"


__all__ = ["NO_RETRY", "OpenAIRoute", "openai_error", "router"]
