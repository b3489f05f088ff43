"""Our tools as an MCP server: listed with their schemas, called through the one dispatch path.

`ToolServer` wraps the SDK's low-level `Server`. Every `tools/call` runs
through `Kernel.arun_tool` (DESIGN rule 6: access, argument validation,
limits, truncation, history) with a Caller made from the connection's
identity, which the transport supplies (`Identify`): `agentkernel mcp
serve` (stdio) has one user and one session for its whole life;
`agentkernel serve`'s `/mcp` takes the user from the bearer token
(server/mcp_mount.py). A template restricts the tools to those it lists. The
transport may also say how a call runs (`run`): `/mcp`'s counts it against
the user's cap on tool runs and gives it a budget (server/tool_runs.py); a
call it refuses (TooMuchWork) is a tool error result naming the setting,
not a protocol error. A call a person must approve (S24.4) is put to the
person at the client, through elicitation, or refused at once saying why
(mcp_serve/asking.py).

Hot reload: the catalog rescans on access, so while a client listens, a
cheap signature of what the clients may see (the tools' names,
descriptions and schemas, and each template's tool list) is polled every
POLL_SECS; when it changes every listener hears
`notifications/tools/list_changed`. Who listens depends on the protocol
era the client opened with: a handshake-era (2025) connection gets the
notification on its own channel for as long as it lives; a 2026-07-28
client opts in with `subscriptions/listen` and gets it on that stream.
Nothing is polled while nobody listens.

This module imports the SDK: only the MCP commands and the lazily mounted
`/mcp` route import it: the SDK is slow to import.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.to_thread
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    Tool,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentkernel.errors import ConfigError
from agentkernel.identity import Caller
from agentkernel.kernel import Kernel
from agentkernel.mcp_serve.asking import AnsweredAsker, ElicitingAsker, answered, state_ids
from agentkernel.mcp_serve.results import call_result
from agentkernel.services.user_work import TooMuchWork
from agentkernel.tools.dispatch import Asker
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONObject, JSONValue
from agentkernel.version import __version__

log = logging.getLogger("agentkernel.mcp")

POLL_SECS = 1.0  # how often the tool list is compared while a client listens for changes
SERVER_NAME = "agentkernel"
TRACKED = "agentkernel.tracked"  # a connection's `state` key: its changes are announced to it

Context = ServerRequestContext[Any, Any]
Signature = tuple[Hashable, ...]


@dataclass(frozen=True)
class Identity:
    """Who is calling on one MCP request: the user, their session, the template that limits the tools."""

    user_id: str
    session_id: str
    template: str | None = None


Identify = Callable[[Context], Identity]  # raises MCPError when the request carries no identity
Seal = Callable[[JSONObject, Caller, str], Awaitable[JSONObject]]  # a result's JSON as it may leave


class RunTool(Protocol):
    """How a call runs (`Kernel.arun_tool` by default), a call a person must approve put to `asker`;
    raises TooMuchWork to refuse it (user_work.py)."""

    def __call__(
        self, name: str, args: JSONValue, caller: Caller, *, asker: Asker | None = None
    ) -> Awaitable[ToolResult]: ...


class _Server(Server[Any]):
    """The SDK's server, announcing `tools.listChanged` whichever transport asks for its options.

    The streamable-HTTP manager builds the options itself, with no
    notification flags; our tool list does change (hot reload), so say so.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        notify = notification_options or NotificationOptions(tools_changed=True)
        return super().create_initialization_options(notify, experimental_capabilities, extensions)


