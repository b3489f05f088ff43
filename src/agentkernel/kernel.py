"""Kernel: owns the configuration, the services, the registry and the dispatch path.

It also owns the parts of the agent runtime (S23): templates, the process
table, the LLM provider, the message store and the hook pipeline, and opens
chat sessions that run the agent loop.
"""

from __future__ import annotations

import time
import uuid
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from agentkernel.catalog import ScriptCatalog
from agentkernel.config import KernelConfig, find_kernel_config, load_kernel_config
from agentkernel.errors import ConfigError, LoadProblem
from agentkernel.helpers import default_helper_table
from agentkernel.llm.base import Provider
from agentkernel.llm.config import LLMConfig, build_provider
from agentkernel.llm.deferred import DeferredProvider
from agentkernel.process import Caller, ProcessTable, session_temp_dir
from agentkernel.scripting.helpers import HelperTable
from agentkernel.scripting.host import ScriptHost
from agentkernel.services import AttachedServices, Environment
from agentkernel.services.files import FilesService
from agentkernel.services.local import kernel_services
from agentkernel.services.memory import LazyMessageStore
from agentkernel.services.scratch import ScratchJanitor
from agentkernel.templates import TemplateSpec, check_references, load_templates
from agentkernel.tools.dispatch import Dispatcher
from agentkernel.tools.history import ToolResultHistory
from agentkernel.tools.registry import ToolRegistry
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONValue

if TYPE_CHECKING:  # the agent runtime is imported when a chat opens, not for a tool run
    from agentkernel.agent.hooks import HookPipeline
    from agentkernel.agent.loop import AgentLoop
    from agentkernel.agent.session import ChatSession


class Kernel:
    """One kernel instance: build it from a KernelConfig, then call tools through it."""

    def __init__(
        self,
        config: KernelConfig,
        helpers: HelperTable | None = None,
        provider: Provider | None = None,
        *,
        live: bool = True,
        extra_services: AttachedServices | None = None,  # by name, built; None detaches one
    ) -> None:
        self.config = config
        self.helpers = helpers or default_helper_table()
        self.host = ScriptHost(self.helpers)
        self.catalog = ScriptCatalog((*config.tool_dirs, *config.hook_dirs), self.host, config.limits)
        self.tools = ToolRegistry(self.catalog, root=config.root)
        self.history = ToolResultHistory(config.limits.history_per_tool, config.limits.history_sessions)
        self.llm_config: LLMConfig | None = config.llm
        deny = config.env_deny
        if self.llm_config is not None and self.llm_config.api_key_env:
            deny = (*deny, self.llm_config.api_key_env)  # scripts never read the kernel's own key
        self._provider = provider
        self.store = LazyMessageStore(config.messages_db)
        self.live = live
        self.services = kernel_services(
            config,
            environment=Environment(deny=deny),
            llm=self.provider if live else None,
            messages=self.store if live else None,
            given=extra_services,
        )
        self.dispatcher = Dispatcher(self.tools, self.host, config.limits, self.history)
        self.processes = ProcessTable()
        self._janitor = ScratchJanitor(config.temp_root, config.files.scratch_ttl_hours * 3600)

    @classmethod
    def from_config_file(cls, path: Path | None = None, *, start: Path | None = None) -> Kernel:
        """`path`, else $AGENTKERNEL_CONFIG, else the nearest config/kernel.yaml upward from `start`.

        Raises ConfigError naming where it looked when there is no project.
        """
        return cls(load_kernel_config(find_kernel_config(path, start)))

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
            temp_dir = session_temp_dir(self.config.temp_root, user_id=user_id, session_id=session_id)
            self._forget_scratch(self._janitor.maybe_clean(time.time()))
        return Caller(
            pid=pid or str(uuid.uuid4()),
            agent=agent,
            session_id=session_id,
            user_id=user_id,
            template=template,
            temp_dir=temp_dir,
            allowed_tools=allowed_tools,
            services=self.services,
        )

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
        for service in self.services.built() if removed else ():
            if isinstance(service, FilesService):
                service.forget(removed)

    def call_tool(self, name: str, args: JSONValue, caller: Caller | None = None) -> ToolResult:
        return self.dispatcher.call(name, args, caller or self.caller())

    # -- the agent runtime ------------------------------------------------------------------------

    @cached_property
    def hooks(self) -> HookPipeline:
        """The hook pipeline (S7), built when the first hook runs."""
        from agentkernel.agent.hooks import HookPipeline

        return HookPipeline(self.host, self.config.limits)

    @cached_property
    def provider(self) -> Provider | None:
        """The configured LLM (kernel.yaml `llm:`); None without one.

        Built — and its HTTP stack imported — on the first request, not here.
        """
        if self._provider is None and self.llm_config is not None:
            config = self.llm_config
            self._provider = DeferredProvider(lambda: build_provider(config))
        return self._provider

    def templates(self) -> tuple[dict[str, TemplateSpec], list[LoadProblem]]:
        """The templates and their problems, unknown tool and hook names included (S23.1)."""
        templates, problems = load_templates(self.config.templates_dir)
        problems += check_references(templates, self.catalog.tools(), self.catalog.hooks())
        return templates, problems

    def template(self, name: str) -> TemplateSpec:
        """A template that loads and names only known tools and hooks; ConfigError otherwise."""
        templates, problems = self.templates()
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

    def agent_loop(self, *, stream: bool = True) -> AgentLoop:
        from agentkernel.agent.loop import AgentLoop

        return AgentLoop(self.provider, self.dispatcher, self.hooks, self.services, self.store, stream=stream)

    def open_chat(
        self,
        template: str,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        stream: bool = True,
    ) -> ChatSession:
        """Spawn a process from `template` and open a chat session with it."""
        from agentkernel.agent.loop import LoopSettings
        from agentkernel.agent.session import ChatSession

        spec = self.template(template)
        process = self.processes.spawn(
            spec,
            user_id=user_id,
            session_id=session_id or str(uuid.uuid4()),
            temp_root=self.config.temp_root,
        )
        self._forget_scratch(self._janitor.maybe_clean(time.time()))
        settings = LoopSettings.for_template(spec, self.catalog)
        return ChatSession(process, self.agent_loop(stream=stream), settings)

    async def aclose(self) -> None:
        """Close the provider's connections, the helper services and the message store."""
        for service in self.services.built():
            close = getattr(service, "close", None)
            if callable(close):
                close()
        if self._provider is not None:
            await self._provider.aclose()
        self.store.close()


__all__ = ["Kernel"]
