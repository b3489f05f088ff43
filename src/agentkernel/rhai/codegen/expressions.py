"""Compiling expressions: literals, variables, operators, `&&`/`||`/`??`, interpolation.

Three-address code: each operation that can fail is on its own line, so
an error's line gives its position; integer operators get an inline fast
path (the operands' types known or tested, the result within the i64 range)
before the general operator of `ops.py`.
"""

from __future__ import annotations

from typing import Any

from agentkernel.rhai.analysis.folding import NOT_CONSTANT
from agentkernel.rhai.codegen.function import FunctionBase
from agentkernel.rhai.codegen.module import literal_operand
from agentkernel.rhai.codegen.operands import (
    BINARY_NAMES,
    FALSE,
    INT_ARITHMETIC,
    INT_COMPARISONS,
    LOCAL,
    TEMP,
    TRUE,
    Operand,
    joined,
)
from agentkernel.rhai.syntax import ast


class Expressions(FunctionBase):
    """Expressions other than chains, calls and control flow."""

    def x_Literal(self, node: ast.Literal) -> Operand:
        return literal_operand(self.m, node.value)

    def x_Interpolated(self, node: ast.Interpolated) -> Operand:
        parts = []
        for part in node.parts:
            if isinstance(part, str):
                parts.append(self.m.constant(part).text)
            else:
                with self.scope():
                    value = self.block_body(part.stmts, want_value=True, counted=True)
                if self.known_int(value):
                    parts.append(f"str({value})")
                else:
                    parts.append(f"(str({value}) if type({value}) is int else to_string({value}))")
        out = self.temp()
        # no size limit to check: the parts joined inline
        inline = " + ".join(parts) if len(parts) == 2 else f"''.join(({joined(parts)},))"
        checked = f"rt.interpolate(({joined(parts)},))"
        self.emit(f"{out} = {inline} if not rt.sizes_checked else {checked}", node.pos)
        return out

    def x_ArrayLit(self, node: ast.ArrayLit) -> Operand:
        items = [self.value_copy(i) for i in node.items]
        out = self.temp()
        self.emit(f"{out} = [{joined(items)}]")
        return out

    def x_MapLit(self, node: ast.MapLit) -> Operand:
        items = [f"{self.m.constant(k)}: {self.value_copy(v)}" for k, v in node.items]
        out = self.temp()
        self.emit(f"{out} = {{{', '.join(items)}}}")
        return out

    def x_Var(self, node: ast.Var) -> Operand:
        if node.namespace == "global":
            out = self.temp()
            self.emit(f"{out} = rt_global_const(rt, {self.m.constant(node.name)})", node.pos)
            return out
        if node.namespace is not None:
            module = self.module_of(node.namespace, node.pos)
            out = self.temp()
            namespace, name = self.m.constant(node.namespace), self.m.constant(node.name)
            self.emit(f"{out} = rt_module_var({module}, {namespace}, {name})", node.pos)
            return out
        info = self.lookup(node.name)
        if info is not None:
            return info.load
        if node.name in self.m.function_names:
            out = self.temp()
            self.emit(f"{out} = FnPtr({self.m.constant(node.name)})")
            return out
        out = self.temp()
        if self.dynamic:
            self.emit(f"{out} = rt_dyn_get(dyn, {self.m.constant(node.name)})", node.pos)
        else:
            self.emit(f"raise rt_var_not_found({self.m.constant(node.name)})", node.pos)
            self.emit(f"{out} = None")
        return out

    def x_This(self, node: ast.This) -> Operand:
        out = self.temp()
        self.emit(f"{out} = rt.this_value(th)", node.pos)
        return out

    def x_Unary(self, node: ast.Unary) -> Operand:
        operand = self.expr(node.operand)
        out = self.temp()
        slow = f"op_unary({self.m.constant(node.op)}, {operand})"
        if node.op == "!" and operand.place in (TEMP, LOCAL):  # a bool at once; the rest: tags, errors
            slow = f"({operand} is False) if type({operand}) is bool else {slow}"
        self.emit(f"{out} = {slow}", node.pos)
        return out

    def x_Binary(self, node: ast.Binary) -> Operand:
        if node.op == "??":
            return self.coalesce(node)
        left = self.stable(self.expr(node.left), node.right)
        right = self.expr(node.right)
        out = self.temp()
        slow = f"{BINARY_NAMES[node.op]}({left}, {right})"
        ints = self.int_checks(left, right)
        both_int = ints == "True"
        # arithmetic errors of binary operators carry no position (RHAI.md §5)
        if node.op in INT_ARITHMETIC:
            if node.op in ("+", "-"):  # strings, arrays, maps and BLOBs they build are checked and counted
                slow += f"; rt.sizes_checked and type({out}) in SIZED and rt.built({out})"
            fast = self.int_result(out, left, node.op, right)
            self.emit(f"if not ({fast}): {out} = {slow}", node.pos, operator=True)
            if both_int:  # in range, or the slow path raised the overflow
                self.int_operands.add(out)
                if node.op != "-" and self.non_negative(left) and self.non_negative(right):
                    self.non_negative_operands.add(out)
        elif node.op in ("%", "/"):
            python_op = "%" if node.op == "%" else "//"
            # Python's `%` and `//` are Rhai's for an int ≥ 0 by an int > 0
            positive = " and ".join(
                [f"{left} >= 0"] * (not self.non_negative(left))
                + [f"{right} > 0"] * (not right.is_int_literal)
            )
            guard = " and ".join(x for x in (ints, positive) if x and x != "True") or "True"
            right_value, left_value = right.int_value, left.int_value
            if (right_value is not None and right_value <= 0) or (left_value is not None and left_value < 0):
                self.emit(f"{out} = {slow}", node.pos, operator=True)
            else:
                fast = f"{left} {python_op} {right}"
                self.emit(
                    f"{out} = {fast} if {guard} else {slow}" if guard != "True" else f"{out} = {fast}",
                    node.pos,
                    operator=True,
                )
                if both_int:  # an int, or the operator raised (by zero, i64::MIN by -1)
                    self.int_operands.add(out)
                    # a remainder has the sign of the dividend; a quotient of two ints ≥ 0 is ≥ 0
                    if self.non_negative(left) and (node.op == "%" or self.non_negative(right)):
                        self.non_negative_operands.add(out)
        elif node.op in INT_COMPARISONS and both_int:
            self.emit(f"{out} = {left} {node.op} {right}", node.pos, operator=True)
            self.bool_operands.add(out)
        elif node.op in ("==", "!=") and (self.is_str_constant(left) or self.is_str_constant(right)):
            # a string against a string literal: Python's own equality (a char, a tag: the operator)
            other = right if self.is_str_constant(left) else left
            self.emit(
                f"{out} = {left} {node.op} {right} if type({other}) is str else {slow}",
                node.pos,
                operator=True,
            )
        elif node.op in INT_COMPARISONS:
            self.emit(f"{out} = {left} {node.op} {right} if {ints} else {slow}", node.pos, operator=True)
        else:
            self.emit(f"{out} = {slow}", node.pos, operator=True)
        return out

    def stable(self, operand: Operand, later: Any) -> Operand:
        """Snapshot a variable operand when evaluating `later` might rebind it."""
        if operand.is_variable and not self.facts.pure(later):
            copy = self.temp()
            self.emit(f"{copy} = {operand}")
            if operand in self.int_operands:
                self.int_operands.add(copy)
            return copy
        return operand

    def coalesce(self, node: ast.Binary) -> Operand:
        """`a ?? b`; the reference makes `a ?? b ?? c` one list it evaluates up to the first
        value that is not `()`: what it never evaluates is taken back (facts.py counts the
        list's 1 once)."""
        out = self.temp()
        left = self.expr(node.left)
        self.emit(f"{out} = {left}")
        self.emit(f"if {out} is None or type({out}) is TaggedUnit:")  # a tagged `()` too
        with self.indented():
            right = self.expr(node.right)
            self.emit(f"{out} = {right}")
        if self.facts.ops(node.right) and self.facts.constant(node) is NOT_CONSTANT:  # counted in full
            self.emit("else:")
            with self.indented():
                self.take_back(self.facts.ops(node.right))
        return out

    def x_And(self, node: ast.And) -> Operand:
        return self.short_circuit(node, "True")

    def x_Or(self, node: ast.Or) -> Operand:
        return self.short_circuit(node, "False")

    def short_circuit(self, node: ast.And | ast.Or, go_on: str) -> Operand:
        folded = self.fold_identity(node, go_on == "True")
        if folded is not None:
            return folded
        out = self.temp()
        left = self.expr(node.left)
        self.emit(f"{out} = cond({left})", node.left.pos)
        self.emit(f"if {out} is {go_on}:")
        with self.indented():
            right = self.expr(node.right)
            self.emit(f"{out} = cond({right})", node.right.pos)
        return out

    def fold_identity(self, node: ast.And | ast.Or, is_and: bool) -> Operand | None:
        """The reference's optimizer folds boolean identities (RHAI.md §16):
        `c && true` and `true && c` are c, `c || true` is true, `c || false` is c."""
        for literal, other in ((node.right, node.left), (node.left, node.right)):
            if isinstance(literal, ast.Literal) and type(literal.value) is bool:
                if literal.value is is_and:
                    return self.expr(other)
                return FALSE if is_and else TRUE
        return None


__all__ = ["Expressions"]
