"""The Rhai engine adapter: `.rhai` tools and hooks on our interpreter (S1.3, S3, S21.1).

Rhai tools get the same contract as JS (DESIGN rules 1–2): values convert at
the boundary (`()` ↔ None, i64 ↔ int, f64 ↔ float, char → 1-char str,
map ↔ dict), `config` is passed when `run` declares two parameters, each
call gets a fresh scope, and every helper of the table is a Rhai function.
`max_operations` is Rhai's exact operation count; the wall-clock bound is
checked as operations are counted and by any work that grows with the size
of its data (pacing.py); memory is bounded per value (the sizes of strings,
arrays and maps) and per call (`memory_limit_mb` bounds all the data a call
holds at once, data_size.py).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkernel.rhai import Engine, Limits, RhaiRuntimeError, RhaiSyntaxError
from agentkernel.rhai.compile_cache import CompileCache
from agentkernel.rhai.compiled import CompiledScript
from agentkernel.rhai.runtime.failures import terminated
from agentkernel.rhai.runtime.module_files import MODULE_EXTENSION, Compile, FileModuleResolver
from agentkernel.rhai.runtime.modules import ModuleLoader
from agentkernel.rhai.runtime.pacing import Deadline
from agentkernel.rhai.runtime.printing import to_string
from agentkernel.rhai.runtime.runtime import ExitScript, Runtime
from agentkernel.rhai.runtime.values import I64_MAX, I64_MIN, TAGGED, Char, plain
from agentkernel.rhai.stdlib import ANY, build_library
from agentkernel.scripting.contract import (
    MAX_SCRIPT_SIZE,
    CallBudget,
    HelperBinding,
    HelperError,
    ScriptError,
    ScriptLimitError,
    ScriptLimits,
    ScriptSyntaxError,
    SourceLocation,
)
from agentkernel.scripting.rhai_hints import EntryCall, hint_for
from agentkernel.scripting.rhai_modules import module_resolver
from agentkernel.types import JSONValue, NoValue

# Sizes that keep one script's memory bounded (Python cannot cap it directly).
MAX_STRING_CHARS = 16 << 20
MAX_ARRAY_ITEMS = 1 << 20
MAX_MAP_ITEMS = 1 << 20
TIME_CHECK_EVERY = 10_000  # operations between two looks at the clock
MAX_HELPER_ARGS = 8


@dataclass(frozen=True)
class RhaiScript:
    path: Path
    compiled: CompiledScript


class _ToolRuntime(Runtime):
    """A Runtime that also honours the call's wall-clock bound and reaches the helpers."""

    binding: HelperBinding
    timeout_secs: float

    def start_clock(self, budget: CallBudget) -> Deadline:
        """Run until the call's deadline, which compiling the script already used."""
        self.timeout_secs = budget.timeout_secs
        self.deadline = Deadline(budget.deadline)
        self.checkpoint = min(self.checkpoint, TIME_CHECK_EVERY)
        return self.deadline

    def sleep(self, seconds: float) -> None:
        """`sleep` is bounded by the call's wall clock like everything else (S21.1)."""
        assert self.deadline is not None
        remaining = self.deadline.at - time.monotonic()
        time.sleep(max(0.0, min(seconds, remaining)))
        if seconds >= remaining:
            raise terminated()

    def reached_checkpoint(self) -> None:
        super().reached_checkpoint()
        if self.deadline is not None and self.deadline.passed():
            raise terminated()
        limit = self.max_operations or float("inf")
        self.checkpoint = min(limit, self.operations + TIME_CHECK_EVERY)


