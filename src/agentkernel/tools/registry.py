"""Tool specs, who may call them, and what a process's LLM is shown (S16.3)."""

from __future__ import annotations

from typing import Protocol

from agentkernel.catalog import ScriptCatalog
from agentkernel.config import ToolSpec
from agentkernel.process import Caller
from agentkernel.types import JSONObject


class AccessPolicy(Protocol):
    """The access-check seam of the dispatch path: None allows, a string refuses."""

    def refusal(self, caller: Caller, spec: ToolSpec) -> str | None: ...


class AllowListPolicy:
    """A process may call the tools its template lists; a caller with no list (None) may call all."""

    def refusal(self, caller: Caller, spec: ToolSpec) -> str | None:
        allowed = caller.allowed_tools
        if allowed is None or spec.name in allowed:
            return None
        who = caller.template or caller.agent or caller.pid or "this caller"
        return f"tool {spec.name!r} is not allowed for {who}"


class ToolRegistry:
    """Looks tools up by name and lists them for a caller, via the catalog."""

    def __init__(self, catalog: ScriptCatalog, access: AccessPolicy | None = None) -> None:
        self.catalog = catalog
        self.access: AccessPolicy = access or AllowListPolicy()

    def get(self, name: str) -> ToolSpec | None:
        return self.catalog.tool(name)

    def all(self) -> list[ToolSpec]:
        return sorted(self.catalog.tools().values(), key=lambda s: s.name)

    def visible_to(self, caller: Caller) -> list[ToolSpec]:
        """The tools this caller may call, by name."""
        return [s for s in self.all() if self.access.refusal(caller, s) is None]

    def list_for(self, caller: Caller) -> list[JSONObject]:
        """`[{name, description, parameters}]`: the tools this caller's LLM sees (S16.3)."""
        return [
            {"name": s.name, "description": s.description, "parameters": s.parameters}
            for s in self.visible_to(caller)
        ]


__all__ = ["AccessPolicy", "AllowListPolicy", "ToolRegistry"]
