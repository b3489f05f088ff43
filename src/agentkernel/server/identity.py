"""Who is calling: a bearer token from `server.tokens`, or, with no tokens configured, `local`.

kernel.yaml holds the SHA-256 of each token, never the token. With no
tokens, the server refuses to bind anywhere but loopback (serving.py), and
this also refuses any request that does not come from loopback, in case
the app is served some other way, and any request addressed to a name other
than a loopback one: a web page on another site whose name its DNS server
re-points at 127.0.0.1 (DNS rebinding) is then same-origin with this server
in the browser, and only the `Host` header it sends tells it apart. A page
of another site may also post to 127.0.0.1 itself: some requests need no
CORS preflight (a body with no Content-Type, a POST with no body), and the
browser names the page in `Origin`, so a request naming a page that is not
on loopback is refused too (what the MCP SDK does on /mcp).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, HTTPException, Request

from agentkernel.config.server import LOCAL_USER, ServerSettings
from agentkernel.server.parts import ServerParts, server_parts

BEARER = "bearer "


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(host_header: str) -> str:
    """The name of a `Host` header without its port: `[::1]:8765` → `[::1]`, `localhost:80` → `localhost`."""
    if host_header.startswith("["):
        return host_header.split("]", 1)[0].lower() + "]"
    return (host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header).lower()


def origin_host(origin: str) -> str | None:
    """The host an `Origin` header names; None for `null`, `file://` or one that does not parse."""
    try:
        return urlsplit(origin).hostname or None
    except ValueError:
        return None


def local_refusal(client: str | None, host_header: str | None, origin: str | None = None) -> str | None:
    """Why a request is refused when no tokens are configured, or None: it must come from and be
    addressed to loopback, and a browser's must come from a loopback page (the module's docstring)."""
    if not is_loopback(client):
        return "no tokens are configured, so only loopback clients are served"
    if host_header is None or not is_loopback(host_name(host_header)):
        return (
            "no tokens are configured, so only requests addressed to localhost, 127.0.0.1 or [::1] "
            f"are served (Host: {host_header!r}); configure server.tokens to serve other names"
        )
    if origin is not None and not is_loopback(origin_host(origin)):
        return (
            "no tokens are configured, so only pages on localhost, 127.0.0.1 or [::1] may call this "
            f"server (Origin: {origin!r}); configure server.tokens to serve other pages"
        )
    return None


def token_user(authorization: str | None, settings: ServerSettings) -> str | None:
    """The user an `Authorization: Bearer TOKEN` header names in `server.tokens`; None for no header,
    another scheme or a token not configured. Every check of a token is this one (the routes, the rate
    limit, a worker's metrics page)."""
    if authorization is None or authorization[: len(BEARER)].lower() != BEARER:
        return None
    return settings.user_of(authorization[len(BEARER) :].strip())


def current_user(request: Request, parts: ServerParts) -> str:
    """The caller's user id; 401 for a missing or unknown token (the same answer for both)."""
    if not parts.settings.tokens:
        client = request.client.host if request.client is not None else None
        refusal = local_refusal(client, request.headers.get("host"), request.headers.get("origin"))
        if refusal is not None:
            raise HTTPException(403, refusal)
        return LOCAL_USER
    user = token_user(request.headers.get("authorization"), parts.settings)
    if user is None:
        raise HTTPException(401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})
    return user


async def caller(request: Request, parts: Annotated[ServerParts, Depends(server_parts)]) -> str:
    """`current_user` as a FastAPI dependency: async, so it runs on the event loop (it reads only memory;
    a plain function's dependency would cost every request a hop to a worker thread and back)."""
    return current_user(request, parts)


User = Annotated[str, Depends(caller)]
Parts = Annotated[ServerParts, Depends(server_parts)]

__all__ = [
    "Parts",
    "User",
    "caller",
    "current_user",
    "host_name",
    "is_loopback",
    "local_refusal",
    "token_user",
]
