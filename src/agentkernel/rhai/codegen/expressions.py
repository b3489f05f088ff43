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
    FALSE,
    INT_ARITHMETIC,
    INT_COMPARISONS,
    LOCAL,
    NONE,
    TEMP,
    TRUE,
    Operand,
    joined,
)
from agentkernel.rhai.codegen.operator_names import BINARY_NAMES
from agentkernel.rhai.runtime.values import I64_MAX, I64_MIN, Char, RangeVal
from agentkernel.rhai.syntax import ast

_NOT_IN_F_STRING = frozenset("'\"\\#")  # what an f-string's expression may not hold (before Python 3.12)


def f_string_text(text: str) -> str:
    """`text` as the literal text of an f-string written `f'…'`: escaped, braces doubled."""
    quoted = repr(text)
    body = quoted[1:-1] if quoted[0] == "'" else quoted[1:-1].replace("'", "\\'")
    return body.replace("{", "{{").replace("}", "}}")


# immutable and small: one shared constant (a string is built at run time, where its size is checked)
_FOLDED = frozenset({int, float, bool, Char, type(None), RangeVal})


class Expressions(FunctionBase):
    """Expressions other than chains, calls and control flow."""

    def x_Literal(self, node: ast.Literal) -> Operand:
        return literal_operand(self.m, node.value)

    def x_Interpolated(self, node: ast.Interpolated) -> Operand:
        parts = []
        pieces = []  # the same, as the pieces of an f-string
        value = NONE
        for part in node.parts:
            if isinstance(part, str):
                parts.append(self.m.constant(part).text)
                pieces.append(f_string_text(part))
                continue
            with self.scope():
                value = self.block_body(part.stmts, want_value=True, counted=True)
            if self.known_int(value):
                parts.append(f"str({value})")
                pieces.append(f"{{({value})}}")
            else:
                parts.append(f"(str({value}) if type({value}) is int else to_string({value}))")
                # an f-string formats a string or an int as `to_string` does
                plain = f"type({value}) is str or type({value}) is int"
                pieces.append(f"{{({value} if {plain} else to_string({value}))}}")
        out = self.temp()
        # no size limit to check: the parts joined inline, by an f-string (an operand's text
        # is a name, a number or an entry of the constants table: nothing an f-string refuses)
        assert not any(_NOT_IN_F_STRING.intersection(p) for p in parts), parts
        inline = f"f'{''.join(pieces)}'"
        checked = f"rt.interpolate(({joined(parts)},))"
        self.emit(f"{out} = {inline} if not {self.setting('sizes_checked')} else {checked}", node.pos)
        counted_last = node is self.final_value and self.facts.constant(node) is NOT_CONSTANT
        if counted_last and not isinstance(node.parts[-1], str):
            # the reference's `to_string` of the last part, on a copy of its state, is then the
            # last count it reports (the earlier parts' are below the count that follows them)
            self.emit(f"if type({value}) is not str: rt.count_to_string({value})")
        return out

    def x_ArrayLit(self, node: ast.ArrayLit) -> Operand:
        items = [self.value_copy(i) for i in node.items]
        out = self.temp()
        self.emit(f"{out} = [{joined(items)}]")
        return out

    def x_MapLit(self, node: ast.MapLit) -> Operand:
        # its keys written in (CPython then builds the map from a constant tuple of them)
        items = [f"{self.str_literal(self.m.constant(k))}: {self.value_copy(v)}" for k, v in node.items]
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
            slow = f"True if {operand} is False else False if {operand} is True else {slow}"
        self.emit(f"{out} = {slow}", node.pos)
        if node.op == "!":  # `!` gives a bool or fails (ops.logical_not): tested as it is
            self.bool_operands.add(out)
        return out

    def x_Binary(self, node: ast.Binary) -> Operand:
        folded = self.facts.constant(node)
        if type(folded) in _FOLDED:  # the reference's optimizer made it this constant: no call runs
            return literal_operand(self.m, folded)
        if node.op == "??":
            return self.coalesce(node)
        if self.facts.counts_up(node):
            return self.coalesce_counted(node)
        left = self.stable(self.expr(node.left), node.right)
        right = self.expr(node.right)
        out = self.temp()
        # the reference's library function, when no built-in takes the operands (library_ops.py)
        last = ", True" if node is self.final_value else ""
        slow = f"{BINARY_NAMES[node.op]}({left}, {right}, rt{last})"
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
            self.divide(node, out, left, right, slow)
        elif node.op in INT_COMPARISONS and both_int:
            self.emit(f"{out} = {left} {node.op} {right}", node.pos, operator=True)
            self.bool_operands.add(out)
        elif node.op in ("==", "!=") and (self.is_str_constant(left) or self.is_str_constant(right)):
            # a string against a string literal: Python's own equality (a char, a tag: the operator)
            other, literal = (
                (right, self.str_literal(left))
                if self.is_str_constant(left)
                else (left, self.str_literal(right))
            )
            sides = (
                f"{literal} {node.op} {other}"
                if self.is_str_constant(left)
                else f"{other} {node.op} {literal}"
            )
            self.emit(f"{out} = {sides} if type({other}) is str else {slow}", node.pos, operator=True)
            self.bool_operands.add(out)  # every comparison gives a bool or fails (ops.py)
        elif node.op in INT_COMPARISONS:
            self.emit(f"{out} = {left} {node.op} {right} if {ints} else {slow}", node.pos, operator=True)
            self.bool_operands.add(out)
        else:
            self.emit(f"{out} = {slow}", node.pos, operator=True)
        return out

    def divide(self, node: ast.Binary, out: Operand, left: Operand, right: Operand, slow: str) -> None:
        """`left % right`, `left / right`: Python's own for ints, the left ≥ 0 and the right > 0
        (where Python's and Rust's rounding agree); an int whenever both sides are."""
        python_op = "%" if node.op == "%" else "//"
        ints = self.int_checks(left, right)
        left_known = left.is_int_literal or self.non_negative(left)
        positive = [f"{left} >= 0"] * (not left_known) + [f"{right} > 0"] * (not right.is_int_literal)
        guard = " and ".join(x for x in (ints, *positive) if x != "True") or "True"
        right_value, left_value = right.int_value, left.int_value
        if (right_value is not None and right_value <= 0) or (left_value is not None and left_value < 0):
            self.emit(f"{out} = {slow}", node.pos, operator=True)
        elif guard == "True":
            self.emit(f"{out} = {left} {python_op} {right}", node.pos, operator=True)
        else:
            self.emit(f"{out} = {left} {python_op} {right} if {guard} else {slow}", node.pos, operator=True)
        if ints == "True":  # an int, or the slow path raised (division by zero, overflow)
            self.int_operands.add(out)
            # a remainder has the sign of the dividend; a quotient of two ints ≥ 0 is ≥ 0
            if self.non_negative(left) and (node.op == "%" or self.non_negative(right)):
                self.non_negative_operands.add(out)

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
        left = self.expr(node.left)
        out = left if left.place == TEMP else self.temp()  # a temporary of its own: no copy
        if out is not left:
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

    def coalesce_counted(self, node: ast.Binary) -> Operand:
        """`(a ?? d) + n` tested once: an int `a` is added to at once, a `()` gives `d + n`
        (a constant), anything else takes the operator's general path — where `a ?? d` and
        then `+` would test `a` twice. The statement's count left `d` out (facts.py
        `counts_up`): it is counted where `a` is `()`, so the common path counts nothing."""
        inner = node.left
        assert isinstance(inner, ast.Binary) and isinstance(inner.right, ast.Literal)  # counts_up
        assert isinstance(node.right, ast.Literal)
        value = self.expr(inner.left)
        held = value if value.place == TEMP else self.temp()
        if held is not value:
            self.emit(f"{held} = {value}")
        right, out = literal_operand(self.m, node.right.value), self.temp()
        last = ", True" if node is self.final_value else ""
        slow = f"{BINARY_NAMES[node.op]}({held}, {right}, rt{last})"
        self.emit(f"if type({held}) is int:")
        with self.indented():
            self.int_operands.add(held)  # here only: the temporary is not read after this
            fast = self.int_result(out, held, node.op, right)
            self.int_operands.discard(held)
            self.emit(f"if not ({fast}): {out} = {slow}", node.pos, operator=True)
        self.emit(f"elif {held} is None or type({held}) is TaggedUnit:")  # a tagged `()` too
        with self.indented():
            self.count(self.facts.ops(inner.right), None)
            start, step = inner.right.value, node.right.value
            assert isinstance(start, int) and isinstance(step, int)  # counts_up
            total = start + step if node.op == "+" else start - step
            if I64_MIN <= total <= I64_MAX:
                self.emit(f"{out} = {total}")
            else:
                self.emit(
                    f"{out} = {BINARY_NAMES[node.op]}({start}, {right}, rt{last})", node.pos, operator=True
                )
        self.emit("else:")
        with self.indented():
            self.emit(
                f"{out} = {slow}; rt.sizes_checked and type({out}) in SIZED and rt.built({out})",
                node.pos,
                operator=True,
            )
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
        self.emit(f"{out} = {self.as_bool(left)}", node.left.pos)
        self.emit(f"if {out} is {go_on}:")
        with self.indented():
            right = self.expr(node.right)
            self.emit(f"{out} = {self.as_bool(right)}", node.right.pos)
        self.bool_operands.add(out)  # `cond` gives a bool or fails
        return out

    def as_bool(self, operand: Operand) -> str:
        """The operand as a Python bool: as it is when known to hold one, else through `cond`
        (a name tested first: a bool, what it nearly always holds, needs no call)."""
        if operand in self.bool_operands:
            return operand.text
        if operand.is_name:
            return f"{operand} if {operand} is True or {operand} is False else cond({operand})"
        return f"cond({operand})"

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
