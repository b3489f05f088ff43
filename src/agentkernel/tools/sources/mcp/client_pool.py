"""Connections to outside MCP servers, each held open by one task on the pool's own event loop.

The SDK's client is a stack of anyio contexts (a subprocess or an HTTP
client, task groups, a session) that must be entered and left in one task.
So each server gets one long-lived task on an event loop the pool runs in a
daemon thread: it connects, lists the tools, then waits until it is told to
stop or the server's side of the connection ends. Tool calls are coroutines
sent to that loop from the worker threads scripts run on
(`run_coroutine_threadsafe(...).result(timeout)`), so a call never blocks
the loop and a slow server never blocks another.

Servers start lazily (the first listing or call), start again after they
die (the next use finds the connection lost), and stop with the pool
(`close`, from `Kernel.close`): a stdio server's process is ended by the
SDK's own shutdown (stdin closed, then terminate, then kill), so none is
left behind.

Nothing here imports `mcp` at module level: it is slow to import, and only
a template with `mcp_servers` pays for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from agentkernel.config.mcp_servers import McpServerSpec, ServerEnvError
from agentkernel.tools.sources.mcp.nesting import CHAIN_HEADER, CHAIN_VARIABLE, encoded
from agentkernel.tools.sources.mcp.stderr_tail import StderrTail
from agentkernel.types import JSONObject

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp import Client
    from mcp.client._transport import Transport, TransportStreams
    from mcp_types import CallToolResult

log = logging.getLogger("agentkernel.mcp")
STDERR_TAIL_CHARS = 600  # of a stdio server's stderr, quoted when it fails
HTTP_REASON_BYTES = 2048  # an HTTP server's error body this short is quoted when it fails
RETRY_START_SECS = 5.0  # a server that failed to start is not tried again sooner: each turn lists its tools
MAX_LISTED_TOOLS = 1000  # of one server: each one goes into every LLM request of the template's agents
RELIST_SECS = 30.0  # a running server's tools are listed again this often at most, when they are needed
CLOSE_TIMEOUT_SECS = 15.0  # every server's shutdown together (the SDK allows a stdio server 2 s, then kills)
T = TypeVar("T")


class ServerFailure(Exception):
    """An outside server could not start, answer, or finish a call; the text names it and the cause."""


class ServerTimeout(ServerFailure):
    """An outside server did not answer within its `timeout_secs`."""


@dataclass(frozen=True)
class ListedTool:
    """One tool as the server lists it (its own name, unchanged)."""

    name: str
    description: str
    input_schema: JSONObject


@dataclass
class _Connection:
    """One server's connection: its holding task, its tools once listed, and whether it ended."""

    spec: McpServerSpec
    started: concurrent.futures.Future[list[ListedTool]] = field(default_factory=concurrent.futures.Future)
    ended: asyncio.Event | None = None  # set (on the pool's loop) to end the holding task
    task: concurrent.futures.Future[None] | None = None
    client: Client | None = None
    lost: bool = False
    stderr: StderrTail | None = None
    http_error: str | None = None  # the last HTTP error status an HTTP server answered
    ended_at: float | None = None  # time.monotonic() when its task ended
    listed: list[ListedTool] | None = None  # its tools as last listed (the start's list at first)
    listed_at: float = 0.0  # time.monotonic() of that listing
    stale: bool = False  # the server said its tool list changed (notifications/tools/list_changed)

    async def on_message(self, message: Any) -> None:
        """The client's message handler: a changed tool list is listed again at the next need."""
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self.stale = True

    def needs_listing(self, now: float) -> bool:
        """Whether its tools should be listed again: the server said so, or RELIST_SECS have passed."""
        return self.listed is not None and (self.stale or now - self.listed_at >= RELIST_SECS)

    def failed_lately(self) -> bool:
        """Whether it failed to start less than RETRY_START_SECS ago: that failure still stands."""
        started, ended = self.started, self.ended_at
        failed = started.done() and not started.cancelled() and started.exception() is not None
        return failed and ended is not None and time.monotonic() - ended < RETRY_START_SECS

    async def note_status(self, response: Any) -> None:
        """An httpx response hook: the SDK reports a refused request without its status or the reason
        the server gave; we keep both (a short body only: an error page is not read whole)."""
        if response.status_code < 400:
            return
        self.http_error = f"HTTP {response.status_code} {response.reason_phrase}".strip()
        length = response.headers.get("content-length", "")
        if length.isdigit() and 0 < int(length) <= HTTP_REASON_BYTES:
            said = " ".join((await response.aread()).decode("utf-8", "replace").split())
            self.http_error += f": {said}"

    def end(self) -> None:
        """Mark it lost and let its holding task leave the SDK's contexts (on the pool's loop)."""
        self.lost = True
        if self.ended is not None:
            self.ended.set()

    def failure_detail(self) -> str:
        """`; stderr: …` (a stdio server's last error output), an HTTP server's error status, or nothing."""
        if self.http_error is not None:
            return f"; the server answered {self.http_error}"
        if self.stderr is None:
            return ""
        text = self.stderr.text().strip()
        return f"; stderr: {text[-STDERR_TAIL_CHARS:]}" if text else ""


