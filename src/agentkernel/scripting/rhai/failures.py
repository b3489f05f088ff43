"""The reference's run-time errors, built with its exact texts (RHAI.md §12, §15).

Operators and natives raise these without a position; the runtime adds the
call site's. Each constructor names one `EvalAltResult` variant of Rhai 1.25
and fills the extra keys a `catch` map shows for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentkernel.scripting.rhai.errors import RhaiRuntimeError
from agentkernel.scripting.rhai.values import IterVal, RangeVal, signature_type_name, type_name

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


def not_found_text(text: str) -> RhaiRuntimeError:
    """`Function not found: <text>`, for the few cases whose text is not a signature."""
    return RhaiRuntimeError("ErrorFunctionNotFound", f"Function not found: {text}", extras={"function": text})


def arithmetic(message: str) -> RhaiRuntimeError:
    """ErrorArithmetic: overflow, division by zero, parse failures."""
    return RhaiRuntimeError("ErrorArithmetic", message)


def mismatch(expected: str, actual: str) -> RhaiRuntimeError:
    """`Data type incorrect: <actual> (expecting <expected>)`."""
    return RhaiRuntimeError(
        "ErrorMismatchDataType",
        f"Data type incorrect: {actual} (expecting {expected})",
        extras={"requested": expected, "actual": actual},
    )


def _bounds(kind: str, message: str, length: int, index: int) -> RhaiRuntimeError:
    return RhaiRuntimeError(kind, message, extras={"length": length, "index": index})


def array_bounds(length: int, index: int) -> RhaiRuntimeError:
    """`Array index 5 out of bounds: only 2 elements in array` (BLOBs say the same)."""
    if length == 0:
        tail = "array is empty"
    elif length == 1:
        tail = "only 1 element in array"
    else:
        tail = f"only {length} elements in array"
    return _bounds("ErrorArrayBounds", f"Array index {index} out of bounds: {tail}", length, index)


def string_bounds(length: int, index: int) -> RhaiRuntimeError:
    """`String index 3 out of bounds: only 3 characters in string`."""
    if length == 0:
        tail = "string is empty"
    elif length == 1:
        tail = "only 1 character in string"
    else:
        tail = f"only {length} characters in string"
    return _bounds("ErrorStringBounds", f"String index {index} out of bounds: {tail}", length, index)


def bit_bounds(index: int) -> RhaiRuntimeError:
    """`Bit-field index 64 out of bounds: only 64 bits in bit-field`."""
    message = f"Bit-field index {index} out of bounds: only 64 bits in bit-field"
    return _bounds("ErrorBitFieldBounds", message, 64, index)


def too_large(what: str) -> RhaiRuntimeError:
    """`Length of string too large` and friends: uncatchable, like every limit."""
    return RhaiRuntimeError("ErrorDataTooLarge", f"{what} too large", extras={"type": what}, catchable=False)


def dot_expr(message: str) -> RhaiRuntimeError:
    """ErrorDotExpr; the catch map repeats the message as `property`."""
    return RhaiRuntimeError("ErrorDotExpr", message, extras={"property": message})


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
    return RhaiRuntimeError("ErrorIndexingType", f"Indexer unavailable: {text}", extras={"type": text})


def in_function_call(caller: str, inner: RhaiRuntimeError) -> RhaiRuntimeError:
    """`…\\nin call to function 'map'`: a native's callback failed (uncatchable stays uncatchable)."""
    return RhaiRuntimeError(
        "ErrorInFunctionCall",
        f"in call to function '{caller}'",
        extras={"function": caller},
        inner=inner,
        catchable=inner.catchable,
    )


def runtime(text: str) -> RhaiRuntimeError:
    """`Runtime error: <text>`: what a Rust `Err("…".into())` becomes (a thrown string)."""
    return RhaiRuntimeError("ErrorRuntime", f"Runtime error: {text}", value=text)


__all__ = [
    "ARRAY_TOO_LARGE",
    "BLOB_TOO_LARGE",
    "MAP_TOO_LARGE",
    "STRING_TOO_LARGE",
    "arithmetic",
    "array_bounds",
    "bit_bounds",
    "dot_expr",
    "function_not_found",
    "in_function_call",
    "mismatch",
    "no_getter",
    "no_indexer",
    "no_setter",
    "not_found_text",
    "raw_type_name",
    "runtime",
    "signature",
    "string_bounds",
    "too_large",
]
