"""`/mcp` in `agentkernel serve`: the tools over MCP's streamable HTTP, behind the server's bearer tokens.

`/mcp` offers every tool the caller may call; `/mcp/{template}` only that
template's tools (a template that does not load is 404, its body both the
server's error body and a JSON-RPC error, so an MCP client shows the message
naming the paths that serve, not a bare "Not Found"). Who is calling
is decided exactly as on the other routes (server/identity.py): a bearer
token from `server.tokens`, or, with no tokens configured, `local` on
loopback only, for requests addressed to a loopback name; there the SDK's
own check also refuses a request whose `Origin` is not a loopback page.

Sessions: a handshake-era (2025) client holds an MCP session
(`Mcp-Session-Id`), and each such connection is one agentkernel session
(scratch folder, tool-result history), answered only for the user who
opened it (another user naming its id gets the 404 of an unknown one). A 2026-07-28 client sends every
request on its own, with nothing tying one to the next, so its calls share
one session per user and path (`mcp` or `mcp-{template}`). A user holds at
most server.max_mcp_sessions_per_user handshake-era sessions (mcp_sessions.py).
A handshake-era session lives in the process that opened it; with
`server.mcp_stateless: true` the SDK's stateless mode keeps none (no
`Mcp-Session-Id`, no notification stream), every request is answered on its
own as a 2026-07-28 one is, by whichever server process it reaches, and the
calls share the one session per user and path.
Each `tools/call` is a tool run of the user's (server/tool_runs.py): counted
against server.max_running_tool_runs_per_user with their other tool runs
and continuations (past it, an error result naming the setting), and given
a budget of server.tool_run_token_budget tokens.

Start-up: the SDK is slow to import, so nothing is imported until the
first request to `/mcp`; that request waits while a worker thread imports
it, then the SDK's session manager is started on a task of the server's
event loop that lives until shutdown (its task group must be entered and
left by one task). Later requests go straight through.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from agentkernel.config import ServerSettings
from agentkernel.errors import ConfigError
from agentkernel.identity import Caller
from agentkernel.server.failures import error_body
from agentkernel.server.identity import current_user
from agentkernel.server.parts import ServerParts, request_id
from agentkernel.server.sealing import Sealing, seal_result
from agentkernel.tools.sources.mcp.nesting import CHAIN_HEADER, chain_from, loop_problem
from agentkernel.types import JSONObject

if TYPE_CHECKING:
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from agentkernel.mcp_serve.serving import Context, Identity, ToolServer

log = logging.getLogger("agentkernel.mcp")

PATH = "/mcp"
USER_KEY, TEMPLATE_KEY = "mcp_user", "mcp_template"  # request.state, set before the SDK sees the request
SESSION_KEY = "agentkernel.session"  # a handshake-era connection's `state`: its agentkernel session id
INVALID_REQUEST = -32600  # JSON-RPC's code, as the SDK's own 404s (an unknown session) give it


class McpEndpoint:
    """The ASGI endpoint of `/mcp` and `/mcp/{template}`: who calls, which template, then the SDK."""

    def __init__(self, parts: ServerParts, sealing: Sealing) -> None:
        self._parts = parts
        self._sealing = sealing
        self._wanted = asyncio.Event()
        self._stop = asyncio.Event()
        self._started: asyncio.Future[StreamableHTTPSessionManager] | None = None
        self._tools: ToolServer | None = None
        self._streams: set[anyio.CancelScope] = set()  # the open GET streams of handshake-era sessions

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The app's lifespan holds this: the SDK starts on first use, on this task's loop, and stops here."""
        self._started = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._serve(), name="agentkernel-mcp")
        try:
            yield
        finally:
            self._stop.set()
            self._wanted.set()
            await task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        user = current_user(request, self._parts)  # HTTPException 401/403: the app's error body
        template = request.path_params.get("template")
        if template is not None:
            unknown = await self._unknown_template(template)
            if unknown is not None:
                await _not_found(request, unknown)(scope, receive, send)
                return
            chain = chain_from(request.headers.get(CHAIN_HEADER))
            problem = loop_problem(chain, self._parts.kernel.config.root, template)
            if problem is not None:  # asked by a server of this template, for it: refused, not awaited
                raise HTTPException(508, problem)
        request.state.mcp_user = user
        request.state.mcp_template = template
        manager = await self._manager()
        scope["user"] = _principal(user)
        if request.method != "GET":
            await manager.handle_request(scope, receive, send)
            return
        sent = _Progress(send)
        with anyio.CancelScope() as stream:  # a session's notification stream: open until it or we end it
            self._streams.add(stream)
            try:
                await manager.handle_request(scope, receive, sent)
            finally:
                self._streams.discard(stream)
        if stream.cancelled_caught and sent.started and not sent.finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def end_streams(self) -> None:
        """Shutdown has begun: end the streams that never end by themselves, so it need not wait for them.

        The server waits (up to `server.shutdown_grace_secs`) for open
        responses before the app's shutdown; a listen stream or a session's
        notification stream stays open as long as its client does. Listen
        streams get their graceful close; notification streams just end
        (their clients reconnect, to a server that is going away).
        """
        if self._tools is not None:
            self._tools.close()
        for stream in list(self._streams):
            stream.cancel()

    async def _unknown_template(self, template: str) -> str | None:
        """Why `/mcp/{template}` serves nothing, naming the paths that do; None when the template loads."""
        kernel = self._parts.kernel
        try:
            await asyncio.to_thread(kernel.template, template)
            return None
        except ConfigError:
            pass
        names = [spec.name for spec in await asyncio.to_thread(kernel.list_templates)]
        served = ", ".join(f"{PATH}/{name}" for name in names) or "none"
        return (
            f"no MCP server at {PATH}/{template}: no template {template!r} that loads "
            f"(the templates' servers: {served}; {PATH} serves every tool you may call)"
        )

    async def _manager(self) -> StreamableHTTPSessionManager:
        if self._started is None:
            raise HTTPException(503, "MCP is not running (the app's lifespan did not start)")
        self._wanted.set()
        try:
            return await asyncio.shield(self._started)
        except Exception as exc:
            raise HTTPException(503, f"MCP could not start: {exc}") from exc

    async def _serve(self) -> None:
        """Wait for the first request; import the SDK on a thread; run its session manager until shutdown."""
        await self._wanted.wait()
        if self._stop.is_set():
            return
        assert self._started is not None
        try:
            serving = await asyncio.to_thread(importlib.import_module, "agentkernel.mcp_serve.serving")
            tools: ToolServer = serving.ToolServer(
                self._parts.kernel,
                identify,
                seal=self._seal,
                run=functools.partial(self._parts.tool_runs.run, origin="mcp_client"),
            )
            self._tools = tools
            manager = _session_manager(tools, self._parts.settings)
            async with manager.run():
                watcher = asyncio.create_task(tools.watch())
                self._started.set_result(manager)
                await self._stop.wait()
                tools.close()
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
        except Exception as exc:  # said once here; every request gets 503 naming it
            log.exception("MCP at %s could not start", PATH)
            if not self._started.done():
                self._started.set_exception(exc)

    async def _seal(self, shown: JSONObject, caller: Caller, tool: str) -> JSONObject:
        """Tables' next pages and files become opaque ids, as on `POST /v1/tools/{name}/run`."""
        return await seal_result(
            self._sealing,
            shown,
            owner=caller.user_id or "",
            tool=tool,
            session_id=caller.session_id,
            pid=caller.pid,
            template=caller.template,
        )


