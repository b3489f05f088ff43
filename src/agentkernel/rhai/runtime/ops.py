"""Rhai's unary and binary operators on Python values (RHAI.md §4–§6).

Each operator is one function of two values, bound once by the compiler
through `BINARY`; the int-and-int (and same-type equality) case comes first
and stays small, everything else goes to a slow path that follows the
reference's dispatch: its built-in operators, then its registered operator
functions, then the rule that comparing different non-numeric types gives
false (or true for `!=`). What matches nothing is
`Function not found: + (bool, i64)`.

Errors carry no position: the runtime adds the call site's. Growing strings,
arrays, BLOBs and maps is not size-checked here (there is no context); the
runtime checks results, and only absurd sizes are refused (`HARD_MAX_SIZE`).
Work that grows with the operands (comparing or searching big arrays, long
strings) looks at the call's deadline as it goes (`pacing.py`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sized

from agentkernel.rhai.errors import RhaiRuntimeError
from agentkernel.rhai.runtime import pacing
from agentkernel.rhai.runtime.copying import clone
from agentkernel.rhai.runtime.failures import (
    ARRAY_TOO_LARGE,
    STRING_TOO_LARGE,
    arithmetic,
    function_not_found,
    too_large,
)
from agentkernel.rhai.runtime.numeric import (
    fdiv,
    feq,
    fge,
    fgt,
    fle,
    flt,
    fne,
    frem,
    int_div,
    int_neg,
    int_pow,
    int_rem,
    overflow,
    powf,
    shift_left,
    shift_right,
)
from agentkernel.rhai.runtime.printing import format_float_rust, to_string
from agentkernel.rhai.runtime.values import (
    TAGGED,
    TAGGED_CONTAINERS,
    Char,
    RangeVal,
    TaggedBlob,
    TaggedDict,
    TaggedList,
    Timestamp,
    plain,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

    Binary = Callable[[Any, Any], Any]  # annotations only

HARD_MAX_SIZE = 2**31  # no string, array or BLOB may grow past this, limits or not
_LONG_TEXT = 1 << 16  # comparing strings this long looks at the clock first
_CONTAINERS = frozenset({list, dict, bytearray, *TAGGED_CONTAINERS})
_NUMBERS = frozenset({int, float})


def _own(value: Any) -> Any:
    """A value about to be stored into a new container: containers are copied (values, not references)."""
    return clone(value) if type(value) in _CONTAINERS else value


def _unmatched(op: str, a: Any, b: Any) -> Any:
    """No operator for these types: `Function not found`, unless a tagged value made
    the difference (values.py, "value tags"): then the operator on the plain values."""
    if type(a) in TAGGED or type(b) in TAGGED:
        return BINARY[op](plain(a), plain(b))
    raise function_not_found(op, [a, b])


def _types_differ(op: str, a: Any, b: Any, result: bool) -> bool:
    """`result` for values of different types, which a tag alone does not make."""
    if type(a) in TAGGED or type(b) in TAGGED:
        return bool(BINARY[op](plain(a), plain(b)))
    return result


def utf8_lossy(blob: bytearray) -> str:
    """A BLOB as text, invalid UTF-8 replaced by U+FFFD (Rust `from_utf8_lossy`)."""
    return bytes(blob).decode("utf-8", errors="replace")


def _concat(a: str, b: str) -> str:
    if len(a) + len(b) > HARD_MAX_SIZE:
        raise too_large(STRING_TOO_LARGE)
    pacing.poll_size((len(a) + len(b)) // pacing.STRING_WORK)
    return a + b


def _joined(a: Sized, b: Sized) -> None:
    if len(a) + len(b) > HARD_MAX_SIZE:
        raise too_large(ARRAY_TOO_LARGE)


# -- timestamps ----------------------------------------------------------------------------------

_INSTANT_MAX = 9223372036854775807.0  # an Instant holds i64 seconds


def _ts_shift(ts: Timestamp, seconds: Any, sign: int) -> Timestamp:
    """`ts + n` / `ts - n`: whole seconds for an int, milliseconds (truncated) for a float."""
    if type(seconds) is float:
        return _ts_shift_float(ts, seconds, sign)
    if not -0x8000000000000000 <= int(ts.seconds) + sign * seconds <= 0x7FFFFFFFFFFFFFFF:
        verb = "adding" if sign > 0 else "subtracting"
        raise arithmetic(f"Timestamp overflow when {verb} {seconds} second(s)")
    return Timestamp(ts.seconds + sign * seconds)


def _ts_shift_float(ts: Timestamp, seconds: float, sign: int) -> Timestamp:
    if seconds < 0:
        sign, seconds = -sign, -seconds
    if seconds > _INSTANT_MAX:
        noun = "add" if sign > 0 else "subtract"
        raise arithmetic(f"Integer overflow for timestamp {noun}: {format_float_rust(seconds)}")
    delta = int(seconds * 1000.0) / 1000.0 if seconds == seconds else 0.0
    moved = ts.seconds + sign * delta
    if abs(moved) > _INSTANT_MAX:
        verb = "adding" if sign > 0 else "subtracting"
        raise arithmetic(f"Timestamp overflow when {verb} {format_float_rust(seconds)} second(s)")
    return Timestamp(moved)


# -- + - * / % ** ---------------------------------------------------------------------------------


def add(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        r = a + b
        if -0x8000000000000000 <= r <= 0x7FFFFFFFFFFFFFFF:
            return r
        raise overflow("+", a, b)
    return _add_slow(a, b)


def _add_slow(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta in _NUMBERS and tb in _NUMBERS:
        return float(a) + float(b)
    if ta is str:
        return _add_to_string(a, b)
    if tb is str:
        return _add_string_to(a, b)
    if ta is Char and tb is Char:
        return str.__str__(a) + str.__str__(b)
    if ta is list and tb is list:
        _joined(a, b)
        return clone(a) + clone(b)
    if ta is dict and tb is dict:
        merged = clone(a)
        merged.update(clone(b))
        return merged
    if ta is bytearray:
        if tb is bytearray:
            _joined(a, b)
            return a + b
        if tb is Char:
            return a + str(b).encode()
    if ta is Timestamp and tb in _NUMBERS:
        return _ts_shift(a, b, 1)
    return _unmatched("+", a, b)


def _add_to_string(a: str, b: Any) -> str:
    tb = type(b)
    if tb is str:
        return _concat(a, b)
    if b is None:
        return a
    if tb is bytearray:
        return _concat(a, utf8_lossy(b))
    return _concat(a, to_string(b))


def _add_string_to(a: Any, b: str) -> str:
    if a is None:
        return b
    if type(a) is bytearray:
        return _concat(utf8_lossy(a), b)
    return _concat(to_string(a), b)


def sub(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        r = a - b
        if -0x8000000000000000 <= r <= 0x7FFFFFFFFFFFFFFF:
            return r
        raise overflow("-", a, b)
    return _sub_slow(a, b)


def _sub_slow(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta in _NUMBERS and tb in _NUMBERS:
        return float(a) - float(b)
    if ta is str:
        if tb is str:
            return string_minus(a, b)
        if tb is Char:
            return a.replace(b, "")
    if ta is Timestamp:
        if tb is Timestamp:
            return a.seconds - b.seconds
        if tb in _NUMBERS:
            return _ts_shift(a, b, -1)
    return _unmatched("-", a, b)


def string_minus(a: str, b: str) -> str:
    """`s - t` removes every `t` from `s` (and, as in the reference, `"" - t` is `t`)."""
    if not b:
        return a
    if not a:
        return b
    pacing.poll_size(len(a) // pacing.STRING_WORK)
    return a.replace(b, "")


def mul(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        r = a * b
        if -0x8000000000000000 <= r <= 0x7FFFFFFFFFFFFFFF:
            return r
        raise overflow("*", a, b)
    if type(a) in _NUMBERS and type(b) in _NUMBERS:
        return float(a) * float(b)
    return _unmatched("*", a, b)


def _numeric(symbol: str, on_ints: Binary, on_floats: Callable[[float, float], Any]) -> Binary:
    """An operator on two numbers: ints stay ints, a float on either side makes both floats."""

    def operator(a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int:
            return on_ints(a, b)
        if type(a) in _NUMBERS and type(b) in _NUMBERS:
            return on_floats(float(a), float(b))
        return _unmatched(symbol, a, b)

    operator.__name__ = f"op {symbol}"
    return operator


div = _numeric("/", int_div, fdiv)
rem = _numeric("%", int_rem, frem)
power = _numeric("**", int_pow, powf)


# -- bits ------------------------------------------------------------------------------------------


def shl(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return shift_left(a, b)
    return _unmatched("<<", a, b)


def shr(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        return shift_right(a, b)
    return _unmatched(">>", a, b)


def bit_and(a: Any, b: Any) -> Any:
    ta = type(a)
    if ta is type(b) and (ta is int or ta is bool):
        return a & b
    return _unmatched("&", a, b)


def bit_or(a: Any, b: Any) -> Any:
    ta = type(a)
    if ta is type(b) and (ta is int or ta is bool):
        return a | b
    return _unmatched("|", a, b)


def bit_xor(a: Any, b: Any) -> Any:
    ta = type(a)
    if ta is type(b) and (ta is int or ta is bool):
        return a ^ b
    return _unmatched("^", a, b)


# -- comparisons -------------------------------------------------------------------------------------

_ORDERED = frozenset({int, bool, str, Char})
_TEXT = frozenset({str, Char})


def eq(a: Any, b: Any) -> bool:
    ta = type(a)
    if ta is type(b) and (ta is int or ta is str or ta is bool):
        if ta is str and len(a) >= _LONG_TEXT:
            pacing.poll()
        return bool(a == b)
    return _eq_slow(a, b)


def _eq_slow(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if ta in _NUMBERS and tb in _NUMBERS:
        return feq(float(a), float(b))
    if ta in _TEXT and tb in _TEXT:
        return bool(a == b)
    if ta is not tb:
        return _types_differ("==", a, b, False)  # unequal, unless a tag made the difference
    if a is None:
        return True
    if ta is list:
        return array_equals(a, b)
    if ta is dict:
        return map_equals(a, b)
    if ta is bytearray:
        return bool(a == b)
    if ta is RangeVal:
        if a.inclusive is not b.inclusive:
            return bool(_unmatched("==", a, b))
        return bool(a.start == b.start and a.end == b.end)
    if ta is Timestamp:
        return bool(a.seconds == b.seconds)
    return bool(_unmatched("==", a, b))


def ne(a: Any, b: Any) -> bool:
    ta = type(a)
    if ta is type(b) and (ta is int or ta is str or ta is bool):
        if ta is str and len(a) >= _LONG_TEXT:
            pacing.poll()
        return bool(a != b)
    return _ne_slow(a, b)


def _ne_slow(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if ta in _NUMBERS and tb in _NUMBERS:
        return fne(float(a), float(b))
    if ta in _TEXT and tb in _TEXT:
        return bool(a != b)
    if ta is not tb or a is None:
        return _types_differ("!=", a, b, a is not None or b is not None)
    if ta is list:
        return not array_equals(a, b)
    if ta is dict:
        return not map_equals(a, b)
    if ta is bytearray or ta is RangeVal:
        return bool(a != b)
    if ta is Timestamp:
        return bool(a.seconds != b.seconds)
    return bool(_unmatched("!=", a, b))


def _compare_slow(op: str, a: Any, b: Any, ints: Binary, floats: Binary) -> bool:
    """`< <= > >=` beyond two ints: same-type ordered values, numbers (with epsilon),
    timestamps; unequal types give false; ranges, arrays, maps, BLOBs and Fn have no order."""
    ta, tb = type(a), type(b)
    if ta is tb and ta in _ORDERED:
        if ta is str and len(a) >= _LONG_TEXT:
            pacing.poll()
        return bool(ints(a, b))
    if ta in _NUMBERS and tb in _NUMBERS:
        return bool(floats(float(a), float(b)))
    if ta in _TEXT and tb in _TEXT:
        return bool(ints(a, b))
    if ta is not tb or a is None:
        return _types_differ(op, a, b, False)
    if ta is Timestamp:
        return bool(ints(a.seconds, b.seconds))
    return bool(_unmatched(op, a, b))


def lt(a: Any, b: Any) -> bool:
    if type(a) is int and type(b) is int:
        return bool(a < b)
    return _compare_slow("<", a, b, operator.lt, flt)


def le(a: Any, b: Any) -> bool:
    if type(a) is int and type(b) is int:
        return bool(a <= b)
    return _compare_slow("<=", a, b, operator.le, fle)


def gt(a: Any, b: Any) -> bool:
    if type(a) is int and type(b) is int:
        return bool(a > b)
    return _compare_slow(">", a, b, operator.gt, fgt)


def ge(a: Any, b: Any) -> bool:
    if type(a) is int and type(b) is int:
        return bool(a >= b)
    return _compare_slow(">=", a, b, operator.ge, fge)


def equals(a: Any, b: Any) -> bool:
    """`a == b` as Rhai decides it (raising where `==` is not defined, e.g. for two Fn)."""
    return eq(a, b)


def element_equals(a: Any, b: Any) -> bool:
    """`==` between two elements of arrays being compared or searched: a missing
    `==` counts as unequal when the types differ, and fails when they are the same."""
    try:
        return eq(a, b)
    except RhaiRuntimeError:
        if type(a) is type(b) and (type(a) is not RangeVal or a.inclusive is b.inclusive):
            raise
        return False


def array_equals(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    return all(element_equals(x, y) for x, y in zip(pacing.paced(a), b, strict=True))


def map_equals(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Maps are equal when they have the same keys and `==` values (errors propagate)."""
    if len(a) != len(b):
        return False
    return all(key in b and eq(a[key], b[key]) for key in pacing.paced(list(a)))


