"""The reference's run-time errors, built with its exact texts (RHAI.md §12, §15).

Every `RhaiRuntimeError` of the interpreter is built here, so that the texts,
the kinds (`errors.ErrorKind`) and the extra keys a `catch` map shows live in
one place. Operators and natives raise these without a position; the runtime
adds the call site's. Each constructor names one `EvalAltResult` variant of
Rhai 1.25. Limits (operations, stack, data size, deadline) are uncatchable.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentkernel.rhai.errors import ErrorKind, Pos, RhaiRuntimeError
from agentkernel.rhai.runtime.values import IterVal, RangeVal, signature_type_name, type_name

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

STRING_TOO_LARGE = "Length of string"
ARRAY_TOO_LARGE = "Size of array/BLOB"
BLOB_TOO_LARGE = "Size of BLOB"
MAP_TOO_LARGE = "Size of object map"


def raw_type_name(value: Any) -> str:
    """The type as "Data type incorrect: …" shows the actual value: ranges by their Rust names."""
    kind = type(value)
    if kind is RangeVal:
        return "core::ops::range::RangeInclusive<i64>" if value.inclusive else "core::ops::range::Range<i64>"
    if kind is IterVal:
        return str(value.rust_name)
    return type_name(value)


def signature(name: str, args: Sequence[Any]) -> str:
    """`name (i64, &str | ImmutableString | String)`: how a failed call is named."""
    return f"{name} ({', '.join(signature_type_name(a) for a in args)})"


def function_not_found(name: str, args: Sequence[Any]) -> RhaiRuntimeError:
    """`Function not found: name (types…)`."""
    return not_found_text(signature(name, args))


def not_found_text(text: str, *, keyed: bool = True) -> RhaiRuntimeError:
    """`Function not found: <text>`, for the few cases whose text is not a signature
    (`keyed=False`: without the `function` key, as `curry` on a non-pointer has it)."""
    extras = {"function": text} if keyed else None
    return RhaiRuntimeError(ErrorKind.FUNCTION_NOT_FOUND, f"Function not found: {text}", extras=extras)


def arithmetic(message: str) -> RhaiRuntimeError:
    """ErrorArithmetic: overflow, division by zero, parse failures."""
    return RhaiRuntimeError(ErrorKind.ARITHMETIC, message)


def mismatch(expected: str, actual: str) -> RhaiRuntimeError:
    """`Data type incorrect: <actual> (expecting <expected>)`, with the `requested` and
    `actual` keys a `catch` sees (the reference's dump_fields adds them to every one)."""
    return RhaiRuntimeError(
        ErrorKind.MISMATCH_DATA_TYPE,
        f"Data type incorrect: {actual} (expecting {expected})",
        extras={"requested": expected, "actual": actual},
    )


class AssignedMismatch(RhaiRuntimeError):
    """A value of the wrong type stored into a string's character, an int's bit or a BLOB's
    byte. The reference finds out as it writes the value back, so it reports the `=`
    (`runtime.Runtime.index_set` moves it there), not the index."""


def assigned_mismatch(expected: str, actual: str) -> RhaiRuntimeError:
    """`s[1] = "X"`: `Data type incorrect: string (expecting char)`, at the `=`."""
    plain = mismatch(expected, actual)
    return AssignedMismatch(plain.kind, plain.message, extras=plain.extras)


def mismatch_output(actual: str, expected: str) -> RhaiRuntimeError:
    """`Output type incorrect: <actual> (expecting <expected>)`."""
    return RhaiRuntimeError(
        ErrorKind.MISMATCH_OUTPUT_TYPE, f"Output type incorrect: {actual} (expecting {expected})"
    )


def _bounds(kind: ErrorKind, message: str, length: int, index: int) -> RhaiRuntimeError:
    return RhaiRuntimeError(kind, message, extras={"length": length, "index": index})


def array_bounds(length: int, index: int) -> RhaiRuntimeError:
    """`Array index 5 out of bounds: only 2 elements in array` (BLOBs say the same)."""
    if length == 0:
        tail = "array is empty"
    elif length == 1:
        tail = "only 1 element in array"
    else:
        tail = f"only {length} elements in array"
    return _bounds(ErrorKind.ARRAY_BOUNDS, f"Array index {index} out of bounds: {tail}", length, index)


def string_bounds(length: int, index: int) -> RhaiRuntimeError:
    """`String index 3 out of bounds: only 3 characters in string`."""
    if length == 0:
        tail = "string is empty"
    elif length == 1:
        tail = "only 1 character in string"
    else:
        tail = f"only {length} characters in string"
    return _bounds(ErrorKind.STRING_BOUNDS, f"String index {index} out of bounds: {tail}", length, index)


def bit_bounds(index: int) -> RhaiRuntimeError:
    """`Bit-field index 64 out of bounds: only 64 bits in bit-field`."""
    message = f"Bit-field index {index} out of bounds: only 64 bits in bit-field"
    return _bounds(ErrorKind.BIT_FIELD_BOUNDS, message, 64, index)


def too_large(what: str, *, keyed: bool = True) -> RhaiRuntimeError:
    """`Length of string too large` and friends: uncatchable, like every limit
    (`keyed=False`: without the `type` key, as the size checks of the runtime have it)."""
    extras = {"type": what} if keyed else None
    return RhaiRuntimeError(ErrorKind.DATA_TOO_LARGE, f"{what} too large", extras=extras, catchable=False)


def data_limit(what: str, limit: int) -> RhaiRuntimeError:
    """The evaluation's data as a whole passed `max_data_size`: `limit` tells the host so."""
    return RhaiRuntimeError(
        ErrorKind.DATA_TOO_LARGE,
        f"{what} too large",
        extras={"type": what, "limit": limit},
        catchable=False,
    )


def too_many_operations() -> RhaiRuntimeError:
    return RhaiRuntimeError(ErrorKind.TOO_MANY_OPERATIONS, "Too many operations", catchable=False)


def stack_overflow() -> RhaiRuntimeError:
    return RhaiRuntimeError(ErrorKind.STACK_OVERFLOW, "Stack overflow", catchable=False)


def terminated() -> RhaiRuntimeError:
    """`Script terminated`: the deadline passed (pacing.py, compile_clock.py)."""
    return RhaiRuntimeError(ErrorKind.TERMINATED, "Script terminated", catchable=False)


def too_many_variables() -> RhaiRuntimeError:
    return RhaiRuntimeError(ErrorKind.TOO_MANY_VARIABLES, "Too many variables defined", catchable=False)


def variable_not_found(name: str) -> RhaiRuntimeError:
    return RhaiRuntimeError(
        ErrorKind.VARIABLE_NOT_FOUND, f"Variable not found: {name}", extras={"variable": name}
    )


def module_not_found(path: str, reason: str | None = None) -> RhaiRuntimeError:
    """`Module not found: lib`; `reason` says why a file that may exist was refused
    (an absolute path, `..` out of the folder, a symbolic link: the host's reader, module_files.py)."""
    text = f"Module not found: {path}" if reason is None else f"Module not found: {path} ({reason})"
    return RhaiRuntimeError(ErrorKind.MODULE_NOT_FOUND, text, extras={"module": path})


def in_module(path: str, inner: RhaiRuntimeError) -> RhaiRuntimeError:
    """`…\nin module 'lib'`: the module failed to compile or its top level failed."""
    return RhaiRuntimeError(
        ErrorKind.IN_MODULE,
        f"in module '{path}'",
        extras={"module": path},
        inner=inner,
        catchable=inner.catchable,
    )


def module_cycle(chain: Sequence[str]) -> RhaiRuntimeError:
    """A module imports itself, directly or through others: `a -> b -> a` (the reference recurses
    until its stack overflows; we name the cycle)."""
    cycle = " -> ".join(chain)
    return RhaiRuntimeError(ErrorKind.IN_MODULE, f"Cyclic import: {cycle}", extras={"module": chain[-1]})


def too_many_modules() -> RhaiRuntimeError:
    return RhaiRuntimeError(ErrorKind.TOO_MANY_MODULES, "Too many modules imported", catchable=False)


def unbound_this() -> RhaiRuntimeError:
    return RhaiRuntimeError(ErrorKind.UNBOUND_THIS, "'this' not bound")


def not_iterable() -> RhaiRuntimeError:
    return RhaiRuntimeError(ErrorKind.FOR, "For loop expects iterable type")


def non_pure_on_constant(name: str) -> RhaiRuntimeError:
    return RhaiRuntimeError(
        ErrorKind.NON_PURE_METHOD_CALL_ON_CONSTANT, f"Non-pure method '{name}' cannot be called on constant"
    )


def constant_assigned(name: str) -> RhaiRuntimeError:
    """`eval("X = 1")` where the caller's X is a constant (a script's own is a syntax error)."""
    return RhaiRuntimeError(ErrorKind.ASSIGNMENT_TO_CONSTANT, f"Cannot modify constant {name}")


def parsing(text: str, pos: Pos | None) -> RhaiRuntimeError:
    """ErrorParsing: `eval`'s text or `parse_json`'s input did not parse (`pos` NO_POS:
    the text carries the position, and the call site must not add its own)."""
    return RhaiRuntimeError(ErrorKind.PARSING, text, pos)


def dot_expr(message: str) -> RhaiRuntimeError:
    """ErrorDotExpr; the catch map repeats the message as `property`."""
    return RhaiRuntimeError(ErrorKind.DOT_EXPR, message, extras={"property": message})


def no_getter(obj: Any, prop: str) -> RhaiRuntimeError:
    return dot_expr(f"Unknown property '{prop}' - a getter is not registered for type '{type_name(obj)}'")


def no_setter(obj: Any, prop: str, value: Any) -> RhaiRuntimeError:
    return dot_expr(
        f"No writable property '{prop}' - a setter is not registered for type "
        f"'{type_name(obj)}' to handle '{type_name(value)}'"
    )


def no_indexer(obj: Any, index: Any, *value: Any) -> RhaiRuntimeError:
    """`Indexer unavailable: () [string]`, with ` = <value type>` when assigning."""
    text = f"{type_name(obj)} [{type_name(index)}]"
    if value:
        text += f" = {type_name(value[0])}"
    return RhaiRuntimeError(ErrorKind.INDEXING_TYPE, f"Indexer unavailable: {text}", extras={"type": text})


def in_function_call(caller: str, inner: RhaiRuntimeError) -> RhaiRuntimeError:
    """`…\\nin call to function 'map'`: a native's callback failed (uncatchable stays uncatchable)."""
    return call_level(f"in call to function '{caller}'", inner)


_CLOSURE_CALL = "in closure call"
_OF = " of "


def closure_call(name: str, source: str | None = None) -> str:
    """The call level label of the closure named `name` (`anon$…`): it reads `in closure
    call`, with ` (from 'lib')` when its script has a source, and its error's `function` is
    the closure's name, as the reference's `ErrorInFunctionCall` of the closure's
    `fn_def.name` (`dump_fields`)."""
    return f"{_CLOSURE_CALL}{from_source(source)}{_OF}{name}"


def from_source(source: str | None) -> str:
    """What a call level's line adds for a script with a source (the reference's
    `ErrorInFunctionCall` display): ` (from 'lib')`, or nothing."""
    return f"{_FROM}{source}')" if source else ""


_FROM = " (from '"


def call_level(label: str, inner: RhaiRuntimeError) -> RhaiRuntimeError:
    """`inner` seen one call level up, `label` the level's line (`in call to function 'f'`,
    or `closure_call`'s label, which shows as `in closure call`), ` (from 'lib')` after it
    when the call's script has a source: the error's `source`, and its inner levels say
    `@ 'lib'`."""
    prefix = "in call to function '"
    extras: dict[str, str] | None = None
    if label.startswith(_CLOSURE_CALL):
        label, _, name = label.rpartition(_OF)
        extras = {"function": name, **_source_of(label[len(_CLOSURE_CALL) :])}
    elif label.startswith(prefix):  # `in call to function 'f'`, ` (from 'lib')` when the script has a source
        name, _, rest = label[len(prefix) :].partition("'")
        extras = {"function": name, **_source_of(rest)}
    return RhaiRuntimeError(
        ErrorKind.IN_FUNCTION_CALL, label, extras=extras, inner=inner, catchable=inner.catchable
    )


def _source_of(rest: str) -> dict[str, str]:
    """`{"source": "lib"}` of a label's rest ` (from 'lib')`, else nothing."""
    return {"source": rest[len(_FROM) : -2]} if rest.startswith(_FROM) else {}


def runtime(text: str) -> RhaiRuntimeError:
    """`Runtime error: <text>`: what a Rust `Err("…".into())` becomes (a thrown string)."""
    return RhaiRuntimeError(ErrorKind.RUNTIME, f"Runtime error: {text}", value=text)


def thrown(value: Any, text: str) -> RhaiRuntimeError:
    """`throw value`; `text` is the value as a string (`Runtime error` alone when empty)."""
    message = f"Runtime error: {text}" if text else "Runtime error"
    return RhaiRuntimeError(ErrorKind.RUNTIME, message, value=value)


def host_failure(text: str) -> RhaiRuntimeError:
    """An `ErrorRuntime` of the host's (`eval is not available`): a map to `catch`, not a value."""
    return RhaiRuntimeError(ErrorKind.RUNTIME, text)


__all__ = [
    "ARRAY_TOO_LARGE",
    "BLOB_TOO_LARGE",
    "MAP_TOO_LARGE",
    "STRING_TOO_LARGE",
    "arithmetic",
    "array_bounds",
    "bit_bounds",
    "call_level",
    "closure_call",
    "constant_assigned",
    "data_limit",
    "dot_expr",
    "from_source",
    "function_not_found",
    "host_failure",
    "in_function_call",
    "in_module",
    "mismatch",
    "mismatch_output",
    "module_cycle",
    "module_not_found",
    "no_getter",
    "no_indexer",
    "no_setter",
    "non_pure_on_constant",
    "not_found_text",
    "not_iterable",
    "parsing",
    "raw_type_name",
    "runtime",
    "signature",
    "stack_overflow",
    "string_bounds",
    "terminated",
    "thrown",
    "too_large",
    "too_many_modules",
    "too_many_operations",
    "too_many_variables",
    "unbound_this",
    "variable_not_found",
]
