"""The engine contract: what a script engine is to the host, and all an engine adapter may import.

An engine compiles a file once and calls one of its functions in a fresh
scope per call, within the call's `CallBudget`. It reaches the helpers only
through the `HelperBinding` it is handed, and values cross in and out as the
plain values of types.py (DESIGN rule 1). Adding an engine touches no helper,
and an adapter imports this module and types.py, nothing else of the kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Final, Protocol, TypeVar

from agentkernel.config.limits import CallBudget, ScriptLimits
from agentkernel.errors import HelperError, ScriptError, ScriptLimitError, ScriptSyntaxError, SourceLocation
from agentkernel.types import JSONValue, NoValue

MAX_SCRIPT_SIZE: Final = 256 << 10
"""The largest script: bytes of a script file, characters of a Rhai `eval` text.

Compiling a Rhai script takes time and memory in proportion to its size
(CPython's `compile()` of the generated code needs about 1.5 KiB of memory
per byte of Rhai at worst); this bound keeps both in check where no call's
deadline does. Hand-written tools are a hundred times smaller."""


ReadBelow = Callable[[Path, str, int], "str | None"]
"""`read_below(folder, name, max_bytes)`: the text of module file `name` (absolute, as the engine
resolved an import) if it lies below `folder`, read as the file helpers read (no link followed, at
most `max_bytes`); None when there is no such file; an exception saying why for any other refusal.
The host hands it to an engine, so no adapter reaches into the kernel's file rules."""


class HelperBinding(Protocol):
    """What an engine gets for one call: the helpers' names, one `invoke`, and the script's log.

    `invoke` raises HelperError, which the engine turns into an exception the
    script can catch (S8.2); `log_line` is `console.log` / `print`.
    """

    @property
    def names(self) -> tuple[str, ...]: ...

    def invoke(self, name: str, args: Sequence[JSONValue]) -> JSONValue: ...

    def log_line(self, level: str, text: str) -> None: ...


class LoadedScript(Protocol):
    """An engine's compiled form of one file; `path` is the file it came from."""

    @property
    def path(self) -> Path: ...


S = TypeVar("S", bound=LoadedScript)


class ScriptEngine(Protocol[S]):
    """A script language: compile once, then call functions in a fresh scope each time."""

    name: str

    def compile(self, path: Path, source: str, deadline: float | None = None) -> S:
        """Compile `source` (read from `path`) by `deadline` (a `time.monotonic()` value);
        raise ScriptSyntaxError with file:line, or ScriptLimitError past the deadline."""
        ...

    def call(
        self,
        script: S,
        function: str,
        args: Sequence[JSONValue],
        optional: Sequence[JSONValue],
        binding: HelperBinding,
        budget: CallBudget,
    ) -> JSONValue | NoValue:
        """Run `function` in a fresh scope with the helpers bound, within `budget`
        (its limits, and its deadline, which compiling may have used already).

        `optional` arguments are passed only as far as the function declares
        parameters for them (S3.2: `run(args, config)` gets config, `run(args)`
        does not). Raises ScriptError / ScriptLimitError on failure.
        """
        ...

    def defined_functions(
        self,
        script: S,
        names: Iterable[str],
        binding: HelperBinding,
        budget: CallBudget,
    ) -> frozenset[str]:
        """Which of `names` the script defines as functions (for hooks' `events`)."""
        ...


__all__ = [
    "MAX_SCRIPT_SIZE",
    "CallBudget",
    "HelperBinding",
    "HelperError",
    "LoadedScript",
    "ReadBelow",
    "ScriptEngine",
    "ScriptError",
    "ScriptLimitError",
    "ScriptLimits",
    "ScriptSyntaxError",
    "SourceLocation",
]
