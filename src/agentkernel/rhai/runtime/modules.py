"""Rhai modules: `import "lib" as m;`, then `m::f()` and `m::X` (docs/rhai.md 15).

A module is a script file. Importing it runs its top level once per
evaluation, in a scope of its own; what it leaves behind is the module:

* its functions, except `private fn`s (`m::f(…)`); inside them, the module's
  own functions, constants (`global::X`) and imports are in sight, as in the
  reference's encapsulated environment;
* the variables it `export`s (`export let x`, `export const X`, `export x as y`),
  with the values they hold when its top level ends (`m::x`, read-only);
* the modules it imports at its top level, as sub-modules (`m::sub::f()`).

Finding and compiling the file is a `ModuleResolver`'s job (module_files.py).

`ModuleLoader` is one evaluation's side: which modules are being imported
(an import cycle is an error naming it, not a hang), which are loaded
already (each is evaluated once per evaluation), how many `import`s ran
(`max_modules`). Module code runs on the importer's `Runtime`, so every
limit (operations, call depth, data, time) counts it with the rest.
"""

from __future__ import annotations

from collections.abc import Callable

from agentkernel.rhai.errors import NO_POS, ErrorKind, RhaiRuntimeError, RhaiSyntaxError
from agentkernel.rhai.runtime import failures
from agentkernel.rhai.runtime.module_files import Compile, ModuleFile, ModuleResolver
from agentkernel.rhai.runtime.runtime import Cell, Runtime, ScriptFn, copy_value
from agentkernel.rhai.runtime.values import type_name
from agentkernel.rhai.syntax.records import field, mutable_record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

# Errors that stay what they are when they pass through a module: limits, not the module's fault.
_UNWRAPPED = frozenset(
    {
        ErrorKind.STACK_OVERFLOW,
        ErrorKind.TOO_MANY_OPERATIONS,
        ErrorKind.TOO_MANY_MODULES,
        ErrorKind.DATA_TOO_LARGE,
        ErrorKind.TERMINATED,
    }
)


class RhaiModule:
    """What an import gives: public functions, exported variables, sub-modules, and the
    environment its functions run in (all its functions, its constants and imports)."""

    __slots__ = ("_env", "constants", "functions", "path", "public", "sub_modules", "variables")

    def __init__(
        self,
        path: str,
        functions: dict[tuple[str, int], ScriptFn],
        variables: dict[str, Any],
        sub_modules: dict[str, RhaiModule],
        constants: dict[str, Any],
    ) -> None:
        self.path = path
        self.functions = functions
        self.public = {key: fn for key, fn in functions.items() if not fn.private and fn.this_type is None}
        self.variables = variables
        self.sub_modules = sub_modules
        self.constants = constants
        self._env: tuple[Any, Any, dict[tuple[str, int], ScriptFn], dict[str, RhaiModule]] | None = None

    def environment(
        self, functions: dict[tuple[str, int], ScriptFn], imports: dict[str, RhaiModule]
    ) -> tuple[dict[tuple[str, int], ScriptFn], dict[str, RhaiModule]]:
        """The functions and imports in sight inside this module's functions: its own first,
        then the caller's (a pointer to a caller's function still calls it), kept while the
        caller's are the same dicts."""
        env = self._env
        if env is None or env[0] is not functions or env[1] is not imports:
            env = (
                functions,
                imports,
                {**functions, **self.functions},
                {**imports, **self.sub_modules},
            )
            self._env = env
        return env[2], env[3]

    def inner(self, namespace: str) -> RhaiModule | None:
        """The sub-module `m::a::b` names (`namespace` starts with this module's alias)."""
        module: RhaiModule | None = self
        for name in namespace.split("::")[1:]:
            module = module.sub_modules.get(name) if module is not None else None
        return module


