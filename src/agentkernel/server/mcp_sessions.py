"""`/mcp`'s session manager with a cap per user: server.max_mcp_sessions_per_user (docs/mcp.md 4).

The SDK's StreamableHTTPSessionManager caps handshake-era sessions only in
all (`max_sessions`, 10,000 by default, then 503 for everyone), so one
token holder opening sessions without end would lock every other user
out for as long as the idle timeout keeps them. The manager already binds
each session to the principal that opened it (mcp_mount.py passes the
user as the principal), and `_admit_session` is its one place where a new
session is admitted: called under its creation lock, so two `initialize`
requests of one user cannot both slip under the cap, and its owners table
forgets a session the moment it ends (DELETE, idle timeout, a failed
opening), which frees the slot with no bookkeeping of ours. It is a
private method, so tests/mcp_serve/test_serve_http.py checks the cap
through the real SDK: an SDK that renamed it fails there, not silently.

Imported only with the SDK, on the first request to `/mcp` (start-up time).
"""

from __future__ import annotations

from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.exceptions import HTTPException

from agentkernel.telemetry import metrics

SETTING = "server.max_mcp_sessions_per_user"
TOO_MANY_SESSIONS = 429


class PerUserSessions(StreamableHTTPSessionManager):
    """The SDK's manager, refusing a user's new session while they hold `max_per_user` open."""

    def __init__(self, *args: Any, max_per_user: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._max_per_user = max_per_user

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        """The SDK's admission, after our check; an HTTPException reaches the app's error handler.

        (`requestor` is never None here: the endpoint always names the caller.)
        """
        if requestor is not None:
            held = sum(1 for owner in self._session_owners.values() if owner == requestor)
            if held >= self._max_per_user:
                metrics.cap_refused(SETTING)
                raise HTTPException(
                    TOO_MANY_SESSIONS,
                    f"user {requestor['client_id']!r} has {held} MCP sessions open, the most {SETTING} "
                    f"({self._max_per_user}) allows; end one (DELETE /mcp with its Mcp-Session-Id) "
                    "or let one expire (server.mcp_session_idle_secs without a request)",
                )
        return super()._admit_session(requestor)


__all__ = ["SETTING", "PerUserSessions"]
