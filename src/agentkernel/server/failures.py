"""Request ids and errors that never show a traceback: every 500 is logged with an id the client also sees.

`RequestIds` is a plain ASGI middleware (it must not buffer a streamed
response): it gives each request an id, sends it back in `X-Request-Id`, and
turns any exception a route lets escape into a logged 500 whose body
carries the same id. The handlers give every other error the same shape
(a per-user cap's refusal, TooMuchWork, and a quota's, QuotaExhausted, included: 429),
`{"detail": …, "request_id": …, "error": {message, type}}`; a 422 also
lists each field at fault. `error` is the OpenAI error object, so OpenAI
SDKs talking to `/v1/chat/completions` show our message, not a bare code.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentkernel.errors import QuotaExhausted, StoreUnavailable
from agentkernel.server.body_limit import BodyLimit
from agentkernel.server.parts import request_id
from agentkernel.services.user_work import TooMuchWork

log = logging.getLogger("agentkernel.server")
HEADER = "X-Request-Id"
STORE_RETRY_AFTER_SECS = 5
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
_ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "server_error",
    503: "server_error",
}


def error_body(status: int, detail: object, request_id: str, **more: object) -> dict[str, object]:
    """Every error's body: `detail`, `request_id`, then `more`, and the OpenAI `error` object."""
    kind = _ERROR_TYPES.get(status, "invalid_request_error")
    message = detail if isinstance(detail, str) else json.dumps(detail)
    return {"detail": detail, "request_id": request_id, **more, "error": {"message": message, "type": kind}}


class RequestIds:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = rid
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                MutableHeaders(scope=message).append(HEADER, rid)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception("request %s: %s %s failed", rid, scope.get("method"), scope.get("path"))
            if started:  # a stream already under way: the client sees it end early; the log has why
                return
            body = json.dumps(error_body(500, "internal server error", rid)).encode()
            await send_with_id(
                {
                    "type": "http.response.start",
                    "status": 500,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", b"%d" % len(body)),
                    ],
                }
            )
            await send_with_id({"type": "http.response.body", "body": body})


def _field(location: tuple[object, ...] | list[object]) -> str:
    """`body.content`, `query.limit`: where FastAPI found the problem, dotted."""
    return ".".join(str(part) for part in location) or "body"


def _problem(error: Mapping[str, Any]) -> dict[str, str]:
    """One `{field, message}`; JSON that does not parse is the body's fault, at a character (not `body.0`)."""
    if error.get("type") == "json_invalid":
        at = error.get("loc", ("body", "?"))[-1]
        why = error.get("ctx", {}).get("error", "JSON decode error")
        return {"field": "body", "message": f"not valid JSON: {why} (at character {at})"}
    return {"field": _field(error.get("loc", ())), "message": str(error.get("msg", ""))}


def _invalid_body(request: Request, problems: list[dict[str, str]]) -> JSONResponse:
    text = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
    return JSONResponse(error_body(422, text, request_id(request), errors=problems), status_code=422)


def field_problems(exc: RequestValidationError, request: Request) -> list[dict[str, str]]:
    """Each field at fault, `{field, message}`, as every 422 lists them (the OpenAI routes' 400s too)."""
    return [_not_json(request, e) or _problem(e) for e in exc.errors()]


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return _invalid_body(request, field_problems(exc, request))


def _not_json(request: Request, error: Mapping[str, Any]) -> dict[str, str] | None:
    """A body not declared JSON is not read as JSON: say which header to send; None for other problems.

    FastAPI parses a body only under `Content-Type: application/json` (or
    `+json`); under none or another it keeps the bytes, and the error was
    "Input should be a valid dictionary". That stays a refusal (a page of
    another site may post such a body without a CORS preflight, docs/server.md
    section 2), now saying why.
    """
    if tuple(error.get("loc", ())) != ("body",) or not isinstance(error.get("input"), bytes):
        return None
    given = request.headers.get("content-type")
    sent = "no Content-Type header" if given is None else f"Content-Type {given!r}"
    return {
        "field": "body",
        "message": f"not read as JSON: the request has {sent}; send Content-Type: application/json",
    }


