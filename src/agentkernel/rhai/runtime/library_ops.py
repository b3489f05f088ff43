"""Operators the reference runs as library functions, and the operations they count there.

The reference calls a built-in operator directly when one exists for the
operands' types (its `get_builtin_binary_op_fn`: numbers, strings and
characters, bools, a comparison of two different types); otherwise the
operator is a function of its library, called through `exec_native_fn_call`,
which counts one operation, and that function may call more natives on a
copy of its state (`==` of arrays calls `==` on their items, `+` of a string
and a number calls `to_string`). `x in y` is always such a call (of
`contains`). A custom type (a timestamp, a range) never has a built-in.

The compiler's slow path of a binary operator is `counted(op)`'s function:
it counts what the reference counts for the operands it meets (the fast
paths only ever meet built-ins). Its optimizer folds only built-ins too
(analysis/folding.py uses `has_builtin`).
"""

from __future__ import annotations

from collections.abc import Callable

from agentkernel.rhai.runtime import ops
from agentkernel.rhai.runtime.printing import calls_to_format
from agentkernel.rhai.runtime.values import TAGGED, Char, RangeVal, Timestamp

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any, Protocol
else:  # a plain base at run time: `Counter` is structural only (nothing subclasses it or
    # checks `isinstance` against it), and `typing.Protocol` would import `typing`
    Protocol = object

_SCALARS = frozenset({int, float, bool, str, type(None)})
_NUMBERS = frozenset({int, float})
_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
_CALLED = frozenset({"in", "!in"})  # `x in y` is `contains(y, x)` there, a function's call
_UNIT_AND_STRING = frozenset({type(None), str})
# custom types: as operands of an operator the reference never looks for a built-in
# (`eval_fn_call_expr`, its "fast operators"), though its optimizer may fold one
_VARIANTS = frozenset({Timestamp, RangeVal})
_NOT_PRINTED = frozenset({Char, type(None), bytearray})  # `+` with a string: no `to_string` call


def has_builtin(op: str, left: type, right: type) -> bool:
    """Whether the reference has a built-in operator for these operand types (its
    `get_builtin_binary_op_fn`), the only ones its optimizer calls: numbers, strings and
    characters, bools, `()`, BLOBs (`+`, `==`, `!=`), ranges (`==`, `!=`), and any
    comparison of two different types (always false, or true for `!=`). `"a" + 1` is a
    library function there, evaluated at run time."""
    if op in _CALLED:
        return False
    if left is right:
        if left in _SCALARS or left is Char:
            return True
        return op in _BUILT_IN_OF.get(left, ())
    if {left, right} <= _NUMBERS or {left, right} == {str, Char}:
        return True
    if {left, right} == _UNIT_AND_STRING:
        return op == "+" or op in _COMPARISONS
    if left is bytearray and right is Char:
        return op == "+"
    return op in _COMPARISONS


_BUILT_IN_OF: dict[type, frozenset[str]] = {
    bytearray: frozenset({"+", "==", "!="}),
    RangeVal: frozenset({"==", "!="}),
}


def same(left: Any, right: Any) -> bool:
    """Equal and of the same types all through (`1` is not `1.0` nor `true` there)."""
    if type(left) is not type(right):
        return False
    if type(left) is list:
        return len(left) == len(right) and all(map(same, left, right))
    if type(left) is dict:
        return left.keys() == right.keys() and all(same(left[k], right[k]) for k in left)
    return bool(left == right)


def library_operator_calls(op: str, left: Any, right: Any) -> int:
    """How deep the library function of an operator nests calls of natives, each counted on
    a copy of the reference's state: `==` of arrays or maps calls `==` on their items
    (array_basic.rs, map_basic.rs `equals`), `+` of a string and another value its
    `to_string` (string_more.rs `add_append`), `in` an array `==` on its items up to the
    one found."""
    if op in ("==", "!="):
        return _equals_calls(left, right)
    if op in _CALLED and _plain(right) is list:  # `contains` compares the items with `==`
        deepest = 0
        for item in right:
            deepest = max(deepest, 1 + _equals_calls(item, left))
            if same(item, left):
                break
        return deepest
    if op == "+" and (_plain(left) is str) is not (_plain(right) is str):
        other = right if _plain(left) is str else left
        return 0 if _plain(other) in _NOT_PRINTED else 1 + calls_to_format(other)
    return 0


def _plain(value: Any) -> type:
    kind = type(value)
    return TAGGED.get(kind, kind)


def _equals_calls(left: Any, right: Any) -> int:
    """The natives' nesting of `left == right` on arrays or maps: 1 an item compared, as
    deep as the deepest of them, up to the first unequal one (none when the sizes differ)."""
    if _plain(left) is list and _plain(right) is list and len(left) == len(right):
        pairs = list(zip(left, right, strict=True))
    elif _plain(left) is dict and _plain(right) is dict and len(left) == len(right):
        pairs = [(left[key], right.get(key, _MISSING)) for key in sorted(left)]
    else:
        return 0
    deepest = 0
    for mine, theirs in pairs:
        if theirs is _MISSING:
            break
        deepest = max(deepest, 1 + _equals_calls(mine, theirs))
        if not same(mine, theirs):
            break
    return deepest


_MISSING: Any = object()


class Counter(Protocol):
    """What a counted operator needs of the runtime."""

    def count(self, n: int) -> None: ...

    def count_apart(self, operations: int) -> None: ...


def counted(op: str) -> Callable[[Any, Any, Counter, bool], Any]:
    """The slow path compiled code calls for `a op b`: when the reference has no built-in
    for the operands, 1 for its library function's call and, when `last` (nothing is
    counted after it there), the natives that function calls on a copy of its state."""
    operator = ops.BINARY[op]

    def slow(a: Any, b: Any, rt: Counter, last: bool = False) -> Any:
        left, right = type(a), type(b)
        if left is right and left in _SCALARS:
            return operator(a, b)
        left, right = TAGGED.get(left, left), TAGGED.get(right, right)
        if left in _VARIANTS or right in _VARIANTS or not has_builtin(op, left, right):
            rt.count(1)
            if last:
                rt.count_apart(library_operator_calls(op, a, b))
        return operator(a, b)

    slow.__name__ = slow.__qualname__ = f"counted_{ops.BINARY[op].__name__}"
    return slow


__all__ = ["counted", "has_builtin", "library_operator_calls", "same"]
