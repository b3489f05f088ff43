"""Rhai for Python: our implementation of the Rhai 1.25 language (RHAI.md).

    from agentkernel.scripting.rhai import Engine, Limits
    Engine(limits=Limits(max_operations=10_000)).eval("40 + 2")   # -> 42

See docs/rhai.md. Scripts compile to Python code objects; every failure is a
`RhaiError` with the reference's text.
"""

from agentkernel.scripting.rhai.engine import CompiledScript, Engine
from agentkernel.scripting.rhai.errors import RhaiError, RhaiRuntimeError, RhaiSyntaxError
from agentkernel.scripting.rhai.runtime import Limits

__all__ = ["CompiledScript", "Engine", "Limits", "RhaiError", "RhaiRuntimeError", "RhaiSyntaxError"]