def _unreadable(exc: StarletteHTTPException) -> str | None:
    """Why FastAPI could not read a body as JSON where it answers a bare 400; None for any other error.

    FastAPI turns what json.loads raises besides JSONDecodeError into
    `400 There was an error parsing the body`, naming no field: bytes that
    are not UTF-8, arrays nested too deep to parse, or an integer longer
    than Python reads (`sys.get_int_max_str_digits`). All are malformed
    JSON, which the API answers with 422 naming `body`.
    """
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None:
        return None
    if isinstance(cause, UnicodeDecodeError):
        return f"not valid JSON: not UTF-8 text (byte {cause.object[cause.start]:#04x} at {cause.start})"
    if isinstance(cause, RecursionError):
        return "not valid JSON: nested too deeply to read"
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):
        return f"not valid JSON: an integer of more than {sys.get_int_max_str_digits():,} digits"
    return None


def _allowed(request: Request) -> str:
    """Every method the path answers, for a 405's `Allow` (RFC 9110 section 15.5.6).

    Starlette names only the methods of the first route whose path matched,
    so `DELETE /v1/sessions` said `Allow: POST` though GET is served too.
    """
    routes = request.app.router.routes
    return ", ".join(
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)
    )


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    unreadable = _unreadable(exc)
    if unreadable is not None:
        return _invalid_body(request, [{"field": "body", "message": unreadable}])
    headers = exc.headers
    if exc.status_code == 405 and (allowed := _allowed(request)):  # (a mount, /static, answers for itself)
        headers = {**(headers or {}), "Allow": allowed}
    return JSONResponse(
        error_body(exc.status_code, exc.detail, request_id(request)),
        status_code=exc.status_code,
        headers=headers,
    )


async def _quota(request: Request, exc: Exception) -> JSONResponse:
    """A quota of kernel.yaml's `quotas:` (S26.3): 429 naming the quota, the use and the reset, as OpenAI
    says it (`insufficient_quota`); `Retry-After` is the time to the reset, and `x-should-retry: false`
    keeps OpenAI's SDKs from asking again before it."""
    assert isinstance(exc, QuotaExhausted)
    quota = {"name": exc.quota, "template": exc.template, "used": exc.used, "limit": exc.limit}
    body = error_body(429, str(exc), request_id(request), quota={**quota, "resets_at": exc.resets_at})
    body["error"] = {
        "message": str(exc),
        "type": "insufficient_quota",
        "param": None,
        "code": "quota_exhausted",
    }
    headers = {"Retry-After": str(exc.retry_after_secs), "x-should-retry": "false"}
    return JSONResponse(body, status_code=429, headers=headers)


async def _too_much(request: Request, exc: Exception) -> JSONResponse:
    """A per-user cap (user_work.py): 429, the detail naming the setting, its limit and how many run."""
    assert isinstance(exc, TooMuchWork)
    return JSONResponse(error_body(429, str(exc), request_id(request)), status_code=429)


async def _store_down(request: Request, exc: Exception) -> JSONResponse:
    """The store database is down or unreachable (S27.2): 503, saying which (password masked), with
    `Retry-After`: nothing was half-written (each write is one transaction), so sending again is safe."""
    assert isinstance(exc, StoreUnavailable)
    log.warning("request %s: %s", request_id(request), exc)
    body = error_body(503, str(exc), request_id(request))
    return JSONResponse(body, status_code=503, headers={"Retry-After": str(STORE_RETRY_AFTER_SECS)})


def install(app: FastAPI, max_body_bytes: int) -> None:
    """The middleware and the handlers, on `app`: request ids outermost, then the body limit."""
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(RequestIds)  # added last: runs first
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(TooMuchWork, _too_much)
    app.add_exception_handler(QuotaExhausted, _quota)
    app.add_exception_handler(StoreUnavailable, _store_down)


__all__ = ["HEADER", "RequestIds", "error_body", "field_problems", "install"]
