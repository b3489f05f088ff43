"""Compiling statements: a block's statements, `let`, `try`/`catch`, `import` and `export`.

A block counts its operations once, at its first statement, and drops the
pure statements whose value nothing uses, as the reference's optimizer does.
"""

from __future__ import annotations

from agentkernel.rhai.codegen.apart import compile_apart
from agentkernel.rhai.codegen.function import FunctionBase
from agentkernel.rhai.codegen.operands import NONE, Operand
from agentkernel.rhai.errors import Pos
from agentkernel.rhai.syntax import ast

_UNIT_LOOPS = (ast.For, ast.While, ast.DoLoop)  # whose value is `()` (a `break` with a value: not pure)


class Statements(FunctionBase):
    """Statements and blocks of statements."""

    def block_body(
        self,
        stmts: tuple[ast.Stmt, ...],
        *,
        want_value: bool,
        counted: bool = False,
        pos: Pos | None = None,
        at_least: int = 0,
    ) -> Operand:
        """Compile statements in the current scope; return the operand holding their value.

        `counted`: the enclosing statement's count already covers these (interpolations).
        `at_least`: the fewest operations to count (a loop's body: 1, so no loop runs free).
        """
        extra, self.branch_extra = self.branch_extra, None
        window, self.window_pending = self.window_pending, None  # a loop's body: windows.py
        if extra is not None and (counted or self.too_deep()):
            self.count(*extra)
            extra = None
        if self.too_deep():
            return compile_apart(
                self,
                stmts,
                lambda inner: inner.block_body(
                    stmts, want_value=want_value, counted=counted, pos=pos, at_least=at_least
                ),
            )
        kept = self.kept(stmts, want_value)
        operations = 0 if counted else max(sum(self.facts.ops(s) for s in kept) + self.pending_ops, at_least)
        if not counted:
            self.pending_ops = 0
        first = kept[0].pos if kept else pos
        ahead = self._ahead(kept) if self.main_top else None
        if extra is not None:
            self.count_merged(extra, operations, first)
        elif operations and ahead is None and self.merges_into_if(kept):
            self.head_count = (operations, first)  # x_If counts it in its branches
        elif operations and window is not None:  # counted by the loop's variable
            window.per, self.window = operations, window
            self.counts_emitted += 1
            self.emit(window.iteration_check(), first)
        elif operations:
            self.count(operations, first)
        rests = self._rests(kept)
        top, self.main_top = self.main_top, False
        value = NONE
        for index, stmt in enumerate(kept):
            last = index == len(kept) - 1
            if top and last:
                self.final_value = _value_of(stmt)
            if ahead is not None and ahead[index] is not None:
                self.emit(f"rt.ahead = {ahead[index]}")
            self.rests.append(0 if counted else rests[index])
            try:
                value = self.statement(stmt, want_value=want_value and last)
            finally:
                self.rests.pop()
        if ahead is not None and any(ahead):
            self.emit("rt.ahead = 0")  # for the functions a host calls after the top level
        if not kept or not want_value:
            return NONE
        return value

    def kept(self, stmts: tuple[ast.Stmt, ...], want_value: bool) -> list[ast.Stmt]:
        """The statements a block runs: not those the reference's optimizer drops."""
        return [s for i, s in enumerate(stmts) if not self._dropped(s, i == len(stmts) - 1 and want_value)]

    def _rests(self, kept: list[ast.Stmt]) -> list[int]:
        """For each statement, the operations of the statements after it (counted ahead)."""
        after, rests = 0, [0] * len(kept)
        for index in range(len(kept) - 1, -1, -1):
            rests[index] = after
            after += self.facts.ops(kept[index])
        return rests

    def _ahead(self, kept: list[ast.Stmt]) -> list[int | None]:
        """For each top-level statement, the operations of the statements after it, which its
        block counted ahead (None: nothing new to tell the runtime). A native's callback, or
        what the reference counts on a copy of its state, counts from where the reference is
        then: it has not counted them yet."""
        told = 0
        ahead: list[int | None] = [None] * len(kept)
        for index, rest in enumerate(self._rests(kept)):
            if rest != told:
                ahead[index] = told = rest
        return ahead

    def _dropped(self, stmt: ast.Stmt, is_result: bool) -> bool:
        """The reference's optimizer removes pure expression statements whose value is unused."""
        if not (isinstance(stmt, ast.ExprStmt) and self.facts.droppable(stmt)):
            return False
        # as the script's value a pure block still counts, unless its value is () anyway, as a
        # loop's is
        unit_block = isinstance(stmt.expr, ast.Block) and not (
            stmt.expr.stmts and isinstance(stmt.expr.stmts[-1], ast.ExprStmt)
        )
        return not is_result or unit_block or isinstance(stmt.expr, _UNIT_LOOPS)

    def statement(self, stmt: ast.Stmt, *, want_value: bool) -> Operand:
        self.m.clock.tick()
        if isinstance(stmt, ast.ExprStmt):
            if not want_value:
                self.discarded = stmt.expr  # an `if` then stores no value (control.py `x_If`)
            value = self.expr(stmt.expr)
            return value if want_value else NONE
        if isinstance(stmt, ast.Let):
            self.let(stmt)
        elif isinstance(stmt, ast.Assign):
            self.assign(stmt)
        elif isinstance(stmt, ast.TryCatch):
            if not self.facts.ops(stmt):  # its body cannot fail: the reference drops it whole
                return NONE
            value = self.try_catch(stmt)
            return value if want_value else NONE
        elif isinstance(stmt, ast.Import):
            self.import_module(stmt)
        elif isinstance(stmt, ast.Export):
            self.export(stmt)
        return NONE

    def let(self, stmt: ast.Let) -> None:
        value = self.value_copy(stmt.value) if stmt.value is not None else NONE
        info = self.declare(stmt.name, stmt, stmt.const)
        live = self.live_variables()
        limit = self.setting("variable_limit")
        self.emit(f"if {limit} and {live} > {limit}: raise rt_too_many_variables()", stmt.pos)
        if info.cell:
            self.emit(f"{info.py} = Cell({value})")
        else:
            self.emit(f"{info.py} = {value}")
        if stmt.const and self.top_level and len(self.scopes) == 1:
            self.emit(f"rt.global_consts[{self.m.constant(stmt.name)}] = {info.load}")
        if self.export_lets and len(self.scopes) == 1:
            self.emit(f"dyn[{self.m.constant(stmt.name)}] = {info.load}")
            self.emit(f"rt.eval_lets.add({self.m.constant(stmt.name)})")

    def try_catch(self, stmt: ast.TryCatch) -> Operand:
        out = self.temp()
        self.emit("try:")
        # the optimizer drops pure statements of a try body, even the last one
        droppable = self.facts.droppable
        body = tuple(s for s in stmt.body.stmts if not (isinstance(s, ast.ExprStmt) and droppable(s)))
        with self.indented(blocks=1), self.scope():
            value = self.block_body(body, want_value=True)
            self.emit(f"{out} = {value}")
        caught = self.m.fresh("e")
        self.emit(f"except RhaiRuntimeError as {caught}_:")
        with self.indented(blocks=3):  # the handler, its cleanup of the name, and the try around both
            self.emit(f"{caught} = locate({caught}_, {caught}_.__traceback__, LINES, NOPOS)")
            self.emit(f"if not {caught}.catchable: raise {caught}")
            with self.scope():
                if stmt.var is not None:
                    info = self.declare(stmt.var, stmt, False)
                    init = f"rt.catch_value({caught})"
                    self.emit(f"{info.py} = Cell({init})" if info.cell else f"{info.py} = {init}")
                self.catch_vars.append(caught)
                # the reference discards the handler's value (its pure statements with it)
                self.block_body(stmt.handler.stmts, want_value=False)
                self.emit(f"{out} = None")
                self.catch_vars.pop()
        return out

    def import_module(self, stmt: ast.Import) -> None:
        """`import path [as m];`: the module in a local, in sight until the block ends."""
        self.emit("rt_check_modules(rt)", stmt.pos)
        path = self.expr(stmt.path)
        top = self.top_level and len(self.scopes) == 1 and self.apart is None
        if stmt.alias is None:
            self.emit(f"rt_import(rt, {path}, None, False)", ast.start_pos(stmt.path))
            return
        local = f"{self.m.fresh('m')}_{stmt.alias}"
        alias = self.m.constant(stmt.alias)
        self.emit(f"{local} = rt_import(rt, {path}, {alias}, {top})", ast.start_pos(stmt.path))
        self.module_scopes[-1][stmt.alias] = local

    def export(self, stmt: ast.Export) -> None:
        """`export x as y`: the variable's Cell, whose value the importer sees at the end."""
        if stmt.decl is not None:
            self.let(stmt.decl)
        info = self.lookup(stmt.name)
        if info is None:
            self.emit(f"raise rt_var_not_found({self.m.constant(stmt.name)})", stmt.pos)
            return
        self.emit(f"rt_export(rt, {self.m.constant(stmt.alias)}, {info.py})")


def _value_of(stmt: ast.Stmt) -> ast.Expr | None:
    """The expression whose value a statement is (or binds): nothing is counted after it."""
    if isinstance(stmt, ast.ExprStmt):
        return stmt.expr
    return stmt.value if isinstance(stmt, ast.Let) else None


__all__ = ["Statements"]
