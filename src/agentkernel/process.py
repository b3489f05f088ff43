"""Who a script runs for: the Caller identity that every helper receives (S15)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from agentkernel.services import Services
from agentkernel.types import JSONObject

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Caller:
    """The process a tool or hook runs for, and the services it may use.

    Identity travels explicitly (DESIGN rule 3): nothing about who is calling
    is ever taken from script input. `allowed_tools` None means every tool.
    """

    pid: str | None = None
    agent: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    template: str | None = None
    temp_dir: Path | None = None
    allowed_tools: frozenset[str] | None = None
    services: Services = field(default_factory=Services)

    def identity(self) -> JSONObject:
        """The `caller()` object of S15; null where unknown."""
        return {
            "pid": self.pid,
            "session_id": self.session_id,
            "user_id": self.user_id,
            "template": self.template,
            "temp_dir": str(self.temp_dir) if self.temp_dir is not None else None,
        }


def safe_folder_name(identifier: str) -> str:
    """A folder name derived from any id that can never climb out or collide.

    Readable part for people, hash suffix for uniqueness: `../x` and `.._x`
    map to different folders, and neither contains a path separator.
    """
    readable = _UNSAFE.sub("_", identifier).strip(".")[:48] or "id"
    digest = hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{readable}-{digest}"


def session_temp_dir(temp_root: Path, session_id: str) -> Path:
    """The session's scratch folder, created on demand, private to the kernel user."""
    path = temp_root.resolve() / safe_folder_name(session_id)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


__all__ = ["Caller", "safe_folder_name", "session_temp_dir"]