class _EndWatch:
    """A transport's read stream that reports the end of the server's side of the connection.

    The SDK fails the calls under way when the stream ends but says nothing
    to its owner; this tells the pool, so the next call starts the server
    again instead of meeting a closed connection.
    """

    def __init__(self, stream: Any, ended: Callable[[], None]) -> None:
        self._stream = stream
        self._ended = ended

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # `last_context`, read by the SDK when present
        return getattr(self._stream, name)


@asynccontextmanager
async def _watched(transport: Transport, ended: Callable[[], None]) -> AsyncIterator[TransportStreams]:
    async with transport as (read, write):
        yield _EndWatch(read, ended), write


def _cause(exc: BaseException, spec: McpServerSpec | None = None) -> str:
    """The innermost reason of a failure the SDK wrapped in exception groups, said plainly."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, ServerEnvError):
        return str(exc)
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED and spec is not None:
        return "the server closed the connection during the handshake (did it exit?)"
    text = str(exc) or type(exc).__name__
    shown = text if type(exc).__name__ in text else f"{type(exc).__name__}: {text}"
    return f"{shown} ({spec.url})" if spec is not None and spec.url is not None else shown


class ServerPool:
    """The outside MCP servers in use, by name; safe to use from any thread."""

    def __init__(
        self, cwd: Path | None = None, chain: Callable[[McpServerSpec], tuple[str, ...]] = lambda _: ()
    ) -> None:
        self._cwd = cwd  # where a stdio server runs: the project folder, so `args` may be relative to it
        self._chain = chain  # what a server is told it serves, against loops (nesting.py)
        self._lock = threading.Lock()
        self._connections: dict[str, _Connection] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- the pool's loop -----------------------------------------------------------------

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The pool's event loop, started in its daemon thread on first use (under the lock)."""
        if self._closed:
            raise ServerFailure("the kernel is closed: its MCP servers are stopped")
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="agentkernel-mcp", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        return self._loop

    def _submit(self, work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        with self._lock:
            loop = self._running_loop()
        return asyncio.run_coroutine_threadsafe(work, loop)

    # -- connections ---------------------------------------------------------------------

    def tools(self, spec: McpServerSpec) -> list[ListedTool]:
        """The tools `spec`'s server lists, starting it if it is not running; ServerFailure if it cannot.

        A running server's list is asked for again when it announced a
        change (a 2025-protocol server's `tools/list_changed`) or when
        RELIST_SECS have passed (what a server of either protocol offers
        may change while it runs); a failed re-listing keeps the last list.
        """
        connection = self._ready(spec)
        if connection.needs_listing(time.monotonic()):
            self._relist(connection)
        return connection.listed if connection.listed is not None else []  # set before it counts as started

    def _relist(self, connection: _Connection) -> None:
        client = connection.client
        connection.stale, connection.listed_at = False, time.monotonic()  # one asker at a time
        if client is None or connection.lost:
            return
        future = self._submit(_listed(client))
        try:
            connection.listed = future.result(connection.spec.timeout_secs)
        except Exception as exc:  # the last list stands; said once
            future.cancel()
            log.warning("MCP server %s: listing its tools again failed: %s", connection.spec.name, exc)

    def _ready(self, spec: McpServerSpec) -> _Connection:
        """A started connection to `spec`'s server, within its `timeout_secs`; ServerFailure if none."""
        connection = self._connection(spec)
        try:
            connection.started.result(spec.start_timeout_secs)
        except concurrent.futures.TimeoutError:
            self._stop(connection)
            raise ServerFailure(
                f"MCP server {spec.name!r} did not finish starting (handshake and tool list) within"
                f" {spec.start_timeout_secs:g} s{connection.failure_detail()}"
            ) from None
        return connection

    def _connection(self, spec: McpServerSpec) -> _Connection:
        """The live connection to `spec`'s server, or a new one starting (an old, lost one stopped)."""
        with self._lock:
            loop = self._running_loop()
            current = self._connections.get(spec.name)
            same = current is not None and current.spec.settings == spec.settings
            if current is not None and same and (not current.lost or current.failed_lately()):
                return current
            connection = _Connection(spec)
            self._connections[spec.name] = connection
            connection.task = asyncio.run_coroutine_threadsafe(self._hold(connection), loop)
        if current is not None:
            self._stop(current)
        return connection

    def _stop(self, connection: _Connection) -> None:
        """Tell a connection's task to end: it leaves the SDK's contexts, which stops the server."""
        connection.lost = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(connection.end)
        if not connection.started.done() and connection.task is not None:
            connection.task.cancel()  # still starting: stop waiting for it

    async def _hold(self, connection: _Connection) -> None:
        """Connect, list the tools, and hold the connection until it ends or is told to (one task)."""
        connection.ended = asyncio.Event()
        if connection.lost:  # stopped before it began
            connection.ended.set()
        spec = connection.spec
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(self._client(connection, stack))
                tools = await _listed(client)
                connection.client = client
                connection.listed, connection.listed_at = tools, time.monotonic()
                connection.started.set_result(tools)
                log.info("MCP server %s started: %d tools", spec.name, len(tools))
                await connection.ended.wait()
        except Exception as exc:  # every failure to start is the starter's to report
            reason = (
                f"MCP server {spec.name!r} failed to start: {_cause(exc, spec)}{connection.failure_detail()}"
            )
            if not connection.started.done():
                connection.started.set_exception(ServerFailure(reason))
            else:
                log.warning("MCP server %s: %s", spec.name, _cause(exc))
        finally:
            connection.lost = True
            connection.client = None
            connection.ended_at = time.monotonic()
            if connection.stderr is not None:
                connection.stderr.close()
            if not connection.started.done():
                connection.started.set_exception(ServerFailure(f"MCP server {spec.name!r} was stopped"))

    def _client(self, connection: _Connection, stack: AsyncExitStack) -> Client:
        """The SDK's client for the server, over stdio or streamable HTTP, its end watched."""
        from mcp import Client

        spec = connection.spec
        transport: Transport
        if spec.url is not None:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            headers = spec.header_values()
            if chain := self._chain(spec):
                headers[CHAIN_HEADER] = encoded(chain)
            http = create_mcp_http_client(headers=headers)
            http.event_hooks["response"].append(connection.note_status)
            stack.push_async_callback(http.aclose)
            transport = streamable_http_client(spec.url, http_client=http)
        else:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            assert spec.command is not None  # the schema requires `command` without `url`
            # the SDK's safe variables (PATH, HOME, …) and the named ones, never the whole environment
            env = spec.child_env()
            if chain := self._chain(spec):
                env[CHAIN_VARIABLE] = encoded(chain)
            params = StdioServerParameters(command=spec.command, args=list(spec.args), env=env, cwd=self._cwd)
            connection.stderr = StderrTail(spec.name, keep=STDERR_TAIL_CHARS * 4)  # closed when it ends
            transport = stdio_client(params, errlog=connection.stderr.writer)
        return Client(
            _watched(transport, connection.end),
            read_timeout_seconds=None,
            cache=None,
            message_handler=connection.on_message,
        )

    # -- calls ---------------------------------------------------------------------------

    def call(self, spec: McpServerSpec, tool: str, arguments: JSONObject, timeout: float) -> CallToolResult:
        """Call `tool` (the server's own name) within `timeout` seconds; ServerFailure saying what failed."""
        connection = self._ready(spec)
        future = self._submit(self._call(connection, tool, arguments))
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()  # the SDK tells the server the request is cancelled
            raise ServerTimeout(
                f"MCP server {spec.name!r} did not answer {tool!r} within {timeout:.3g} s (timeout_secs)"
            ) from None

    async def _call(self, connection: _Connection, tool: str, arguments: JSONObject) -> CallToolResult:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, METHOD_NOT_FOUND

        client, name = connection.client, connection.spec.name
        if client is None:
            raise ServerFailure(f"MCP server {name!r} is not connected")
        try:
            return await client.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.code in (INVALID_PARAMS, METHOD_NOT_FOUND):  # about this call: the connection is fine
                raise ServerFailure(f"MCP server {name!r} refused the call: {exc}") from exc
            if exc.code != CONNECTION_CLOSED:  # e.g. an HTTP server restarted (its session gone): reconnect
                connection.end()
                reason = f"MCP server {name!r} failed the call: {exc}{connection.failure_detail()}"
                raise ServerFailure(reason + " (it is connected again at the next call)") from exc
            connection.end()
            reason = f"MCP server {name!r} closed the connection during the call (did it crash?)"
            raise ServerFailure(reason + connection.failure_detail()) from exc
        except Exception as exc:  # a broken transport: the next call connects again
            connection.end()
            raise ServerFailure(f"MCP server {name!r} failed during the call: {_cause(exc)}") from exc

    def running(self, name: str) -> bool:
        """Whether server `name` is connected now (started, not lost)."""
        with self._lock:
            connection = self._connections.get(name)
        if connection is None or connection.lost or not connection.started.done():
            return False
        return connection.started.exception() is None

    # -- stopping ------------------------------------------------------------------------

    def stop(self, name: str) -> None:
        """Stop server `name` and wait until it has stopped (its process ended); nothing if not running."""
        with self._lock:
            connection = self._connections.pop(name, None)
        if connection is not None:
            self._stop(connection)
            _wait(connection, CLOSE_TIMEOUT_SECS)

    def close(self) -> None:
        """Stop every server (their processes end) and the pool's loop; closing twice is harmless."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        for connection in connections:
            self._stop(connection)
        for connection in connections:
            _wait(connection, CLOSE_TIMEOUT_SECS)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(CLOSE_TIMEOUT_SECS)
        if not thread.is_alive():
            loop.close()


def _wait(connection: _Connection, timeout: float) -> None:
    if connection.task is None:
        return
    try:
        connection.task.result(timeout)
    except concurrent.futures.TimeoutError:
        log.warning("MCP server %s did not stop within %g s", connection.spec.name, timeout)
    except Exception:  # its failure was reported to whoever started it
        log.debug("MCP server %s ended with an error", connection.spec.name, exc_info=True)


async def _listed(client: Client) -> list[ListedTool]:
    """Every tool the server lists, page after page, up to MAX_LISTED_TOOLS (a server whose cursor never
    ends, or that lists without end, stops there: the rest is not offered, and the log says so)."""
    tools: list[ListedTool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += [ListedTool(t.name, t.description or "", dict(t.input_schema)) for t in page.tools]
        cursor = page.next_cursor
        if not cursor:
            return tools
        if len(tools) >= MAX_LISTED_TOOLS:
            log.warning("an MCP server lists over %d tools; only the first are offered", MAX_LISTED_TOOLS)
            return tools[:MAX_LISTED_TOOLS]


__all__ = ["ListedTool", "ServerFailure", "ServerPool", "ServerTimeout"]
