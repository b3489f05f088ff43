"""What a script engine is to the host: compile a file, call one of its functions.

Engines meet the rest of the kernel only here and in `HelperBinding`: values
in and out are plain JSON-like Python values (DESIGN rule 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final, Protocol, TypeVar

from agentkernel.config import CallBudget
from agentkernel.scripting.helper_table import HelperBinding
from agentkernel.types import JSONValue


class NoValue:
    """What a function returned when it returned nothing at all (JS `undefined`).

    Distinct from None (JS null, Rhai `()`): a tool that forgets `return` fails
    with a clear message, while a hook that returns nothing simply has no verdict.
    """

    _instance: NoValue | None = None

    def __new__(cls) -> NoValue:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_VALUE"

    def __bool__(self) -> bool:
        return False


NO_VALUE: Final = NoValue()

MAX_SCRIPT_SIZE: Final = 256 << 10
"""The largest script: bytes of a script file, characters of a Rhai `eval` text (issue 9).

Compiling a Rhai script takes time and memory in proportion to its size
(CPython's `compile()` of the generated code needs about 1.5 KiB of memory
per byte of Rhai at worst); this bound keeps both in check (a few seconds,
a few hundred MiB) where no call's deadline does. Hand-written tools are a
hundred times smaller."""


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


__all__ = ["MAX_SCRIPT_SIZE", "NO_VALUE", "LoadedScript", "NoValue", "ScriptEngine"]
