"""`create_app(kernel, settings)`: the FastAPI app over one loaded Kernel.

The app only uses the Kernel's public verbs. It owns the sessions table
and the running turns; the kernel stays the caller's to close. At shutdown
(Ctrl-C, SIGTERM) the running turns get `settings.shutdown_grace_secs` to
finish and be recorded, then are stopped. With `check_llm`, it asks the LLM
server in the background as it starts and logs a warning if it cannot be
used (llm_status.py; `agentkernel serve` asks for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from starlette.routing import Route

from agentkernel.agent.session import ChatSession
from agentkernel.config import ServerSettings
from agentkernel.kernel import Kernel
from agentkernel.llm.base import ChatMessage
from agentkernel.server import failures
from agentkernel.server.llm_status import LLMWatch
from agentkernel.server.mcp_mount import PATH as MCP_PATH
from agentkernel.server.mcp_mount import McpEndpoint
from agentkernel.server.parts import ServerParts
from agentkernel.server.resumer import RunResumer
from agentkernel.server.routes import (
    approval_links,
    approvals,
    continuations,
    cron,
    files,
    health,
    llm,
    memory,
    metrics,
    openai,
    page,
    runs,
    sessions,
    tools,
    usage,
)
from agentkernel.server.run_streams import RunStreams
from agentkernel.server.run_wakeups import PgRunWakeups, PollingWakeups, RunWakeups
from agentkernel.server.sealing import Sealing, TurnSealer
from agentkernel.server.sessions import (
    SESSIONS_FILE,
    KnownSessions,
    OpenedOnFirstUse,
    SessionDirectory,
    SessionInfo,
    SessionStore,
    sessions_file,
)
from agentkernel.server.tool_runs import ToolRuns
from agentkernel.server.trace_context import TraceContext
from agentkernel.server.turns import TurnRunner
from agentkernel.services.work_leases import SharedUserWork
from agentkernel.telemetry import metrics as counted
from agentkernel.telemetry import tracing
from agentkernel.version import __version__


def sessions_path(kernel: Kernel) -> Path:
    """The sessions file (when the sessions are not in the store database)."""
    return sessions_file(kernel.config)


def session_directory(kernel: Kernel) -> SessionStore:
    """Who owns which session: in the store database with kernel.yaml `store.url` (S27.2), so every
    replica knows every session (opened by the first request that needs it); else in the sessions file
    beside the transcript."""
    if kernel.config.store.url is not None:
        from agentkernel.server.sessions_pg import PostgresSessionDirectory  # psycopg: only with a store.url

        return KnownSessions(OpenedOnFirstUse(lambda: PostgresSessionDirectory(kernel.store_pool())))
    return KnownSessions(SessionDirectory(sessions_path(kernel)))


def create_app(kernel: Kernel, settings: ServerSettings | None = None, *, check_llm: bool = False) -> FastAPI:
    """The app; `settings` default to kernel.yaml's `server:` section; `check_llm`: warn at start-up."""
    chosen = settings or kernel.config.server
    counted.start()  # the metrics count from here on (S26.2; a CLI command never pays for them)

    engine = None
    if kernel.config.runs.temporal:  # S27.2: sessions' runs are driven by `agentkernel worker` processes
        from agentkernel.services.temporal_runs import TemporalRuns  # the SDK only then: start-up time

        engine = TemporalRuns(kernel.config.runs)

    def open_chat(info: SessionInfo, history: list[ChatMessage] | None) -> ChatSession:
        # resume: a session opened again after a restart goes on with its conversation
        chat = kernel.chat(info.template, user_id=info.user_id, session_id=info.id, resume=history is None)
        if history is not None:  # a stateless client's turn: the conversation is the one it sent
            chat.from_client(history)
        return chat

    # S6.2, S6.3: beside the transcript, in the message store's file (continuations.py says why)
    sealing = Sealing.for_kernel(kernel, chosen.continuation_ttl_secs)
    backlog = chosen.max_stream_backlog_bytes
    turns = TurnRunner(
        open_chat,
        kernel.end_chat,
        chosen.max_open_chats,
        TurnSealer(sealing),
        backlog,
        chosen.max_running_turns_per_user,
        kernel.turn_leases,  # in the store: turns and their per-user cap across processes
        chosen.turn_lease_secs,
        # S26.3: a spent quota is a 429 before the turn starts; without `quotas:` (read once, at load) no
        # turn needs the check, nor its hop to a worker thread
        check_quota=kernel.check_quota if kernel.config.quotas.enabled else None,
        engine=engine,
    )
    directory = session_directory(kernel)
    # tool runs are counted in the store: every process on the project counts the same (work_leases.py;
    # the PostgreSQL store with store.url: every machine's)
    shared_work = SharedUserWork(kernel.work_leases, lease_secs=chosen.work_lease_secs)
    tool_runs = ToolRuns(
        kernel,
        directory,
        turns,
        shared_work,
        max_running_per_user=chosen.max_running_tool_runs_per_user,
        budget_tokens=chosen.tool_run_token_budget,
    )
    streams = RunStreams(chosen.max_run_streams_per_user)
    parts = ServerParts(
        kernel, chosen, directory, turns, tool_runs, LLMWatch(kernel.llm_config), streams, _wakeups(kernel)
    )
    mcp = McpEndpoint(parts, sealing)  # the SDK is imported on the first request to /mcp

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        tracing.start(kernel.config.telemetry)  # this process's exporter, when traces are on (S26.1)
        try:
            async with _served():
                yield
        finally:
            await asyncio.to_thread(tracing.close)  # the spans still queued are sent

    @asynccontextmanager
    async def _served() -> AsyncIterator[None]:
        stop = asyncio.Event()  # the cron scheduler fires jobs on this loop while the server runs (S10)
        cron = asyncio.create_task(_cron(kernel, stop, chosen.shutdown_grace_secs))
        cron.add_done_callback(_report_failure)
        # the runs a dead server left unfinished: taken over and resumed here (S25.3)
        resumer = RunResumer(kernel, directory, turns, chosen.turn_lease_secs, engine)
        resuming = asyncio.create_task(resumer.run(stop))
        # in the background: start-up never waits for the LLM server
        warned = asyncio.create_task(parts.llm.warn()) if check_llm else None
        try:
            async with mcp.running():
                yield
        finally:
            stop.set()
            await asyncio.gather(resuming, return_exceptions=True)
            await parts.turns.drain(chosen.shutdown_grace_secs)
            await _ended(cron)
            await parts.llm.close()
            if warned is not None:
                warned.cancel()
                await asyncio.gather(warned, return_exceptions=True)
            parts.sessions.close()
            sealing.close()
            await asyncio.to_thread(shared_work.close)
            await parts.run_wakeups.close()

    app = FastAPI(
        title="agentkernel",
        version=__version__,
        description="Agents whose tools are scripts: sessions, streamed turns, tools (docs/server.md).",
        lifespan=lifespan,
        # FastAPI's /docs and /redoc load their scripts from a CDN onto this origin, where the web page
        # keeps its bearer token: not served (/openapi.json describes the API; tests/server/test_page.py)
        docs_url=None,
        redoc_url=None,
    )
    app.state.parts = parts
    app.state.sealing = sealing
    app.state.end_streams = mcp.end_streams  # serving.py calls it when shutdown begins
    failures.install(app, chosen.max_body_bytes)
    app.add_middleware(TraceContext)  # a caller's traceparent continued (S26.1)
    for area in (health, sessions, runs, approvals, tools, continuations, openai, files, cron, memory, llm):
        app.include_router(area.router)
    app.include_router(usage.router)  # S26.3
    app.include_router(metrics.router)  # a token unless telemetry.metrics_public (S26.2)
    app.include_router(approval_links.router)  # no bearer token: the URL's own token is the credential
    for path in (MCP_PATH, MCP_PATH + "/{template}"):
        app.router.routes.append(Route(path, mcp, methods=["GET", "POST", "DELETE"]))
    page.install(app)
    return app


def _wakeups(kernel: Kernel) -> RunWakeups:
    """PostgreSQL's notices of new run records with `store.url` (S27.2); polling the files without."""
    url = kernel.config.store.url
    return PollingWakeups() if url is None else PgRunWakeups(url)


async def _cron(kernel: Kernel, stop: asyncio.Event, grace: float) -> None:
    """Fire the cron jobs until `stop` — unless runs are on Temporal, whose Schedules fire them on the
    workers (server/cron_worker.py)."""
    if not kernel.config.runs.temporal:
        await kernel.cron_scheduler().run(stop, grace=grace)


def _report_failure(cron: asyncio.Task[None]) -> None:
    """A scheduler that stopped by itself (a static job kernel.yaml got wrong) is said at once."""
    if not cron.cancelled() and cron.exception() is not None:
        logging.getLogger("agentkernel.cron").error("cron jobs will not fire: %s", cron.exception())


async def _ended(cron: asyncio.Task[None]) -> None:
    """The scheduler's end; its failure was reported when it happened."""
    with contextlib.suppress(Exception):
        await cron


__all__ = ["SESSIONS_FILE", "create_app", "session_directory", "sessions_path"]