# -- ranges and membership ----------------------------------------------------------------------------


def make_range(a: Any, b: Any) -> RangeVal:
    if type(a) is int and type(b) is int:
        return RangeVal(a, b)
    range_: RangeVal = _unmatched("..", a, b)
    return range_


def make_inclusive_range(a: Any, b: Any) -> RangeVal:
    if type(a) is int and type(b) is int:
        return RangeVal(a, b, True)
    range_: RangeVal = _unmatched("..=", a, b)
    return range_


def contains(container: Any, item: Any) -> bool:
    """`contains(container, item)`, which `item in container` means (RHAI.md §4)."""
    kind, ik = type(container), type(item)
    if kind is list:
        return any(element_equals(x, item) for x in pacing.paced(container))
    if kind is dict and ik is str:
        return item in container
    if kind is str and ik in _TEXT:
        pacing.poll_size(len(container) // pacing.STRING_WORK)
        return item in container
    if kind is RangeVal and ik is int:
        if container.inclusive:
            return bool(container.start <= item <= container.end)
        return bool(container.start <= item < container.end)
    if kind is bytearray and ik is int:
        return (item & 0xFF) in container
    if kind in TAGGED or ik in TAGGED:
        return contains(plain(container), plain(item))
    raise function_not_found("contains", [container, item])


def is_in(a: Any, b: Any) -> bool:
    return contains(b, a)


def not_in(a: Any, b: Any) -> bool:
    return not contains(b, a)


# -- unary --------------------------------------------------------------------------------------------


def negate(value: Any) -> Any:
    kind = type(value)
    if kind is int:
        return int_neg(value)
    if kind is float:
        return -value
    if type(value) in TAGGED:
        return negate(plain(value))
    raise function_not_found("-", [value])


def plus(value: Any) -> Any:
    if type(value) in _NUMBERS:
        return value
    if type(value) in TAGGED:
        return plus(plain(value))
    raise function_not_found("+", [value])


def logical_not(value: Any) -> bool:
    if type(value) is bool:
        return not value
    if type(value) in TAGGED:
        return logical_not(plain(value))
    raise function_not_found("!", [value])


UNARY: dict[str, Callable[[Any], Any]] = {"-": negate, "+": plus, "!": logical_not}

BINARY: dict[str, Binary] = {
    "+": add,
    "-": sub,
    "*": mul,
    "/": div,
    "%": rem,
    "**": power,
    "<<": shl,
    ">>": shr,
    "&": bit_and,
    "|": bit_or,
    "^": bit_xor,
    "==": eq,
    "!=": ne,
    "<": lt,
    "<=": le,
    ">": gt,
    ">=": ge,
    "..": make_range,
    "..=": make_inclusive_range,
    "in": is_in,
    "!in": not_in,
}


def binary(op: str, a: Any, b: Any) -> Any:
    """`a op b` for any binary operator symbol (the compiler binds `BINARY[op]` directly)."""
    return BINARY[op](a, b)


def unary(op: str, value: Any) -> Any:
    """`-x`, `+x`, `!x`."""
    return UNARY[op](value)


# -- compound assignment --------------------------------------------------------------------------------


def compound(op: str, a: Any, b: Any) -> Any:
    """The new value of `a` after `a op= b` (`op` given as "+" or "+=").

    The same as `a op b`, except that `+=` appends in place: an array pushes
    one element (concatenates another array), a map mixes in another map,
    a BLOB appends a byte, BLOB, string or char, and a char followed by a
    non-empty string becomes a string. Lists, maps and BLOBs are changed in
    place and returned; the runtime checks the size of what comes back.
    """
    if op[-1] == "=" and len(op) > 1:
        op = op[:-1]
    if op == "+":
        kind = type(a)
        if kind is list or kind is TaggedList:  # in place: a tagged array keeps its tag
            return _push_or_extend(a, b)
        if kind is bytearray or kind is TaggedBlob:  # in place: a tagged BLOB keeps its tag
            appended = _blob_append(a, b)
            if appended is not None:
                return appended
        elif (kind is dict or kind is TaggedDict) and (type(b) is dict or type(b) is TaggedDict):
            a.update(clone(b))
            return a
        elif kind is Char and type(b) is str and not b:
            return a
    return BINARY[op](a, b)


_ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "**"})
# per pair of operand types, the operators the reference's `x op= y` runs itself (its
# eval_op_assignment and get_builtin_op_assignment_fn): no native's call counted
_BUILTIN_ASSIGNMENTS: dict[tuple[type, type], frozenset[str]] = {
    (int, int): frozenset({*_ARITHMETIC, "<<", ">>", "&", "|", "^"}),
    (float, float): _ARITHMETIC,
    (float, int): _ARITHMETIC,
    (bool, bool): frozenset({"&", "|", "^"}),
    (Char, Char): frozenset({"+"}),
    (str, str): frozenset({"+", "-"}),
    (str, Char): frozenset({"+", "-"}),
    (Char, str): frozenset({"+"}),
    (bytearray, bytearray): frozenset({"+"}),
    (bytearray, int): frozenset({"+"}),
    (bytearray, Char): frozenset({"+"}),
    (bytearray, str): frozenset({"+"}),
}
# and those its library has an `op=` function for (string_more.rs, map_basic.rs, time_basic.rs)
_LIBRARY_ASSIGNMENTS: dict[tuple[type, type], frozenset[str]] = {
    (dict, dict): frozenset({"+"}),
    (Timestamp, int): frozenset({"+", "-"}),
    (Timestamp, float): frozenset({"+", "-"}),
}


