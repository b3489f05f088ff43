"""The kernel's assembly: every part behind the `Kernel` face, built in one place and closed in one place.

`KernelParts` makes the parts (the script host, the catalog, the dispatch
path, the process table, the message store, the pools) cheaply, opening
nothing; what costs an import or a file (the LLM client, the hook pipeline,
the cron store, each service) is built when first used. The face
(kernel.py) holds one and speaks only through it.

`SERVICES` is the one table of the services a script can reach: each key
of ports.py with the factory that builds its service from the parts. A
live service (the dispatch path, the transcript, the LLM, sub-agents, cron)
is attached only to a live kernel; a local one (the machine's: HTTP, state,
DuckDB, files, shell) may be replaced by one handed to the kernel.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkernel import builtins
from agentkernel.agent.approval_gate import ApprovalDesk, ApprovalGate
from agentkernel.agent.approval_notices import ApprovalNotices
from agentkernel.agent.call_hooks import CallHooks
from agentkernel.bundle import ServiceKey, Services
from agentkernel.config import HookSpec, KernelConfig, ToolSpec
from agentkernel.config.mcp_servers import McpServerSpec, settle_servers
from agentkernel.config.stores import TOOL_RESULTS_FILE, rhai_cache_folder
from agentkernel.config.templates import TemplateFolder, TemplateSpec, check_references
from agentkernel.errors import ConfigError, HelperError, LoadProblem
from agentkernel.helpers.table import HelperTable
from agentkernel.identity import session_temp_dir
from agentkernel.ports import (
    CRON,
    DUCKDB,
    FILES,
    HTTP,
    LLM,
    MESSAGES,
    QUOTAS,
    SHELL,
    STATE,
    SUBAGENTS,
    TOOL_RESULTS,
    TOOLS,
    USAGE,
    UsageStore,
)
from agentkernel.scripting.host import ScriptHost, default_engines
from agentkernel.services.files import FilesService
from agentkernel.services.kernel_loop import KernelLoop
from agentkernel.services.lazy_messages import ClosableMessageStore, LazyMessageStore
from agentkernel.services.scratch import ScratchJanitor
from agentkernel.telemetry.helper_spans import capture_content
from agentkernel.tools.catalog import ScriptCatalog
from agentkernel.tools.dispatch import Dispatcher
from agentkernel.tools.history import ToolResultHistory
from agentkernel.tools.isolated import WorkerPool
from agentkernel.tools.registry import ToolRegistry
from agentkernel.tools.sources.mcp.outside import OutsideTools
from agentkernel.util.environment import Environment
from agentkernel.util.fair_pool import FairPool
from agentkernel.util.later import Later

CatalogView = tuple[dict[str, ToolSpec], dict[str, HookSpec]]
"""The catalog's tools and hooks from one scan of the folders (`ScriptCatalog.tools_and_hooks`)."""

if TYPE_CHECKING:  # the agent runtime and cron are imported when first used: a tool run never pays for them
    from agentkernel.agent.cron_runs import CronRuns
    from agentkernel.agent.hooks import HookPipeline
    from agentkernel.agent.loop import AgentLoop, LoopSettings, Transcript
    from agentkernel.agent.processes import ProcessTable
    from agentkernel.agent.session import ChatSession
    from agentkernel.agent.subagents import SubagentService
    from agentkernel.llm.base import Provider
    from agentkernel.services.approval_values import ApprovalStore
    from agentkernel.services.cron import CronService
    from agentkernel.services.cron_scheduler import CronScheduler
    from agentkernel.services.postgres import PgPool
    from agentkernel.services.quotas import QuotaBook
    from agentkernel.services.tool_results import ToolResults
    from agentkernel.services.turn_leases import LeaseStore
    from agentkernel.services.work_leases import WorkLeaseStore

CLOSE_TIMEOUT_SECS = 30.0  # closing the provider's connections on the kernel's own loop
LISTING_WORKERS = 4  # threads listing tools at once, for every user together (one listing a user at a time)


