"""Kernel: the public face of the runtime, and the owner of everything behind it.

It owns the configuration, the services, the catalog of tools and hooks, the
dispatch path and the parts of the agent runtime (S23): templates, the
process table, the LLM provider, the message store and the hook pipeline.
Callers (the command line, the docs, an HTTP server) use its verbs only —
`run_tool`, `run_hooks`, `list_tools`, `problems`, `spawn`, `chat`, `close` —
so the engine room can change behind them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkernel import builtins
from agentkernel.agent.processes import Process, ProcessTable
from agentkernel.agent.subagents import SubagentService
from agentkernel.assembly import build_services
from agentkernel.config import HookSpec, KernelConfig, ToolSpec, find_kernel_config, load_kernel_config
from agentkernel.config.mcp_servers import McpServerSpec, settle_servers
from agentkernel.config.stores import rhai_cache_folder
from agentkernel.config.templates import TemplateFolder, TemplateSpec, check_references
from agentkernel.errors import ConfigError, HelperError, LoadProblem
from agentkernel.helpers import default_helper_table
from agentkernel.helpers.table import HelperTable
from agentkernel.identity import Caller, session_temp_dir
from agentkernel.llm.base import ChatMessage, Provider
from agentkernel.llm.config import LLMConfig, build_provider
from agentkernel.llm.deferred import DeferredProvider
from agentkernel.ports import HTTP
from agentkernel.scripting.host import ScriptHost
from agentkernel.services.files import FilesService
from agentkernel.services.kernel_loop import KernelLoop
from agentkernel.services.llm import KernelLLM
from agentkernel.services.memory import LazyMessageStore
from agentkernel.services.scratch import ScratchJanitor
from agentkernel.tools.calls import ToolCallService
from agentkernel.tools.catalog import ScriptCatalog
from agentkernel.tools.dispatch import Dispatcher
from agentkernel.tools.history import ToolResultHistory
from agentkernel.tools.isolated import WorkerPool
from agentkernel.tools.registry import ToolRegistry
from agentkernel.tools.results import ToolResult
from agentkernel.tools.sources.mcp.outside import OutsideTools
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.environment import Environment
from agentkernel.util.fair_pool import FairPool

RESUME_RECORDS = 1_000  # the transcript records `chat(resume=True)` reads back
CLOSE_TIMEOUT_SECS = 30.0  # closing the provider's connections on the kernel's own loop
LISTING_WORKERS = 4  # threads listing tools at once, for every user together (one listing a user at a time)

if TYPE_CHECKING:  # the agent runtime is imported when a chat opens, not for a tool run
    from agentkernel.agent.hooks import HookPipeline, HookRun
    from agentkernel.agent.loop import AgentLoop, LoopSettings
    from agentkernel.agent.session import ChatSession
    from agentkernel.services.cron import CronService
    from agentkernel.services.cron_scheduler import CronScheduler
    from agentkernel.services.memory import Record


class Kernel:
    """One kernel: build it from a KernelConfig (or `from_config_file`), use its verbs, close it.

    The verbs are the whole public face: what the command line, the docs and
    an HTTP server need (`run_tool`, `run_hooks`, `list_tools`, `problems`,
    `spawn`, `chat`, …). The parts behind them (script host, catalog,
    dispatcher, process table, services, message store) are private.
    `with Kernel.from_config_file() as kernel:` (or `async with`) closes
    every service built, the message store and the LLM provider at the end.
    """

    def __init__(
        self,
        config: KernelConfig,
        helpers: HelperTable | None = None,
        provider: Provider | None = None,
        *,
        live: bool = True,
        extra_services: Mapping[str, object | None] | None = None,  # by name, built; None detaches one
        extensions: Mapping[str, object] | None = None,  # your own services, by name
    ) -> None:
        """A kernel on `config`; nothing is built or opened until something needs it.

        `helpers` replaces the helper table (`default_helper_table()` plus your
        own); `provider` is an LLM backend used instead of kernel.yaml's
        `llm:`; `live=False` attaches neither the LLM nor the message store,
        nor the tool-call, tool-result and sub-agent services of S16 and S17
        (`hook_tool` without `--live`); `extra_services` replaces the kernel's
        own services (`http`, `state`, `duckdb`, `files`, `shell`) by name,
        built, or None to detach one; `extensions` are your own services, by
        name, for your own helpers (`Services.extension`). The kernel closes
        what it is handed with its own services.
        """
        self._config = config
        self._helpers = helpers or default_helper_table()
        folders = (*config.tool_dirs, *config.hook_dirs)
        builtin = builtins.FOLDERS if config.builtins else ()
        self._host = ScriptHost(
            self._helpers, script_folders=(*folders, *builtin), rhai_compile_cache=rhai_cache_folder(config)
        )
        self._catalog = ScriptCatalog(folders, self._host, config.limits, builtin_folders=builtin)
        self._template_folder = TemplateFolder(config.templates_dir)
        self._outside = OutsideTools(
            self._mcp_servers, lambda: self._catalog.tools(), config.limits, cwd=config.root
        )
        self._tools = ToolRegistry(self._catalog, root=config.root, outside=self._outside)
        self._history: ToolResultHistory = ToolResultHistory(
            config.limits.history_per_tool, config.limits.history_sessions
        )
        self._llm_config: LLMConfig | None = config.llm
        deny = config.env_deny
        if self._llm_config is not None and self._llm_config.api_key_env:
            deny = (*deny, self._llm_config.api_key_env)  # scripts never read the kernel's own key
        self._provider = provider
        self._store: LazyMessageStore = LazyMessageStore(config.messages_db)
        self._live = live
        self._home = KernelLoop()
        # tool and hook calls of event loops, shared fairly between users; threads start on first use
        self._script_pool = FairPool(config.script_workers, config.script_workers_per_user, name="scripts")
        # tool listings, apart: a user's listing never queues behind that user's own slow tool runs
        self._listing_pool = FairPool(LISTING_WORKERS, 1, name="listings")
        # python_tool built-ins do their work in these processes, killed at a call's deadline; none starts
        # before the first such call
        self._workers = WorkerPool(config.python_workers, preload=builtins.WORKER_PRELOAD)
        self._dispatcher = Dispatcher(
            self._tools,
            self._host,
            config.limits,
            self._history,
            self._workers,
            pool=self._script_pool,
            home=self._home,
        )
        self._processes = ProcessTable()
        self._environment: Environment = Environment(deny=deny)
        self._services = build_services(self, live=live, given=extra_services, extensions=extensions)
        handed = [*(extra_services or {}).values(), *(extensions or {}).values()]
        self._given = [s for s in handed if s is not None]  # closed with us
        self._janitor = ScratchJanitor(config.temp_root, config.files.scratch_ttl_hours * 3600)
        self._closed = False

    def _kernel_llm(self) -> KernelLLM | None:
        return None if self._llm is None else KernelLLM(self._llm, self._home)

    def _tool_calls(self) -> ToolCallService:
        return ToolCallService(self._dispatcher)

    @classmethod
    def from_config_file(
        cls, path: Path | None = None, *, start: Path | None = None, live: bool = True
    ) -> Kernel:
        """`path`, else $AGENTKERNEL_CONFIG, else the nearest config/kernel.yaml upward from `start`.

        Raises ConfigError naming where it looked when there is no project,
        or the file, line and field of a kernel.yaml that does not load.
        """
        return cls(load_kernel_config(find_kernel_config(path, start)), live=live)

    # -- read-only views ---------------------------------------------------------------------------

    @property
    def config(self) -> KernelConfig:
        """kernel.yaml as loaded (folders, limits, paths)."""
        return self._config

    @property
    def llm_config(self) -> LLMConfig | None:
        """kernel.yaml's `llm:` section, parsed; None without one."""
        return self._llm_config

    # -- what the project holds --------------------------------------------------------------------

    def list_tools(self, caller: Caller | Process | None = None) -> list[ToolSpec]:
        """The tools that load, by name; with a caller (or a process), only those it may call (S16.3)."""
        if caller is None:
            return self._tools.all()
        return self._tools.visible_to(self._as_caller(caller))

    def list_hooks(self) -> list[HookSpec]:
        """The hooks that load, in the order they run: priority, then name (S7.6)."""
        from agentkernel.agent.hooks import HookPipeline

        return HookPipeline.ordered(self._catalog.hooks().values())

    def list_templates(self) -> list[TemplateSpec]:
        """The templates that load, by name; re-read from their folder on each call (S23.1)."""
        templates, _ = self._templates()
        return [templates[name] for name in sorted(templates)]

    def problems(self, *, scripts: bool = True, templates: bool = True) -> list[LoadProblem]:
        """Every file that did not load, by path and line: what `agentkernel check` prints (S2.5).

        `scripts` are the tool and hook YAML files (one catalog holds both);
        `templates` the template files, a template naming an unknown tool or
        hook included. kernel.yaml itself has no problems here: a kernel.yaml
        that does not load (a helper section included) raises ConfigError
        when the kernel is built.
        """
        found = list(self._catalog.problems()) if scripts else []
        if templates:
            found += self._templates()[1]
            found += self._static_job_problems()
        return sorted(found, key=lambda p: (str(p.path), p.line or 0))

    def _static_job_problems(self) -> list[LoadProblem]:
        """kernel.yaml's `cron.jobs` checked as a scheduler will check them (a template they name, …)."""
        if not self._config.cron.jobs or self._config.path is None:
            return []
        try:
            self._cron.check_static()
        except HelperError as exc:
            return [LoadProblem(self._config.path, str(exc))]
        return []

    def tool(self, name: str) -> ToolSpec:
        """The tool called `name`; ConfigError saying why it is not there (its file's problem, or what is)."""
        spec = self._tools.get(name)
        if spec is not None:
            return spec
        unavailable = self._tools.unavailable(name)
        if unavailable is not None:  # the file meant to declare it failed: say why, nothing else
            raise ConfigError(None, unavailable)
        known = ", ".join(s.name for s in self._tools.all()) or "none"
        failed = len(self._catalog.problems())
        files = "1 file" if failed == 1 else f"{failed} files"
        more = f"; {files} failed to load, see `agentkernel tool list`" if failed else ""
        raise ConfigError(None, f"unknown tool {name!r} (loaded: {known}{more})")

    def hook(self, name: str) -> HookSpec:
        """The hook called `name`; ConfigError naming the hooks that did load otherwise."""
        spec = self._catalog.hooks().get(name)
        if spec is None:
            known = ", ".join(s.name for s in self.list_hooks()) or "none"
            raise ConfigError(None, f"unknown hook {name!r} (loaded: {known})")
        return spec

    def template(self, name: str) -> TemplateSpec:
        """A template that loads and names only known tools and hooks; ConfigError otherwise."""
        templates, problems = self._templates()
        spec = templates.get(name)
        own = [p for p in problems if spec is not None and p.path == spec.yaml_path]
        if spec is None:
            known = ", ".join(sorted(templates)) or "none"
            detail = "".join(f"\n  {p}" for p in problems)
            raise ConfigError(
                self._config.templates_dir, f"unknown template {name!r} (loaded: {known}){detail}"
            )
        if own:
            raise ConfigError(spec.yaml_path, "; ".join(p.reason for p in own))
        return spec

    def load_spec(self, yaml_path: Path) -> ToolSpec | HookSpec:
        """A tool or hook YAML file anywhere, loaded, its script checked; ConfigError if it does not load.

        For `agentkernel tool run PATH.yaml` and `hook_tool PATH.yaml`: the
        file need not be in the configured folders.
        """
        return self._catalog.load_file(yaml_path)

    def _templates(self) -> tuple[dict[str, TemplateSpec], list[LoadProblem]]:
        """The templates and their problems, unknown tool and hook names and MCP server clashes included."""
        templates, problems = self._template_folder.load()
        problems += check_references(templates, *self._catalog.tools_and_hooks())
        problems += settle_servers(s for t in templates.values() for s in t.mcp_servers)[1]
        return templates, problems

    def _mcp_servers(self) -> dict[str, McpServerSpec]:
        """Every MCP server the templates declare, by name; one declared two ways is left out (issue 16)."""
        templates, _ = self._template_folder.load()
        return settle_servers(s for t in templates.values() for s in t.mcp_servers)[0]

    def check_mcp_servers(self) -> tuple[list[LoadProblem], dict[str, int]]:
        """Start each template's MCP servers, list their tools, stop them: what fails, at its template,
        and how many tools each server that started offers.

        For `agentkernel check`: a server that cannot start (command not
        found, exits at once, handshake timeout, HTTP refused) is a problem
        naming the template, the server and the cause, and so is a tool it
        cannot offer. A server running already is left running. The servers
        start side by side: a start takes seconds, and `check` waits for
        the slowest, not for the sum.
        """
        from concurrent.futures import ThreadPoolExecutor

        servers = sorted(self._mcp_servers().items())
        running = {name for name, _ in servers if self._outside.running(name)}
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(servers)))) as starting:  # all at once
            reasons = list(starting.map(lambda item: self._outside.problems(item[1]), servers))
        found: list[LoadProblem] = []
        offered: dict[str, int] = {}
        for (name, spec), said in zip(servers, reasons, strict=True):
            where = spec.yaml_path or self._config.templates_dir
            found += [LoadProblem(where, f"template {spec.template}: {r}", spec.line) for r in said]
            count = self._outside.offered_count(name)
            if count is not None:
                offered[name] = count
            if name not in running:
                self._outside.stop(name)
        return found, offered

    # -- running tools and hooks -------------------------------------------------------------------

    def caller(
        self,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        template: str | None = None,
        agent: str | None = None,
        pid: str | None = None,
        allowed_tools: frozenset[str] | None = None,
    ) -> Caller:
        """A Caller for this kernel; a session gets its scratch folder (S14.2)."""
        temp_dir = None
        if session_id is not None:
            temp_dir = session_temp_dir(self._config.temp_root, user_id=user_id, session_id=session_id)
            self._forget_scratch(self._janitor.maybe_clean(time.time()))
        return Caller(
            pid=pid or str(uuid.uuid4()),
            agent=agent,
            session_id=session_id,
            user_id=user_id,
            template=template,
            temp_dir=temp_dir,
            allowed_tools=allowed_tools,
            services=self._services,
        )

    def _as_caller(self, who: Caller | Process | None) -> Caller:
        """A caller as given; a process's own (its template's tools only); None: the kernel, no session."""
        if who is None:
            return self.caller()
        if isinstance(who, Process):
            return who.caller(self._services)
        return who

    def run_tool(
        self, tool: str | ToolSpec, args: JSONValue, caller: Caller | Process | None = None
    ) -> ToolResult:
        """One tool call through the one dispatch path (DESIGN rule 6); every failure is in the result.

        `tool` is a name, or a spec from `load_spec` (a file outside the
        configured folders). No caller means the kernel itself: every tool,
        no session, no scratch folder.
        """
        who = self._as_caller(caller)
        if isinstance(tool, ToolSpec):
            return self._dispatcher.call_spec(tool, args, who)
        return self._dispatcher.call(tool, args, who)

    async def arun_tool(
        self, name: str, args: JSONValue, caller: Caller | Process | None = None
    ) -> ToolResult:
        """`run_tool` from an event loop: the script runs on a worker of the kernel's script pool,
        in its user's queue (fair_pool.py, DESIGN rule 10)."""
        return await self._dispatcher.acall(name, args, self._as_caller(caller))

    async def alist_tools(self, caller: Caller | Process | None = None) -> list[ToolSpec]:
        """`list_tools` from an event loop, on a small pool of its own shared fairly between users (one
        listing of each user at a time): listing may start a template's outside MCP servers, a wait that
        must not hold the loop's default threads, and a user whose tool runs fill their share of the
        script pool can still see their tools (an MCP client lists them before it calls one)."""
        who = self._as_caller(caller)
        return await self._listing_pool.run(who.user_id, self.list_tools, who)

    def run_hooks(
        self,
        hooks: str | HookSpec | Iterable[str | HookSpec],
        message: JSONObject,
        caller: Caller | Process | None = None,
    ) -> HookRun:
        """One message through hooks, as a run of the loop takes it but with no LLM (S22.1).

        `hooks` are names or specs (`load_spec`), run in priority order as
        the loop runs a template's. A live kernel records every call in the
        transcript of the caller's session exactly as the loop does (kind
        `hook` or `error`, kernel.md 9); a kernel built with `live=False`
        has no message store attached and records nothing.
        """
        given = [hooks] if isinstance(hooks, str | HookSpec) else list(hooks)
        specs = [self.hook(h) if isinstance(h, str) else h for h in given]
        who = self._as_caller(caller)
        run = self._hooks.run_message(specs, who, message)
        if self._live and who.session_id is not None:
            for record in run.records:
                self._store.append(who.session_id, *record.transcript_entry(), user_id=who.user_id)
        return run

    async def arun_hooks(
        self,
        hooks: str | HookSpec | Iterable[str | HookSpec],
        message: JSONObject,
        caller: Caller | Process | None = None,
    ) -> HookRun:
        """`run_hooks` from an event loop, on a worker of the script pool in the caller's user's queue."""
        who = self._as_caller(caller)
        return await self._script_pool.run(who.user_id, self.run_hooks, hooks, message, who)

    # -- processes and chats -----------------------------------------------------------------------

    def spawn(
        self,
        template: str | TemplateSpec,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        parent: Process | None = None,
        name: str | None = None,
    ) -> Process:
        """Start a process from a template (S23.2); a child (`parent`) shares its budget group (S17).

        `template` is a name (`template(name)` checks it), or a TemplateSpec
        built in code, such as a sub-agent's made from its instructions.
        """
        process = self._processes.spawn(
            template if isinstance(template, TemplateSpec) else self.template(template),
            user_id=user_id,
            session_id=session_id,
            parent=parent,
            name=name,
            temp_root=self._config.temp_root,
        )
        if process.session_id is not None:
            self._forget_scratch(self._janitor.maybe_clean(time.time()))
        return process

    def process(self, pid: str) -> Process | None:
        """The running process `pid`; None when it is unknown or has ended."""
        return self._processes.get(pid)

    def list_processes(self) -> list[Process]:
        """The running processes, oldest first."""
        return self._processes.all()

    def terminate(self, pid: str) -> list[Process]:
        """End a process and all its descendants; the ones ended, the process first (none if unknown)."""
        return self._processes.terminate(pid)

    def chat(
        self,
        template: str,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        stream: bool = True,
        resume: bool = False,
    ) -> ChatSession:
        """Spawn a process from `template` and open a chat session with it (a new session id if none).

        `resume`: the conversation so far is read back from the session's
        transcript (its last RESUME_RECORDS records: the user's messages and
        the answers; tool calls are not replayed), so a session goes on
        after a restart of the program that holds it (`agentkernel serve`).
        """
        from agentkernel.agent.loop import LoopSettings
        from agentkernel.agent.session import ChatSession

        process = self.spawn(template, user_id=user_id, session_id=session_id or str(uuid.uuid4()))
        settings = LoopSettings.for_template(process.template, self._catalog)
        history = self._conversation(process) if resume else []
        return ChatSession(process, self._agent_loop(stream=stream), settings, history)

    def _conversation(self, process: Process) -> list[ChatMessage]:
        """The user's messages and the answers of the process's session, as the loop's history.

        Only the records of the process's user (and those from before the
        store recorded users): naming another user's session id resumes nothing of theirs.
        """
        from agentkernel.services.memory import KIND_AGENT, KIND_USER, Owner

        if process.session_id is None:
            return []
        owner = Owner(process.user_id, unrecorded=True)
        records = self._store.history(process.session_id, RESUME_RECORDS, owner=owner)
        return [
            ChatMessage.user(r.content) if r.kind == KIND_USER else ChatMessage.assistant(r.content)
            for r in records
            if r.kind in (KIND_USER, KIND_AGENT)
        ]

    def end_chat(self, chat: ChatSession) -> None:
        """The chat is over: its process (and sub-agents) end, its session's tool results are dropped."""
        process = chat.process
        self._processes.terminate(process.pid)
        if process.session_id is not None:
            self._history.forget_session(process.user_id, process.session_id)

    def transcript(self, session_id: str, limit: int = 100, *, user_id: str | None = None) -> list[Record]:
        """The last `limit` records of a session's transcript, oldest first (kernel.md 9).

        Every record under the session id, unless `user_id` names its owner:
        then only that user's (and those from before the store recorded
        users). Whoever calls this has checked who owns the session (the
        server does, through its sessions table); scripts never reach it.
        """
        from agentkernel.services.memory import Owner

        owner = Owner(user_id, unrecorded=True) if user_id is not None else None
        return self._store.history(session_id, limit, owner=owner)

    def _agent_loop(self, *, stream: bool = True) -> AgentLoop:
        from agentkernel.agent.loop import AgentLoop

        return AgentLoop(self._llm, self._dispatcher, self._hooks, self._services, self._store, stream=stream)

    def _subagent_service(self) -> SubagentService:
        """`run_subagent`'s service (S17), made of this kernel's parts, not of its face."""

        def settings(template: TemplateSpec) -> LoopSettings:
            from agentkernel.agent.loop import LoopSettings

            return LoopSettings.for_template(template, self._catalog)

        def agent_loop(pool: FairPool) -> AgentLoop:
            from agentkernel.agent.loop import AgentLoop

            # not streamed, and not in the session's transcript: the script gets the answer
            return AgentLoop(
                self._llm,
                self._dispatcher,
                self._hooks,
                self._services,
                None,
                stream=False,
                pool=pool,
            )

        return SubagentService(
            processes=self._processes,
            temp_root=self._config.temp_root,
            limits=self._config.limits,
            home=self._home,
            template=self.template,
            tool_names=lambda: set(self._catalog.tools()),
            settings=settings,
            agent_loop=agent_loop,
        )

    @cached_property
    def _hooks(self) -> HookPipeline:
        """The hook pipeline (S7), built when the first hook runs."""
        from agentkernel.agent.hooks import HookPipeline

        return HookPipeline(self._host, self._config.limits)

    # -- cron (S10) ---------------------------------------------------------------------------------

    @cached_property
    def _cron(self) -> CronService:
        """The live service `cron` (its store opened on first use)."""
        from agentkernel.services.cron import CronChecks, CronService

        checks = CronChecks(
            self._template_problem,
            lambda name: self.template(name).allowed_tools(),
            self._webhook_problem,
            self._session_problem,
        )
        return CronService(self._config.cron, checks)

    def cron_scheduler(self) -> CronScheduler:
        """A scheduler of this kernel's cron store: `await scheduler.run(stop)` fires jobs until `stop`.

        `agentkernel serve` runs one on its event loop, `agentkernel cron run`
        one alone. Jobs run with their owner's identity, each run a process
        of the job's template (services/cron.py, agent/cron_runs.py).
        """
        from agentkernel.agent.cron_runs import CronRuns
        from agentkernel.services.cron_scheduler import CronScheduler

        runs = CronRuns(
            open_chat=self.chat,
            end_chat=self.end_chat,
            messages=lambda: self._store,
            http=lambda: self._services.require(HTTP, "cron"),
            webhook_attempts=self._config.cron.webhook_attempts,
            pool=self._script_pool,
        )
        return CronScheduler(self._cron, runs.run, runs.deliver)

    def cron_jobs(self, user_id: str | None = None) -> list[JSONObject]:
        """The jobs of `user_id` (every user's when None) as `list_cron` shows them, each with its `owner`."""
        return [{"owner": s.owner, **s.to_json()} for s in self._cron.store.statuses(user_id)]

    def cancel_cron_job(self, user_id: str, name: str) -> bool:
        """Remove `user_id`'s job `name`; whether there was one."""
        return self._cron.cancel(self.caller(user_id=user_id), name)

    def _template_problem(self, name: str) -> str | None:
        try:
            self.template(name)
        except ConfigError as exc:
            return exc.reason
        return None

    def _webhook_problem(self, url: str) -> str | None:
        """Why `url` can never be a webhook: not http(s), or a host the `http:` rules deny by name."""
        import httpx

        from agentkernel.services.http import HostPolicy, HostRefused, check_url

        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, ValueError) as exc:
            return f"not a URL ({exc})"
        problem = check_url(parsed)
        if problem is not None:
            return problem
        rules = self._config.http
        policy = HostPolicy(rules.allow_hosts, rules.deny_hosts, rules.allow_private)
        try:
            policy.check_name(parsed.host)
            if _is_address(parsed.host):  # an address in the URL is judged now; a name when it resolves
                policy.check_addresses(parsed.host, [parsed.host])
        except HostRefused as exc:
            return str(exc)
        return None

    def _session_problem(self, owner: str | None, session_id: str) -> str | None:
        """Why a job of `owner` may not post into `session_id`: it holds none of their messages."""
        from agentkernel.services.memory import Owner

        if self._store.count(session_id, owner=Owner(owner)) == 0:
            return f"{session_id!r} is not a session of {owner!r} (it holds none of their messages)"
        return None

    @cached_property
    def _llm(self) -> Provider | None:
        """The configured LLM (kernel.yaml `llm:`); None without one.

        Built — and its HTTP stack imported — on the first request, not here.
        """
        if self._provider is None and self._llm_config is not None:
            config = self._llm_config
            self._provider = DeferredProvider(lambda: build_provider(config))
        return self._provider

    # -- scratch folders ---------------------------------------------------------------------------

    def clean_scratch(self, now: float | None = None) -> list[Path]:
        """Remove the session scratch folders idle for `files.scratch_ttl_hours`; the removed ones.

        The kernel runs this itself when it hands out its first session
        folder and then at most hourly (services/scratch.py); `now` (a
        `time.time()` value) lets a test move the clock instead of waiting.
        """
        removed = self._janitor.clean(time.time() if now is None else now)
        self._forget_scratch(removed)
        return removed

    def _forget_scratch(self, removed: list[Path]) -> None:
        for service in self._services.built() if removed else ():
            if isinstance(service, FilesService):
                service.forget(removed)

    # -- closing -----------------------------------------------------------------------------------

    def close(self) -> None:
        """Close every service built (and each one handed in), the message store and the provider.

        Closing twice is harmless. A provider that was used is closed on an
        event loop of its own, so from async code use `aclose` (or `async
        with`): RuntimeError here when an event loop is running.
        """
        provider = self._open_provider()
        if provider is None or self._home.owns_loop:
            errors = self._close_local()
            if provider is not None:  # its connections were made on the kernel's own loop: closed there
                try:
                    self._home.run(provider.aclose, timeout=CLOSE_TIMEOUT_SECS)
                except Exception as exc:
                    errors.append(exc)
            self._home.close()
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
        import asyncio

        provider = self._open_provider()
        if not self._closed and self._outside.started:
            await asyncio.to_thread(self._outside.close)
        errors = self._close_local()
        if provider is not None:
            try:
                await provider.aclose()
            except Exception as exc:
                errors.append(exc)
        self._home.close()
        _raise_all(errors)

    def _open_provider(self) -> Provider | None:
        """The provider still to close: None once closed, or when it was never built."""
        provider = self._provider
        if self._closed or provider is None:
            return None
        if isinstance(provider, DeferredProvider) and not provider.built:
            return None
        return provider

    def _close_local(self) -> list[Exception]:
        """Close the services and the store, each even when another fails; the failures."""
        if self._closed:
            return []
        self._closed = True
        self._script_pool.shutdown()  # calls still waiting are cancelled; running ones end by their deadlines
        self._listing_pool.shutdown()
        errors: list[Exception] = []
        try:
            self._outside.close()  # outside MCP servers: their processes end with the kernel
        except Exception as exc:
            errors.append(exc)
        try:
            self._workers.close()  # python_tool worker processes: killed and reaped
        except Exception as exc:
            errors.append(exc)
        for service in _unique([*self._services.built(), *self._given]):
            close = getattr(service, "close", None)
            if not callable(close):
                continue
            try:
                close()
            except Exception as exc:  # the rest must still close; the failure is raised at the end
                errors.append(exc)
        try:
            self._store.close()
            if "_cron" in self.__dict__:  # built: its store may be open
                self._cron.close()
        except Exception as exc:
            errors.append(exc)
        return errors

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Kernel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _unique(services: Iterable[Any]) -> list[Any]:
    """Each service once (one handed in is also among the built ones), in order."""
    seen: dict[int, Any] = {}
    for service in services:
        seen.setdefault(id(service), service)
    return list(seen.values())


def _raise_all(errors: list[Exception]) -> None:
    """Raise what closing met: the one error, or all of them together."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup("closing the kernel failed", errors)


def _is_address(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


__all__ = ["Kernel"]
