"""Tool specs, who may call them, and what a process's LLM is shown (S16.3)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from agentkernel.config import ToolSpec, read_yaml
from agentkernel.config.mcp_servers import GRANT_SUFFIX, allows, grant
from agentkernel.errors import ConfigError, LoadProblem
from agentkernel.identity import Caller
from agentkernel.tools.catalog import ScriptCatalog
from agentkernel.tools.sources.mcp.outside import OutsideTools, OutsideToolSpec
from agentkernel.types import JSONObject


class AccessPolicy(Protocol):
    """The access-check seam of the dispatch path: None allows, a string refuses."""

    def refusal(self, caller: Caller, spec: ToolSpec) -> str | None: ...


class AllowListPolicy:
    """A process may call the tools its template lists; a caller with no list (None) may call all.

    An outside MCP tool is allowed by its server's grant (`srv__*`, what a
    template's `mcp_servers:` puts in its list), never by its name alone.
    """

    def refusal(self, caller: Caller, spec: ToolSpec) -> str | None:
        allowed = caller.allowed_tools
        if allowed is None or spec.name in allowed:
            return None
        if isinstance(spec, OutsideToolSpec) and grant(spec.server.name) in allowed:
            return None
        who = caller.template or caller.agent or caller.pid or "this caller"
        return f"tool {spec.name!r} is not allowed for {who}"


class ToolRegistry:
    """Looks tools up by name and lists them for a caller, via the catalog."""

    def __init__(
        self,
        catalog: ScriptCatalog,
        access: AccessPolicy | None = None,
        root: Path | None = None,
        outside: OutsideTools | None = None,
    ) -> None:
        self.catalog = catalog
        self.access: AccessPolicy = access or AllowListPolicy()
        self.root = root  # the project folder: messages show paths relative to it
        self.outside = outside  # outside MCP servers' tools, when the kernel has them

    def get(self, name: str, caller: Caller | None = None) -> ToolSpec | None:
        """The script tool `name`, else the outside MCP tool (`srv__tool`; its server started if needed).

        With a caller, an outside tool it is not granted is not looked up:
        a caller never starts a server it may not use. An outside tool its
        running server offers is found without scanning the script folders
        (a miss in the catalog rescans them): its name was checked against
        the script tools when the server's tools were listed.
        """
        offered = self.outside.offered(name) if self.outside is not None else None
        if offered is not None and (caller is None or allows(caller.allowed_tools, name)):
            return offered
        spec = self.catalog.tool(name)
        if spec is not None or self.outside is None:
            return spec
        return self.outside.tool(name) if caller is None or allows(caller.allowed_tools, name) else None

    def unavailable(self, name: str, caller: Caller | None = None) -> str | None:
        """Why tool `name` cannot be called, when the file that declares it failed to load (S2.5).

        `tool 'x' is not available: config/scripts/tools/x.yaml failed to load: …`
        names only the files meant to declare `name` (see `declared_tool_name`),
        not every problem of the project. A caller whose allow list lacks
        `name` learns nothing about its files: None, as for an unknown tool.
        """
        if caller is not None and not allows(caller.allowed_tools, name):
            return None
        problems = [p for p in self.catalog.problems() if declared_tool_name(p.path) == name]
        if not problems:
            return self.outside.unavailable(name) if self.outside is not None else None
        return f"tool {name!r} is not available: " + "; ".join(map(self._failed, problems))

    def _failed(self, problem: LoadProblem) -> str:
        """`config/scripts/tools/x.yaml:4 failed to load: …`, the project's paths shown relative to it."""
        line = f":{problem.line}" if problem.line is not None else ""
        if self.root is None or not problem.path.is_relative_to(self.root):
            return f"{problem.path}{line} failed to load: {problem.reason}"
        prefix = f"{self.root}{os.sep}"
        shown = problem.path.relative_to(self.root)
        return f"{shown}{line} failed to load: {problem.reason.replace(prefix, '')}"

    def all(self) -> list[ToolSpec]:
        return sorted(self.catalog.tools().values(), key=lambda s: s.name)

    def visible_to(self, caller: Caller) -> list[ToolSpec]:
        """The tools this caller may call, by name: the outside tools of the servers it is granted too.

        Those servers start here if they are not running (lazily: the first
        time a process of their template needs its tool list). A caller
        with no allow list sees the script tools only: nothing names which
        servers it would mean.
        """
        tools = [s for s in self.all() if self.access.refusal(caller, s) is None]
        servers = self.granted_servers(caller)
        if self.outside is not None and servers:
            found = self.outside.for_servers(servers)
            tools += sorted(
                (s for s in found if self.access.refusal(caller, s) is None), key=lambda s: s.name
            )
        return tools

    def granted_servers(self, caller: Caller) -> list[str]:
        """The outside MCP servers whose tools `visible_to` lists for this caller, by name: the ones it may
        start (a wait), none when the kernel has no outside tools or the caller no allow list."""
        allowed = caller.allowed_tools
        if self.outside is None or allowed is None:
            return []
        return sorted(n.removesuffix(GRANT_SUFFIX) for n in allowed if n.endswith(GRANT_SUFFIX))

    def list_for(self, caller: Caller) -> list[JSONObject]:
        """`[{name, description, parameters}]`: the tools this caller's LLM sees (S16.3)."""
        return [
            {"name": s.name, "description": s.description, "parameters": s.parameters}
            for s in self.visible_to(caller)
        ]


def declared_tool_name(path: Path) -> str | None:
    """The tool name a YAML file that failed to load was meant to declare.

    Its `name:` when the YAML parsed (None when it is a `script_hook`: a hook
    is never a tool), else the file's name without its extension.
    """
    try:
        data = read_yaml(path)
    except ConfigError:
        return path.stem
    if not isinstance(data, dict):
        return path.stem
    if data.get("kind") == "script_hook":
        return None
    name = data.get("name")
    return name if isinstance(name, str) else path.stem


__all__ = ["AccessPolicy", "AllowListPolicy", "ToolRegistry", "declared_tool_name"]