class KernelParts:
    """The parts of one kernel: see the module docstring. Built by the face, closed by it."""

    def __init__(
        self,
        config: KernelConfig,
        helpers: HelperTable,
        provider: Provider | None,
        *,
        live: bool,
        extra_services: Mapping[str, object | None] | None,
        extensions: Mapping[str, object] | None,
        kept_contexts: bool = True,
    ) -> None:
        self.config = config
        self.helpers = helpers
        folders = (*config.tool_dirs, *config.hook_dirs)
        builtin = builtins.FOLDERS if config.builtins else ()
        self.host = ScriptHost(
            helpers,
            default_engines(kept_contexts=kept_contexts),
            script_folders=(*folders, *builtin),
            rhai_compile_cache=rhai_cache_folder(config),
        )
        self.catalog = ScriptCatalog(folders, self.host, config.limits, builtin_folders=builtin)
        self.template_folder = TemplateFolder(config.templates_dir)
        self.outside = OutsideTools(
            self.mcp_servers, lambda: self.catalog.tools(), config.limits, cwd=config.root
        )
        self.tools = ToolRegistry(self.catalog, root=config.root, outside=self.outside)
        self.history = ToolResultHistory(
            config.messages_db.with_name(TOOL_RESULTS_FILE),
            config.limits.history_per_tool,
            config.limits.history_sessions,
            open_store=self._tool_results_in_database if config.store.url is not None else None,
            shown=config.store.shown,
        )
        self.provider = provider
        pg_messages = self._pg_messages if config.store.url is not None else None  # S27.2
        self.store = LazyMessageStore(config.messages_db, pg_messages)
        self.live = live
        self.home = KernelLoop()
        # tool and hook calls of event loops, shared fairly between users; threads start on first use
        self.script_pool = FairPool(config.script_workers, config.script_workers_per_user, name="scripts")
        # tool listings, apart: a user's listing never queues behind that user's own slow tool runs
        self.listing_pool = FairPool(LISTING_WORKERS, 1, name="listings")
        # python_tool built-ins do their work in these processes, killed at a call's deadline; none starts
        # before the first such call
        self.workers = WorkerPool(config.python_workers, preload=builtins.WORKER_PRELOAD)
        self.dispatcher = Dispatcher(
            self.tools,
            self.host,
            config.limits,
            self.history,
            self.workers,
            pool=self.script_pool,
            home=self.home,
        )
        # a call a person must approve (S24.4): asked in the message store's file, opened on first use
        # each one asked is posted to approvals.notify with its decision URLs, off the run's thread
        self.approval_notices = ApprovalNotices(
            lambda: self.approvals,
            config.approvals,
            lambda: self.services.require(HTTP, "approvals.notify"),
            self._webhook_problem,
        )
        self.approval_gate = ApprovalGate(lambda: self.approvals, config.approvals, self.approval_notices)
        self.dispatcher.desk = self.approval_desk = ApprovalDesk(self.approval_gate)
        self.dispatcher.guard = CallHooks(lambda: self.hooks, config.limits)  # S24.1 on every path
        self._processes: ProcessTable | None = None  # made by the first process spawned (`processes`)
        self._making_processes = threading.Lock()
        deny = config.env_deny
        if config.llm is not None and config.llm.api_key_env:
            deny = (*deny, config.llm.api_key_env)  # scripts never read the kernel's own key
        self.environment = Environment(deny=deny)
        capture_content(config.telemetry.enabled and config.telemetry.capture_content)  # helpers' spans
        self.services = build_services(self, live=live, given=extra_services, extensions=extensions)
        handed = [*(extra_services or {}).values(), *(extensions or {}).values()]
        self.given = [s for s in handed if s is not None]  # closed with the kernel
        self.janitor = ScratchJanitor(config.temp_root, config.files.scratch_ttl_hours * 3600)
        self.closed = False
        self._usage_opening = threading.Lock()  # the ledger is opened once, by whichever call comes first

    @property
    def processes(self) -> ProcessTable:
        """The running processes (S23.2): the table is made, once, when first asked for (a tool run
        never spawns one, nor imports the agent runtime's processes)."""
        if self._processes is None:
            with self._making_processes:
                if self._processes is None:
                    from agentkernel.agent.processes import ProcessTable  # by the first process spawned

                    self._processes = ProcessTable()
        return self._processes

    # -- templates: the face's and the services' (a sub-agent's, a cron job's) ------------------------

    def templates(self, view: CatalogView | None = None) -> tuple[dict[str, TemplateSpec], list[LoadProblem]]:
        """The templates and their problems, unknown tool and hook names and MCP server clashes included;
        names checked against `view` (the catalog's tools and hooks, one scan) when given."""
        templates, problems = self.template_folder.load()
        providers = None if self.config.llm is None else [p.label for p in self.config.llm.chain()]
        problems += check_references(templates, *(view or self.catalog.tools_and_hooks()), providers)
        problems += settle_servers(s for t in templates.values() for s in t.mcp_servers)[1]
        return templates, problems

    def template(self, name: str, view: CatalogView | None = None) -> TemplateSpec:
        """A template that loads and names only known tools and hooks (of `view`); ConfigError otherwise."""
        templates, problems = self.templates(view)
        spec = templates.get(name)
        own = [p for p in problems if spec is not None and p.path == spec.yaml_path]
        if spec is None:
            known = ", ".join(sorted(templates)) or "none"
            detail = "".join(f"\n  {p}" for p in problems)
            raise ConfigError(
                self.config.templates_dir, f"unknown template {name!r} (loaded: {known}){detail}"
            )
        if own:
            raise ConfigError(spec.yaml_path, "; ".join(p.reason for p in own))
        return spec

    def tool(self, name: str) -> ToolSpec:
        """The tool called `name`; ConfigError saying why it is not there (its file's problem, or what is)."""
        spec = self.tools.get(name)
        if spec is not None:
            return spec
        unavailable = self.tools.unavailable(name)
        if unavailable is not None:  # the file meant to declare it failed: say why, nothing else
            raise ConfigError(None, unavailable)
        known = ", ".join(s.name for s in self.tools.all()) or "none"
        failed = len(self.catalog.problems())
        files = "1 file" if failed == 1 else f"{failed} files"
        more = f"; {files} failed to load, see `agentkernel tool list`" if failed else ""
        raise ConfigError(None, f"unknown tool {name!r} (loaded: {known}{more})")

    def job_problems(self) -> list[LoadProblem]:
        """kernel.yaml's `cron.jobs` checked as a scheduler will check them (a template they name, …)."""
        if not self.config.cron.jobs or self.config.path is None:
            return []
        try:
            self.cron.check_static()
        except HelperError as exc:
            return [LoadProblem(self.config.path, str(exc))]
        return []

    def mcp_servers(self) -> dict[str, McpServerSpec]:
        """Every MCP server the templates declare, by name; one declared two ways is left out."""
        templates, _ = self.template_folder.load()
        return settle_servers(s for t in templates.values() for s in t.mcp_servers)[0]

    # -- the agent runtime ----------------------------------------------------------------------------

    @cached_property
    def llm(self) -> Provider | None:
        """The configured LLM (kernel.yaml `llm:`), or the one handed in, metered; None without one.

        Built — and its HTTP stack imported — on the first request, not here.
        Every path's calls pass here, so each is counted in the usage ledger
        once (services/metering.py says why this is the one place).
        """
        from agentkernel.llm.config import build_provider  # the LLM's parts: not for a tool run
        from agentkernel.llm.deferred import DeferredProvider
        from agentkernel.llm.measured import MeasuredProvider
        from agentkernel.services.metering import MeteredProvider
        from agentkernel.services.quota_gate import QuotaGate

        default_model = self.config.llm.model if self.config.llm is not None else None
        measured: Provider
        if self.provider is None and self.config.llm is not None:
            config = self.config.llm
            self.provider = measured = DeferredProvider(lambda: build_provider(config))  # measured within
        elif self.provider is not None:  # one handed in is measured as a built one is (S26.2)
            measured = MeasuredProvider(self.provider, default_model)
        else:
            return None
        # each call checked against the user's quotas (S26.3) before it is made, then counted
        metered = MeteredProvider(measured, self._usage_ledger, default_model, self._usage_ledger_if_open)
        return QuotaGate(metered, self.quotas)

    @cached_property
    def quotas(self) -> QuotaBook:
        """kernel.yaml's `quotas:` measured in the usage ledger (S26.3), which is read only when a limit
        is set."""
        from agentkernel.services.quotas import QuotaBook  # by the first LLM call, or a quota's check

        return QuotaBook(self.config.quotas, self._usage_ledger)

    def _usage_ledger(self) -> UsageStore | None:
        """The ledger the metered provider writes to (from worker threads); None once the kernel is closed."""
        with self._usage_opening:
            return None if self.closed else self.usage

    def _usage_ledger_if_open(self) -> UsageStore | None:
        """The ledger if it is open (the metered provider may write it on the event loop: opening it there
        could wait on the file); None before the first call counted and once the kernel is closed."""
        opened: UsageStore | None = self.__dict__.get("usage")  # the cached property, without opening it
        return None if self.closed else opened

    @cached_property
    def hooks(self) -> HookPipeline:
        """The hook pipeline (S7), built when the first hook runs."""
        from agentkernel.agent.hooks import HookPipeline  # imported by the first hook run, not a tool run

        return HookPipeline(self.host, self.config.limits)

    def loop_settings(
        self, template: TemplateSpec, hooks: Mapping[str, HookSpec] | None = None
    ) -> LoopSettings:
        """The template's loop settings, its hooks found among `hooks` (else the catalog's, scanned now)."""
        from agentkernel.agent.loop import LoopSettings  # imported when a chat opens, not for a tool run

        return LoopSettings.for_template(template, self.catalog.hooks() if hooks is None else hooks)

    def template_hooks(self, template: TemplateSpec) -> tuple[HookSpec, ...]:
        """The template's hooks that load, in its order (one it names that does not load is left out,
        as a chat leaves it out: `agentkernel check` reports it)."""
        loaded = self.catalog.hooks() if template.hooks else {}
        return tuple(loaded[name] for name in template.hooks if name in loaded)

    @cached_property
    def approvals(self) -> ApprovalStore:
        """Calls waiting for a person's decision, and the users' rules (S24.4): in the message store's
        file, or in the store database with `store.url` (S27.2); opened by the first call that asks."""
        if self.config.store.url is not None:
            from agentkernel.services.approvals_pg import PostgresApprovals  # psycopg: only with a store.url

            return PostgresApprovals(self.store_pool)
        from agentkernel.services.approvals import Approvals  # SQLite and signing: by the first call asked

        return Approvals(self.config.messages_db)

    def _tool_results_in_database(self) -> ToolResults:
        """get_tool_result's record in the store database (`store.url`, S27.2), opened by the history
        on the first call with a session."""
        from agentkernel.services.tool_results_pg import PostgresToolResults  # psycopg: only with a store.url

        limits = self.config.limits
        return PostgresToolResults(
            self.store_pool, per_tool=limits.history_per_tool, sessions=limits.history_sessions
        )

    @cached_property
    def usage(self) -> UsageStore:
        """The usage ledger (S26.3): in the message store's file, or in the store database with
        `store.url` (S27.2); opened by the first LLM call counted (or the first read)."""
        if self.config.store.url is not None:
            from agentkernel.services.usage_pg import PostgresUsageLedger  # psycopg: only with a store.url

            return PostgresUsageLedger(self.store_pool)
        from agentkernel.services.usage import UsageLedger  # by the first LLM call counted: not a tool run

        return UsageLedger(self.config.messages_db)

    @cached_property
    def store_pool(self) -> PgPool:
        """Connections to kernel.yaml's `store.url` (S27.2), shared by the stores that live there; the
        pool connects on the first operation."""
        from agentkernel.services.postgres import PgPool  # psycopg is imported only with a store.url

        if self.config.store.url is None:
            raise ConfigError(
                self.config.path, "no store.url (nor $AGENTKERNEL_STORE_URL): no store database"
            )
        return PgPool(self.config.store.url)

    def work_leases(self, lease_secs: float) -> WorkLeaseStore:
        """A store of running work's leases (the server's per-user caps): in the message store's file,
        or in the store database with `store.url` (S27.2), so the caps hold across machines."""
        if self.config.store.url is not None:
            from agentkernel.services.work_leases_pg import PostgresWorkLeases  # psycopg: only with a URL

            return PostgresWorkLeases(self.store_pool, lease_secs=lease_secs)
        from agentkernel.services.work_leases import WorkLeases  # asyncio: only in the server

        return WorkLeases(self.config.messages_db, lease_secs=lease_secs)

    @cached_property
    def turn_leases(self) -> LeaseStore:
        """One turn per session across processes, and the runs: in the message store's file, or in the
        store database with `store.url` (S27.2); opened when a server first takes one (a tool run never
        does)."""
        if self.config.store.url is not None:
            from agentkernel.services.turn_leases_pg import PostgresTurnLeases  # psycopg: only with a URL

            return PostgresTurnLeases(self.store_pool)
        from agentkernel.services.turn_leases import TurnLeases  # by the server's first turn

        return TurnLeases(self.config.messages_db)

    def _pg_messages(self) -> ClosableMessageStore:
        """The transcript in the store database (`store.url`, S27.2), beside the runs and leases."""
        from agentkernel.services.memory_pg import PostgresMessageStore  # psycopg: only with a store.url

        return PostgresMessageStore(self.store_pool)

    def agent_loop(
        self,
        *,
        stream: bool = True,
        recorded: bool = True,
        pool: FairPool | None = None,
        transcript: Transcript | None = None,
    ) -> AgentLoop:
        """An agent loop on these parts; a `recorded` one writes the session's transcript (a sub-agent's
        does not: the script gets the answer), through `transcript` when given (a chat's own records)."""
        from agentkernel.agent.loop import AgentLoop  # imported when a chat opens, not for a tool run

        store = (transcript or self.store) if recorded else None
        return AgentLoop(
            self.llm,
            self.dispatcher,
            self.hooks,
            self.services,
            store,
            stream=stream,
            pool=pool,
            gate=self.approval_gate,
            default_model=self.config.llm.model if self.config.llm is not None else None,
        )

    def subagent_service(self) -> SubagentService:
        """`run_subagent`'s service (S17), made of these parts, not of the face."""
        from agentkernel.agent.subagents import SubagentService  # the agent runtime: by the first sub-agent

        return SubagentService(
            processes=self.processes,
            temp_root=self.config.temp_root,
            limits=self.config.limits,
            home=self.home,
            template=self.template,
            tool_names=lambda: set(self.catalog.tools()),
            settings=self.loop_settings,
            # not streamed, and not in the session's transcript: the script gets the answer
            agent_loop=lambda pool: self.agent_loop(stream=False, recorded=False, pool=pool),
        )

    @cached_property
    def cron(self) -> CronService:
        """The live service `cron` (its store opened on first use)."""
        from agentkernel.services.cron import CronChecks, CronService  # croniter: not for a tool run
        from agentkernel.services.memory import session_problem

        checks = CronChecks(
            self._template_problem,
            lambda name: self.template(name).allowed_tools(),
            self._webhook_problem,
            lambda owner, session: session_problem(self.store, owner, session),
        )
        if self.config.store.url is None:
            return CronService(self.config.cron, checks)
        from agentkernel.services.cron_store_pg import PostgresCronStore  # psycopg: only with a store.url

        return CronService(self.config.cron, checks, partial(PostgresCronStore, self.store_pool))

    def cron_runs(
        self, open_chat: Callable[..., ChatSession], end_chat: Callable[[ChatSession], None]
    ) -> CronRuns:
        """A cron run's parts: chats opened and ended by the face's verbs, the transcript, http, the pool."""
        from agentkernel.agent.cron_runs import CronRuns  # asyncio and croniter: only where jobs fire

        return CronRuns(
            open_chat=open_chat,
            end_chat=end_chat,
            messages=lambda: self.store,
            http=lambda: self.services.require(HTTP, "cron"),
            webhook_attempts=self.config.cron.webhook_attempts,
            pool=self.script_pool,
        )

    def cron_scheduler(
        self, open_chat: Callable[..., ChatSession], end_chat: Callable[[ChatSession], None]
    ) -> CronScheduler:
        """A scheduler of the cron store whose runs are chats opened and ended by the face's verbs."""
        from agentkernel.services.cron_scheduler import CronScheduler

        runs = self.cron_runs(open_chat, end_chat)
        return CronScheduler(self.cron, runs.run, runs.deliver)

    def _template_problem(self, name: str) -> str | None:
        try:
            self.template(name)
        except ConfigError as exc:
            return exc.reason
        return None

    def _webhook_problem(self, url: str) -> str | None:
        from agentkernel.services.http import webhook_problem  # httpx: only when a job names a webhook

        return webhook_problem(url, self.config.http)

    # -- scratch folders ------------------------------------------------------------------------------

    def scratch_folder(self, user_id: str | None, session_id: str) -> Path:
        """`user_id`'s session's scratch folder, made if need be; old ones are cleaned now and then."""
        folder = session_temp_dir(self.config.temp_root, user_id=user_id, session_id=session_id)
        self.clean_scratch_now_and_then()
        return folder

    def clean_scratch_now_and_then(self) -> None:
        """The scratch clean-up, when it is due (services/scratch.py: at most hourly)."""
        self._forget_scratch(self.janitor.maybe_clean(time.time()))

    def clean_scratch(self, now: float) -> list[Path]:
        """Remove the session scratch folders idle for `files.scratch_ttl_hours` at `now`; the removed."""
        removed = self.janitor.clean(now)
        self._forget_scratch(removed)
        return removed

    def _forget_scratch(self, removed: list[Path]) -> None:
        """Tell the files service that the scratch folders `removed` are gone (their quotas)."""
        for service in self.services.built() if removed else ():
            if isinstance(service, FilesService):
                service.forget(removed)

    # -- closing --------------------------------------------------------------------------------------

    def open_provider(self) -> Provider | None:
        """The provider still to close: None once closed, or when it was never built."""
        provider = self.provider
        if self.closed or provider is None:
            return None
        from agentkernel.llm.deferred import DeferredProvider  # imported with the provider, if one was made

        if isinstance(provider, DeferredProvider) and not provider.built:
            return None
        return provider

    def close_local(self) -> list[Exception]:
        """Close the pools, the workers, the services and the store, each even when another fails; the
        failures. The provider is the face's to close, on the right event loop."""
        if self.closed:
            return []
        self.closed = True
        self.script_pool.shutdown()  # calls still waiting are cancelled; running ones end by their deadlines
        self.listing_pool.shutdown()
        errors: list[Exception] = []
        closers: list[Callable[[], object]] = [self.outside.close, self.workers.close]  # MCP servers, workers
        closers += [self.catalog.close, self.template_folder.close]  # their watches of the folders
        closers += [c for c in map(_closer, _unique([*self.services.built(), *self.given])) if c is not None]
        closers += [self.store.close, self.history.close]
        if "cron" in self.__dict__:  # built: its store may be open
            closers.append(self.cron.close)
        if "turn_leases" in self.__dict__:
            closers.append(self.turn_leases.close)
        self.approval_desk.close()
        self.approval_notices.close()  # retries end; notices still queued are dropped
        if "approvals" in self.__dict__:
            closers.append(self.approvals.close)
        if "usage" in self.__dict__:
            closers.append(self.usage.close)
        if "store_pool" in self.__dict__:  # after the stores that share it
            closers.append(self.store_pool.close)
        for close in closers:
            try:
                close()
            except Exception as exc:  # the rest must still close; the failure is raised at the end
                errors.append(exc)
        return errors

    def close(self) -> None:
        """Close every part (`close_local`) and the provider, on the loop its connections were made on.

        RuntimeError when an event loop is running here: use `aclose` there.
        """
        provider = self.open_provider()
        if provider is None or self.home.owns_loop:
            errors = self.close_local()
            if provider is not None:  # its connections were made on the kernel's own loop: closed there
                try:
                    self.home.run(provider.aclose, timeout=CLOSE_TIMEOUT_SECS)
                except Exception as exc:
                    errors.append(exc)
            self.home.close()
            _raise_all(errors)
            return
        import asyncio  # only when an LLM client was built: a tool run never pays for asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop running here: the usual case
            asyncio.run(self.aclose())
            return
        raise RuntimeError("Kernel.close() inside a running event loop: use `await kernel.aclose()`")

    async def aclose(self) -> None:
        """`close` for async callers: the provider's connections are closed on the running loop.

        Outside MCP servers are stopped first, on a worker thread: a stdio
        server is given up to 2 s to exit, and the loop (a server's other
        connections, its shutdown) goes on meanwhile.
        """
        import asyncio  # async callers have it already

        provider = self.open_provider()
        if not self.closed and self.outside.started:
            await asyncio.to_thread(self.outside.close)
        errors = self.close_local()
        if provider is not None:
            try:
                await provider.aclose()
            except Exception as exc:
                errors.append(exc)
        self.home.close()
        _raise_all(errors)


