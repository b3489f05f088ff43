"""Compiling assignments: `x = v`, `a.b[i] op= v`, storing changed values back up a chain.

The value is evaluated first, then the target's indices, each once (as the
reference does), however many steps the store takes; an immutable parent
that a store replaced is stored back into its own parent, level by level.
"""

from __future__ import annotations

from agentkernel.rhai.codegen.appends import append_in_place
from agentkernel.rhai.codegen.function import FunctionBase
from agentkernel.rhai.codegen.operands import FALSE, INT_ARITHMETIC, NONE, TRUE, Operand, list_index_test
from agentkernel.rhai.errors import Pos, RhaiSyntaxError
from agentkernel.rhai.syntax import ast


class Assignments(FunctionBase):
    """Assignments and stores into lvalue chains."""

    def assign(self, stmt: ast.Assign) -> None:
        """`target = value` / `target op= value`: the value first, then the target's indices,
        each evaluated once (as the reference does), however many steps the store takes."""
        if stmt.op is None:
            value = self.value_copy(stmt.value)
            with self.evaluated_once(stmt.target):
                self.store(stmt.target, value, stmt.pos)
            return
        right = self.expr(stmt.value)
        with self.evaluated_once(stmt.target):
            if stmt.op in ("+", "+=") and append_in_place(
                self, stmt.target, right, lambda current: self.compound(stmt, current, right), counted=True
            ):
                return
            self.compound(stmt, self.expr(stmt.target), right)

    def compound(self, stmt: ast.Assign, current: Operand, right: Operand) -> None:
        """`target op= right`, the target's value in `current`: the general path."""
        assert stmt.op is not None
        value = self.temp()
        if self.in_range_at_entry(stmt, current, stmt.op.rstrip("="), right):
            self.emit(f"{value} = {current} {stmt.op.rstrip('=')} {right}", stmt.pos)
        elif stmt.op.rstrip("=") in INT_ARITHMETIC:
            fast = self.int_result(value, current, stmt.op.rstrip("="), right)
            self.emit(f"if not ({fast}):", stmt.pos)
            with self.indented():
                self.general_compound(stmt, value, current, right)
        else:
            self.general_compound(stmt, value, current, right)
        self.store(stmt.target, value, stmt.pos)

    def general_compound(self, stmt: ast.Assign, value: Operand, current: Operand, right: Operand) -> None:
        """`value = current op right` through the runtime, first counting the natives the
        reference calls for it (none for its built-ins, as every `op=` of two ints), where the
        limit sees them."""
        op = self.m.constant(stmt.op)
        if not (self.known_int(current) and self.known_int(right)):
            self.count(f"compound_calls({op}, {current}, {right})", stmt.pos)
        self.emit(f"{value} = rt.compound({op}, {current}, {right})", stmt.pos)

    def store(self, target: ast.Expr, value: Operand, pos: Pos) -> None:
        """Write `value` into an lvalue chain, storing changed immutable parents back.

        `a.b[0].c = v` sets `c`, then stores the changed object into `[0]` if
        it is a new one, and so on up to `a`: one `if` per level, all at the
        same indentation, however long the chain.
        """
        if (
            isinstance(target, ast.Index)
            and isinstance(target.target, ast.Var | ast.This)
            and self.is_lvalue(target.target)
        ):  # `a[i] = v`: only the slow path may give a new container to store back
            self._store_step(target, value, pos, store_back=True)
            return
        step = self._store_step(target, value, pos)
        going = self.m.fresh("go")
        inside = False
        while step is not None and self.is_lvalue(step[0]):
            parent, old, new = step
            self.emit(f"{going} = {new} is not {old}")
            if inside:
                self.ind -= 1
            self.emit(f"if {going}:")
            self.ind += 1
            inside = True
            step = self._store_step(parent, new, pos)
        if inside:
            self.ind -= 1

    def _store_step(
        self, target: ast.Expr, value: Operand, pos: Pos, *, store_back: bool = False
    ) -> tuple[ast.Expr, Operand, Operand] | None:
        """Store into `target` itself; for a property or index, (parent, old object, new object).

        `store_back` (an index into a variable): store a new container back into the
        variable here, on the slow path only — the fast path changes the list in place.
        """
        if isinstance(target, ast.Var):
            info = self.lookup(target.name)
            if info is None and self.dynamic:  # one `eval` defined, or the caller's eval scope holds
                self.emit(f"rt_dyn_set(rt, dyn, {self.m.constant(target.name)}, {value})", target.pos)
            elif info is None:
                self.emit(f"raise rt_var_not_found({self.m.constant(target.name)})", target.pos)
            else:
                self.emit(f"{info.py}.v = {value}" if info.cell else f"{info.py} = {value}")
            return None
        if isinstance(target, ast.This):
            self.emit(f"rt.this_value(th); th.v = {value}", target.pos)
            return None
        if isinstance(target, ast.Property):
            obj = self.expr(target.target)
            new = self.temp()
            self.emit(f"{new} = rt.set_prop({obj}, {self.m.constant(target.name)}, {value})", target.pos)
            return target.target, obj, new
        if isinstance(target, ast.Index):
            return self._store_index(target, value, pos, store_back)
        raise RhaiSyntaxError("Expression cannot be assigned to", pos)

    def _store_index(
        self, target: ast.Index, value: Operand, pos: Pos, store_back: bool
    ) -> tuple[ast.Expr, Operand, Operand] | None:
        """`x[i] = value`: in place when `x` is a list and `i` an int in range (or `x` a map and
        `i` a string), else through `rt.index_set`, which may give a new object (a string, a BLOB)."""
        obj = self.named(self.expr(target.target))
        index = self.index_of(target)
        new = self.temp()
        fast = list_index_test(obj, index, self.known_int(index), self.type_test(obj, "list"))
        if not self.known_int(index):
            # a map first: an index not proven an int is most often a map's key (a string one
            # never a list's)
            keyed = " and ".join(self.key_test(obj, index, unless="map_limit"))
            text = index in self.text_operands or self.is_str_constant(index)
            fast = keyed if text else f"({keyed}) or ({fast})"
        # counted unless it is what the slot holds already (`a[i] += x` grew it in place)
        charged = f"type({value}) in SIZED and rt.account_slot({obj}, {index}, {value}); "
        counted = (
            ""
            if value in (TRUE, FALSE, NONE) or value.is_int_literal
            else f"{self.setting('data_limit')} and {charged}"
        )
        where = self.m.constant((target.pos, pos))
        slow = f"{new} = rt.index_set({obj}, {index}, {value}, {where})"
        if store_back and not counted and self.known_int(index) and index.int_value is None:
            # an int index: Python's own bounds check (a negative one counts from the end, as
            # Rhai's does) stands for the test; out of range, the slow path words the failure
            self.emit("try:")
            with self.indented(blocks=1):
                if obj.text not in self.proven_lists:
                    negated = self.type_test(obj, "list", negated=True)
                    self.emit(f"if {negated}: raise IndexError", ast.expr_pos(target.index))
                self.emit(f"{obj}[{index}] = {value}", ast.expr_pos(target.index))
            self.emit("except IndexError:")
        elif store_back:
            self.emit(f"if {fast}: {counted}{obj}[{index}] = {value}", ast.expr_pos(target.index))
            self.emit("else:")
        if store_back:
            with self.indented(blocks=1):  # an except handler is a block to CPython
                self.emit(slow, ast.expr_pos(target.index))
                self.emit(f"if {new} is not {obj}:")
                with self.indented():
                    self._store_step(target.target, new, pos)
            return None
        self.emit(f"if {fast}: {counted}{obj}[{index}] = {value}; {new} = {obj}", ast.expr_pos(target.index))
        self.emit(f"else: {slow}", ast.expr_pos(target.index))
        return target.target, obj, new


__all__ = ["Assignments"]