class _Progress:
    """An ASGI `send` that notes how far the response got, so one cut short can still be ended properly."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = self.finished = False

    async def __call__(self, message: Message) -> None:
        await self._send(message)
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.finished = True


def _not_found(request: Request, message: str) -> JSONResponse:
    """A 404 whose body is the server's error body and also a JSON-RPC error (`jsonrpc`, `id` null,
    `error.code`).

    The SDK's client raises a JSON-RPC error found in a non-2xx answer with
    its message; any other body it replaces with the status's stand-in
    (`Not Found`), and the user never sees why.
    """
    body = {**error_body(404, message, request_id(request)), "jsonrpc": "2.0", "id": None}
    body["error"] = {"code": INVALID_REQUEST, "message": message, "type": "not_found_error"}
    return JSONResponse(body, status_code=404)


def _principal(user: str) -> AuthenticatedUser:
    """The caller as the SDK's session manager knows a principal: it binds each handshake-era session
    (`Mcp-Session-Id`) to the principal that opened it, and answers anyone else's request naming that id
    as it answers an unknown id (404). So a session id that leaks (a log, a proxy) is no way in for
    another user. The token itself is not kept: the user id is what identifies the caller here."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    return AuthenticatedUser(AccessToken(token="", client_id=user, scopes=[]))


def _session_manager(tools: ToolServer, settings: ServerSettings) -> StreamableHTTPSessionManager:
    from mcp.server.transport_security import TransportSecuritySettings

    from agentkernel.server.mcp_sessions import PerUserSessions  # mcp: by the first /mcp request

    security = None
    if not settings.tokens:  # everyone is `local`: no web page of another site may drive the tools
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    return PerUserSessions(
        app=tools.server,
        security_settings=security,
        max_request_body_size=settings.max_body_bytes,
        session_idle_timeout=settings.mcp_session_idle_secs,
        max_per_user=settings.max_mcp_sessions_per_user,
        stateless=settings.mcp_stateless,
    )


def identify(ctx: Context) -> Identity:
    """The user and template the endpoint put on the request; the session as the module docstring says."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INTERNAL_ERROR
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    from agentkernel.mcp_serve.serving import Identity, connection_of  # mcp: by the first /mcp request

    request = ctx.request
    state: dict[str, Any] = request.scope.get("state", {}) if isinstance(request, Request) else {}
    user, template = state.get(USER_KEY), state.get(TEMPLATE_KEY)
    if not isinstance(user, str):
        raise MCPError(INTERNAL_ERROR, "no caller identity on this request")
    connection = connection_of(ctx)
    held = connection is not None and connection.session_id is not None  # None: `mcp_stateless`
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and connection is not None and held:
        session = connection.state.setdefault(SESSION_KEY, str(uuid.uuid4()))
    else:
        session = "mcp" if template is None else f"mcp-{template}"
    return Identity(user, session, template)


__all__ = ["PATH", "McpEndpoint", "identify"]
