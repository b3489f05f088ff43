"""A request body past `server.max_body_bytes` is refused with 413 before it is all read.

FastAPI reads a whole JSON body before any route sees it, so a client could
make the server hold any amount of memory; this plain ASGI middleware
refuses a declared `Content-Length` over the limit at once, and stops
reading a chunked body the moment it passes the limit.
"""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class _TooLarge(HTTPException):
    """An HTTPException, so FastAPI's body parsing passes it on as it is (it turns other errors into 400)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"the request body is over server.max_body_bytes ({max_bytes:,} bytes)")


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, send)
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _TooLarge(self.max_bytes)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if not started:
                await self._refuse(scope, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        detail = _TooLarge(self.max_bytes).detail
        rid = scope.get("state", {}).get("request_id", "-")
        body = json.dumps({"detail": detail, "request_id": rid}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


__all__ = ["BodyLimit"]