class ToolServer:
    """The kernel's tools as one MCP server; `server` is what a transport runs, `watch` the hot reload."""

    def __init__(
        self,
        kernel: Kernel,
        identify: Identify,
        *,
        seal: Seal | None = None,
        run: RunTool | None = None,
        poll_secs: float = POLL_SECS,
    ) -> None:
        self._kernel = kernel
        self._identify = identify
        self._seal = seal
        self._run = run or functools.partial(kernel.arun_tool, origin="mcp_client")
        self._poll_secs = poll_secs
        self._bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self._bus)
        self._sessions: dict[object, ServerSession] = {}  # handshake-era connections, until they close
        self._listeners = 0  # open `subscriptions/listen` streams
        self._last: Signature | None = None  # what listeners saw last; None while nobody listens
        self._listened = anyio.Event()
        self.server = _Server(
            SERVER_NAME,
            version=__version__,
            instructions="Script tools of an agentkernel project.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._subscriptions_listen,
        )

    # -- tools/list and tools/call ---------------------------------------------------------------

    async def _list_tools(self, ctx: Context, params: PaginatedRequestParams | None) -> ListToolsResult:
        """Every tool the caller may call, by name, with its description and `parameters` as inputSchema."""
        await self._track(ctx)
        caller = await self._caller(self._identify(ctx), with_session=False)
        specs = await self._kernel.alist_tools(caller)  # on the kernel's script pool, in the user's queue
        tools = [Tool(name=s.name, description=s.description, input_schema=s.parameters) for s in specs]
        return ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: Context, params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        """One call through the kernel's dispatch path; a tool the caller cannot see is a protocol error.

        Everything else — bad arguments (naming the fields), a script that
        throws, a limit hit, a call past the user's cap, a call denied by a
        person or one no person could be asked about (mcp_serve/asking.py) —
        is the tool's failed result, `isError`, so the client's model can
        read why.
        """
        await self._track(ctx)
        identity = self._identify(ctx)
        caller = await self._caller(identity, with_session=True)
        name = params.name
        retried = await self._retried(params, caller)  # MCPError for a requestState that is not this call's
        async with anyio.create_task_group() as tasks:  # the request's: a question to the client ends with it
            gate = self._kernel.approval_gate()
            asker = retried or ElicitingAsker(gate, ctx, tasks)  # asked only if a person must decide
            try:
                result = await self._run(name, params.arguments or {}, caller, asker=asker)
            except TooMuchWork as exc:
                return call_result({"content": None, "success": False, "error": str(exc)})
        if asker.input_required is not None:  # 2026-07-28: the question is the answer; asked, it retries
            return asker.input_required
        if not result.success:  # was it a tool this caller sees at all? Asked only now: it costs a lookup
            await self._check_known(name, caller)
        shown = result.to_json()
        if self._seal is not None:
            shown = await self._seal(shown, caller, name)
        return call_result(shown)

    async def _retried(self, params: CallToolRequestParams, caller: Caller) -> AnsweredAsker | None:
        """For a retry carrying a `requestState` (2026-07-28), the decision the client's answer made
        (mcp_serve/asking.py); None for a first call. MCPError for a `requestState` that names no
        question of this caller's about this tool."""
        if params.request_state is None:
            return None
        gate = self._kernel.approval_gate()
        ids = state_ids(params.request_state)
        approvals = self._kernel.approvals()
        found = None if ids is None else await anyio.to_thread.run_sync(approvals.get, *ids)
        user = caller.user_id or ""
        responses = params.input_responses
        asker = await anyio.to_thread.run_sync(answered, gate, found, params.name, user, responses)
        if asker is None:
            raise MCPError(INVALID_PARAMS, f"requestState names no question of yours about {params.name!r}")
        return asker

    async def _check_known(self, name: str, caller: Caller) -> None:
        """MCPError unless `name` is among the tools `tools/list` shows this caller.

        The dispatch path has already refused a tool outside the caller's
        template (its access check runs no script); this turns that, and an
        unknown name, into the protocol error the MCP spec asks for. For a
        caller with every tool, a lookup (two `stat` calls) settles it;
        otherwise the listing does, which scans every folder and applies
        the access policy, as `tools/list` does.
        """
        reason = _unknown(name, caller)  # a template's caller learns nothing of the tools outside it
        if caller.allowed_tools is None:
            try:
                await anyio.to_thread.run_sync(self._kernel.tool, name)
                return
            except ConfigError as exc:
                reason = exc.reason
        visible = await self._kernel.alist_tools(caller)
        if name not in {spec.name for spec in visible}:
            raise MCPError(INVALID_PARAMS, reason)

    async def _caller(self, identity: Identity, *, with_session: bool) -> Caller:
        """The identity as a kernel Caller; MCPError for a template that does not load.

        A template is read (and the scripts it names checked) on a worker
        thread, as everything that may compile a script is: never on the
        event loop, which serves every other connection meanwhile.
        """
        spec = None
        if identity.template is not None:
            template = identity.template
            try:
                spec = await anyio.to_thread.run_sync(self._kernel.template, template)
            except ConfigError as exc:
                raise MCPError(INVALID_PARAMS, f"template {template!r} does not load: {exc}") from exc
        caller = functools.partial(
            self._kernel.caller,
            user_id=identity.user_id,
            session_id=identity.session_id if with_session else None,
            spec=spec,  # its tools, and its hooks asked about each call (S24): found by a scan
        )
        return await anyio.to_thread.run_sync(caller)

    # -- who listens for changes -----------------------------------------------------------------

    async def _track(self, ctx: Context) -> None:
        """A handshake-era connection hears of changes from its first request until it closes.

        Its `state` marks it tracked, its `exit_stack` forgets it.
        """
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # 2026-07-28: changes reach only `subscriptions/listen` streams
        connection = connection_of(ctx)
        if connection is None or connection.state.get(TRACKED):
            return
        connection.state[TRACKED] = True
        key = object()
        await self._start_listening()
        self._sessions[key] = ctx.session
        connection.exit_stack.callback(self._sessions.pop, key, None)

    async def _subscriptions_listen(
        self, ctx: Context, params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """The SDK's listen stream, counted, so the tool list is polled only while one is open."""
        await self._start_listening()
        self._listeners += 1
        try:
            return await self._listen(ctx, params)
        finally:
            self._listeners -= 1

    async def _start_listening(self) -> None:
        """Before a listener is told it listens, the list it would hear changes of is known."""
        if not self._is_listened():
            self._last = await self._signature()
        self._listened.set()

    def _is_listened(self) -> bool:
        return bool(self._sessions) or self._listeners > 0

    # -- hot reload ------------------------------------------------------------------------------

    async def watch(self) -> None:
        """Poll the tool list while anyone listens; announce each change. Runs until cancelled."""
        while True:
            await self._listened.wait()
            await anyio.sleep(self._poll_secs)
            if not self._is_listened():
                self._listened = anyio.Event()
                self._last = None
                continue
            try:
                now = await self._signature()
            except Exception:  # a broken project must not end the serving; said, and tried again
                log.exception("could not read the tool list to look for changes")
                continue
            if now != self._last:
                self._last = now
                await self._announce()

    async def _signature(self) -> Signature:
        return await anyio.to_thread.run_sync(self._tool_list_signature)

    def _tool_list_signature(self) -> Signature:
        """What any client may see: every tool's name, description and schema, and each template's allow
        list (its tools and its MCP servers' grants)."""
        specs = self._kernel.list_tools()
        tools = tuple((s.name, s.description, json.dumps(s.parameters, sort_keys=True)) for s in specs)
        templates = tuple((t.name, tuple(sorted(t.allowed_tools()))) for t in self._kernel.list_templates())
        return (tools, templates)

    async def _announce(self) -> None:
        """`notifications/tools/list_changed` to every listener, whichever era it speaks."""
        log.info("tool list changed: telling %d connection(s) and listen stream(s)", len(self._sessions))
        await self._bus.publish(ToolsListChanged())
        for session in list(self._sessions.values()):
            try:
                await session.send_tool_list_changed()  # best effort: the SDK drops it on a closed channel
            except Exception as exc:  # one connection's failure must not keep the news from the others
                log.warning("could not announce the tool list change to a connection: %s", exc)

    def close(self) -> None:
        """End the listen streams gracefully (each sends its final result)."""
        self._listen.close()


def _unknown(name: str, caller: Caller) -> str:
    where = f" in template {caller.template!r}" if caller.template else ""
    return f"unknown tool {name!r}{where} (see tools/list)"


def connection_of(ctx: Context) -> Connection | None:
    """The connection a request came on: per-connection `state` and an `exit_stack` run when it closes.

    The SDK (2.3) hands low-level handlers the connection only inside the
    request's session; None if a later SDK moves it (then nothing is
    tracked per connection, and a test of list_changed fails).
    """
    connection = getattr(ctx.session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


async def serve_stdio(kernel: Kernel, identity: Identity) -> None:
    """Serve `kernel`'s tools on stdin/stdout until the client closes them; the kernel is closed at the end.

    While serving, the SDK points fd 1 at stderr, so nothing a tool prints
    (a Python tool's `print`, a shell command's output) can corrupt the
    protocol on stdout.
    """
    from mcp.server.stdio import stdio_server

    tools = ToolServer(kernel, lambda _ctx: identity)
    async with kernel, stdio_server() as (read, write), anyio.create_task_group() as group:
        group.start_soon(tools.watch)
        await tools.server.run(read, write, tools.server.create_initialization_options())
        tools.close()
        group.cancel_scope.cancel()


__all__ = [
    "POLL_SECS",
    "Context",
    "Identify",
    "Identity",
    "RunTool",
    "Seal",
    "ToolServer",
    "connection_of",
    "serve_stdio",
]
