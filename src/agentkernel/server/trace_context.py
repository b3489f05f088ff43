"""A caller's W3C trace continued (S26.1): each HTTP request's `traceparent` becomes the current context.

A pure ASGI middleware, so every route (the API, the OpenAI endpoint, MCP
over HTTP at /mcp) runs inside it: a run a request starts is a child of
the caller's span, in the caller's trace. With traces off it passes the
request through untouched.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from agentkernel.telemetry.context import TRACEPARENT, TRACESTATE, continued
from agentkernel.telemetry.tracing import active

_WANTED = (TRACEPARENT.encode(), TRACESTATE.encode())


class TraceContext:
    """Runs each HTTP request in the trace its `traceparent` header names, when traces are on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or active() is None:
            await self.app(scope, receive, send)
            return
        headers = {
            name.decode(): value.decode("latin-1") for name, value in scope["headers"] if name in _WANTED
        }
        with continued(headers):
            await self.app(scope, receive, send)


__all__ = ["TraceContext"]
