"""Rhai for Python: our implementation of the Rhai 1.25 language (RHAI.md), a library of its own.

    from agentkernel.rhai import Engine, Limits
    Engine(limits=Limits(max_operations=10_000)).eval("40 + 2")   # -> 42

See docs/rhai.md, and README.md here for the map of the package. Scripts
compile to Python code objects; every failure is a `RhaiError` with the
reference's text. The package imports nothing else of agentkernel: a host
hands it what it needs (a module resolver, natives). Names are imported on
first use, so a submodule (the runner's flag table, the values) can be
imported without loading the whole interpreter.
"""

from __future__ import annotations

from agentkernel.rhai._version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from agentkernel.rhai.compiled import CompiledScript
    from agentkernel.rhai.engine import Engine
    from agentkernel.rhai.errors import RhaiError, RhaiRuntimeError, RhaiSyntaxError
    from agentkernel.rhai.runtime.runtime import Limits

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "CompiledScript": "agentkernel.rhai.compiled",
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
    "__version__",
]  # literal, so type checkers see what is exported


def __getattr__(name: str) -> object:
    """A public name, imported on first use (PEP 562) and kept in the module."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
