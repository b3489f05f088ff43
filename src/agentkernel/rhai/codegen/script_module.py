"""A parsed script → its generated Python module: each function, then the top level.

`compiler.FunctionCompiler` writes one Python function; this assembles the
module from them (see compiler.py for what the code looks like) and hands it
to the engine as a `CompiledModule`.
"""

from __future__ import annotations

from agentkernel.rhai.analysis.facts import Facts
from agentkernel.rhai.analysis.scopes import analyse
from agentkernel.rhai.codegen.calls import SPECIAL_CALLS
from agentkernel.rhai.codegen.compiler import FunctionCompiler
from agentkernel.rhai.codegen.module import Module
from agentkernel.rhai.compiled import CompiledModule, Signature, fn_py_name
from agentkernel.rhai.runtime.failures import from_source
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.compile_clock import CompileClock


def compile_script(
    script: ast.Script, *, eval_mode: bool = False, clock: CompileClock | None = None
) -> CompiledModule:
    """Generate the Python module for a parsed script.

    In `eval_mode` (the text given to `eval`), unknown variables are read from
    the caller's scope and top-level `let`s are exported back to it.
    """
    module = Module(clock or CompileClock())
    # a plain call `f(x)` reaches only functions without a `this` type (typed methods are
    # reached through method calls: runtime.Runtime.method)
    functions = {(f.name, len(f.params)): f for f in script.functions if f.this_type is None}
    module.function_names = frozenset(f.name for f in script.functions)
    module.source = script.source
    body = ast.Block(script.stmts, (1, 1))
    resolutions = [analyse(fn.params, fn.body, fn) for fn in script.functions]
    top = analyse((), body, script)
    capturing = {key for r in (*resolutions, top) for key, needs in r.closure_captures.items() if needs}
    bodies = [*(fn.body for fn in script.functions), body]
    facts = Facts.of(bodies, functions, SPECIAL_CALLS, capturing, optimized=not eval_mode)
    for fn, resolution in zip(script.functions, resolutions, strict=True):
        compiler = FunctionCompiler(module, functions, resolution, facts, label=fn.name, top_level=False)
        compiler.function(
            fn_py_name(fn.name, len(fn.params), fn.this_type),
            fn.params,
            fn.body,
            fn,
            wrap=f"in call to function '{fn.name}'{from_source(script.source)}",
        )
    main = FunctionCompiler(module, functions, top, facts, label="main", top_level=True)
    main.dynamic = eval_mode or facts.uses_eval(body)
    main.export_lets = eval_mode
    main.function("main", (), body, script)
    if not script.stmts and not eval_mode:  # only functions: a call need not run the top level
        module.emit_module_level("main.rhai_idle = True")
    parts, positions, operator_lines = module.finish()
    return CompiledModule(parts, positions, operator_lines, module.constants, list(script.functions))


__all__ = ["CompiledModule", "Signature", "compile_script"]
