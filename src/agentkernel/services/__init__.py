"""The services helpers reach (DESIGN rule 4): optional, named, attached per kernel.

A helper whose service is not attached raises the SPEC's text for it; the
`Services` bundle travels inside every `Caller` (DESIGN rule 3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


__all__ = ["Environment", "MessageStore", "Provider", "Services"]
