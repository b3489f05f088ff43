"""Compile-time rules the reference parser applies to expressions it has built.

The reference rejects some scripts by looking at the *shape* of a parsed
expression rather than at the next token: a literal that can never be a
bool used as a condition, a map literal as a `for` iterable, a non-literal
switch case, a literal index of the wrong type, an assignment to something
that is not a variable chain. These checks only need the AST, so they live
here, apart from the token-driven parser (parser.py).
"""

from __future__ import annotations

from enum import Enum

from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.literals import Char
from agentkernel.rhai.syntax.words import is_valid_function_name

I64_MAX = (1 << 63) - 1


def literal_kind(expr: ast.Expr) -> str | None:
    """How the reference names a literal's type in "Expecting …, not <kind>"."""
    if isinstance(expr, ast.Literal):
        value = expr.value
        if value is None:
            return "()"
        kind = type(value)
        if kind is bool:
            return "a boolean"
        if kind is int:
            return "a number"
        if kind is float:
            return "a floating-point number"
        if kind is Char:
            return "a character"
        return "a string"
    if isinstance(expr, ast.Interpolated):
        return "a string"
    if isinstance(expr, ast.ArrayLit):
        return "an array"
    if isinstance(expr, ast.MapLit):
        return "an object map"
    return None


def bool_mismatch(expr: ast.Expr) -> str | None:
    """The type named in "Expecting a boolean expression, not …", or None if fine."""
    kind = literal_kind(expr)
    return None if kind == "a boolean" else kind


def iterable_mismatch(expr: ast.Expr) -> str | None:
    """The type named in "Expecting an iterable value, not …", or None if fine.

    Strings, arrays and interpolated strings iterate, so only scalar literals
    and map literals are rejected.
    """
    kind = literal_kind(expr)
    return None if kind in (None, "a string", "an array") else kind


def index_type_error(target: ast.Expr, index: ast.Expr) -> str | None:
    """The message for a literal index that cannot suit a literal target.

    Only literal maps, arrays, strings and integers are checked, and only a
    literal (or `&&`/`||`) index, exactly as the reference does.
    """
    kind = _index_kind(index)
    if kind is None:
        return None
    if isinstance(target, ast.MapLit):
        if kind == "a string":
            return None
        return f"Object map expects string index, not {_short(kind)}"
    if _is_sequence_literal(target):
        if kind == "a number":
            return None
        if kind == "a string":
            return "Array, string or bit-field expects numeric index, not a string"
        return f"Array, string or bit-field expects integer index, not {_short(kind)}"
    return None


def _index_kind(index: ast.Expr) -> str | None:
    if isinstance(index, ast.And | ast.Or):
        return "a boolean"
    if isinstance(index, ast.ArrayLit | ast.MapLit):
        return None
    return literal_kind(index)


def _short(kind: str) -> str:
    return {"a floating-point number": "a float"}.get(kind, kind)


def _is_sequence_literal(expr: ast.Expr) -> bool:
    if isinstance(expr, ast.ArrayLit | ast.Interpolated):
        return True
    return isinstance(expr, ast.Literal) and type(expr.value) in (int, str)


def is_constant(expr: ast.Expr) -> bool:
    """A literal, or an array/map literal made only of literals."""
    if isinstance(expr, ast.Literal):
        return True
    if isinstance(expr, ast.ArrayLit):
        return all(is_constant(item) for item in expr.items)
    if isinstance(expr, ast.MapLit):
        return all(is_constant(value) for _, value in expr.items)
    return False


class CaseKind(Enum):
    """What a switch pattern's literal value is, for the case-order rules."""

    RANGE = "range"
    EMPTY_RANGE = "empty range"
    NUMBER = "number"
    OTHER = "other"


def case_kind(pattern: ast.Expr) -> CaseKind | None:
    """The kind of a switch pattern's value; None when it is not a literal."""
    if isinstance(pattern, ast.Literal):
        return CaseKind.NUMBER if type(pattern.value) in (int, float) else CaseKind.OTHER
    if isinstance(pattern, ast.ArrayLit | ast.MapLit):
        return CaseKind.OTHER if is_constant(pattern) else None
    if isinstance(pattern, ast.Binary) and pattern.op in ("..", "..="):
        return _range_kind(pattern)
    if isinstance(pattern, ast.Call) and _is_fn_pointer_literal(pattern):
        return CaseKind.OTHER
    return None


def _range_kind(pattern: ast.Binary) -> CaseKind | None:
    """`a..b` of int literals; a `()` end means 0 (start) or i64::MAX (end)."""
    start, end = _range_end(pattern.left), _range_end(pattern.right)
    if start is None or end is None or (start == "()" and end == "()"):
        return None
    low = 0 if start == "()" else start
    high = I64_MAX if end == "()" else end
    assert isinstance(low, int) and isinstance(high, int)
    empty = low > high if pattern.op == "..=" else low >= high
    return CaseKind.EMPTY_RANGE if empty else CaseKind.RANGE


def _range_end(expr: ast.Expr) -> int | str | None:
    if isinstance(expr, ast.Literal):
        if expr.value is None:
            return "()"
        if type(expr.value) is int:
            return expr.value
    return None


def _is_fn_pointer_literal(call: ast.Call) -> bool:
    if call.name != "Fn" or call.namespace is not None or len(call.args) != 1:
        return False
    arg = call.args[0]
    return isinstance(arg, ast.Literal) and type(arg.value) is str and is_valid_function_name(arg.value)


def invalid_lvalue(target: ast.Property | ast.MethodCall | ast.Index) -> ast.Pos | None:
    """Where "Expression cannot be assigned to" is reported for a chain target.

    A chain can be assigned to only if it is made of properties and indexes
    and is rooted in a variable or `this`. The first method call from the
    root is reported at its name; otherwise a bad root at its own position.
    """
    links: list[ast.Property | ast.MethodCall | ast.Index] = []
    node: ast.Expr = target
    while isinstance(node, ast.Property | ast.MethodCall | ast.Index):
        links.append(node)
        node = node.target
    for link in reversed(links):
        if isinstance(link, ast.MethodCall):
            return link.pos
    if isinstance(node, ast.Var | ast.This):
        return None
    return ast.expr_pos(node)


__all__ = [
    "CaseKind",
    "bool_mismatch",
    "case_kind",
    "index_type_error",
    "invalid_lvalue",
    "is_constant",
    "iterable_mismatch",
    "literal_kind",
]