def _raise_all(errors: list[Exception]) -> None:
    """Raise what closing met: the one error, or all of them together."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup("closing the kernel failed", errors)


def _closer(service: object) -> Callable[[], object] | None:
    close = getattr(service, "close", None)
    return close if callable(close) else None


def _unique(services: Iterable[Any]) -> list[Any]:
    """Each service once (one handed in is also among the built ones), in order."""
    seen: dict[int, Any] = {}
    for service in services:
        seen.setdefault(id(service), service)
    return list(seen.values())


# -- the services scripts reach ---------------------------------------------------------------------


def _http(parts: KernelParts) -> object:
    from agentkernel.services.http import HttpService  # httpx: imported by the first HTTP call

    return HttpService.from_config(parts.config)


def _state(parts: KernelParts) -> object:
    if parts.config.store.url is not None and parts.config.state.db_path is not None:
        from agentkernel.services.state_pg import on_pool  # psycopg: only with a store.url

        return on_pool(parts.store_pool, parts.config.state)  # S27.2: in the store database
    from agentkernel.services.state import from_config  # the SQLite file: not opened before a state_* call

    return from_config(parts.config)


def _duckdb(parts: KernelParts) -> object:
    from agentkernel.services.duck import DuckService  # duckdb: imported by the first db_* call

    return DuckService.from_config(parts.config)


def _files(parts: KernelParts) -> object:
    return FilesService.from_config(parts.config)


def _shell(parts: KernelParts) -> object:
    from agentkernel.services.shell import ShellService  # subprocess machinery: by the first program run

    return ShellService.from_config(parts.config)


def _llm(parts: KernelParts) -> object:
    from agentkernel.services.llm import KernelLLM  # by the first script that calls the LLM

    return None if parts.llm is None else KernelLLM(parts.llm, parts.home)


def _tools(parts: KernelParts) -> object:
    from agentkernel.tools.calls import ToolCallService  # by the first script that calls a tool

    return ToolCallService(parts.dispatcher)


SERVICES: Mapping[ServiceKey[Any], Callable[[KernelParts], object]] = {
    HTTP: _http,
    STATE: _state,
    DUCKDB: _duckdb,
    FILES: _files,
    SHELL: _shell,
    LLM: _llm,
    MESSAGES: lambda parts: parts.store,
    TOOLS: _tools,
    TOOL_RESULTS: lambda parts: parts.history,
    SUBAGENTS: lambda parts: parts.subagent_service(),
    CRON: lambda parts: parts.cron,
    USAGE: lambda parts: parts.usage,
    QUOTAS: lambda parts: parts.quotas,
}
"""Every service a script can reach: its key (ports.py) and its factory. A new service is one of each."""


def build_services(
    parts: KernelParts,
    *,
    live: bool,
    given: Mapping[str, object | None] | None = None,
    extensions: Mapping[str, object] | None = None,
) -> Services:
    """The kernel's `Services`: each built from `parts` on first use, except those `given` by name.

    A live service is attached only to a live kernel. `given` replaces local
    services (built, or None to detach one); a name that is no local
    service's is a ValueError.
    """
    given = dict(given or {})
    local = {key.name for key in SERVICES if not key.live}
    for name in given:
        if name not in local:
            shown = ", ".join(sorted(local))
            raise ValueError(f"extra_services: no local service {name!r} (the kernel's own: {shown})")
    attached: dict[ServiceKey[Any], object] = {}
    for key, factory in SERVICES.items():
        if key.live and not live:
            continue
        attached[key] = given[key.name] if key.name in given else Later(_bound(factory, parts))
    return Services(attached, environment=parts.environment, extensions=extensions)


def _bound(factory: Callable[[KernelParts], object], parts: KernelParts) -> Callable[[], object]:
    return lambda: factory(parts)


__all__ = ["CLOSE_TIMEOUT_SECS", "SERVICES", "KernelParts", "build_services"]
