"""Who a script runs for (S15, DESIGN rule 3): the `Caller`, and the keys and folders of a user's session.

The `Caller` travels explicitly into every helper: identity is never taken
from script input, nor from a global. A session belongs to a user, so what
is kept per session (its scratch folder, its state keys, its tool results)
is keyed by both (`session_key`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from agentkernel.budget import Spender, earlier
from agentkernel.bundle import Services
from agentkernel.config import HookSpec
from agentkernel.types import JSONObject

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Caller:
    """The process a tool or hook runs for, and the services it may use.

    Identity travels explicitly (DESIGN rule 3): nothing about who is calling
    is ever taken from script input. `allowed_tools` None means every tool.
    `process` is the running process itself when the caller is one (an
    agent's tool call, or a tool run of the server's, server/tool_runs.py):
    what `llm()` charges its tokens to (S9.2); None for a bare caller
    (`agentkernel tool run`, `mcp serve` on stdio), which spends no budget.

    Two fields say where in a chain of calls the caller stands, not who it
    is: `call_depth` counts tool calls nested through `call_tool` (0 for the
    LLM's own call, S16), and `deadline` (a `time.monotonic()` value, or
    None) is the moment by which anything run for it must end: a nested
    call's is its calling script's, a sub-agent's is the deadline of the
    script that started it (S17).

    `temp_dir` is the session's scratch folder, which a process makes on
    first use: a helper that uses it (or shows it, `caller()`) calls
    `scratch_made` first.
    """

    pid: str | None = None
    agent: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    template: str | None = None
    temp_dir: Path | None = None
    allowed_tools: frozenset[str] | None = None
    services: Services = field(default_factory=Services)
    process: Spender | None = field(default=None, repr=False)
    call_depth: int = 0
    deadline: float | None = None
    # the hooks its tool calls pass (S24): its template's, as its process opened them; none for a caller
    # with no template
    hooks: tuple[HookSpec, ...] = field(default=(), repr=False)
    # S26.4: the provider of kernel.yaml's `llm:` its `llm()` calls ask first (its template's), and the
    # ones a script may name besides
    llm_provider: str | None = None
    llm_providers: frozenset[str] = frozenset()

    def one_deeper(self, deadline: float | None) -> Caller:
        """This caller for a call nested in one of its own: one deeper, never past `deadline`.

        Every other field is copied as it is (`replace`), whatever fields a
        Caller gains later: a nested call is the same caller.
        """
        return replace(self, call_depth=self.call_depth + 1, deadline=earlier(self.deadline, deadline))

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
    return _named(identifier, identifier)


def session_key(user_id: str | None, session_id: str) -> str:
    """One text for one user's session, never the same for two (user, session) pairs.

    A session id is not a secret (a person may reuse or guess one), so what
    belongs to a session — its scratch folder, its `session` state keys, its
    `{session}` database — is keyed by the user too: user B naming user A's
    session id gets B's own. JSON, so no separator trick makes two pairs one.
    No user and an empty user id are the same: no user.
    """
    return json.dumps([user_id or None, session_id], ensure_ascii=True)


def session_folder_name(user_id: str | None, session_id: str) -> str:
    """The folder name of one user's session (`session_key`); the readable part shows the session id."""
    return _named(session_id, session_key(user_id, session_id))


def _named(readable: str, unique: str) -> str:
    import hashlib  # OpenSSL's library: not for a command that names no session

    shown = _UNSAFE.sub("_", readable).strip(".")[:48] or "id"
    digest = hashlib.sha256(unique.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{shown}-{digest}"


def session_temp_dir(temp_root: Path, *, user_id: str | None, session_id: str) -> Path:
    """The scratch folder of `user_id`'s session, created on demand, private to the kernel user.

    Its time stamp is renewed on every use, so the scratch clean-up
    (services/scratch.py) never removes the folder of a session in use.
    """
    return scratch_made(session_temp_path(temp_root, user_id=user_id, session_id=session_id))


def session_temp_path(temp_root: Path, *, user_id: str | None, session_id: str) -> Path:
    """Where `user_id`'s session's scratch folder is, made or not (`scratch_made` makes it)."""
    return temp_root.resolve() / session_folder_name(user_id, session_id)


def scratch_made(folder: Path) -> Path:
    """`folder` (a `session_temp_path`), made if missing (private to the kernel user), its time stamp
    renewed: what every user of a session's scratch folder calls before using it."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.utime(folder)
    return folder


def scratch_renewed(folder: Path) -> None:
    """Renew the time stamp of `folder` when it exists, without making it: a session that opens again
    keeps its folder from the clean-up, and one that never writes a file costs no folder."""
    with contextlib.suppress(FileNotFoundError):
        os.utime(folder)


__all__ = [
    "Caller",
    "safe_folder_name",
    "scratch_made",
    "scratch_renewed",
    "session_folder_name",
    "session_key",
    "session_temp_dir",
    "session_temp_path",
]
