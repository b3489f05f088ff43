"""A compiled script: the generated module (`CompiledModule`), and as `Engine.compile` hands it
out, loaded (`CompiledScript`).

Apart from the code generator and the engine: what runs modules (runtime/modules.py) names
them without the engine, and a script loaded from the compile cache (compile_cache.py) is
run without importing the parser or the code generator at all (`agentkernel rhai run`'s
start-up). Plain classes, for the same reason: `dataclasses` imports `inspect`.
"""

from __future__ import annotations

from collections.abc import Callable

from agentkernel.rhai.runtime.runtime import ScriptFn

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

    from agentkernel.rhai.errors import Pos
    from agentkernel.rhai.syntax import ast

# (name, number of parameters, typed-method type, private, parameter names) of each script function
Signature = tuple[str, int, str | None, bool, tuple[str, ...]]


def fn_py_name(name: str, arity: int, this_type: str | None = None) -> str:
    """The generated function's name; a typed method's carries its type (any text: hex)."""
    if this_type is not None:
        return f"m_{name}_{arity}_{this_type.encode().hex()}"
    return f"f_{name}_{arity}"


class CompiledModule:
    """The generated Python: `parts` are its functions' texts, in order, each starting on
    the line after the previous one ends (`positions` count lines across all of them)."""

    def __init__(
        self,
        parts: list[str],
        positions: dict[int, Pos],
        operator_lines: set[int],
        constants: list[Any],
        functions: list[ast.FnDef],
    ) -> None:
        self.parts = parts
        self.positions = positions
        self.operator_lines = operator_lines
        self.constants = constants
        self.functions = functions

    @property
    def source(self) -> str:
        return "".join(self.parts)

    @property
    def signatures(self) -> list[Signature]:
        """What loading the module needs of each function (the engine names them by these)."""
        return [
            (fn.name, len(fn.params), fn.this_type, fn.private, tuple(fn.params)) for fn in self.functions
        ]


class CompiledScript:
    """A compiled Rhai script: its functions and top level, ready to run many times.

    `methods`: typed methods (`fn int.calc(x)`) by name, arity and `this` type, which method
    calls only reach; `path`: the file it was read from (`compile_file`), its imports relative
    to it."""

    def __init__(
        self,
        module: CompiledModule,
        namespace: dict[str, Any],
        functions: dict[tuple[str, int], ScriptFn] | None = None,
        source_name: str | None = None,
        methods: dict[tuple[str, int, str], ScriptFn] | None = None,
        path: str | None = None,
    ) -> None:
        self.module = module
        self.namespace = namespace
        self.functions: dict[tuple[str, int], ScriptFn] = {} if functions is None else functions
        self.source_name = source_name
        self.methods: dict[tuple[str, int, str], ScriptFn] = {} if methods is None else methods
        self.path = path

    def __repr__(self) -> str:
        return f"CompiledScript(source_name={self.source_name!r}, path={self.path!r})"

    @property
    def main(self) -> Callable[..., Any]:
        return self.namespace["main"]  # type: ignore[no-any-return]

    @property
    def idle_top_level(self) -> bool:
        """Whether the top level does nothing (the script holds functions only): a call of one
        of them need not run it first."""
        return getattr(self.main, "rhai_idle", False) is True


__all__ = ["CompiledModule", "CompiledScript", "Signature", "fn_py_name"]
