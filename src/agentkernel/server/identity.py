"""Who is calling: a bearer token from `server.tokens`, or, with no tokens configured, `local`.

kernel.yaml holds the SHA-256 of each token, never the token. With no
tokens, the server refuses to bind anywhere but loopback (serving.py), and
this also refuses any request that does not come from loopback, in case
the app is served some other way.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from agentkernel.config.server import LOCAL_USER
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


def current_user(request: Request, parts: Annotated[ServerParts, Depends(server_parts)]) -> str:
    """The caller's user id; 401 for a missing or unknown token (the same answer for both)."""
    if not parts.settings.tokens:
        client = request.client.host if request.client is not None else None
        if not is_loopback(client):
            raise HTTPException(403, "no tokens are configured, so only loopback clients are served")
        return LOCAL_USER
    header = request.headers.get("authorization", "")
    user = None
    if header[: len(BEARER)].lower() == BEARER:
        user = parts.settings.user_of(header[len(BEARER) :].strip())
    if user is None:
        raise HTTPException(401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})
    return user


User = Annotated[str, Depends(current_user)]
Parts = Annotated[ServerParts, Depends(server_parts)]

__all__ = ["Parts", "User", "current_user", "is_loopback"]
