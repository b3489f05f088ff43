"""Rhai for Python: our implementation of the Rhai 1.25 language (RHAI.md).

    from agentkernel.rhai import Engine, Limits
    Engine(limits=Limits(max_operations=10_000)).eval("40 + 2")   # -> 42

See docs/rhai.md. Scripts compile to Python code objects; every failure is a
`RhaiError` with the reference's text. Names are imported on first use, so a
submodule (the runner's flag table, the values) can be imported without
loading the whole interpreter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkernel.lazy_exports import lazy_getattr

_EXPORTS: dict[str, str] = {
    "CompiledScript": "agentkernel.rhai.engine",
    "Engine": "agentkernel.rhai.engine",
    "Limits": "agentkernel.rhai.runtime.runtime",
    "RhaiError": "agentkernel.rhai.errors",
    "RhaiRuntimeError": "agentkernel.rhai.errors",
    "RhaiSyntaxError": "agentkernel.rhai.errors",
}

__all__ = [
    "CompiledScript",
    "Engine",
    "Limits",
    "RhaiError",
    "RhaiRuntimeError",
    "RhaiSyntaxError",
]  # literal, so type checkers see what is exported

if TYPE_CHECKING:
    from agentkernel.rhai.engine import CompiledScript, Engine
    from agentkernel.rhai.errors import RhaiError, RhaiRuntimeError, RhaiSyntaxError
    from agentkernel.rhai.runtime.runtime import Limits

__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
