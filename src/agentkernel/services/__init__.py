"""The services helpers reach (DESIGN rule 4): optional, named, attached per kernel.

A helper whose service is not attached raises the SPEC's text for it; the
`Services` bundle travels inside every `Caller` (DESIGN rule 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentkernel.llm.base import Provider
from agentkernel.services.environment import Environment
from agentkernel.services.memory import MessageStore


@dataclass(frozen=True)
class Services:
    """Everything a helper may use besides the caller's identity.

    The live ones (`llm`, `messages`) are None when not attached — e.g. in
    `hook_tool` without `--live` — and helpers needing them raise the SPEC's
    "no … attached" error.
    """

    environment: Environment = field(default_factory=Environment)
    llm: Provider | None = None
    messages: MessageStore | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Any | None:
        """A named service of a helper area (`http`, `state`, `duckdb`, …), or None."""
        return self.extra.get(name)


__all__ = ["Environment", "MessageStore", "Provider", "Services"]
