"""Kernel: owns the configuration, the services, the registry and the dispatch path."""

from __future__ import annotations

import uuid
from pathlib import Path

from agentkernel.catalog import ScriptCatalog
from agentkernel.config import KernelConfig, find_kernel_config, load_kernel_config
from agentkernel.helpers import default_helper_table
from agentkernel.process import Caller, session_temp_dir
from agentkernel.scripting.helpers import HelperTable
from agentkernel.scripting.host import ScriptHost
from agentkernel.services import Environment, Services
from agentkernel.tools.dispatch import Dispatcher
from agentkernel.tools.history import ToolResultHistory
from agentkernel.tools.registry import ToolRegistry
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONValue


class Kernel:
    """One kernel instance: build it from a KernelConfig, then call tools through it."""

    def __init__(self, config: KernelConfig, helpers: HelperTable | None = None) -> None:
        self.config = config
        self.helpers = helpers or default_helper_table()
        self.host = ScriptHost(self.helpers)
        self.catalog = ScriptCatalog((*config.tool_dirs, *config.hook_dirs), self.host)
        self.tools = ToolRegistry(self.catalog)
        self.history = ToolResultHistory(config.limits.history_per_tool)
        self.services = Services(environment=Environment(deny=config.env_deny))
        self.dispatcher = Dispatcher(self.tools, self.host, config.limits, self.history)

    @classmethod
    def from_config_file(cls, path: Path | None = None) -> Kernel:
        """`path`, else $AGENTKERNEL_CONFIG, else ./config/kernel.yaml, else defaults."""
        return cls(load_kernel_config(find_kernel_config(path)))

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
        temp_dir = session_temp_dir(self.config.temp_root, session_id) if session_id is not None else None
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

    def call_tool(self, name: str, args: JSONValue, caller: Caller | None = None) -> ToolResult:
        return self.dispatcher.call(name, args, caller or self.caller())


__all__ = ["Kernel"]