def to_rhai(value: JSONValue) -> Any:
    """A plain value as a Rhai value: ints beyond i64 become floats, as literals do."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if I64_MIN <= value <= I64_MAX else float(value)
    if isinstance(value, list):
        return [to_rhai(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_rhai(v) for k, v in value.items()}
    return value


def to_plain(value: Any) -> JSONValue:
    """A Rhai value as a plain value (DESIGN rule 1): char → str; others by their text."""
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value  # type: ignore[no-any-return]
    if kind is float:
        return value if math.isfinite(value) else to_string(value)
    if kind is Char:
        return str.__str__(value)
    if kind is list:
        return [to_plain(v) for v in value]
    if kind is dict:
        return {k: to_plain(v) for k, v in value.items()}
    if kind is bytearray:
        return list(value)
    if kind in TAGGED:  # a tagged i64, f64, string or char: its value
        return to_plain(plain(value))
    return to_string(value)


class RhaiEngine:
    """`.rhai` (and any non-JS extension) scripts for the ScriptHost."""

    name = "rhai"

    def __init__(self, script_folders: Sequence[Path] = (), compile_cache: Path | None = None) -> None:
        """`script_folders`: where tools and hooks import modules from; `compile_cache`: the
        folder of compiled scripts kept across restarts (None: none)."""
        self._script_folders = [Path(os.path.abspath(folder)) for folder in script_folders]
        self._cache = CompileCache(compile_cache) if compile_cache is not None else None
        self._library = build_library()
        self._bound: frozenset[str] = frozenset()
        self._last_names: tuple[str, ...] | None = None  # the last names found all bound
        self._lock = threading.Lock()
        self._resolvers: dict[Path, FileModuleResolver] = {}  # per script folder: its compiled modules
        # built once, not per call: an engine per pair of limits, what a script's imports need
        self._engines: dict[tuple[int, int], Engine] = {}
        self._importers: dict[Path, tuple[Compile, FileModuleResolver, str]] = {}

    def _engine(self, limits: ScriptLimits | None = None) -> Engine:
        """The engine for these limits, made on first use (it holds nothing of a call)."""
        key = (limits.max_operations, limits.memory_limit_bytes) if limits else (0, 0)
        engine = self._engines.get(key)
        if engine is None:
            rhai_limits = Limits(
                max_operations=key[0],
                max_string_size=MAX_STRING_CHARS,
                max_array_size=MAX_ARRAY_ITEMS,
                max_map_size=MAX_MAP_ITEMS,
                max_data_size=key[1],
            )
            engine = Engine(
                limits=rhai_limits,
                library=self._library,
                max_source_size=MAX_SCRIPT_SIZE,
                compile_cache=self._cache,
            )
            engine = self._engines.setdefault(key, engine)
        return engine

    def compile(self, path: Path, source: str, deadline: float | None = None) -> RhaiScript:
        """Compile by `deadline`; a script that fails fails alone, with a Rhai error."""
        try:
            compiled = self._engine().compile(source, source_name=None, deadline=deadline)
        except RhaiSyntaxError as exc:
            location = SourceLocation(str(path), exc.pos[0], exc.pos[1]) if exc.pos else None
            raise ScriptSyntaxError(f"Syntax error: {exc.message}", location) from None
        except RhaiRuntimeError as exc:  # the deadline passed: `Script terminated`
            raise ScriptLimitError(
                "timeout_secs", f"script exceeded timeout_secs while being compiled: {exc}"
            ) from None
        return RhaiScript(path, compiled)

    def _bind_helpers(self, names: tuple[str, ...]) -> None:
        """Register each helper once as a native that finds its binding on the runtime
        (a call whose helpers are all registered already does no work here)."""
        if names is self._last_names or self._bound.issuperset(names):
            self._last_names = names  # the table's tuple, the same object at every call
            return
        with self._lock:
            for name in names:
                if name not in self._bound:
                    native = _helper_native(name)
                    for arity in range(MAX_HELPER_ARGS + 1):
                        self._library.register(name, (ANY,) * arity, native, needs_context=True)
            self._bound = self._bound.union(names)

    def _runtime(self, script: RhaiScript, binding: HelperBinding, limits: CallBudget) -> _ToolRuntime:
        self._bind_helpers(binding.names)
        engine = self._engine(limits)
        runtime = _ToolRuntime(
            limits=engine.limits,
            library=self._library,
            functions=dict(script.compiled.functions),
            methods=script.compiled.methods,
            stdout=lambda text: binding.log_line("info", text),
        )
        runtime.binding = binding
        deadline = runtime.start_clock(limits)
        runtime.eval_hook = engine.evaluator(deadline=deadline.at)  # eval's compile, too
        runtime.module_loader = self._module_loader(script.path)
        return runtime

    def _module_loader(self, path: Path) -> ModuleLoader:
        """`import "lib"` in a tool or hook: `.rhai` files below the kernel's scripts folders
        (its tools and hooks folders), or below its own folder for a script outside them, read
        as the file helpers and an `.mjs` script's imports read (S1.1); each module compiled
        once per change of its file (S1.4). What finds them is made once per script; the
        loader, which holds one call's modules, per call."""
        found = self._importers.get(path)
        if found is None:
            found = self._importers.setdefault(path, self._importer(path))
        compile_module, resolver, importer = found
        return ModuleLoader(compile_module, resolver, importer)

    def _importer(self, path: Path) -> tuple[Compile, FileModuleResolver, str]:
        folder = Path(os.path.abspath(path)).parent
        inside = any(folder == root or root in folder.parents for root in self._script_folders)
        key = self._script_folders[0] if inside else folder
        resolver = self._resolvers.get(key)
        if resolver is None:
            roots = self._script_folders if inside else [folder]
            built = module_resolver(roots[0], also=roots[1:], max_bytes=MAX_SCRIPT_SIZE)
            resolver = self._resolvers.setdefault(key, built)
        engine = self._engine()

        def compile_module(text: str, name: str, deadline: float | None) -> CompiledScript:
            return engine.compile(text, source_name=name, deadline=deadline)

        return compile_module, resolver, str(folder / path.name)

    def call(
        self,
        script: RhaiScript,
        function: str,
        args: Sequence[JSONValue],
        optional: Sequence[JSONValue],
        binding: HelperBinding,
        limits: CallBudget,
    ) -> JSONValue | NoValue:
        runtime = self._runtime(script, binding, limits)
        functions = script.compiled.functions
        count = _arity(functions, function, len(args), len(optional))
        if count is None:
            raise ScriptError(f"{script.path.name} does not define a function {function}()")
        given = [*args, *optional][:count]
        try:
            _run_top_level(runtime, script)
            result = runtime.run(functions[(function, count)].body, 1, None, *map(to_rhai, given))
        except ExitScript as stop:  # `exit(v)` in the function: v is its result
            result = stop.value
        except RhaiRuntimeError as exc:
            entry = EntryCall(script.compiled.module.functions, function, given)
            raise _script_error(exc, script.path, limits, entry) from None
        return to_plain(result)

    def defined_functions(
        self, script: RhaiScript, names: Iterable[str], binding: HelperBinding, limits: CallBudget
    ) -> frozenset[str]:
        defined = {name for name, _ in script.compiled.functions}
        return frozenset(n for n in names if n in defined)


