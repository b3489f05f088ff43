"""A user's request past `server.requests_per_user_per_sec` is refused with 429 before any work is done.

A plain ASGI layer around the whole app, outside even FastAPI's and
Starlette's own middleware (serving.server_for puts it there): it reads
the bearer token with the one lookup every route uses
(identity.token_user) and asks the user's bucket (request_rates.py). A
refused request is answered at once, with `Retry-After` and its own
request id: its body is never read, no route is matched and no dependency
solved, so a flood costs the server what parsing its requests costs, no
more than a bare uvicorn app answering at once (inside the app's own
middleware it cost more: docs/benchmarks.md). Every request that carries a token of
`server.tokens` is counted, whatever its path: the API, the
OpenAI-compatible routes, `/mcp`, `/metrics`. A request with no token or
an unknown one passes on to its route's own 401 (or to a route that needs
none, `/healthz`): it names no user to count, and a bucket per unknown
token would grow with them.

Nobody is held with no tokens configured (everyone is `local`, the one
user, with nobody else to protect) or with
`server.requests_per_user_per_sec: null`: the app is then served bare.
"""

from __future__ import annotations

import json
import uuid

from starlette.types import ASGIApp, Receive, Scope, Send

from agentkernel.config import ServerSettings
from agentkernel.server.failures import HEADER, error_body
from agentkernel.server.identity import token_user
from agentkernel.server.request_rates import RATE_SETTING, RequestRates, retry_after, user_rates
from agentkernel.telemetry import metrics

_AUTHORIZATION = b"authorization"  # ASGI servers give header names in lower case
_REQUEST_ID = HEADER.lower().encode()


class UserRateLimit:
    """Answers 429 for a request whose token's user has sent past their rate; passes every other on."""

    def __init__(self, app: ASGIApp, settings: ServerSettings, rates: RequestRates) -> None:
        self.app = app
        self.settings = settings
        self.rates = rates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            user = token_user(_authorization(scope), self.settings)
            wait = 0.0 if user is None else self.rates.wait(user)
            if wait and user is not None:
                await self._refuse(send, user, wait)
                return
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send, user: str, wait: float) -> None:
        """The house's error body (failures.error_body) with a request id of its own, as RequestIds would
        give (the refusal never reaches it), and `Retry-After` the whole seconds to wait."""
        metrics.cap_refused(RATE_SETTING)
        rid = uuid.uuid4().hex
        body = json.dumps(error_body(429, self.rates.refusal(user, wait), rid)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            (b"retry-after", b"%d" % retry_after(wait)),
            (_REQUEST_ID, rid.encode()),
        ]
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _authorization(scope: Scope) -> str | None:
    """The request's `Authorization` header, or None."""
    for name, value in scope["headers"]:
        if name == _AUTHORIZATION:
            return str(value.decode("latin-1"))
    return None


def limited(app: ASGIApp, settings: ServerSettings) -> ASGIApp:
    """`app` behind the rate limit when anyone is held (tokens and a rate); `app` itself otherwise."""
    rates = user_rates(settings)
    return app if rates is None else UserRateLimit(app, settings, rates)


__all__ = ["UserRateLimit", "limited"]
