"""Exceptions of agentkernel: each says which file, field or value is at fault."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


class AgentKernelError(Exception):
    """Base of every error the kernel raises on purpose."""


class ConfigError(AgentKernelError):
    """A kernel or script YAML that cannot be loaded (S2.5).

    `line` is the 1-based line of the key at fault when it is known, so the
    error reads like a compiler's: `path:line: field: what is wrong`.
    """

    def __init__(self, path: Path | str | None, reason: str, line: int | None = None) -> None:
        self.path = str(path) if path is not None else None
        self.reason = reason
        self.line = line
        super().__init__(f"{_where(self.path, line)}: {reason}" if self.path else reason)


def _where(path: Path | str, line: int | None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


@dataclass(frozen=True)
class SourceLocation:
    """Where in a script an error happened (1-based line and column)."""

    file: str
    line: int
    column: int | None = None

    def __str__(self) -> str:
        if self.column is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.column}"


class ScriptError(AgentKernelError):
    """A script failed: it threw, had a runtime error, or returned garbage.

    `message` is the script-level text (e.g. ``TypeError: x is null``);
    `location` points at the first frame in the script's own file when the
    engine knows it; `stack` is the engine's full stack text for the log;
    `hint` says what to do instead, when the kernel can tell (``fetch`` is
    missing: use ``http_get``). The message stays the engine's own text and
    the hint follows the location, so neither is lost in the other.
    """

    def __init__(
        self,
        message: str,
        location: SourceLocation | None = None,
        stack: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.location = location
        self.stack = stack
        self.hint = hint
        super().__init__(self._with_hint(f"{message} (at {location})" if location else message))

    def _with_hint(self, text: str) -> str:
        return f"{text} — {self.hint}" if self.hint else text

    def describe(self, base: Path | None = None) -> str:
        """The message with its location, the file shown relative to `base`.

        Tool errors go into the LLM's context: they name the script as its
        author knows it (`tools/x.js:3:7`), not the server's absolute path.
        """
        if self.location is None:
            return self._with_hint(self.message)
        file = Path(self.location.file)
        if base is not None and file.is_relative_to(base):
            file = file.relative_to(base)
        shown = SourceLocation(str(file), self.location.line, self.location.column)
        return self._with_hint(f"{self.message} (at {shown})")


class ScriptSyntaxError(ScriptError):
    """The script does not compile; reported at load time with file:line."""


class ScriptLimitError(ScriptError):
    """A limit ended the script: operations, time, memory or stack depth.

    `limit` is one of ``max_operations``, ``timeout_secs``, ``memory``,
    ``stack``. The first two cannot be caught by the script; running out of
    memory or stack can be, but a script that does not catch them ends here.
    """

    def __init__(self, limit: str, message: str) -> None:
        self.limit = limit
        super().__init__(message)


@dataclass(frozen=True)
class LoadProblem:
    """A YAML file that did not load, and why (S2.5): the rest load and serve.

    `line` is the line of the offending key where known; `str()` reads
    `path:line: field: reason`, or `path: reason` without a line.
    """

    path: Path
    reason: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{_where(self.path, self.line)}: {self.reason}"

    @classmethod
    def from_error(cls, path: Path, error: ConfigError) -> LoadProblem:
        """The problem a ConfigError describes, kept at `path` (the file that was being loaded)."""
        return cls(path, error.reason, error.line)


def name_clash(claimants: Sequence[tuple[Path, int | None]], name: str) -> list[LoadProblem]:
    """One problem per file claiming `name` (at the line given), each naming the others.

    Every claimant is refused: which file would win is an accident of file
    names, and a copy that silently takes over a name swaps a tool mid-chat.
    """
    problems = []
    for path, line in claimants:
        others = ", ".join(os.path.relpath(other, path.parent) for other, _ in claimants if other != path)
        reason = f"name: {name!r} is also defined in {others}; rename one of them"
        problems.append(LoadProblem(path, reason, line))
    return problems


class HelperError(AgentKernelError):
    """A helper refused or failed; inside a script it is a catchable exception."""


class QuotaExhausted(HelperError):
    """An LLM call refused before it was made: its user spent a quota of kernel.yaml's `quotas:` (S26.3).

    Not a ProviderError: no retry or fallback provider may take the call.
    Inside a script it is catchable, its message starting `quota exhausted:`;
    the server answers it with 429. `quota` is the limit's name
    (`tokens_per_day`…), `template` set for a template's limit, `resets_at`
    an RFC 3339 UTC time and `retry_after_secs` the seconds until then.
    """

    PREFIX = "quota exhausted: "

    def __init__(
        self,
        *,
        quota: str,
        user: str,
        template: str | None,
        used: int,
        limit: int,
        resets_at: str,
        retry_after_secs: int,
    ) -> None:
        self.quota, self.user, self.template = quota, user, template
        self.used, self.limit = used, limit
        self.resets_at, self.retry_after_secs = resets_at, retry_after_secs
        within = f" in template {template}" if template is not None else ""
        spent = f"{used:,} of {limit:,} used; resets at {resets_at}"
        super().__init__(f"{self.PREFIX}{quota} for user {user}{within}: {spent}")


class StoreUnavailable(AgentKernelError):
    """The store database (kernel.yaml `store.url`, S27.2) could not be reached or failed; its URL is
    named with the password masked. A server answers it 503: the request may be sent again."""


__all__ = [
    "AgentKernelError",
    "ConfigError",
    "HelperError",
    "LoadProblem",
    "QuotaExhausted",
    "ScriptError",
    "ScriptLimitError",
    "ScriptSyntaxError",
    "SourceLocation",
    "StoreUnavailable",
    "name_clash",
]
