"""The QuickJS engine adapter: `.js`, `.cjs` and `.mjs` scripts (S1.1, S3, S21.1).

Each call starts from a fresh scope (S3.3): an ES module in a new runtime and
context on the calling thread, any other script in a context kept on that
thread whose builtins are proved unchanged after every call (reuse.py), or in
a new one too when the engine is told to keep none (a process that makes one
call: `agentkernel tool run`). Each
call has a memory limit, a stack limit and an interrupt handler that enforces
both the operation budget and the wall-clock bound. Values cross the boundary only as
JSON text, so no Python object (cyclic or not) ever reaches QuickJS and no JS
object ever leaks into Python.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agentkernel_quickjs as quickjs
from agentkernel.scripting.contract import (
    CallBudget,
    HelperBinding,
    HelperError,
    ReadBelow,
    ScriptError,
    ScriptLimitError,
    ScriptLimits,
    ScriptSyntaxError,
    SourceLocation,
)
from agentkernel.scripting.js.modules import module_loader
from agentkernel.scripting.js.reuse import GC_HEADROOM, ContextPool, KeptContext, lockdown_source
from agentkernel.types import NO_VALUE, JSONValue, NoValue

# QuickJS polls its interrupt handler once per this many "ticks" (backward
# jumps and calls); `max_operations` in JS is counted in these units (S21.1).
TICK_OPERATIONS = 10_000
#: The size of one element of a QuickJS array: no array the heap can hold is longer than the
#: memory limit over this, and the prelude refuses to walk a longer (sparse) one (prelude.js).
JS_VALUE_BYTES = 16
JS_EXTENSIONS = (".js", ".mjs", ".cjs")

_FRAME = re.compile(r"\(?(?P<file>[^\s()]+?):(?P<line>\d+)(?::(?P<col>\d+))?\)?\s*$")


@dataclass(frozen=True)
class JsScript:
    """A compiled script: QuickJS bytecode for scripts, checked source for modules.

    ES modules are kept as source: QuickJS bytecode of a module that imports
    others cannot be linked through this binding (it crashes), so a module is
    compiled again, from this cached text, through the module loader per call.
    `wrapped` is a script's top level as a function (`_wrapped`), run in a kept
    context; None for a module, a script that compiles only as it is, or any
    script of an engine that keeps no contexts.
    """

    path: Path
    source: str
    bytecode: bytes | None
    module: bool
    wrapped: bytes | None = None


class _Budget:
    """The interrupt handler: stops the script past its operations or its deadline.

    Once tripped it keeps answering True, so the uncatchable interrupt cannot
    be swallowed by a `catch` further up the script's stack.
    """

    def __init__(self, limits: CallBudget) -> None:
        self.max_ticks = max(1, limits.max_operations // TICK_OPERATIONS)
        self.deadline = limits.deadline  # the call's: compiling the script counted against it too
        self.limits = limits
        self.ticks = 0
        self.tripped: str | None = None

    def __call__(self) -> bool:
        if self.tripped is not None:
            return True
        self.ticks += 1
        if self.ticks > self.max_ticks:
            self.tripped = "max_operations"
        elif time.monotonic() > self.deadline:
            self.tripped = "timeout_secs"
        return self.tripped is not None

    def past_deadline(self) -> bool:
        """Asked by the prelude between builtin calls on big data (prelude.js): once
        True, the script spins until the interrupt handler above stops it."""
        if self.tripped is None and time.monotonic() > self.deadline:
            self.tripped = "timeout_secs"
        return self.tripped is not None

    def error(self) -> ScriptLimitError:
        if self.tripped == "max_operations":
            return ScriptLimitError(
                "max_operations",
                f"script exceeded max_operations ({self.limits.max_operations:,}): stopped a runaway loop",
            )
        return ScriptLimitError(
            "timeout_secs", f"script exceeded timeout_secs ({self.limits.timeout_secs:g} s)"
        )


def _location(stack: str | None, path: Path) -> SourceLocation | None:
    """The first stack frame in the script's own file, else the first other frame
    that is not the kernel's own prelude."""
    if not stack:
        return None
    frames = []
    for line in stack.splitlines():
        match = _FRAME.search(line.strip())
        if match:
            col = match["col"]
            frames.append(SourceLocation(match["file"], int(match["line"]), int(col) if col else None))
    own = [f for f in frames if f.file == str(path)]
    chosen = own or [f for f in frames if f.file != "<agentkernel>"]
    return chosen[0] if chosen else None


