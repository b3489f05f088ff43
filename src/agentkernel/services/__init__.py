"""The services helpers reach (DESIGN rule 4): optional, named, attached per kernel.

A helper whose service is not attached raises the SPEC's text for it; the
`Services` bundle travels inside every `Caller` (DESIGN rule 3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentkernel.services.environment import Environment


@dataclass(frozen=True)
class Services:
    """Everything a helper may use besides the caller's identity."""

    environment: Environment = field(default_factory=Environment)


__all__ = ["Environment", "Services"]
