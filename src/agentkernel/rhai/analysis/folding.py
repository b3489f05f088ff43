"""Which expressions the reference's optimizer folds to a constant (operation counts).

The reference Rhai optimizes every script (level Simple) before running it:
an operator whose operands are constants is evaluated once, at compile time,
and the expression becomes one constant, which costs one operation where the
tree it replaced cost one per node (`40 + 2` counts 2 there: the statement
and the constant). So that `max_operations` means about the same in both,
the facts pass (facts.py: `ops`) counts a folded expression as one node. Only the count
is affected: the generated code still computes the value (CPython folds
most of it again).

The rules follow `optimize_expr` in the reference's `optimizer.rs`: literals;
arrays, maps and interpolated strings of constants; `!` of a bool; a binary
operator on two constants when it succeeds (`1 / 0` is not folded, so it still
fails where it stands); `&&`, `||` and `??` of constants; `type_of` of a
constant; `Fn("name")`; a block holding a single constant expression; an `if`
or a `switch` on a constant whose arm taken is a constant. (A closure that
captures nothing is a constant pointer too: facts.py knows which.)
"""

from __future__ import annotations

from typing import Any

from agentkernel.rhai.runtime import ops
from agentkernel.rhai.runtime.library_ops import has_builtin, same
from agentkernel.rhai.runtime.printing import to_string
from agentkernel.rhai.runtime.values import Char, FnPtr, type_name
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.words import is_valid_function_name

NOT_CONSTANT: Any = object()  # the fold of an expression that is not a constant


def fold(node: Any, memo: dict[int, Any] | None = None) -> Any:
    """The constant `node` folds to, or NOT_CONSTANT. `memo` (id → fold) keeps repeated
    questions about the nodes of one tree linear."""
    if memo is None:
        memo = {}
    key = id(node)
    if key not in memo:
        memo[key] = _fold(node, memo)
    return memo[key]


def _fold(node: Any, memo: dict[int, Any]) -> Any:
    kind = type(node)
    if kind is ast.Literal:
        return node.value
    if kind is ast.ArrayLit:
        items = [fold(item, memo) for item in node.items]
        return NOT_CONSTANT if any(item is NOT_CONSTANT for item in items) else items
    if kind is ast.MapLit:
        values = [fold(value, memo) for _, value in node.items]
        if any(value is NOT_CONSTANT for value in values):
            return NOT_CONSTANT
        return {key: value for (key, _), value in zip(node.items, values, strict=True)}
    if kind is ast.Unary:
        return _fold_unary(node, memo)
    if kind is ast.Binary:
        return _fold_binary(node.op, fold(node.left, memo), fold(node.right, memo))
    if kind is ast.And or kind is ast.Or:
        left, right = fold(node.left, memo), fold(node.right, memo)
        if type(left) is not bool or type(right) is not bool:
            return NOT_CONSTANT
        return (left and right) if kind is ast.And else (left or right)
    if kind is ast.Interpolated:
        return _fold_interpolated(node, memo)
    if kind is ast.Block and len(node.stmts) == 1 and isinstance(node.stmts[0], ast.ExprStmt):
        return fold(node.stmts[0].expr, memo)
    if kind is ast.If:
        return _fold_if(node, memo)
    if kind is ast.Switch:
        return _fold_switch(node, memo)
    if (kind is ast.Property or kind is ast.Index) and not node.optional:
        return _fold_link(node, memo)
    if kind is ast.Call and node.name == "type_of" and node.namespace is None and len(node.args) == 1:
        return _type_of(fold(node.args[0], memo))
    if kind is ast.MethodCall and node.name == "type_of" and not node.args and not node.optional:
        return _type_of(fold(node.target, memo))
    if kind is ast.Call and node.name == "Fn" and node.namespace is None and len(node.args) == 1:
        name = fold(node.args[0], memo)  # `Fn("f")`: a constant pointer, when `f` may be a name
        return FnPtr(name) if type(name) is str and is_valid_function_name(name) else NOT_CONSTANT
    return NOT_CONSTANT


