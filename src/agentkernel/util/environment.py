"""The environment variables scripts may read through `env_var` (S8.4)."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

SHORTEST_SECRET = 8
"""The fewest characters of an environment value that spans hide (telemetry/helper_spans.py)."""


@dataclass(frozen=True)
class Environment:
    """A view of the process environment minus the names the kernel keeps secret.

    `deny` holds names or shell-style globs (`*_SECRET`) from kernel.yaml's
    `scripts.env_deny`; the kernel's own credentials (the LLM provider's key
    variable) belong here too, so a script cannot read them.
    """

    deny: tuple[str, ...] = ()
    source: Mapping[str, str] = field(default_factory=lambda: os.environ)

    def is_denied(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.deny)

    def get(self, name: str) -> str | None:
        """The value, or None when unset or denied."""
        if self.is_denied(name):
            return None
        return self.source.get(name)

    def values(self, shortest: int = SHORTEST_SECRET) -> tuple[str, ...]:
        """Every value of at least `shortest` characters, denied ones too: what a span must not carry.

        Shorter values (`1`, `true`, `C`) are left out: they are no secret,
        and hiding them would mangle every text that holds them.
        """
        return tuple(value for value in self.source.values() if len(value) >= shortest)
