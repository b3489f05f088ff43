"""The public Rhai API: compile, evaluate, call functions, register natives, set limits.

    engine = Engine(limits=Limits(max_operations=100_000))
    script = engine.compile("fn add(a, b) { a + b } add(1, 2)")
    engine.run(script)                 # -> 3
    engine.call_fn(script, "add", [2, 3])   # -> 5

Compiled code runs with an explicit globals table and no Python builtins:
a script reaches only what `codegen/abi.py` lists (DESIGN: sandbox by construction).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from types import CodeType

from agentkernel.rhai.codegen.abi import GLOBALS
from agentkernel.rhai.compiled import CompiledModule, CompiledScript, fn_py_name
from agentkernel.rhai.errors import RhaiError, RhaiRuntimeError, RhaiSyntaxError
from agentkernel.rhai.runtime import failures
from agentkernel.rhai.runtime.module_files import ModuleResolver
from agentkernel.rhai.runtime.modules import ModuleLoader
from agentkernel.rhai.runtime.runtime import (
    ExitScript,
    Limits,
    Runtime,
    ScriptFn,
    copy_value,
    locate,
    wrap_call,
)
from agentkernel.rhai.runtime.values import RangeVal, host_value
from agentkernel.rhai.stdlib import ANY, Library, default_library, engine_natives
from agentkernel.rhai.syntax.compile_clock import CompileClock
from agentkernel.rhai.syntax.parse_support import TOO_COMPLEX, ParseOptions

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # only their interfaces: a script the compile cache holds is run without them
    from pathlib import Path
    from typing import Any

    from agentkernel.rhai.compile_cache import CompileCache
    from agentkernel.rhai.syntax import ast


def _load(
    module: CompiledModule, source_name: str | None, codes: Sequence[CodeType | None] | None = None
) -> CompiledScript:
    """Run the module's parts (compiled here, or `codes` already compiled) into a namespace.

    A part given as None is a script function compiled on its first call (`LazyFunction`).
    """
    namespace = dict(GLOBALS)
    namespace["K"] = module.constants
    namespace["LINES"] = module.positions
    namespace["NOPOS"] = module.operator_lines
    if codes is None:
        codes = list(_compiled_parts(module, source_name))
    first_line = 1
    for part, code in zip(module.parts, codes, strict=True):
        if code is not None:
            exec(code, namespace)
        else:
            name = _function_defined(part)
            assert name is not None, "only a script function's part is compiled on its first call"
            namespace[name] = LazyFunction(namespace, name, part, first_line, _filename(source_name))
        first_line += part.count("\n")
    return _script_of(module, namespace, source_name)


def _script_of(module: CompiledModule, namespace: dict[str, Any], source_name: str | None) -> CompiledScript:
    """The loaded script: its functions by name and arity, its typed methods by type too."""
    functions: dict[tuple[str, int], ScriptFn] = {}
    methods: dict[tuple[str, int, str], ScriptFn] = {}
    for name, arity, this_type, private, params in module.signatures:
        body = namespace[fn_py_name(name, arity, this_type)]
        compiled = ScriptFn(name, arity, body, this_type, private, params)
        if this_type is None:
            functions[(name, arity)] = compiled
        else:
            methods[(name, arity, this_type)] = compiled
        if type(body) is LazyFunction:
            body.tables.append(
                (functions, (name, arity)) if this_type is None else (methods, (name, arity, this_type))
            )
    return CompiledScript(module, namespace, functions, source_name, methods)


def _compiled_parts(
    module: CompiledModule, source_name: str | None, *, lazy: bool = False
) -> Iterator[CodeType | None]:
    """Each part's bytecode, lines numbered across the module: one `compile()` per function,
    so that the memory CPython needs to compile one is freed before the next. With `lazy`,
    a script function's part is None: `_load` compiles it on its first call."""
    first_line = 1
    filename = _filename(source_name)
    for part in module.parts:
        if lazy and _function_defined(part) is not None:
            yield None
        else:
            yield _compiled(part, filename, first_line)
        first_line += part.count("\n")


def _compiled(part: str, filename: str, first_line: int) -> CodeType:
    code = compile(part, filename, "exec")
    return _moved(code, first_line - 1) if first_line > 1 else code


def _function_defined(part: str) -> str | None:
    """The Python name of the script function (or typed method) `part` defines, if it is
    one (`fn_py_name`: `f_…`/`m_…`; closures, parts apart and the top level are not)."""
    if part.startswith(("def f_", "def m_")):
        return part[4 : part.index("(")]
    return None


