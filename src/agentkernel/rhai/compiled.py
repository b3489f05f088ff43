"""A compiled script, as `Engine.compile` hands it out: its functions and top level, loaded.

Apart from engine.py so that what runs modules (runtime/modules.py) can name
it without the engine, which runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentkernel.rhai.codegen.script_module import CompiledModule
from agentkernel.rhai.runtime.runtime import ScriptFn


@dataclass
class CompiledScript:
    """A compiled Rhai script: its functions and top level, ready to run many times."""

    module: CompiledModule
    namespace: dict[str, Any]
    functions: dict[tuple[str, int], ScriptFn] = field(default_factory=dict)
    source_name: str | None = None
    # typed methods (`fn int.calc(x)`) by name, arity and `this` type: method calls only
    methods: dict[tuple[str, int, str], ScriptFn] = field(default_factory=dict)
    path: str | None = None  # the file it was read from (`compile_file`): its imports are relative to it

    @property
    def main(self) -> Callable[..., Any]:
        return self.namespace["main"]  # type: ignore[no-any-return]

    @property
    def idle_top_level(self) -> bool:
        """Whether the top level does nothing (the script holds functions only): a call of one
        of them need not run it first."""
        return getattr(self.main, "rhai_idle", False) is True


__all__ = ["CompiledScript"]
