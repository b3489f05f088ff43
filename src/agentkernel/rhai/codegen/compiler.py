"""Rhai AST → Python source → one code object per script (RHAI-DESIGN.md "Why compile").

Each Rhai script function becomes a Python function `f_<name>_<arity>(rt, d, th, *params)`,
the top level becomes `main(rt, d, th)`, and closures become functions whose
first parameters are their captured Cells, bound when the closure is made (so
each `let` in a loop body gives each closure its own variable, as in Rhai).
All of them are functions of the module, none nested in another, and code
nested deeper than one Python function may hold is compiled apart
(`nesting.py`): whatever a script's shape, the generated code stays within
CPython's limits, and compile time grows linearly with the script.

Expressions are compiled to three-address code: every operation that can fail
sits on its own generated line, and `LINES` maps that line to the Rhai
(line, position). When an error passes through a compiled function, the
handler looks up the line in the traceback and positions the error — the happy
path pays nothing for positions.

The sandbox is by construction: Rhai names become `v<N>_<name>` locals, string
constants go through the `K` table, and the module's globals are an explicit
table with no builtins (see `abi.py`: all that generated code may name).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agentkernel.rhai.analysis.scopes import Scopes, decl_key
from agentkernel.rhai.codegen.appends import append_in_place
from agentkernel.rhai.codegen.module import (
    BINARY_NAMES,
    EXPR,
    FALSE,
    INT_ARITHMETIC,
    INT_COMPARISONS,
    NONE,
    SPECIAL_CALLS,
    TEMP,
    TRUE,
    LoopTarget,
    Module,
    Operand,
    VarInfo,
    Visible,
    anon_for,
    count_ops,
    fn_py_name,
    is_mutable_pattern,
    is_pure,
    joined,
    list_index_test,
    literal_operand,
    may_change,
    only_reads,
)
from agentkernel.rhai.codegen.nesting import (
    BREAK,
    CONTINUE,
    FLAT_NODES,
    MAX_BLOCKS,
    MAX_INDENT,
    RETURN,
    Apart,
    compile_apart,
)
from agentkernel.rhai.errors import Pos, RhaiSyntaxError
from agentkernel.rhai.runtime.values import I64_MAX, I64_MIN
from agentkernel.rhai.syntax import ast


class FunctionCompiler:
    """Generates one Python function: a script fn, a closure or the top level."""

    def __init__(
        self,
        module: Module,
        functions: dict[tuple[str, int], ast.FnDef],
        resolution: Scopes,
        *,
        label: str,
        top_level: bool,
    ) -> None:
        self.m = module
        self.functions = functions
        self.resolution = resolution
        self.label = label
        self.top_level = top_level
        self.scopes: list[dict[str, VarInfo]] = [{}]
        self.module_scopes: list[dict[str, str]] = [{}]  # per scope: import alias → its local
        self.visible: Visible | None = None  # the variables in sight, for `eval` and `is_def_var`
        self.loops: list[LoopTarget] = []
        self.catch_vars: list[str] = []
        self.ind = 0
        self.blocks = 0  # Python blocks (loops, try) open around the current line
        self.apart: Apart | None = None  # set when this compiles a part of a function apart
        self.dynamic = False
        self.export_lets = False
        self.pending_ops = 0  # a loop head's operation, added to its body's count
        self.int_keys: frozenset[tuple[int, str]] = frozenset()  # declarations proven i64 (int_types.py)
        self.int_operands: set[Operand] = set()  # operands known to hold an int
        self.bool_operands: set[Operand] = set()  # operands known to hold a bool
        self.once: dict[int, Operand] = {}  # an assignment's indices, evaluated once (`evaluated_once`)
        self.counter: str | None = None  # the local a loop without calls counts in (counted_locally)

    # -- emitting ------------------------------------------------------------------

    def emit(self, text: str, pos: Pos | None = None, *, operator: bool = False) -> None:
        self.m.emit(self.ind, text, pos, operator=operator)

    @contextmanager
    def indented(self, blocks: int = 0) -> Iterator[None]:
        """One level deeper in Python; `blocks`: how many blocks CPython counts for it."""
        self.ind += 1
        self.blocks += blocks
        yield
        self.blocks -= blocks
        self.ind -= 1

    @contextmanager
    def scope(self) -> Iterator[None]:
        self.scopes.append({})
        self.module_scopes.append({})
        visible = self.visible
        yield
        self.visible = visible
        self.module_scopes.pop()
        self.scopes.pop()

    def too_deep(self) -> bool:
        """Whether code nested further must go to a function of its own (see `nesting.py`)."""
        return self.blocks >= MAX_BLOCKS or self.ind >= MAX_INDENT

    def count(self, operations: int, pos: Pos | None) -> None:
        """Count operations inline; past the checkpoint the runtime decides (limit, clock).

        `Too many operations` is reported at the first statement of the block.
        """
        if self.counter is not None:
            self.emit(f"{self.counter} += {operations}")
            # the local is zeroed as the runtime takes its count, before the check may raise
            local, taken = self.counter, f"{self.counter} - ({self.counter} := 0)"
            self.emit(f"if {local} > {local}_room: {local}_room = rt.settle({taken})", pos)
            return
        self.emit(f"rt.operations += {operations}")
        self.emit("if rt.operations > rt.checkpoint: rt.reached_checkpoint()", pos)

    @contextmanager
    def counted_locally(self, loop: ast.While | ast.Loop | ast.DoLoop | ast.For) -> Iterator[None]:
        """Count a loop's operations in a local rather than in `rt.operations`, when
        nothing in it can count on its own (no call of any kind).

        The local holds what was counted since the runtime last saw it, beside the room
        left to the checkpoint: past that room the runtime takes the count and decides
        (`Runtime.settle`), so the limit trips at the very same block as counting inline
        would; the rest is added when the loop ends, however it ends.
        """
        if self.counter is not None or not _without_calls(loop):
            yield
            return
        counter = self.m.fresh("o")
        self.emit(f"{counter} = 0; {counter}_room = rt.checkpoint - rt.operations")
        self.emit("try:")
        with self.indented(blocks=2):
            self.counter = counter
            try:
                yield
            finally:
                self.counter = None
        self.emit("finally:")
        with self.indented():
            self.emit(f"rt.operations += {counter}")

    def test(self, operand: Operand) -> str:
        """A Python condition for a Rhai bool: only `true`/`false` decide, anything else errors."""
        if operand in self.bool_operands:
            return operand.text
        return f"({operand} is True or ({operand} is not False and cond({operand})))"

    def known_int(self, operand: Operand) -> bool:
        """Whether the operand is an int literal or proven to hold an i64 (int_types.py)."""
        return operand.is_int_literal or operand in self.int_operands

    def int_checks(self, *operands: Operand) -> str:
        """`type(x) is int and …` for the operands not already known to be ints."""
        return " and ".join(f"type({o}) is int" for o in operands if not self.known_int(o)) or "True"

    def int_result(self, out: Operand, left: Operand, op: str, right: Operand) -> str:
        """The condition of integer arithmetic's fast path: both operands ints, and
        `out := left op right` within the i64 range. Adding a non-negative literal can
        only pass the top of the range, subtracting one only the bottom: one comparison."""
        value = f"({out} := {left} {op} {right})"
        step = right.int_value
        if step is not None and op in ("+", "-") and step != 0:
            upward = (op == "+") == (step > 0)
            in_range = f"{value} <= {I64_MAX}" if upward else f"{I64_MIN} <= {value}"
        else:
            in_range = f"{I64_MIN} <= {value} <= {I64_MAX}"
        ints = self.int_checks(left, right)
        return in_range if ints == "True" else f"{ints} and {in_range}"

    def named(self, operand: Operand) -> Operand:
        """An operand usable as `x.attr`/`x[i]` in Python: a literal goes into a temp first
        (`True[0]` would make CPython print a SyntaxWarning)."""
        if operand.is_name:
            return operand
        held = self.temp()
        self.emit(f"{held} = {operand}")
        return held

    def temp(self) -> Operand:
        return Operand(self.m.fresh("t"), TEMP)

    def live_variables(self) -> int:
        """How many variables are alive here (for `max_variables`), counting the enclosing
        function's when this is a part compiled apart."""
        own = sum(len(scope) for scope in self.scopes)
        if self.apart is None:
            return own
        return self.apart.outer_variables + own - len(self.scopes[0])

    def lookup(self, name: str) -> VarInfo | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def declare(self, name: str, node: object, const: bool) -> VarInfo:
        key = decl_key(node, name)
        info = VarInfo(self.m.fresh("v") + "_" + name, const, key in self.resolution.captured)
        if key in self.int_keys and not info.cell:
            self.int_operands.add(info.load)
        self.bind(name, info)
        return info

    def bind(self, name: str, info: VarInfo) -> None:
        """Put `name` in sight in the current scope."""
        self.scopes[-1][name] = info
        self.visible = Visible.of(name, info.py, info.cell, self.visible, info.const)

    # -- function shells -----------------------------------------------------------------

    def function(
        self,
        py_name: str,
        params: tuple[str, ...],
        body: ast.Block,
        owner: object,
        leading: tuple[str, ...] = (),
        wrap: str | None = None,
    ) -> None:
        """Emit `def py_name(leading…, rt, d, th, params…):` with the error handler around the body.

        `leading` are a closure's captured Cells, bound when the closure is made.
        """
        self.int_keys = self.resolution.int_keys
        infos = [self.declare(p, owner, False) for p in params]
        plain = [i.py for i in infos]
        self.m.begin_function()
        self.emit(f"def {py_name}({', '.join([*leading, 'rt', 'd', 'th', *plain])}):")
        hinted = self.calls_natives(body)
        with self.indented():
            self.emit("if d > rt.max_depth: rt.enter(d)")
            if hinted:
                self.emit("rt.depth_hint = d")
            if self.dynamic:
                self.emit("dyn = rt.eval_scope")
            self.emit("try:")
            with self.indented(blocks=2):  # CPython counts try/finally and try/except
                for info in infos:
                    if info.cell:
                        self.emit(f"{info.py} = Cell({info.py})")
                value = self.block_body(body.stmts, want_value=True)
                self.emit(f"return {value}")
            self.emit("except Exception as e:")
            with self.indented():
                located = "locate(e, e.__traceback__, LINES, NOPOS)"
                if wrap is None:
                    self.emit(f"raise {located} from None")
                else:
                    self.emit(f"raise wrap_call({located}, {self.m.constant(wrap)}) from None")
            if hinted:
                self.emit("finally:")
                with self.indented():
                    self.emit("rt.depth_hint = d - 1  # natives calling back from the caller nest one level")
        self.m.end_function()

    def calls_natives(self, body: ast.Block) -> bool:
        """Whether `body` may call a native (which reads `rt.depth_hint` to call back into
        the script at the right depth); calls of script functions pass their depth."""
        if self.dynamic or self.apart is not None:
            return True
        pending: list[Any] = [body]
        while pending:
            node = pending.pop()
            if isinstance(node, ast.MethodCall | ast.Import):  # an import runs the module at depth + 1
                return True
            if isinstance(node, ast.Call):
                script = self.functions.get((node.name, len(node.args)))
                if node.namespace is not None or node.name in SPECIAL_CALLS or script is None:
                    return True
                if script.this_type is not None:
                    return True
            pending.extend(ast.children(node))
        return False

    # -- statements ------------------------------------------------------------------------

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
        if self.too_deep():
            return compile_apart(
                self,
                stmts,
                lambda inner: inner.block_body(
                    stmts, want_value=want_value, counted=counted, pos=pos, at_least=at_least
                ),
            )
        kept = [s for i, s in enumerate(stmts) if not self._dropped(s, i == len(stmts) - 1 and want_value)]
        operations = 0 if counted else max(sum(count_ops(s) for s in kept) + self.pending_ops, at_least)
        if not counted:
            self.pending_ops = 0
        if operations:
            self.count(operations, kept[0].pos if kept else pos)
        value = NONE
        for index, stmt in enumerate(kept):
            last = index == len(kept) - 1
            value = self.statement(stmt, want_value=want_value and last)
        if not kept or not want_value:
            return NONE
        return value

    @staticmethod
    def _dropped(stmt: ast.Stmt, is_result: bool) -> bool:
        """The reference's optimizer removes pure expression statements whose value is unused."""
        if not (isinstance(stmt, ast.ExprStmt) and is_pure(stmt.expr)):
            return False
        # as the script's value a pure block still counts, unless its value is () anyway
        unit_block = isinstance(stmt.expr, ast.Block) and not (
            stmt.expr.stmts and isinstance(stmt.expr.stmts[-1], ast.ExprStmt)
        )
        return not is_result or unit_block

    def statement(self, stmt: ast.Stmt, *, want_value: bool) -> Operand:
        self.m.clock.tick()
        if isinstance(stmt, ast.ExprStmt):
            value = self.expr(stmt.expr)
            return value if want_value else NONE
        if isinstance(stmt, ast.Let):
            self.let(stmt)
        elif isinstance(stmt, ast.Assign):
            self.assign(stmt)
        elif isinstance(stmt, ast.TryCatch):
            value = self.try_catch(stmt)
            return value if want_value else NONE
        elif isinstance(stmt, ast.Import):
            self.import_module(stmt)
        elif isinstance(stmt, ast.Export):
            self.export(stmt)
        return NONE

    # -- modules (modules.py) ----------------------------------------------------------------

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

    def module_of(self, namespace: str, pos: Pos) -> Operand:
        """The module `namespace` (`m`, `m::sub`) starts from: an import in sight, else one
        the top level imported (functions see those), else `Module not found`."""
        root = namespace.split("::", 1)[0]
        for scope in reversed(self.module_scopes):
            if root in scope:
                return Operand(scope[root], EXPR)
        out = self.temp()
        self.emit(f"{out} = rt_module(rt, {self.m.constant(namespace)})", pos)
        return out

    def export(self, stmt: ast.Export) -> None:
        """`export x as y`: the variable's Cell, whose value the importer sees at the end."""
        if stmt.decl is not None:
            self.let(stmt.decl)
        info = self.lookup(stmt.name)
        if info is None:
            self.emit(f"raise rt_var_not_found({self.m.constant(stmt.name)})", stmt.pos)
            return
        self.emit(f"rt_export(rt, {self.m.constant(stmt.alias)}, {info.py})")

    def let(self, stmt: ast.Let) -> None:
        value = self.value_copy(stmt.value) if stmt.value is not None else NONE
        info = self.declare(stmt.name, stmt, stmt.const)
        live = self.live_variables()
        self.emit(
            f"if rt.variable_limit and {live} > rt.variable_limit: raise rt_too_many_variables()", stmt.pos
        )
        if info.cell:
            self.emit(f"{info.py} = Cell({value})")
        else:
            self.emit(f"{info.py} = {value}")
        if stmt.const and self.top_level and len(self.scopes) == 1:
            self.emit(f"rt.global_consts[{self.m.constant(stmt.name)}] = {info.load}")
        if self.export_lets and len(self.scopes) == 1:
            self.emit(f"dyn[{self.m.constant(stmt.name)}] = {info.load}")

    def value_copy(self, node: ast.Expr) -> Operand:
        """An expression's value for a second owner: copied when it may alias a variable."""
        operand = self.expr(node)
        if isinstance(node, ast.Var | ast.Property | ast.Index | ast.This) and not self.known_int(operand):
            copy = self.temp()
            self.emit(f"{copy} = {self.copied(operand)}")
            return copy
        return operand

    @staticmethod
    def copied(operand: Operand) -> str:
        """Inline copy: only arrays, maps and BLOBs need one; everything else is immutable."""
        return f"({operand} if type({operand}) not in CONTAINERS else rt.copy({operand}))"

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
                self, stmt.target, right, lambda current: self.compound(stmt, current, right)
            ):
                return
            self.compound(stmt, self.expr(stmt.target), right)

    def compound(self, stmt: ast.Assign, current: Operand, right: Operand) -> None:
        """`target op= right`, the target's value in `current`: the general path."""
        assert stmt.op is not None
        value = self.temp()
        slow = f"rt.compound({self.m.constant(stmt.op)}, {current}, {right})"
        if stmt.op.rstrip("=") in INT_ARITHMETIC:
            fast = self.int_result(value, current, stmt.op.rstrip("="), right)
            self.emit(f"if not ({fast}): {value} = {slow}", stmt.pos)
        else:
            self.emit(f"{value} = {slow}", stmt.pos)
        self.store(stmt.target, value, stmt.pos)

    @contextmanager
    def evaluated_once(self, target: ast.Expr) -> Iterator[None]:
        """Evaluate the indices of an lvalue chain once, outermost first: reading the
        target and storing back into each level then reuse them (`a[f()] += 1` calls f once)."""
        keys = []
        node = target
        chain = []
        while isinstance(node, ast.Property | ast.Index):
            chain.append(node)
            node = node.target
        for link in reversed(chain):
            if isinstance(link, ast.Index) and not isinstance(link.index, ast.Literal | ast.Var):
                self.once[id(link)] = self.named(self.expr(link.index))
                keys.append(id(link))
        try:
            yield
        finally:
            for key in keys:
                del self.once[key]

    def index_of(self, node: ast.Index) -> Operand:
        """The operand of `node`'s index: evaluated once for an assignment, else here."""
        held = self.once.get(id(node))
        return held if held is not None else self.expr(node.index)

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
            obj = self.named(self.expr(target.target))
            index = self.index_of(target)
            new = self.temp()
            fast = list_index_test(obj, index, self.known_int(index))
            if not self.known_int(index):
                fast = f"({fast}) or (type({obj}) is dict and type({index}) is str and not rt.map_limit)"
            # counted unless it is what the slot holds already (`a[i] += x` grew it in place)
            counted = (
                ""
                if value in (TRUE, FALSE, NONE) or value.is_int_literal
                else (
                    f"rt.data_limit and type({value}) in SIZED and rt.account_slot({obj}, {index}, {value}); "
                )
            )
            where = self.m.constant((target.pos, pos))
            slow = f"{new} = rt.index_set({obj}, {index}, {value}, {where})"
            if store_back:
                self.emit(f"if {fast}: {counted}{obj}[{index}] = {value}", ast.expr_pos(target.index))
                self.emit("else:")
                with self.indented():
                    self.emit(slow, ast.expr_pos(target.index))
                    self.emit(f"if {new} is not {obj}:")
                    with self.indented():
                        self._store_step(target.target, new, pos)
                return None
            self.emit(
                f"if {fast}: {counted}{obj}[{index}] = {value}; {new} = {obj}", ast.expr_pos(target.index)
            )
            self.emit(f"else: {slow}", ast.expr_pos(target.index))
            return target.target, obj, new
        raise RhaiSyntaxError("Expression cannot be assigned to", pos)

    def is_lvalue(self, node: ast.Expr) -> bool:
        if isinstance(node, ast.Var):
            return node.namespace is None and self.lookup(node.name) is not None
        if isinstance(node, ast.This):
            return True
        if isinstance(node, ast.Property | ast.Index):
            return self.is_lvalue(node.target)
        return False

    def is_const(self, node: ast.Expr) -> str:
        """Python expression telling whether the chain's root is a constant."""
        while isinstance(node, ast.Property | ast.Index):
            node = node.target
        if isinstance(node, ast.Var):
            info = self.lookup(node.name)
            return "True" if info is not None and info.const else "False"
        if isinstance(node, ast.This):
            return "th.const"
        return "False"

    def try_catch(self, stmt: ast.TryCatch) -> Operand:
        out = self.temp()
        self.emit("try:")
        # the optimizer drops pure statements of a try body, even the last one
        body = tuple(s for s in stmt.body.stmts if not (isinstance(s, ast.ExprStmt) and is_pure(s.expr)))
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
                value = self.block_body(stmt.handler.stmts, want_value=True)
                self.emit(f"{out} = {value}")
                self.catch_vars.pop()
        return out

    # -- expressions --------------------------------------------------------------------------

    def expr(self, node: Any) -> Operand:
        self.m.clock.tick()
        if self.too_deep() and not isinstance(node, FLAT_NODES):
            return compile_apart(self, node, lambda inner: inner.expr(node))
        method = getattr(self, "x_" + type(node).__name__)
        result: Operand = method(node)
        return result

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
        self.emit(f"{out} = op_unary({self.m.constant(node.op)}, {operand})", node.pos)
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
        elif node.op in ("%", "/"):
            python_op = "%" if node.op == "%" else "//"
            positive = " and ".join(
                [f"{left} >= 0"] * (not left.is_int_literal) + [f"{right} > 0"] * (not right.is_int_literal)
            )
            guard = " and ".join(x for x in (ints, positive) if x and x != "True") or "True"
            right_value, left_value = right.int_value, left.int_value
            if (right_value is not None and right_value <= 0) or (left_value is not None and left_value < 0):
                self.emit(f"{out} = {slow}", node.pos, operator=True)
            else:
                self.emit(
                    f"{out} = {left} {python_op} {right} if {guard} else {slow}", node.pos, operator=True
                )
        elif node.op in INT_COMPARISONS and both_int:
            self.emit(f"{out} = {left} {node.op} {right}", node.pos, operator=True)
            self.bool_operands.add(out)
        elif node.op in INT_COMPARISONS:
            self.emit(f"{out} = {left} {node.op} {right} if {ints} else {slow}", node.pos, operator=True)
        else:
            self.emit(f"{out} = {slow}", node.pos, operator=True)
        return out

    def stable(self, operand: Operand, later: Any) -> Operand:
        """Snapshot a variable operand when evaluating `later` might rebind it."""
        if operand.is_variable and not is_pure(later):
            copy = self.temp()
            self.emit(f"{copy} = {operand}")
            if operand in self.int_operands:
                self.int_operands.add(copy)
            return copy
        return operand

    def coalesce(self, node: ast.Binary) -> Operand:
        out = self.temp()
        left = self.expr(node.left)
        self.emit(f"{out} = {left}")
        self.emit(f"if {out} is None:")
        with self.indented():
            right = self.expr(node.right)
            self.emit(f"{out} = {right}")
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

    # -- chains: properties, indexing, method calls ------------------------------------------------

    def x_Property(self, node: ast.Property) -> Operand:
        return self.chain(node)

    def x_Index(self, node: ast.Index) -> Operand:
        return self.chain(node)

    def x_MethodCall(self, node: ast.MethodCall) -> Operand:
        if node.name == "append" and len(node.args) == 1 and not node.optional:
            return self.append_call(node)
        return self.chain(node)

    def append_call(self, node: ast.MethodCall) -> Operand:
        """`x.append(y)`: on a string held by a variable, property or element, grown in
        place (appends.py) unless the script defines its own `append(y)` method."""
        out = self.temp()
        with self.evaluated_once(node.target):
            item = self.value_copy(node.args[0])
            self.emit(f"{out} = None")

            def general(receiver: Operand) -> None:
                self.emit(f"{out} = {self.method_call(node, receiver, [item])}")

            if not append_in_place(self, node.target, item, general, also="not rt.functions_named_append"):
                general(self.named(self.expr(node.target)))
        return out

    def chain(self, node: ast.Property | ast.Index | ast.MethodCall) -> Operand:
        """Compile `a.b[c].d()`; an optional link that meets `()` skips the rest (RHAI.md §4)."""
        links: list[Any] = []
        base: Any = node
        while isinstance(base, ast.Property | ast.Index | ast.MethodCall):
            links.append(base)
            base = base.target
        links.reverse()
        out = self.temp()
        current = self.named(self.expr(base))
        going: str | None = None  # after an optional link: whether the chain goes on
        for link in links:
            if link.optional and going is None:
                going = self.m.fresh("go")
                self.emit(f"{going} = {current} is not None")
            elif link.optional:
                self.emit(f"if {going}: {going} = {current} is not None")
            if going is None:
                current = self.link(link, current)
                continue
            self.emit(f"if {going}:")  # each link one level in, however long the chain
            with self.indented():
                current = self.link(link, current)
        if going is None and current.place == TEMP:
            return current  # the last link's own temporary: no copy of it
        self.emit(f"{out} = {current}" if going is None else f"{out} = {current} if {going} else None")
        return out

    def link(self, link: Any, current: Operand) -> Operand:
        out = self.temp()
        if isinstance(link, ast.Property):
            name = self.m.constant(link.name)
            fast = f"{current}.get({name}) if type({current}) is dict"
            self.emit(f"{out} = {fast} else rt.get_prop({current}, {name})", link.pos)
        elif isinstance(link, ast.Index):
            index = self.index_of(link)
            fast = list_index_test(current, index)
            slow = f"rt.index_get({current}, {index})"
            if not self.known_int(index):
                slow = (
                    f"{current}.get({index}) if type({current}) is dict and type({index}) is str else {slow}"
                )
            self.emit(f"{out} = {current}[{index}] if {fast} else {slow}", ast.expr_pos(link.index))
        else:
            return self.method_call(link, current)
        return out

    def method_call(
        self, node: ast.MethodCall, receiver: Operand, args: list[Operand] | None = None
    ) -> Operand:
        """`receiver.name(args)`; `args` when already evaluated (`append_call`)."""
        if args is None:
            args = [self.value_copy(a) for a in node.args]
        out = self.temp()
        arg_list = f"[{joined(args)}]"
        name = self.m.constant(node.name)
        if node.name in ("type_of", "is_shared") and not args:
            self.emit(f"{out} = type_name({receiver})" if node.name == "type_of" else f"{out} = False")
            return out
        const = self.is_const(node.target)
        if node.name == "push" and len(args) == 1 and const == "False":
            self.emit(f"if type({receiver}) is list and not rt.functions_named_push:")
            with self.indented():
                self.emit(f"{receiver}.append({args[0]})")
                self.emit(f"if rt.sizes_checked: rt.pushed({receiver})", node.pos)
                self.emit(f"{out} = None")
            self.emit("else:")
            self.ind += 1
            self.emit(f"{out} = rt_method(rt, {name}, {receiver}, {arg_list}, {const}, d + 1)", node.pos)
            self.ind -= 1
            return out
        self.emit(f"{out} = rt_method(rt, {name}, {receiver}, {arg_list}, {const}, d + 1)", node.pos)
        self.emit(f"if type({out}) is Mutated:")
        with self.indented():
            if self.is_lvalue(node.target):
                self.store(node.target, Operand(f"{out}.receiver", EXPR), node.pos)
            self.emit(f"{out} = {out}.result")
        return out

    # -- calls ----------------------------------------------------------------------------------------

    def x_Call(self, node: ast.Call) -> Operand:
        if node.namespace is None and node.name in SPECIAL_CALLS:
            special = self.special_call(node)
            if special is not None:
                return special
        args = [self.value_copy(a) for a in node.args]
        out = self.temp()
        arity = len(args)
        if node.namespace is None and (node.name, arity) in self.functions:
            fn = self.functions[(node.name, arity)]
            if fn.this_type is None:
                self.emit(
                    f"{out} = {fn_py_name(node.name, arity)}(rt, d + 1, None, {joined(args)})", node.pos
                )
                return out
        arg_list = f"[{joined(args)}]"
        name = self.m.constant(node.name)
        if node.namespace is not None and node.namespace != "global":
            module = self.module_of(node.namespace, node.pos)
            namespace = self.m.constant(node.namespace)
            self.emit(
                f"{out} = rt_module_call(rt, {module}, {namespace}, {name}, {arg_list}, d + 1)", node.pos
            )
            return out
        first = node.args[0] if node.args else None
        if first is not None and isinstance(first, ast.Var) and self.is_lvalue(first):
            # a variable first argument is passed by reference to natives (they may change it)
            reference = self.expr(first)
            args_ref = f"[{joined([reference, *args[1:]])}]"
            self.emit(f"{out} = rt.call_native_ref({name}, {args_ref}, {self.is_const(first)})", node.pos)
            self.emit(f"if type({out}) is Mutated:")
            with self.indented():
                self.store(first, Operand(f"{out}.receiver", EXPR), node.pos)
                self.emit(f"{out} = {out}.result")
        else:
            self.emit(f"{out} = rt.call_native({name}, {arg_list})", node.pos)
        return out

    def special_call(self, node: ast.Call) -> Operand | None:
        name, args, out = node.name, node.args, self.temp()
        count = len(args)
        if name == "print" and count <= 1:
            value = self.expr(args[0]) if args else NONE
            self.emit(f"rt.print_value({value})", node.pos)
            self.emit(f"{out} = None")
        elif name == "debug" and count <= 1:
            if args:
                self.emit(f"rt.debug_value({self.expr(args[0])}, {node.pos!r})", node.pos)
            else:
                self.emit(f"rt.debug_text('', {node.pos!r})", node.pos)
            self.emit(f"{out} = None")
        elif name == "type_of" and count == 1:
            self.emit(f"{out} = type_name({self.expr(args[0])})")
        elif name == "Fn" and count == 1:
            self.emit(f"{out} = rt.make_fn_ptr({self.expr(args[0])})", args[0].pos)
        elif name == "call" and count >= 1:
            values = [self.value_copy(a) for a in args]
            self.emit(f"{out} = rt_call(rt, {values[0]}, [{joined(values[1:])}], d + 1)", node.pos)
        elif name == "curry" and count >= 1:
            values = [self.value_copy(a) for a in args]
            self.emit(f"{out} = rt_curry({values[0]}, [{joined(values[1:])}])", node.pos)
        elif name == "eval" and count == 1:
            text = self.expr(args[0])
            self.emit(f"{out} = rt_eval(rt, {text}, {self.m.constant(self.visible)})", args[0].pos)
        elif name == "is_def_var" and count == 1:
            self.emit(f"{out} = {self.is_def_var(args[0])}", args[0].pos)
        elif name == "is_def_fn" and count == 2:
            fn_name, arity = self.expr(args[0]), self.expr(args[1])
            self.emit(f"{out} = rt_is_def_fn(rt, {fn_name}, {arity})", node.pos)
        elif name == "is_def_fn" and count == 3:  # is_def_fn(this_type, name, arity): a typed method
            this_type, fn_name, arity = (self.expr(arg) for arg in args)
            self.emit(f"{out} = rt_is_def_fn(rt, {fn_name}, {arity}, {this_type})", node.pos)
        elif name == "is_shared" and count == 1:
            arg = args[0]
            info = self.lookup(arg.name) if isinstance(arg, ast.Var) else None
            self.emit(f"{out} = {info.py}.shared" if info is not None and info.cell else f"{out} = False")
        elif name == "exit" and count <= 1:
            value = self.expr(args[0]) if args else NONE
            self.emit(f"raise ExitScript({value})")
            self.emit(f"{out} = None")
        else:
            return None
        return out

    def is_def_var(self, arg: ast.Expr) -> str:
        if isinstance(arg, ast.Literal) and type(arg.value) is str:
            return "True" if self.lookup(arg.value) is not None else "False"
        value = self.expr(arg)
        return f"rt_is_def_var({value}, {self.m.constant(self.visible)})"

    # -- closures -------------------------------------------------------------------------------------

    def x_Closure(self, node: ast.Closure) -> Operand:
        """A closure is a function of the module whose first parameters are the Cells it
        captures (RHAI.md §10), bound to them when the closure is made."""
        py_name = self.m.fresh("c")
        inner = FunctionCompiler(self.m, self.functions, self.resolution, label="closure", top_level=False)
        cells: list[str] = []
        for name, info in self._captured(node):
            cells.append(info.py)
            inner.bind(name, VarInfo(self.m.fresh("v") + "_" + name, info.const, True))
        leading = tuple(info.py for info in inner.scopes[0].values())
        inner.function(py_name, node.params, node.body, node, leading=leading, wrap="in closure call")
        arity = len(node.params)
        out = self.temp()
        for cell in cells:
            self.emit(f"{cell}.shared = True")
        target = f"bind_closure({py_name}, {arity}, {', '.join(cells)})" if cells else py_name
        if not cells:
            self.m.emit_module_level(f"{py_name}.rhai_arity = {arity}")
            if arity == 1 and only_reads(node):
                self.m.emit_module_level(f"{py_name}.rhai_reads_only = True")
        self.emit(f"{out} = FnPtr({self.m.constant(anon_for(node))}, (), {target})")
        return out

    def _captured(self, node: ast.Closure) -> Iterator[tuple[str, VarInfo]]:
        """The shared variables in sight that the closure (or one nested in it) uses."""
        seen: set[str] = set()
        for _, name in self.resolution.closure_captures.get(id(node), ()):
            info = self.lookup(name)
            if info is not None and info.cell and name not in seen:
                seen.add(name)
                yield name, info

    # -- blocks and control flow ------------------------------------------------------------------------

    def x_Block(self, node: ast.Block) -> Operand:
        out = self.temp()
        with self.scope():
            value = self.block_body(node.stmts, want_value=True)
        self.emit(f"{out} = {value}")
        return out

    def x_If(self, node: ast.If) -> Operand:
        out = self.temp()
        inline = self.inline_comparison(node.cond)
        if inline is not None:  # `if n < 2`: compared and tested on one line
            self.emit(f"if {inline}:", node.cond.pos, operator=True)
        else:
            condition = self.expr(node.cond)
            self.emit(f"if {self.test(condition)}:", ast.expr_pos(node.cond))
        with self.indented(), self.scope():
            value = self.block_body(node.then.stmts, want_value=True)
            self.emit(f"{out} = {value}")
        self.emit("else:")
        with self.indented():
            if node.otherwise is None:
                self.emit(f"{out} = None")
            else:
                value = self.expr(node.otherwise)
                self.emit(f"{out} = {value}")
        return out

    def x_Switch(self, node: ast.Switch) -> Operand:
        out = self.temp()
        subject = self.expr(node.subject)
        self.emit(f"{out} = None")
        done = self.m.fresh("sw")
        self.emit(f"{done} = False")
        for case in node.cases:
            tests = [self.pattern_test(subject, p) for p in case.patterns]
            self.emit(f"if not {done} and ({' or '.join(tests)}):")
            with self.indented():
                if case.condition is not None:
                    condition = self.expr(case.condition)
                    self.emit(f"if cond({condition}):", case.condition.pos)
                    self.ind += 1
                value = self.expr(case.body)
                self.emit(f"{out} = {value}")
                self.emit(f"{done} = True")
                if case.condition is not None:
                    self.ind -= 1
        if node.default is not None:
            self.emit(f"if not {done}:")
            with self.indented():
                value = self.expr(node.default)
                self.emit(f"{out} = {value}")
        return out

    def pattern_test(self, subject: Operand, pattern: Any) -> str:
        if isinstance(pattern, ast.Binary) and pattern.op in ("..", "..="):
            start = self.constant_value(pattern.left)
            end = self.constant_value(pattern.right)
            return f"switch_in_range({subject}, {start!r}, {end!r}, {pattern.op == '..='})"
        value = self.constant_value(pattern)
        operand = (
            self.m.constant_object(value) if is_mutable_pattern(value) else literal_operand(self.m, value)
        )
        return f"switch_eq({subject}, {operand})"

    def constant_value(self, node: Any) -> Any:
        if isinstance(node, ast.Literal):
            return node.value
        if isinstance(node, ast.Unary) and node.op == "-" and isinstance(node.operand, ast.Literal):
            return -node.operand.value  # type: ignore[operator]
        if isinstance(node, ast.ArrayLit):
            return [self.constant_value(i) for i in node.items]
        if isinstance(node, ast.MapLit):
            return {k: self.constant_value(v) for k, v in node.items}
        raise RhaiSyntaxError("Expecting a literal expression", node.pos)

    def loop_body(self, body: ast.Block, loop: LoopTarget) -> None:
        self.loops.append(loop)
        with self.scope():
            # an empty body still counts 1 an iteration, as the reference's does
            self.block_body(body.stmts, want_value=False, pos=body.pos, at_least=1)
            self.emit("pass")
        self.loops.pop()

    def x_While(self, node: ast.While) -> Operand:
        loop = LoopTarget(self.temp())
        self.emit(f"{loop.result} = None")
        head = self.inline_comparison(node.cond)
        with self.counted_locally(node):
            if head is None:
                self.emit("while True:")
            else:
                self.emit(f"while {head}:", node.cond.pos, operator=True)
            self.indented_while(node, loop, head)
        return loop.result

    def indented_while(self, node: ast.While, loop: LoopTarget, head: str | None) -> None:
        with self.indented(blocks=1):
            self.pending_ops = count_ops(node.cond)  # the condition, at each iteration (as the reference)
            if head is None:
                condition = self.expr(node.cond)
                self.emit(f"if not {self.test(condition)}: break", ast.expr_pos(node.cond))
            self.loop_body(node.body, loop)

    def inline_comparison(self, node: ast.Expr) -> str | None:
        """A comparison of plain local variables and number literals as one Python test:
        ints compared directly, anything else through the operator and `cond`."""
        if not (isinstance(node, ast.Binary) and node.op in INT_COMPARISONS) or self.dynamic:
            return None
        sides = []
        for side in (node.left, node.right):
            if isinstance(side, ast.Literal) and type(side.value) is int:
                sides.append(literal_operand(self.m, side.value))
            elif isinstance(side, ast.Var) and side.namespace is None:
                info = self.lookup(side.name)
                if info is None or info.cell:
                    return None
                sides.append(info.load)
            else:
                return None
        left, right = sides
        ints = self.int_checks(left, right)
        fast = f"{left} {node.op} {right}"
        if ints == "True":
            return fast
        return f"({fast} if {ints} else cond({BINARY_NAMES[node.op]}({left}, {right})))"

    def x_Loop(self, node: ast.Loop) -> Operand:
        loop = LoopTarget(self.temp())
        self.emit(f"{loop.result} = None")
        with self.counted_locally(node):
            self.emit("while True:")
            with self.indented(blocks=1):
                self.pending_ops = 0  # the reference counts only the body at each iteration
                self.loop_body(node.body, loop)
        return loop.result

    def x_DoLoop(self, node: ast.DoLoop) -> Operand:
        loop = LoopTarget(self.temp())
        first = self.m.fresh("first")
        self.emit(f"{loop.result} = None")
        self.emit(f"{first} = True")
        with self.counted_locally(node):
            self.emit("while True:")
            with self.indented(blocks=1):
                self.pending_ops = count_ops(node.cond)  # the condition, at each iteration
                self.emit(f"if not {first}:")
                with self.indented():
                    condition = self.expr(node.cond)
                    test = "" if node.until else "not "
                    self.emit(f"if {test}{self.test(condition)}: break", ast.expr_pos(node.cond))
                self.emit(f"{first} = False")
                self.loop_body(node.body, loop)
        return loop.result

    def x_For(self, node: ast.For) -> Operand:
        loop = LoopTarget(self.temp())
        iterable = self.expr(node.iterable)
        self.emit(f"{loop.result} = None")
        if not node.body.stmts:  # the reference's optimizer drops a loop with an empty body
            return loop.result
        item = Operand(self.m.fresh("item"), TEMP)
        with self.scope():
            var = self.declare(node.var, node, False)
            counter = self.declare(node.counter, node, False) if node.counter else None
            for info in (var, counter):
                if info is not None and info.cell:
                    self.emit(f"{info.py} = Cell(None)")
            index = self.m.fresh("i")
            over_range = isinstance(node.iterable, ast.Binary) and node.iterable.op in ("..", "..=")
            read_only = not may_change(node.body, node.var)
            direct = (over_range or read_only) and not var.cell and str(var.load) == var.py
            if direct:  # `for v_x in …`: the item needs no copy and goes straight to the variable
                item = var.load
            head = f"{index}, {item} in enumerate(" if counter is not None else f"{item} in ("
            with self.counted_locally(node):
                self.emit(f"for {head}rt.iterate({iterable})):", ast.start_pos(node.iterable))
                with self.indented(blocks=1):
                    self.pending_ops = 0  # the reference counts only the body at each iteration
                    if not direct:
                        self.emit(f"{var.load} = {item if over_range or read_only else self.copied(item)}")
                    if counter is not None:
                        self.emit(f"{counter.load} = {index}")
                    self.loop_body(node.body, loop)
        return loop.result

    def x_Break(self, node: ast.Break) -> Operand:
        value = self.expr(node.value) if node.value is not None else NONE
        if not self.loops and self.apart is not None:  # the loop is in the function this part came from
            self.emit(self.apart.jump(BREAK, value))
            return NONE
        if node.value is not None and self.loops:
            self.emit(f"{self.loops[-1].result} = {value}")
        self.emit("break")
        return NONE

    def x_Continue(self, node: ast.Continue) -> Operand:
        if not self.loops and self.apart is not None:
            self.emit(self.apart.jump(CONTINUE, NONE))
        else:
            self.emit("continue")
        return NONE

    def x_Return(self, node: ast.Return) -> Operand:
        value = self.expr(node.value) if node.value is not None else NONE
        self.emit(f"return {value}" if self.apart is None else self.apart.jump(RETURN, value))
        return NONE

    def x_Throw(self, node: ast.Throw) -> Operand:
        if node.value is None and self.catch_vars:
            self.emit(f"raise {self.catch_vars[-1]}")
        else:
            value = self.expr(node.value) if node.value is not None else NONE
            self.emit(f"raise rt.throw({value})", node.pos)
        return NONE


def _without_calls(loop: ast.Expr) -> bool:
    """Whether nothing in `loop` calls a function, a method or a closure (which would
    count operations of their own while the loop holds its count in a local)."""
    pending: list[Any] = [loop]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Call | ast.MethodCall | ast.Closure):
            return False
        pending.extend(ast.children(node))
    return True


__all__ = ["FunctionCompiler"]
