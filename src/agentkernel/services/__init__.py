"""The services helpers reach (DESIGN rule 4): optional, named, attached per kernel.

A helper whose service is not attached raises the contract's text for it; the
`Services` bundle travels inside every `Caller` (DESIGN rule 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkernel.services.environment import Environment
from agentkernel.services.lazy import LazyServices

if TYPE_CHECKING:  # annotations only: importing the LLM layer costs a tool run ~100 ms
    from agentkernel.llm.base import Provider
    from agentkernel.services.memory import MessageStore


@dataclass(frozen=True)
class Services:
    """Everything a helper may use besides the caller's identity.

    The live ones (`llm`, `messages`) are None when not attached — e.g. in
    `hook_tool` without `--live` — and helpers needing them raise the contract's
    "no … attached" error.
    """

    environment: Environment = field(default_factory=Environment)
    llm: Provider | None = None
    messages: MessageStore | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Any | None:
        """A named service of a helper area (`http`, `state`, `duckdb`, …), or None."""
        return self.extra.get(name)

    def built(self) -> list[Any]:
        """The helper services that exist now; lazy ones never asked for are not built to be closed."""
        if isinstance(self.extra, LazyServices):
            return self.extra.built()
        return list(self.extra.values())


__all__ = ["Environment", "LazyServices", "Services"]