#: Package data beside this module (pyproject's package-data ships it in the wheel); read by path, as
#: `importlib.resources` alone costs a tenth of a `tool run`'s start-up.
_PRELUDE = Path(__file__).with_name("prelude.js")
_COMMENT_LINE = re.compile(r"^[ \t]*//.*$", re.MULTILINE)
_INDENT = re.compile(r"^[ \t]+", re.MULTILINE)


def _prelude_source(names: Sequence[str]) -> str:
    """prelude.js for these helpers, its comment lines and indentation dropped: QuickJS keeps each
    function's source text in its bytecode, which every fresh context reads and frees. Lines stay
    where they were, so a stack frame of `<agentkernel>` still names a line of prelude.js."""
    template = _PRELUDE.read_text("utf-8")
    return _stripped(template.replace("HELPER_NAMES", json.dumps(list(names))))


def _stripped(source: str) -> str:
    return _INDENT.sub("", _COMMENT_LINE.sub("", source))


#: A script's top level as a method named `<eval>`, the name QuickJS gives a script's top level in a
#: stack trace; it returns the script's lookup of a function by name (`_finder`). On the script's first
#: line, QuickJS counts the prefix's columns too (`_script_error` takes them off).
_WRAP_PREFIX = '({"<eval>"() {'
_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
#: Words that cannot follow `typeof` in a script, strict or not.
_RESERVED = frozenset(
    [
        "await",
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "debugger",
        "default",
        "delete",
        "do",
        "else",
        "enum",
        "export",
        "extends",
        "false",
        "finally",
        "for",
        "function",
        "if",
        "implements",
        "import",
        "in",
        "instanceof",
        "interface",
        "let",
        "new",
        "null",
        "package",
        "private",
        "protected",
        "public",
        "return",
        "static",
        "super",
        "switch",
        "this",
        "throw",
        "true",
        "try",
        "typeof",
        "var",
        "void",
        "while",
        "with",
        "yield",
        "arguments",
        "eval",
    ]
)


def _wrapped(source: str) -> str:
    """`source` run as a function: its declarations are the call's own, not globals of the context."""
    return f'{_WRAP_PREFIX}{source}\n;return {_finder(source)};\n}}}})["<eval>"]'


def _finder(source: str) -> str:
    """A function of a name giving the function the script's top level sees by that name: one case
    for each name the source spells (a name it never spells it cannot have declared)."""
    names = sorted(set(_NAME.findall(source)) - _RESERVED)
    cases = "".join(f'case "{n}": return typeof {n} === "function" ? {n} : undefined; ' for n in names)
    return f"(__ak_name) => {{ switch (__ak_name) {{ {cases}}} return undefined; }}"