def _filename(source_name: str | None) -> str:
    return f"<rhai {source_name or 'script'}>"


def _moved(code: CodeType, lines: int) -> CodeType:
    """`code` (and the functions in it) as if compiled `lines` lines further down the module."""
    consts = tuple(_moved(c, lines) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_firstlineno=code.co_firstlineno + lines, co_consts=consts)


class LazyFunction:
    """A script function whose bytecode is compiled on its first call.

    A script of many functions that calls a few (a tool's helpers, a library
    of functions) pays CPython's `compile()` (half of a compile's time) only
    for those. The first call compiles the part into the script's namespace,
    where the generated code finds the function by name from then on, and puts
    the real function in the tables (`CompiledScript.functions`/`methods`)
    that named this one, so that later calls pay nothing. Threads calling it
    first at once compile it once.
    """

    __slots__ = ("_filename", "_first_line", "_lock", "_name", "_namespace", "_part", "_real", "tables")

    def __init__(
        self, namespace: dict[str, Any], name: str, part: str, first_line: int, filename: str
    ) -> None:
        self._namespace = namespace
        self._name = name
        self._part = part
        self._first_line = first_line
        self._filename = filename
        self._lock = threading.Lock()
        self._real: Callable[..., Any] | None = None
        self.tables: list[tuple[dict[Any, ScriptFn], Any]] = []  # where a ScriptFn names this one

    def __call__(self, *args: Any) -> Any:
        real = self._real
        return (real if real is not None else self.compiled())(*args)

    def compiled(self) -> Callable[..., Any]:
        """The real function, compiled now if no call compiled it yet."""
        with self._lock:
            if self._real is None:
                _stack_room()
                exec(_compiled(self._part, self._filename, self._first_line), self._namespace)
                real = self._real = self._namespace[self._name]
                for table, key in self.tables:
                    old = table[key]
                    table[key] = ScriptFn(old.name, old.arity, real, old.this_type, old.private, old.params)
            return self._real


# The code generator never writes what CPython warns about (a literal subscripted,
# `is` with a literal); should it ever, the warning is ours to fix, not the
# script author's to read, so generated code prints none.
warnings.filterwarnings("ignore", category=SyntaxWarning, module=r"<rhai ")


COMPILE_FRAMES = 1500  # Python frames compiling the deepest script the parser accepts takes (~1,100)


def _stack_room() -> None:
    """Make sure compiling has `COMPILE_FRAMES` of Python stack above the caller's.

    Parsing and code generation recurse once per level of the script's
    nesting, which the parser caps (HARD_DEPTH); with this room a script
    compiles, or fails as too complex, the same way whoever calls — a test
    runner deep in its own frames or a kernel worker thread. The recursion
    limit is only ever raised, by what one compile needs.
    """
    depth = 0
    frame: Any = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    if sys.getrecursionlimit() < depth + COMPILE_FRAMES:
        sys.setrecursionlimit(depth + COMPILE_FRAMES)


