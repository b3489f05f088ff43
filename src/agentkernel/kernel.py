"""Kernel: the public face of the runtime — its verbs, and nothing behind them.

Callers (the command line, the docs, an HTTP server, MCP serving) use its
verbs only — `run_tool`, `run_hooks`, `list_tools`, `problems`, `spawn`,
`chat`, `close`, … — so the engine room can change behind them. The parts
the verbs use (the script host, the catalog, the dispatch path, the process
table, the services, the message store) are built and closed by the
assembly (assembly.py), which the face holds and speaks through.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

from agentkernel.agent.approval_gate import ApprovalGate
from agentkernel.assembly import KernelParts
from agentkernel.config import (
    HookSpec,
    KernelConfig,
    LLMConfig,
    ToolSpec,
    find_kernel_config,
    load_kernel_config,
)
from agentkernel.config.templates import TemplateSpec
from agentkernel.errors import ConfigError, LoadProblem
from agentkernel.helpers import default_helper_table
from agentkernel.helpers.table import HelperTable
from agentkernel.identity import Caller
from agentkernel.ports import Record, UsageStore
from agentkernel.schemas.bounds import ValidationStopped
from agentkernel.tools.dispatch import Asker, argument_problem
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.ids import new_uuid

if TYPE_CHECKING:  # the agent runtime and cron are imported when first used: a tool run never pays for them
    from agentkernel.agent.cron_runs import CronRuns
    from agentkernel.agent.hooks import HookEvent, HookEventRun, HookRun
    from agentkernel.agent.processes import Process
    from agentkernel.agent.session import ChatSession
    from agentkernel.llm.base import Provider
    from agentkernel.services.approval_values import ApprovalStore
    from agentkernel.services.cron import CronService
    from agentkernel.services.cron_scheduler import CronScheduler
    from agentkernel.services.postgres import PgPool  # psycopg: imported only with a store.url
    from agentkernel.services.turn_leases import LeaseStore, Run
    from agentkernel.services.work_leases import WorkLeaseStore

RESUME_RECORDS = 1_000  # the transcript records `chat(resume=True)` reads back


class Kernel:
    """One kernel: build it from a KernelConfig (or `from_config_file`), use its verbs, close it.

    The verbs are the whole public face: what the command line, the docs and
    an HTTP server need (`run_tool`, `run_hooks`, `list_tools`, `problems`,
    `spawn`, `chat`, …). The parts behind them are private (assembly.py).
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
        kept_contexts: bool = True,
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
        what it is handed with its own services. `kept_contexts=False` runs
        every JavaScript call in a new QuickJS context, keeping none for the
        next call: the same answers, cheaper for a kernel that makes a call or
        two (`agentkernel tool run`), dearer for one that makes many.
        """
        self._parts = KernelParts(
            config,
            helpers or default_helper_table(),
            provider,
            live=live,
            extra_services=extra_services,
            extensions=extensions,
            kept_contexts=kept_contexts,
        )

    @classmethod
    def from_config_file(
        cls,
        path: str | PathLike[str] | None = None,
        *,
        start: str | PathLike[str] | None = None,
        live: bool = True,
    ) -> Kernel:
        """`path`, else $AGENTKERNEL_CONFIG, else the nearest config/kernel.yaml upward from `start`.

        Raises ConfigError naming where it looked when there is no project,
        or the file, line and field of a kernel.yaml that does not load.
        """
        found = find_kernel_config(
            None if path is None else Path(path), None if start is None else Path(start)
        )
        return cls(load_kernel_config(found), live=live)

    # -- read-only views ---------------------------------------------------------------------------

    @property
    def config(self) -> KernelConfig:
        """kernel.yaml as loaded (folders, limits, paths)."""
        return self._parts.config

    @property
    def llm_config(self) -> LLMConfig | None:
        """kernel.yaml's `llm:` section, parsed; None without one."""
        return self._parts.config.llm

    # -- what the project holds --------------------------------------------------------------------

    def list_tools(self, caller: Caller | Process | None = None) -> list[ToolSpec]:
        """The tools that load, by name; with a caller (or a process), only those it may call (S16.3)."""
        if caller is None:
            return self._parts.tools.all()
        return self._parts.tools.visible_to(self._as_caller(caller))

    def list_hooks(self) -> list[HookSpec]:
        """The hooks that load, in the order they run: priority, then name (S7.6)."""
        from agentkernel.agent.hooks import HookPipeline  # the agent runtime: not for a tool run

        return HookPipeline.ordered(self._parts.catalog.hooks().values())

    def list_templates(self) -> list[TemplateSpec]:
        """The templates that load, by name; re-read from their folder on each call (S23.1)."""
        templates, _ = self._parts.templates()
        return [templates[name] for name in sorted(templates)]

    def problems(self, *, scripts: bool = True, templates: bool = True) -> list[LoadProblem]:
        """Every file that did not load, by path and line: what `agentkernel check` prints (S2.5).

        `scripts` are the tool and hook YAML files (one catalog holds both);
        `templates` the template files, a template naming an unknown tool or
        hook included. kernel.yaml itself has no problems here: a kernel.yaml
        that does not load (a helper section included) raises ConfigError
        when the kernel is built.
        """
        found = list(self._parts.catalog.problems()) if scripts else []
        if templates:
            found += self._parts.templates()[1] + self._parts.job_problems()
        return sorted(found, key=lambda p: (str(p.path), p.line or 0))

    def tool(self, name: str) -> ToolSpec:
        """The tool called `name`; ConfigError saying why it is not there (its file's problem, or what is)."""
        return self._parts.tool(name)

    def hook(self, name: str) -> HookSpec:
        """The hook called `name`; ConfigError naming the hooks that did load otherwise."""
        spec = self._parts.catalog.hooks().get(name)
        if spec is None:
            known = ", ".join(s.name for s in self.list_hooks()) or "none"
            raise ConfigError(None, f"unknown hook {name!r} (loaded: {known})")
        return spec

    def template(self, name: str) -> TemplateSpec:
        """A template that loads and names only known tools and hooks; ConfigError otherwise."""
        return self._parts.template(name)

    def load_spec(self, yaml_path: Path) -> ToolSpec | HookSpec:
        """A tool or hook YAML file anywhere, loaded, its script checked; ConfigError if it does not load.

        For `agentkernel tool run PATH.yaml` and `hook_tool PATH.yaml`: the
        file need not be in the configured folders.
        """
        return self._parts.catalog.load_file(yaml_path)

    def check_mcp_servers(self) -> tuple[list[LoadProblem], dict[str, int]]:
        """Start each template's MCP servers, list their tools, stop them: what fails, at its template,
        and how many tools each server that started offers (`agentkernel check`)."""
        return self._parts.outside.check(self._parts.mcp_servers(), self._parts.config.templates_dir)

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
        spec: TemplateSpec | None = None,
    ) -> Caller:
        """A Caller for this kernel; a session gets its scratch folder (S14.2). With `spec`, the
        template's: its tools allowed, its hooks asked about each tool call (S24), its name."""
        if spec is not None:
            template, allowed_tools = spec.name, spec.allowed_tools()
        temp_dir = None
        if session_id is not None:
            temp_dir = self._parts.scratch_folder(user_id, session_id)
        return Caller(
            pid=pid or new_uuid(),
            agent=agent,
            session_id=session_id,
            user_id=user_id,
            template=template,
            temp_dir=temp_dir,
            allowed_tools=allowed_tools,
            services=self._parts.services,
            hooks=() if spec is None else self._parts.template_hooks(spec),
            llm_provider=None if spec is None else spec.model.provider,
            llm_providers=frozenset() if spec is None else frozenset(spec.model.providers),
        )

    def _as_caller(self, who: Caller | Process | None) -> Caller:
        """A caller as given; a process's own (its template's tools only); None: the kernel, no session."""
        if who is None:
            return self.caller()
        if isinstance(who, Caller):
            return who
        return who.caller(self._parts.services)  # a Process

    def run_tool(
        self,
        tool: str | ToolSpec,
        args: JSONValue,
        caller: Caller | Process | None = None,
        origin: str = "panel",
        *,
        approved: bool = False,
    ) -> ToolResult:
        """One tool call through the one dispatch path (DESIGN rule 6); every failure is in the result.

        `tool` is a name, or a spec from `load_spec` (a file outside the
        configured folders). No caller means the kernel itself: every tool,
        no session, no scratch folder. `origin`: where the call comes from,
        as its hooks see it (S24.1; `panel`: a person ran it). `approved`:
        the person running it approves it by doing so (`agentkernel tool
        run`, a tool's `tests:`), so a call that needs approval (S24.4)
        does not wait; the hooks still see it, and may deny it.
        """
        who = self._as_caller(caller)
        if isinstance(tool, ToolSpec):
            return self._parts.dispatcher.call_spec(tool, args, who, origin, approved=approved)
        return self._parts.dispatcher.call(tool, args, who, origin, approved=approved)

    async def arun_tool(
        self,
        name: str,
        args: JSONValue,
        caller: Caller | Process | None = None,
        origin: str = "panel",
        *,
        asker: Asker | None = None,
    ) -> ToolResult:
        """`run_tool` from an event loop: the script runs on a worker of the kernel's script pool,
        in its user's queue (fair_pool.py, DESIGN rule 10). A call a person must approve is put to
        `asker` when one is given (tools/dispatch.py `Asker`), else it waits at the blocking desk."""
        who = self._as_caller(caller)
        return await self._parts.dispatcher.acall(name, args, who, origin=origin, asker=asker)

    async def alist_tools(self, caller: Caller | Process | None = None) -> list[ToolSpec]:
        """`list_tools` from an event loop, on a small pool of its own shared fairly between users (one
        listing of each user at a time): listing may start a template's outside MCP servers, a wait that
        must not hold the loop's default threads, and a user whose tool runs fill their share of the
        script pool can still see their tools (an MCP client lists them before it calls one)."""
        who = self._as_caller(caller)
        return await self._parts.listing_pool.run(who.user_id, self.list_tools, who)

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
        run = self._parts.hooks.run_message(specs, who, message)
        if self._parts.live and who.session_id is not None:
            for record in run.records:
                self._parts.store.append(who.session_id, *record.transcript_entry(), user_id=who.user_id)
        return run

    def run_hook_event(
        self, hook: str | HookSpec, given: HookEvent, caller: Caller | Process | None = None
    ) -> HookEventRun:
        """One hook on one event with the inputs `given` states, through the loop's pipeline: what a
        hook's `tests:` case runs (`agentkernel hook test`). Nothing is recorded in a transcript."""
        spec = self.hook(hook) if isinstance(hook, str) else hook
        return self._parts.hooks.run_event(spec, self._as_caller(caller), given)

    async def arun_hooks(
        self,
        hooks: str | HookSpec | Iterable[str | HookSpec],
        message: JSONObject,
        caller: Caller | Process | None = None,
    ) -> HookRun:
        """`run_hooks` from an event loop, on a worker of the script pool in the caller's user's queue."""
        who = self._as_caller(caller)
        return await self._parts.script_pool.run(who.user_id, self.run_hooks, hooks, message, who)

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
        process = self._parts.processes.spawn(
            template if isinstance(template, TemplateSpec) else self.template(template),
            user_id=user_id,
            session_id=session_id,
            parent=parent,
            name=name,
            temp_root=self._parts.config.temp_root,
        )
        if process.session_id is not None:
            self._parts.clean_scratch_now_and_then()
        return process

    def process(self, pid: str) -> Process | None:
        """The running process `pid`; None when it is unknown or has ended."""
        return self._parts.processes.get(pid)

    def list_processes(self) -> list[Process]:
        """The running processes, oldest first."""
        return self._parts.processes.all()

    def terminate(self, pid: str) -> list[Process]:
        """End a process and all its descendants; the ones ended, the process first (none if unknown)."""
        return self._parts.processes.terminate(pid)

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
        after a restart of the program that holds it (`agentkernel serve`);
        and before each message the chat checks the transcript for records it
        did not write (another process's turn in the session) and reads the
        history again when there are: the store is the truth.
        """
        from agentkernel.agent.session import ChatSession  # the agent runtime: when a chat opens
        from agentkernel.agent.session_records import SessionRecords  # with it

        view = self._parts.catalog.tools_and_hooks()  # one scan of the folders for the template and its hooks
        spec = self._parts.template(template, view)
        process = self.spawn(spec, user_id=user_id, session_id=session_id or new_uuid())
        settings = self._parts.loop_settings(process.template, view[1])
        assert process.session_id is not None
        records = SessionRecords(self._parts.store, process.session_id, process.user_id, RESUME_RECORDS)
        loop = self._parts.agent_loop(stream=stream, transcript=records)
        history = records.history() if resume else []
        return ChatSession(process, loop, settings, history, records=records, follows_store=resume)

    def end_chat(self, chat: ChatSession) -> None:
        """The chat is over: its process (and sub-agents) end.

        Its session's tool results stay in the store (`get_tool_result`), as its
        transcript does: another process may be serving the session, and a chat
        that opens on it again reads them; `limits.history_sessions` bounds them.
        """
        self._parts.processes.terminate(chat.process.pid)

    def turn_leases(self) -> LeaseStore:
        """The store's turn leases: one turn per session at a time, across every process on
        this project's message store (`agentkernel serve` takes one for each turn)."""
        return self._parts.turn_leases

    def work_leases(self, lease_secs: float) -> WorkLeaseStore:
        """A new store of running work's leases (the server's per-user caps, counted across every
        process on the project's store; the PostgreSQL one with `store.url`)."""
        return self._parts.work_leases(lease_secs)

    def approvals(self) -> ApprovalStore:
        """The calls waiting for a person's decision and the users' rules (S24.4), every process's."""
        return self._parts.approvals

    def usage(self) -> UsageStore:
        """The usage ledger (S26.3): every LLM call of every path, per user, template, model and day,
        every process's (services/usage.py)."""
        return self._parts.usage

    def store_pool(self) -> PgPool:
        """The connections to kernel.yaml's `store.url` (S27.2) the kernel's stores share, for the
        server's own stores that live there too (sessions, continuations, downloads); closed with the
        kernel. ConfigError without a `store.url`."""
        return self._parts.store_pool

    def check_quota(self, user_id: str, template: str | None) -> None:
        """QuotaExhausted, naming the quota, the use and the reset, when `user_id` has spent a quota of
        kernel.yaml's `quotas:` (S26.3) that a call within `template` must fit; reads the ledger."""
        self._parts.quotas.check(user=user_id, template=template)

    def approval_gate(self) -> ApprovalGate:
        """Where a call is asked about in the store and its decision awaited (agent/approval_gate.py):
        for a caller that asks a person its own way (an `Asker`, such as our MCP server's)."""
        return self._parts.approval_gate

    def edit_problem(self, tool: str, args: JSONValue) -> str | None:
        """Why `args` cannot be a decision's edit of a call of `tool`: they do not match its
        `parameters` (checked as a call's are, S2.5), or the tool is gone; None when they can."""
        spec = self._parts.tools.get(tool)
        if spec is None:
            return f"tool {tool!r} is not loaded now"
        try:
            problem = argument_problem(spec, args, time.monotonic() + self.config.limits.timeout_secs)
        except ValidationStopped as exc:
            return f"args: could not be validated: {exc}"
        return None if problem is None else f"args: {problem}"

    def run(self, run_id: str) -> Run | None:
        """A run (S25.1): whose, in which session, whether it is still going and how it ended."""
        return self._parts.turn_leases.run(run_id)

    def run_journal(self, run_id: str) -> list[Record]:
        """Every record of a run, oldest first. Whoever calls this has checked the run is the caller's."""
        from agentkernel.services.memory import run_journal  # the transcript's reads: not for a tool run

        return run_journal(self._parts.store, run_id)

    def run_records(self, run_id: str, after: int = 0, most: int = 500) -> list[Record]:
        """A run's records after record id `after`, oldest first (its events, read again: S25.4).
        Whoever calls this has checked the run is the caller's."""
        return self._parts.store.run_records(run_id, after, most)

    def transcript(self, session_id: str, limit: int = 100, *, user_id: str | None = None) -> list[Record]:
        """The last `limit` records of a session's transcript, oldest first (kernel.md 9).

        Every record under the session id, unless `user_id` names its owner:
        then only that user's (and those from before the store recorded
        users). Whoever calls this has checked who owns the session (the
        server does, through its sessions table); scripts never reach it.
        """
        from agentkernel.services.memory import transcript  # the transcript's reads: not for a tool run

        return transcript(self._parts.store, session_id, limit, user_id)

    # -- cron (S10) ---------------------------------------------------------------------------------

    def cron_scheduler(self) -> CronScheduler:
        """A scheduler of this kernel's cron store: `await scheduler.run(stop)` fires jobs until `stop`.

        `agentkernel serve` runs one on its event loop, `agentkernel cron run`
        one alone. Jobs run with their owner's identity, each run a process
        of the job's template (services/cron.py, agent/cron_runs.py).
        """
        return self._parts.cron_scheduler(self.chat, self.end_chat)

    def cron_runs(self) -> CronRuns:
        """What runs a job's due time and delivers its answer (a Temporal worker's firings use it)."""
        return self._parts.cron_runs(self.chat, self.end_chat)

    @property
    def cron(self) -> CronService:
        """The cron service: the jobs' checks and their store (opened on first use)."""
        return self._parts.cron

    def cron_jobs(self, user_id: str | None = None) -> list[JSONObject]:
        """The jobs of `user_id` (every user's when None) as `list_cron` shows them, each with its `owner`."""
        return [{"owner": s.owner, **s.to_json()} for s in self._parts.cron.store.statuses(user_id)]

    def cancel_cron_job(self, user_id: str, name: str) -> bool:
        """Remove `user_id`'s job `name`; whether there was one."""
        return self._parts.cron.cancel(self.caller(user_id=user_id), name)

    # -- scratch folders and closing ------------------------------------------------------------------

    def clean_scratch(self, now: float | None = None) -> list[Path]:
        """Remove the session scratch folders idle for `files.scratch_ttl_hours`; the removed ones.

        The kernel runs this itself when it hands out its first session
        folder and then at most hourly (services/scratch.py); `now` (a
        `time.time()` value) lets a test move the clock instead of waiting.
        """
        return self._parts.clean_scratch(time.time() if now is None else now)

    def close(self) -> None:
        """Close every service built (and each one handed in), the message store and the provider.

        Closing twice is harmless. A provider that was used is closed on an
        event loop of its own, so from async code use `aclose` (or `async
        with`): RuntimeError here when an event loop is running.
        """
        self._parts.close()

    async def aclose(self) -> None:
        """`close` for async callers: the provider's connections are closed on the running loop."""
        await self._parts.aclose()

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Kernel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


__all__ = ["Kernel"]
