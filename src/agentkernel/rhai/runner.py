"""`agentkernel rhai run`: run a Rhai file like the reference's runner does.

Prints what the script prints; with `print_result`, one last line
`<type_of>: <to_string>` of the script's value; an error goes to stderr and
the exit status is 1 (runtime) or 2 (syntax). The conformance cases
(tests/rhai/conformance/) are written against exactly this behaviour.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from agentkernel.rhai.engine import Engine
from agentkernel.rhai.errors import RhaiRuntimeError, RhaiSyntaxError
from agentkernel.rhai.runtime.module_files import ModuleResolver
from agentkernel.rhai.runtime.printing import to_display
from agentkernel.rhai.runtime.runtime import Limits
from agentkernel.rhai.runtime.values import type_name

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from agentkernel.rhai.compile_cache import CompileCache

LIMIT_FLAGS = {
    "--max-operations": "max_operations",
    "--max-array-size": "max_array_size",
    "--max-string-size": "max_string_size",
    "--max-map-size": "max_map_size",
    "--max-call-levels": "max_call_levels",
    "--max-variables": "max_variables",
    "--max-functions": "max_functions",
    "--max-modules": "max_modules",
}


class RunOutcome:
    """What a run printed and how it ended."""

    def __init__(self) -> None:
        self.stdout: list[str] = []
        self.result: str | None = None
        self.error: str | None = None
        self.exit_code = 0


def limits_from_flags(flags: Sequence[str]) -> Limits:
    """`["--max-array-size", "3", …]` → Limits (the conformance cases' `opts`)."""
    limits = Limits()
    pairs = list(flags)
    for flag, value in zip(pairs[::2], pairs[1::2], strict=True):
        setattr(limits, LIMIT_FLAGS[flag], int(value))
    return limits


def strip_shebang(source: str) -> str:
    """A file runner drops a first `#!` line (RHAI.md §1), keeping line numbers."""
    if source.startswith("#!"):
        newline = source.find("\n")
        return "" if newline < 0 else source[newline:]
    return source


def run_source(
    source: str,
    limits: Limits | None = None,
    *,
    echo: Callable[[str], None] | None = None,
    path: str | os.PathLike[str] | None = None,
    module_resolver: ModuleResolver | None = None,
    compile_cache: CompileCache | None = None,
) -> RunOutcome:
    """Run `source`, read from the file `path` (its `import`s are relative to it) or from
    standard input; `module_resolver` finds the modules (None: every import fails);
    `compile_cache` keeps the compiled script for the next run of the same text."""
    outcome = RunOutcome()

    def write(text: str) -> None:
        outcome.stdout.append(text)
        if echo is not None:
            echo(text)

    engine = Engine(limits=limits, module_resolver=module_resolver, compile_cache=compile_cache)
    try:
        script = engine.compile(strip_shebang(source))
        script.path = os.path.realpath(path) if path is not None else None  # as Path.resolve() gives it
        value = engine.run(script, stdout=write)
    except RhaiSyntaxError as exc:
        outcome.error, outcome.exit_code = exc.display(), 2
    except RhaiRuntimeError as exc:
        outcome.error, outcome.exit_code = exc.display(), 1
    else:
        outcome.result = f"{type_name(value)}: {to_display(value)}"
    return outcome


__all__ = ["LIMIT_FLAGS", "RunOutcome", "limits_from_flags", "run_source", "strip_shebang"]