_LITERALS = frozenset({ast.MapLit, ast.ArrayLit, ast.Literal})
_INT_BITS = 64


def _fold_link(node: ast.Property | ast.Index, memo: dict[int, Any]) -> Any:
    """A property or an index of a literal, one step (the reference's optimizer folds none
    inside a longer chain): a map's item (`()` when absent), an array's item in range, an
    integer's bit, a string's character."""
    if type(node.target) not in _LITERALS:
        return NOT_CONSTANT
    target = fold(node.target, memo)
    if isinstance(node, ast.Property):
        return target.get(node.name) if type(target) is dict else NOT_CONSTANT
    index = fold(node.index, memo)
    if type(target) is dict and type(index) is str:
        return target.get(index)
    if type(index) is not int or type(target) not in (list, int, str):
        return NOT_CONSTANT
    size = _INT_BITS if type(target) is int else len(target)
    if not -size <= index < size:
        return NOT_CONSTANT
    if type(target) is int:
        return bool(target >> (index % _INT_BITS) & 1)
    return Char(target[index]) if type(target) is str else target[index]


def _fold_if(node: ast.If, memo: dict[int, Any]) -> Any:
    """`if` on a constant: the branch taken, when it is a constant (`()` when there is none)."""
    cond = fold(node.cond, memo)
    if type(cond) is not bool:
        return NOT_CONSTANT
    branch = node.then if cond else node.otherwise
    if branch is None or (type(branch) is ast.Block and not branch.stmts):
        return None
    return fold(branch, memo)


_SWITCHED = frozenset({list, dict})  # the constants a `switch` on one is folded for


def _fold_switch(node: ast.Switch, memo: dict[int, Any]) -> Any:
    """`switch` on a constant array or map with plain constant cases: the arm taken, when it
    is a constant (`()` when no arm is); an arm with a condition or a range is left alone.
    The reference's optimizer folds only a subject it made a `Dynamic` constant (its
    `is_hashable_constant`): a literal int, string, char or bool is left to run."""
    subject = fold(node.subject, memo)
    if type(subject) not in _SWITCHED:
        return NOT_CONSTANT
    for case in node.cases:
        for pattern in case.patterns:
            value = fold(pattern, memo)
            if value is NOT_CONSTANT or case.condition is not None:
                return NOT_CONSTANT
            if same(value, subject):
                return fold(case.body, memo)
    return None if node.default is None else fold(node.default, memo)


def _fold_unary(node: ast.Unary, memo: dict[int, Any]) -> Any:
    value = fold(node.operand, memo)
    if node.op == "!" and type(value) is bool:
        return not value
    if node.op == "-" and isinstance(node.operand, ast.Literal) and type(value) in (int, float):
        return -value  # a negative number literal
    return NOT_CONSTANT


def _fold_binary(op: str, left: Any, right: Any) -> Any:
    if left is NOT_CONSTANT or right is NOT_CONSTANT:
        return NOT_CONSTANT
    if op == "??":
        return right if left is None else left
    if not has_builtin(op, type(left), type(right)):
        return NOT_CONSTANT
    operator = ops.BINARY.get(op)
    if operator is None:
        return NOT_CONSTANT
    try:
        return operator(left, right)
    except Exception:  # fails at run time, where it stands: the reference does not fold it
        return NOT_CONSTANT


def _fold_interpolated(node: ast.Interpolated, memo: dict[int, Any]) -> Any:
    text = []
    for part in node.parts:
        value = part if isinstance(part, str) else fold(part, memo)
        if value is NOT_CONSTANT:
            return NOT_CONSTANT
        text.append(value if isinstance(part, str) else to_string(value))
    return "".join(text)


def _type_of(value: Any) -> Any:
    if value is NOT_CONSTANT:
        return NOT_CONSTANT
    return type_name(value)


__all__ = ["NOT_CONSTANT", "fold"]