def compound_calls(op: str, a: Any, b: Any) -> int:
    """The natives' calls the reference counts for `a op= b` (`op` as "+="): none for its
    built-ins, 1 for an `op=` function of its library (a string's `+=` of any other value, a
    map's, a timestamp's), else 2: `op=` looked for in vain, then `op` called."""
    op = op[:-1] if op[-1] == "=" else op
    left, right = TAGGED.get(type(a), type(a)), TAGGED.get(type(b), type(b))
    if (left is list and op == "+") or op in _BUILTIN_ASSIGNMENTS.get((left, right), ()):
        return 0
    if op in _LIBRARY_ASSIGNMENTS.get((left, right), ()) or (left is str and op == "+"):
        return 1
    return 2


def _push_or_extend(a: list[Any], b: Any) -> list[Any]:
    if type(b) is list or type(b) is TaggedList:
        _joined(a, b)
        a.extend(clone(b))
    else:
        a.append(_own(b))
    return a


def _blob_append(a: bytearray, b: Any) -> bytearray | None:
    kind = type(b)
    if kind is int:
        a.append(b & 0xFF)
    elif kind is bytearray:
        _joined(a, b)
        a.extend(b)
    elif kind is str or kind is Char:
        data = str(b).encode()
        _joined(a, data)
        a.extend(data)
    elif kind in TAGGED:
        return _blob_append(a, plain(b))
    else:
        return None
    return a


__all__ = [
    "BINARY",
    "HARD_MAX_SIZE",
    "UNARY",
    "array_equals",
    "binary",
    "compound",
    "contains",
    "element_equals",
    "equals",
    "map_equals",
    "string_minus",
    "unary",
    "utf8_lossy",
]