@mutable_record
class ModuleLoader:
    """One evaluation's modules: `compile` and `resolver` find them, each is evaluated once."""

    compile: Compile
    resolver: ModuleResolver
    importer: str | None = None  # the file of the script being run, if it is one
    loaded: dict[str, RhaiModule] = field(default_factory=dict)
    importing: list[tuple[str, str]] = field(default_factory=list)  # (file, path as written)
    imported: int = 0  # `import` statements run, for max_modules

    def load(self, rt: Runtime, path: str) -> RhaiModule:
        importer = self.importing[-1][0] if self.importing else self.importer
        deadline = rt.deadline.at if rt.deadline is not None else None
        try:
            found = self.resolver.resolve(self.compile, path, importer, deadline)
        except RhaiSyntaxError as exc:
            inner = failures.parsing(f"Syntax error: {exc.message}", exc.pos or NO_POS)
            raise failures.in_module(path, inner) from None
        chain = [self.importer_name(), *(written for _, written in self.importing), path]
        files = [self.importer, *(key for key, _ in self.importing)]
        if found.key in files:
            raise failures.module_cycle(chain[files.index(found.key) :])
        module = self.loaded.get(found.key)
        if module is None:
            module = self._evaluate(rt, found, path)
            self.loaded[found.key] = module
        return module

    def held(self) -> list[Any]:
        """The values the loaded modules hold (exported variables, constants): the data limit
        counts them with the rest of the evaluation's data."""
        return [
            value
            for module in self.loaded.values()
            for value in (*module.variables.values(), *module.constants.values())
        ]

    def importer_name(self) -> str:
        from pathlib import Path  # on an import only: `rhai run` of a script without one never loads it

        return Path(self.importer).stem if self.importer is not None else "script"

    def _evaluate(self, rt: Runtime, found: ModuleFile, path: str) -> RhaiModule:
        """Run the module's top level in a scope, functions and imports of its own."""
        compiled = found.compiled
        saved = (
            rt.functions,
            rt.global_consts,
            rt.imports,
            rt.exports,
            rt.functions_named_push,
            rt.depth_hint,
            rt.natives_inline,
        )
        rt.functions = dict(compiled.functions)
        rt.functions_named_push = ("push", 1) in rt.functions
        rt.natives_inline = rt.natives_inlinable()
        rt.global_consts, rt.imports, rt.exports = {}, {}, {}
        self.importing.append((found.key, path))
        try:
            compiled.main(rt, rt.depth_hint + 1, None)  # a chain of imports is bounded like calls
            variables = {alias: cell.v for alias, cell in rt.exports.items()}
            return RhaiModule(path, compiled.functions, variables, rt.imports, rt.global_consts)
        except RhaiRuntimeError as exc:
            raise (exc if exc.kind in _UNWRAPPED else failures.in_module(path, exc)) from None
        finally:
            self.importing.pop()
            (rt.functions, rt.global_consts, rt.imports, rt.exports) = saved[:4]
            rt.functions_named_push, rt.depth_hint, rt.natives_inline = saved[4:]


# -- what generated code calls (abi.py lists them) --------------------------------------------


def rt_check_modules(rt: Runtime) -> None:
    """Before an `import`: `max_modules` imports have run already (uncatchable)."""
    loader = rt.module_loader
    limit = rt.limits.max_modules
    if limit and loader is not None and loader.imported >= limit:
        raise failures.too_many_modules()


def rt_import(rt: Runtime, path: Any, alias: str | None, top_level: bool) -> RhaiModule:
    """`import path [as alias];`: the module; at a top level its alias is in sight of the
    functions called from there (the reference's imports are a stack they see)."""
    if type(path) is not str:
        raise failures.mismatch("string", type_name(path))
    loader: ModuleLoader | None = rt.module_loader
    if loader is None:
        raise failures.module_not_found(path)
    module = loader.load(rt, path)
    loader.imported += 1
    if alias is not None and top_level:
        rt.imports[alias] = module
    return module


def rt_module(rt: Runtime, namespace: str) -> RhaiModule:
    """A module no `import` in sight names: one imported at the top level, else not found."""
    module = rt.imports.get(namespace.split("::", 1)[0])
    if module is None:
        raise failures.module_not_found(namespace)
    assert isinstance(module, RhaiModule)
    return module


def rt_module_var(module: RhaiModule, namespace: str, name: str) -> Any:
    """`m::x`: an exported variable's value (a copy: module variables are read-only)."""
    inner = module.inner(namespace)
    if inner is None or name not in inner.variables:
        raise failures.variable_not_found(f"{namespace}::{name}")
    return copy_value(inner.variables[name])


def rt_module_call(
    rt: Runtime, module: RhaiModule, namespace: str, name: str, args: list[Any], depth: int
) -> Any:
    """`m::f(args)`: a public function of the module, run in the module's environment."""
    inner = module.inner(namespace)
    fn = inner.public.get((name, len(args))) if inner is not None else None
    if fn is None or inner is None:
        raise failures.not_found_text(f"{namespace}::{failures.signature(name, args)}")
    saved = (rt.functions, rt.global_consts, rt.imports, rt.functions_named_push, rt.natives_inline)
    rt.functions, rt.imports = inner.environment(rt.functions, rt.imports)
    rt.global_consts = inner.constants
    rt.functions_named_push = ("push", 1) in rt.functions
    rt.natives_inline = rt.natives_inlinable()
    try:
        return fn.body(rt, depth, None, *args)
    finally:
        rt.functions, rt.global_consts, rt.imports, rt.functions_named_push, rt.natives_inline = saved


def rt_export(rt: Runtime, alias: str, cell: Any) -> None:
    """`export x as alias`: the variable's Cell, read when the module's top level ends."""
    rt.exports[alias] = cell if type(cell) is Cell else Cell(cell)


HELPERS: dict[str, Callable[..., Any]] = {
    "rt_check_modules": rt_check_modules,
    "rt_import": rt_import,
    "rt_module": rt_module,
    "rt_module_var": rt_module_var,
    "rt_module_call": rt_module_call,
    "rt_export": rt_export,
}

__all__ = ["HELPERS", "ModuleLoader", "RhaiModule"]