def _compile_checked(
    source: str,
    options: ParseOptions,
    clock: CompileClock,
    max_size: int,
    *,
    source_name: str | None = None,
    eval_mode: bool = False,
    cache: CompileCache | None = None,
) -> CompiledScript:
    """Parse, generate and load `source`; whatever goes wrong is a Rhai error.

    Too large a source is refused before any work, and the clock stops a
    compile at its deadline (`Script terminated`). A Python exception here
    would be a bug of ours: it still ends as a syntax error, never as a traceback.
    With a `cache`, an unchanged script is loaded from it, and a compiled one stored.
    """
    if max_size and len(source) > max_size:
        raise RhaiSyntaxError(
            f"Script is too large: {len(source):,} characters, more than {max_size:,}", None
        )
    clock.check()
    key = cache.key(source, options, source_name) if cache is not None else ""
    if cache is not None:
        hit = cache.load(key, partial(_functions_of, source, options))
        if hit is not None:
            return _load(hit.module, source_name, hit.codes)
    _stack_room()
    # here, not at the top: a script loaded from the cache runs without the parser and code generator
    from agentkernel.rhai.codegen.script_module import compile_script
    from agentkernel.rhai.syntax.parser import parse

    try:
        with _collector_paused():
            script = parse(source, options, clock)
            module = compile_script(script, eval_mode=eval_mode, clock=clock)
            codes = list(_compiled_parts(module, source_name, lazy=True))
            if cache is not None:
                cache.store(key, module, codes)
            return _load(module, source_name, codes)
    except RhaiError:
        raise
    except RecursionError:
        raise RhaiSyntaxError(TOO_COMPLEX, None) from None
    except MemoryError:
        raise RhaiSyntaxError("Script is too large to compile", None) from None
    except Exception as exc:
        reason = f"internal error: {type(exc).__name__}: {exc}"
        raise RhaiSyntaxError(f"the script could not be compiled ({reason})", None) from None


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while compiling.

    A compile allocates some hundred thousand objects (tokens, the tree, the
    generated lines) that all live until it ends; each full collection they
    trigger walks them, and the whole heap of a long-running server, in vain
    (a third of a compile's time in a server-sized heap). They hold no
    cycles: reference counting frees them. A collector that was off (the
    host's choice, or another thread compiling) is left off.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _functions_of(source: str, options: ParseOptions) -> list[ast.FnDef]:
    """A cached script's functions, parsed again (only a failed call's hint needs them)."""
    from agentkernel.rhai.syntax.parser import parse

    _stack_room()
    return list(parse(source, options).functions)


class Engine:
    """A Rhai engine: limits, the native library, and compile/run entry points.

    `max_source_size` (characters, 0 = unlimited) bounds what `compile` and
    `eval(text)` accept, so that no text takes unbounded time to compile.

    `module_resolver` finds what `import "lib"` names (runtime/module_files.py);
    without one, every import fails with `Module not found`: an embedded engine
    reads no file unless its host gives it a resolver and a reader,
    `FileModuleResolver(folder, read)`.

    `compile_cache` (off by default) keeps compiled scripts on disk, so that
    `compile` of an unchanged script in a later process skips compiling
    (compile_cache.py: keyed by text, options and version; signed entries).
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        library: Library | None = None,
        max_source_size: int = 0,
        module_resolver: ModuleResolver | None = None,
        compile_cache: CompileCache | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.library = library or default_library(
            engine_natives.register, then_keeps_inline=True
        )  # filled on first use
        self.max_source_size = max_source_size
        self.module_resolver = module_resolver
        self.compile_cache = compile_cache
        if library is not None and not library.has_function("parse_json", 1):
            engine_natives.register(library)

    def parse_options(self, *, allow_functions: bool = True, source: str | None = None) -> ParseOptions:
        return ParseOptions(
            max_expr_depth=self.limits.max_expr_depth,
            max_fn_expr_depth=self.limits.max_fn_expr_depth,
            max_string_size=self.limits.max_string_size,
            max_array_size=self.limits.max_array_size,
            max_map_size=self.limits.max_map_size,
            max_functions=self.limits.max_functions,
            allow_functions=allow_functions,
            source=source,
        )

    def compile(
        self, source: str, *, source_name: str | None = None, deadline: float | None = None
    ) -> CompiledScript:
        """Parse and compile; raises RhaiSyntaxError with the reference's text, or the
        uncatchable `Script terminated` once past `deadline` (a `time.monotonic()` value)."""
        options = self.parse_options(source=source_name)
        clock = CompileClock(deadline, failures.terminated)
        return _compile_checked(
            source, options, clock, self.max_source_size, source_name=source_name, cache=self.compile_cache
        )

    def compile_file(self, path: str | Path, *, deadline: float | None = None) -> CompiledScript:
        """Compile a script file; its imports are found relative to its folder."""
        with open(path, encoding="utf-8") as file:  # not pathlib: `rhai run` never imports it (start-up)
            text = file.read()
        compiled = self.compile(text, deadline=deadline)
        compiled.path = os.path.abspath(path)
        return compiled

    def module_loader(self, importer: str | None) -> ModuleLoader | None:
        """What a run's `import`s load with: this engine's resolver and compiler (None: none)."""
        if self.module_resolver is None:
            return None

        def compile_module(text: str, name: str, deadline: float | None) -> CompiledScript:
            return self.compile(text, source_name=name, deadline=deadline)

        return ModuleLoader(compile_module, self.module_resolver, importer)

    def register_fn(
        self, name: str, function: Callable[..., Any], params: Sequence[Any] | None = None
    ) -> None:
        """Expose a Python function to scripts, callable as `name(…)` or `x.name(…)`.

        `params` are the Python types of the arguments (`int`, `str`, `list`, …,
        or `ANY`); by default every positional parameter accepts any value.
        """
        if params is None:
            import inspect  # here: `agentkernel rhai run` registers no function

            signature = inspect.signature(function)
            kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            positional = [p for p in signature.parameters.values() if p.kind in kinds]
            params = [ANY] * len(positional)
        self.library.register(name, tuple(params), function)

    def new_runtime(self, script: CompiledScript, stdout: Callable[[str], None] | None = None) -> Runtime:
        rt = Runtime(
            limits=self.limits,
            library=self.library,
            functions=dict(script.functions),
            methods=script.methods,
            stdout=stdout,
            source=script.source_name,
        )
        rt.eval_hook = self.evaluator()
        rt.module_loader = self.module_loader(script.path)
        return rt

    def run(self, script: CompiledScript, stdout: Callable[[str], None] | None = None) -> Any:
        """Evaluate the script's top level; returns its value (or `exit()`'s)."""
        rt = self.new_runtime(script, stdout)
        return _run_main(rt, script)

    def eval(self, source: str, stdout: Callable[[str], None] | None = None) -> Any:
        return self.run(self.compile(source), stdout)

    def call_fn(
        self,
        script: CompiledScript,
        name: str,
        args: Sequence[Any],
        *,
        stdout: Callable[[str], None] | None = None,
        run_top_level: bool = True,
    ) -> Any:
        """Call a script function in a fresh scope (after the top level, as the reference does)."""
        rt = self.new_runtime(script, stdout)
        if run_top_level and not script.idle_top_level:
            _run_main(rt, script)
        fn = script.functions.get((name, len(args))) or _typed_method(script, name, len(args))
        if fn is None:
            raise rt.not_found(name, list(args))
        try:
            return host_value(rt.run(fn.body, 1, None, *[copy_value(a) for a in args]))
        except ExitScript as stop:
            return host_value(stop.value)
        except RhaiError:
            raise
        except Exception as exc:  # never let Python leak out (Ctrl-C and SystemExit do)
            raise locate(exc, None, {}) from None

    def evaluator(self, deadline: float | None = None) -> Callable[[Runtime, str, dict[str, Any]], Any]:
        """What a runtime's `eval(text)` calls: compiling the text stops at `deadline`
        (the time left to the running call) and is bounded by `max_source_size`."""
        return partial(self.eval_in_scope, deadline=deadline)

    def eval_in_scope(
        self, rt: Runtime, text: str, scope: dict[str, Any], *, deadline: float | None = None
    ) -> Any:
        """`eval(text)`: compile and run `text` in the caller's scope (RHAI.md §3, §13)."""
        options = self.parse_options(allow_functions=False)
        try:
            compiled = _compile_checked(
                text,
                options,
                CompileClock(deadline, failures.terminated),
                self.max_source_size,
                source_name=rt.source,
                eval_mode=True,
            )
        except RhaiSyntaxError as exc:
            inner = failures.parsing(f"Syntax error: {exc.message}", exc.pos)
            raise wrap_call(inner, _eval_call(rt)) from None
        saved, saved_lets = rt.eval_scope, rt.eval_lets
        combined = {**scope, **saved}
        initial = dict(combined)
        rt.eval_scope, rt.eval_lets = combined, set()
        try:
            return compiled.main(rt, rt.depth_hint, None)
        except RhaiRuntimeError as exc:
            raise wrap_call(exc, _eval_call(rt)) from None
        finally:
            declared = rt.eval_lets & scope.keys()
            rt.eval_scope, rt.eval_lets = saved, saved_lets
            for name, value in combined.items():
                if name not in scope:
                    saved[name] = value  # defined here: the caller's eval scope keeps it
                elif value is not initial[name] or name in declared:
                    scope[name] = value  # assigned, or declared anew: back to the caller's variable
            rt.eval_declared = frozenset(declared)


def _eval_call(rt: Runtime) -> str:
    """The call level `eval`'s error is seen through, naming the running script's source as
    the reference's does (`global.source()`)."""
    return f"in call to function 'eval'{failures.from_source(rt.source)}"


def _typed_method(script: CompiledScript, name: str, arity: int) -> ScriptFn | None:
    """What `call_fn` calls when no plain function has the name and arity: the first typed
    method that has them, `this` unbound (the reference takes whichever its table yields)."""
    return next((fn for (n, a, _), fn in script.methods.items() if (n, a) == (name, arity)), None)


def _run_main(rt: Runtime, script: CompiledScript) -> Any:
    try:
        return host_value(rt.run(script.main, 0, None))
    except ExitScript as stop:
        return host_value(stop.value)
    except RhaiError:
        raise
    except Exception as exc:  # KeyboardInterrupt and SystemExit are the host's, not the script's
        raise locate(exc, None, {}) from None


__all__ = ["CompiledScript", "Engine", "Limits", "RangeVal"]