class JsEngine:
    """QuickJS through its vendored binding (agentkernel_quickjs); the module docstring has the rules."""

    name = "javascript"

    def __init__(self, read_below: ReadBelow, *, kept_contexts: bool = True) -> None:
        """`kept_contexts=False`: every call in a fresh context, none made to keep (reuse.py): for a
        process that makes a call or two, where making and locking down one costs more than it saves."""
        self._read_below = read_below  # how an imported module is read (contract.py ReadBelow)
        self._kept_contexts = kept_contexts
        self._preludes: dict[tuple[str, ...], bytes] = {}
        self._lockdown: bytes | None = None
        self._lock = threading.Lock()
        self._pool = ContextPool()
        #: Scripts whose call left a kept context unusable: their calls take a fresh one, which costs
        #: less than making and locking down a context to keep (until the file changes).
        self._fresh: dict[Path, JsScript] = {}

    # -- compiling ---------------------------------------------------------

    def compile(self, path: Path, source: str, deadline: float | None = None) -> JsScript:
        """QuickJS compiles in C, quickly for any source the host accepts: no deadline needed."""
        module = path.suffix == ".mjs"
        ctx = quickjs.Runtime().new_context()
        ctx.set_module_loader(module_loader(path, source, self._read_below))
        try:
            code = ctx.compile(source, filename=str(path), module=module)
        except quickjs.JSError as exc:
            stack = getattr(exc, "js_stack", None)
            message = str(exc)
            raise ScriptSyntaxError(message, _location(stack, path), stack, _hint(message)) from None
        bytecode = None if module else code.write_object()
        wrapped = None if module or not self._kept_contexts else _compile_wrapped(ctx, path, source)
        return JsScript(path=path, source=source, bytecode=bytecode, module=module, wrapped=wrapped)

    def _prelude(self, names: tuple[str, ...]) -> bytes:
        bytecode = self._preludes.get(names)
        if bytecode is None:
            ctx = quickjs.Runtime().new_context()
            bytecode = ctx.compile(_prelude_source(names), filename="<agentkernel>").write_object()
            with self._lock:
                self._preludes[names] = bytecode
        return bytecode

    # -- calling -----------------------------------------------------------

    def call(
        self,
        script: JsScript,
        function: str,
        args: Sequence[JSONValue],
        optional: Sequence[JSONValue],
        binding: HelperBinding,
        limits: CallBudget,
    ) -> JSONValue | NoValue:
        budget = _Budget(limits)
        if script.wrapped is not None and self._fresh.get(script.path) is not script:
            return self._call_kept(script, function, args, optional, binding, limits, budget)
        ctx = self._new_context(binding, limits, budget)
        try:
            invoke = self._install(ctx, script, binding)
            target = self._lookup(ctx, script, function)
            if target is None:
                raise ScriptError(f"{script.path.name} does not define a function {function}()")
            return _run(ctx, invoke, target, function, args, optional)
        except quickjs.JSError as exc:
            raise _script_error(exc, budget, script.path, limits) from None
        except quickjs.QuickJSError as exc:
            raise ScriptError(f"{function}() returned a Promise that never settled: {exc}") from None

    def _call_kept(
        self,
        script: JsScript,
        function: str,
        args: Sequence[JSONValue],
        optional: Sequence[JSONValue],
        binding: HelperBinding,
        limits: CallBudget,
        budget: _Budget,
    ) -> JSONValue | NoValue:
        """`call` in a kept context (reuse.py), which goes back to the pool only if the call left
        it as it found it."""
        key = (binding.names, limits.memory_limit_bytes, limits.stack_limit_bytes)
        kept = self._enter(key, script, binding, limits, budget)
        stopped = True  # until the call ends, with a value or an error, within its limits
        try:
            target = self._start_kept(kept, script, function)
            if target is None:
                raise ScriptError(f"{script.path.name} does not define a function {function}()")
            value = _run(kept.ctx, kept.invoke, target, function, args, optional)
            stopped = False
            return value
        except quickjs.JSError as exc:
            error = _script_error(exc, budget, script.path, limits, len(_WRAP_PREFIX))
            stopped = isinstance(error, ScriptLimitError)
            raise error from None
        except quickjs.QuickJSError as exc:
            stopped = False  # its pending jobs keep the context from being used again
            raise ScriptError(f"{function}() returned a Promise that never settled: {exc}") from None
        except ScriptError:  # no such function, or a value with no JSON form
            stopped = False
            raise
        finally:
            self._after(key, kept, script, stopped)

    def _after(self, key: object, kept: KeptContext, script: JsScript, stopped: bool) -> None:
        """Give `kept` back to the pool if its call was not `stopped` by a limit and left it as it
        found it, a call that threw included. A call that changed it (a polyfill, an import, a job
        left pending) sends its script's later calls to fresh contexts, which cost less than making
        a kept one per call; a limit only drops the context, after which QuickJS is asked nothing."""
        if kept.leave(not stopped):
            self._pool.give_back(key, kept)
        elif not stopped:
            self._fresh[script.path] = script

    def _enter(
        self, key: object, script: JsScript, binding: HelperBinding, limits: CallBudget, budget: _Budget
    ) -> KeptContext:
        kept = self._pool.take(key) or self._new_kept(binding.names, limits)
        kept.runtime.set_gc_threshold(kept.gc_threshold)
        kept.enter(
            _helper_trampoline(binding),
            binding.log_line,
            budget.past_deadline,
            module_loader(script.path, script.source, self._read_below),
            budget,
        )
        return kept

    @staticmethod
    def _start_kept(kept: KeptContext, script: JsScript, function: str) -> Any | None:
        """Run the script's top level in `kept`; its function named `function`, or None."""
        ctx = kept.ctx
        assert script.wrapped is not None
        find = ctx.eval_function(ctx.read_object(script.wrapped)).call(this=kept.global_object)
        found = kept.lookup.call(find, function, _identifier(function))
        return found if _found(found) else None

    def _new_kept(self, names: tuple[str, ...], limits: ScriptLimits) -> KeptContext:
        """A runtime and context with the prelude and lockdown.js run, its host functions the slot's."""
        runtime = quickjs.Runtime()
        runtime.set_memory_limit(limits.memory_limit_bytes)
        runtime.set_max_stack_size(limits.stack_limit_bytes)
        ctx = runtime.new_context()
        kept = KeptContext(runtime, ctx)
        slot = kept.slot
        runtime.set_interrupt_handler(slot.interrupt)
        ctx.set("__ak_call", slot.helper)
        ctx.set("__ak_log", slot.log)
        ctx.set("__ak_poll", slot.poll)
        ctx.set("__ak_walk_limit", limits.memory_limit_bytes // JS_VALUE_BYTES)
        ctx.set_module_loader(slot.load)
        kept.invoke = ctx.eval_function(ctx.read_object(self._prelude(names)))
        done = ctx.eval_function(ctx.read_object(self._lockdown_bytecode()))
        kept.begin, kept.lookup, kept.clean = done.get(0), done.get(1), done.get(2)
        runtime.run_gc()
        kept.gc_threshold = runtime.compute_memory_usage()["malloc_size"] + GC_HEADROOM
        return kept

    def _lockdown_bytecode(self) -> bytes:
        if self._lockdown is None:
            ctx = quickjs.Runtime().new_context()
            code = ctx.compile(_stripped(lockdown_source()), filename="<agentkernel>")
            self._lockdown = code.write_object()
        return self._lockdown

    def defined_functions(
        self,
        script: JsScript,
        names: Iterable[str],
        binding: HelperBinding,
        limits: CallBudget,
    ) -> frozenset[str]:
        budget = _Budget(limits)
        if script.wrapped is not None:
            key = (binding.names, limits.memory_limit_bytes, limits.stack_limit_bytes)
            kept = self._enter(key, script, binding, limits, budget)
            stopped = True
            try:
                find = kept.ctx.eval_function(kept.ctx.read_object(script.wrapped))
                find = find.call(this=kept.global_object)
                found = frozenset(n for n in names if _found(kept.lookup.call(find, n, _identifier(n))))
                stopped = False
                return found
            except quickjs.JSError as exc:
                error = _script_error(exc, budget, script.path, limits, len(_WRAP_PREFIX))
                stopped = isinstance(error, ScriptLimitError)
                raise error from None
            finally:
                self._after(key, kept, script, stopped)
        ctx = self._new_context(binding, limits, budget)
        try:
            self._install(ctx, script, binding)
            return frozenset(n for n in names if self._lookup(ctx, script, n) is not None)
        except quickjs.JSError as exc:
            raise _script_error(exc, budget, script.path, limits) from None

    def _new_context(self, binding: HelperBinding, limits: ScriptLimits, budget: _Budget) -> Any:
        runtime = quickjs.Runtime()
        runtime.set_memory_limit(limits.memory_limit_bytes)
        runtime.set_max_stack_size(limits.stack_limit_bytes)
        runtime.set_interrupt_handler(budget)
        ctx = runtime.new_context()
        ctx.set("__ak_call", _helper_trampoline(binding))
        ctx.set("__ak_log", binding.log_line)
        ctx.set("__ak_poll", budget.past_deadline)
        ctx.set("__ak_walk_limit", limits.memory_limit_bytes // JS_VALUE_BYTES)
        return ctx

    def _install(self, ctx: Any, script: JsScript, binding: HelperBinding) -> Any:
        """Bind helpers, then evaluate the script's top level; return `invoke`."""
        invoke = ctx.eval_function(ctx.read_object(self._prelude(binding.names)))
        # static imports and import() alike
        ctx.set_module_loader(module_loader(script.path, script.source, self._read_below))
        if script.bytecode is not None:
            ctx.eval_function(ctx.read_object(script.bytecode))
        else:
            exposed = ctx.eval(
                f"import * as m from {json.dumps(str(script.path))}; globalThis.__ak_exports = m;",
                filename="<agentkernel>",
                module=True,
            )
            _settle(exposed)
        return invoke

    @staticmethod
    def _lookup(ctx: Any, script: JsScript, function: str) -> Any | None:
        """The script's function: an ES export, a `module.exports` entry, or a global."""
        places: list[Callable[[], object]] = (
            [lambda: _member(ctx.get("__ak_exports"), function)]
            if script.module
            else [
                lambda: _member(_member(ctx.get("module"), "exports"), function),
                lambda: ctx.get(function),
                lambda: _lexical(ctx, function),
            ]
        )
        for place in places:
            found = place()
            if isinstance(found, quickjs.Value) and found.is_function:
                return found
        return None


_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def _identifier(name: str) -> bool:
    return _IDENTIFIER.match(name) is not None


def _found(value: object) -> bool:
    return isinstance(value, quickjs.Value) and value.is_function


def _run(
    ctx: Any,
    invoke: Any,
    target: Any,
    function: str,
    args: Sequence[JSONValue],
    optional: Sequence[JSONValue],
) -> JSONValue | NoValue:
    """Call `target` through the prelude's `invoke` with the arguments it declares room for."""
    declared = target.get("length")
    extra = list(optional[: max(0, int(declared) - len(args))])
    # ASCII JSON: a lone surrogate (JSON may spell one) crosses as an escape, not as bad UTF-8
    argv = ctx.parse_json(json.dumps([*args, *extra], allow_nan=False))
    result = invoke.call(target, argv)
    if isinstance(result, quickjs.Value) and result.is_promise:
        result = result.result()
    return _export(result, function)


def _compile_wrapped(ctx: Any, path: Path, source: str) -> bytes | None:
    """The bytecode of `_wrapped(source)`, or None when only the script itself compiles (a hashbang)."""
    try:
        return bytes(ctx.compile(_wrapped(source), filename=str(path)).write_object())
    except quickjs.JSError:
        return None


def _lexical(ctx: Any, name: str) -> object:
    """A top-level `const`/`let` binding, which is global but not on globalThis."""
    if not _IDENTIFIER.match(name):
        return None
    return ctx.eval(f"typeof {name} === 'function' ? {name} : undefined", filename="<agentkernel>")


def _member(holder: object, key: str) -> object:
    if isinstance(holder, quickjs.Value) and holder.is_object:
        return holder.get(key)
    return None


def _settle(value: object) -> None:
    if isinstance(value, quickjs.Value) and value.is_promise:
        value.result()


def _helper_trampoline(binding: HelperBinding) -> Any:
    """The one Python function JS calls for every helper: JSON text in and out.

    The reply is "v<json>" for a value or "e<message>" for a HelperError,
    which the prelude turns into a catchable JS Error.
    """

    def call(name: str, payload: str) -> str:
        try:
            args = json.loads(payload)
            value = binding.invoke(name, args)
            return "v" + json.dumps(value, allow_nan=False)  # ASCII, as the arguments (see above)
        except HelperError as exc:
            return "e" + str(exc)
        except (ValueError, TypeError, RecursionError) as exc:
            return "e" + f"{name}: value cannot cross into the script: {exc}"

    return call


def _export(value: object, function: str) -> JSONValue | NoValue:
    """A JS return value as plain Python, refusing what has no JSON form."""
    if value is quickjs.Undefined:
        return NO_VALUE
    if not isinstance(value, quickjs.Value):
        return value  # type: ignore[return-value]  # str, int, float, bool, None
    if value.is_function:
        raise ScriptError(f"{function}() returned a function, which has no JSON form")
    if value.is_symbol:
        raise ScriptError(f"{function}() returned a Symbol, which has no JSON form")
    text = value.json()
    if text is None:
        return NO_VALUE
    try:
        return json.loads(text)  # type: ignore[no-any-return]
    except RecursionError:
        raise ScriptError(f"{function}() returned a value nested too deeply") from None


def _script_error(
    exc: quickjs.JSError, budget: _Budget, path: Path, limits: ScriptLimits, shift: int = 0
) -> ScriptError:
    """Map a QuickJS exception to the kernel's error, naming the limit when one hit; `shift`
    columns are taken off the positions on the script's first line (a `_wrapped` script's)."""
    if budget.tripped is not None:
        return budget.error()
    message = str(exc)
    stack = getattr(exc, "js_stack", None)
    if shift and stack:
        stack = _unshift(stack, path, shift)
    if message == "InternalError: out of memory":
        return ScriptLimitError(
            "memory", f"script ran out of memory (limit {limits.memory_limit_bytes >> 20} MiB)"
        )
    if message == "null":  # QuickJS's bare out-of-memory exception, or `throw null`
        return ScriptLimitError(
            "memory",
            f"script ran out of memory (limit {limits.memory_limit_bytes >> 20} MiB), or threw null",
        )
    if message == _NO_TEXT:
        return ScriptLimitError(
            "memory",
            f"script ran out of memory (limit {limits.memory_limit_bytes >> 20} MiB), "
            "or threw a value whose toString() failed",
        )
    if message == "InternalError: stack overflow":
        return ScriptLimitError(
            "stack",
            f"stack overflow: recursion too deep (stack limit {limits.stack_limit_bytes >> 10} KiB)",
        )
    if "circular reference" in message:
        message = f"{message} (a cyclic object cannot be returned)"
    return ScriptError(message, _location(stack, path), stack, _hint(message))


def _hint(message: str) -> str | None:
    """What to do about a script's error, if hints.py knows (imported by the first error: a call that
    goes well never needs it)."""
    from agentkernel.scripting.js.hints import hint_for

    return hint_for(message)


#: The binding's message for an exception it could not turn into text: no memory left for the
#: text, or a thrown object whose `toString()` threw in turn.
_NO_TEXT = "<unknown JS error>"


def _unshift(stack: str, path: Path, shift: int) -> str:
    first_line = re.compile(re.escape(f"{path}:1:") + r"(\d+)")
    return first_line.sub(lambda m: f"{path}:1:{max(1, int(m[1]) - shift)}", stack)


__all__ = ["JS_EXTENSIONS", "TICK_OPERATIONS", "JsEngine", "JsScript"]
