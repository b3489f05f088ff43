"""A reading closure's copies that run over all the items of a `filter` or `map` at once.

`words.filter(|w| w.len > 0)` calls its closure once an item, and each call
tests its parameter's type, counts its operations against the checkpoint and
goes through a Python call: several times the work of the test itself. A
closure of one parameter that captures nothing, only reads that parameter and
whose body is one expression of it, literals, `len`, comparisons and
arithmetic (`batchable`) counts the same number of operations at every call,
at its start, and calls nothing that could count, print or change anything.
Such a closure gets one copy per kind of item (KINDS), compiled knowing its
parameter of that kind: a loop over the items that counts nothing and gives
their results (`def c7_str(rt, d, th, items)`), set on the closure's function
as `rhai_batch`, `{str: (copy, operations a call), …}`.

`Runtime.reading_callback` runs the copy when every item is of its kind, the
inlined natives are the standard ones, and every item's count would fit before
the checkpoint (none would stop at it), then counts them all at once as the
calls one by one would have; when the copy fails (an item's operator fails, or
a slow path counted), nothing was changed, and the items are called one by one
as before, which fail or count exactly where the reference does.
"""

from __future__ import annotations

import re

from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.records import mutable_record

KINDS = ("str", "int")  # the kinds of item a copy is compiled for
_OPERATORS = frozenset({"==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%"})
_UNARY = frozenset({"!", "-"})
_RUNTIME_USE = re.compile(r"\brt\.(\w+)")
_RUNTIME_READS = frozenset({"max_depth", "enter", "natives_inline", "sizes_checked", "string_limit"})


class NotBatchable(Exception):
    """The copy being compiled counts or calls what it may not (its lines are dropped)."""


@mutable_record
class BatchCopy:
    """The copy being compiled: its parameter's kind, the indentation of its body's first
    statement, and the operations that statement counts for the whole call."""

    kind: str
    indent: int
    operations: int | None = None

    def counted(self, operations: int | str, indent: int) -> None:
        """The body counts `operations`: once, at its start, a number, or it has no copy."""
        if self.operations is not None or indent != self.indent or not isinstance(operations, int):
            raise NotBatchable
        self.operations = operations


def batchable(closure: ast.Closure) -> bool:
    """Whether `closure` is one expression of its one parameter that calls nothing."""
    if len(closure.params) != 1 or len(closure.body.stmts) != 1:
        return False
    stmt = closure.body.stmts[0]
    return isinstance(stmt, ast.ExprStmt) and _plain(stmt.expr, closure.params[0])


def _plain(node: ast.Expr, param: str) -> bool:
    if isinstance(node, ast.Var):
        return node.name == param and node.namespace is None
    if isinstance(node, ast.Literal):
        return type(node.value) in (bool, int, str)
    if isinstance(node, ast.Property):
        return node.name == "len" and not node.optional and _plain(node.target, param)
    if isinstance(node, ast.Binary):
        return node.op in _OPERATORS and _plain(node.left, param) and _plain(node.right, param)
    if isinstance(node, ast.Unary):
        return node.op in _UNARY and _plain(node.operand, param)
    return False


def spoils_copy(text: str) -> bool:
    """Whether a copy's Python text uses the runtime beyond reading its depth and settings
    (`rt.get_prop`, `rt.charge_data`…: what may count, change or call back): no copy then."""
    return not {match.group(1) for match in _RUNTIME_USE.finditer(text)} <= _RUNTIME_READS


__all__ = ["KINDS", "BatchCopy", "NotBatchable", "batchable", "spoils_copy"]