_LIMIT_KINDS = frozenset(
    {"ErrorTooManyOperations", "ErrorTerminated", "ErrorStackOverflow", "ErrorDataTooLarge"}
)


def _run_top_level(runtime: _ToolRuntime, script: RhaiScript) -> None:
    """The script's top level, before the called function, as the reference's `call_fn` runs
    it: an `exit()` there ends the top level only, and the function is still called."""
    if script.compiled.idle_top_level:
        return
    with contextlib.suppress(ExitScript):
        runtime.run(script.compiled.main, 0, None)


def _arity(functions: dict[tuple[str, int], Any], name: str, required: int, optional: int) -> int | None:
    """The most arguments `name` takes, from `required` up to `required + optional`."""
    for count in range(required + optional, required - 1, -1):
        if (name, count) in functions:
            return count
    return None


def _helper_native(name: str) -> Any:
    def helper(ctx: _ToolRuntime, *args: Any) -> Any:
        try:
            return to_rhai(ctx.binding.invoke(name, [to_plain(a) for a in args]))
        except HelperError as exc:  # as if the helper did `throw "message"`: catchable, a string
            raise Runtime.throw(str(exc)) from None

    return helper


def _script_error(exc: RhaiRuntimeError, path: Path, limits: ScriptLimits, entry: EntryCall) -> ScriptError:
    """The kernel's error for a Rhai failure: a limit by name, else the reference's text
    at the innermost position, with a hint when the cause was a `()` value."""
    innermost, module = exc, None
    while innermost.inner is not None:  # below a module's level, positions are in the module's file
        level = innermost.extras.get("module" if innermost.kind == "ErrorInModule" else "source")
        if level and level != module:
            path, module = (path.parent / level).with_suffix(MODULE_EXTENSION), level
        innermost = innermost.inner
    if innermost.kind in _LIMIT_KINDS:
        exc = innermost
    if exc.kind == "ErrorTooManyOperations":
        return ScriptLimitError(
            "max_operations",
            f"script exceeded max_operations ({limits.max_operations:,}): Too many operations",
        )
    if exc.kind == "ErrorTerminated":
        return ScriptLimitError("timeout_secs", f"script exceeded timeout_secs ({limits.timeout_secs:g} s)")
    if exc.kind == "ErrorStackOverflow":
        return ScriptLimitError("stack", "Stack overflow: script functions nested too deeply")
    if exc.kind == "ErrorDataTooLarge":
        if "limit" in exc.extras:  # the call's data as a whole, not one value
            megabytes = limits.memory_limit_bytes >> 20
            return ScriptLimitError(
                "memory", f"script exceeded memory_limit_mb ({megabytes} MiB): {exc.message}"
            )
        return ScriptLimitError("memory", exc.message)
    text = exc.display()
    location = None
    if innermost.pos and innermost.pos != (0, 0):
        location = SourceLocation(str(path), innermost.pos[0], innermost.pos[1])
    first_line = text.split("\n")[0]
    message = first_line.rsplit(" (line ", 1)[0] if location else first_line
    return ScriptError(message, location, text, hint_for(innermost, entry))


__all__ = ["RhaiEngine", "RhaiScript", "to_plain", "to_rhai"]
