"""A `while` loop of known trip count, counted in runs of iterations (sieve's `while k <= MAX`).

`while k <= e { …; k += p; }` (or `<`, or downward with `>`/`>=` and `-=`): `k` a
local proven an int that only the body's last statement changes, by a step `p`
that is a literal or an int local the body leaves alone (at run time, > 0), and
`e` an int literal or such a local. At each iteration, the number left is known:
`(e - k) // p + 1`.

When the loop counts in a local (control.py `counted_locally`), each iteration
first takes as many of the iterations left as fit in the room left to the
checkpoint, counts them at once and runs them in a copy of the body that counts
nothing; when none fits, the iteration runs as before, counting itself, so the
limit (and a host's periodic look at the clock) stops the loop at the same count
and place, and the next iteration takes a run again. Without a limit the whole
loop is one run. The copy

* has no jump and nothing that counts on its own (a nested block, a
  compound assignment's call of a native): such a body has no copy;
* runs its iterations, unless something fails: then the operations of the
  iterations not begun are taken back, so the count is the failing
  iteration's, as counting each iteration leaves it;
* reads and stores at an int index of the arrays it indexes without testing
  that they are arrays when they were at the run's start: the copy's only
  writes to them are stores at an index, which keep an array one;
* steps `k` without an overflow test when `e ± p` is an i64.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from agentkernel.rhai.codegen.function import FunctionBase, LoopTarget
from agentkernel.rhai.codegen.module import literal_operand
from agentkernel.rhai.codegen.operands import Operand
from agentkernel.rhai.runtime.values import I64_MAX, I64_MIN
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.records import record

_SWAPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}  # each comparison, its sides swapped
_UPWARD = frozenset({"<", "<="})
# what the copy of a body may not hold: what counts on its own, jumps, calls
_NOT_FLAT = frozenset(
    {
        ast.Block, ast.If, ast.Switch, ast.While, ast.Loop, ast.DoLoop, ast.For, ast.Break,
        ast.Continue, ast.Return, ast.Throw, ast.TryCatch, ast.Closure, ast.Call, ast.MethodCall,
        ast.Import, ast.Export, ast.Interpolated,
    }
)  # fmt: skip


@record
class Stepping:
    """What makes a `while` loop's trip count known at its entry."""

    var: Operand  # the local the head compares, which the last statement steps
    bound: Operand  # what it is compared with
    step: Operand  # the step's size: a literal > 0, or a local tested > 0 before each run
    upward: bool  # `k < e` / `k <= e` stepped by `k += p` (else `>`/`>=` and `-=`)
    strict: bool  # `<` or `>`
    last: ast.Assign  # the statement that steps it
    arrays: tuple[Operand, ...]  # the locals the body indexes and never assigns whole


def _walk(stmts: tuple[ast.Stmt, ...]) -> Iterator[ast.Node]:
    pending: list[ast.Node] = list(stmts)
    while pending:
        node = pending.pop()
        yield node
        pending.extend(ast.children(node))


def _root(target: ast.Expr) -> ast.Expr:
    while isinstance(target, ast.Index | ast.Property):
        target = target.target
    return target


class SteppedLoops(FunctionBase):
    """`while` loops counted in runs, on a copy of their body."""

    def stepped_while(self, node: ast.While, loop: LoopTarget, head: str) -> bool:
        """Emit `node` with a run of iterations in a copy of its body at the top of each
        iteration, and say True; or emit nothing and say False when it is not of the kind."""
        stepping = self.stepping(node)
        if stepping is None:
            return False
        mark, counts = self.m.mark(), self.counts_emitted
        ops = self.iteration_ops(node)
        trips = self.m.fresh("n")
        self.emit(f"while {head}:", node.cond.pos, operator=True)
        with self.indented(blocks=1):
            self.emit(f"if {self.run_test(stepping, trips, ops)}:")
            with self.indented():
                self.counted_copy(node, loop, stepping, trips, ops)
                self.emit("continue")
            if self.counts_emitted != counts:  # something in the body counts on its own: no copy
                self.m.rollback(mark)
                return False
            self.while_body(node, loop, head)
        return True

    def iteration_ops(self, node: ast.While) -> int:
        """What an iteration counts: its head and its body, as `loop_body` counts them."""
        body = sum(self.facts.ops(s) for s in self.kept(node.body.stmts, False))
        return max(body + self.facts.ops(node.cond), 1)

    def stepping(self, node: ast.While) -> Stepping | None:
        """What `node` is stepped by, if its iterations left are known (the module's docstring)."""
        cond, stmts = node.cond, node.body.stmts
        if self.counter is None or self.dynamic or not stmts or not isinstance(cond, ast.Binary):
            return None
        if cond.op not in _SWAPPED:
            return None
        op, var, bound = cond.op, cond.left, cond.right
        if not (isinstance(var, ast.Var) and var.namespace is None):
            op, var, bound = _SWAPPED[op], bound, var
        last = stmts[-1]
        if not (isinstance(last, ast.Assign) and last.op in ("+", "-") and isinstance(var, ast.Var)):
            return None
        if not (isinstance(last.target, ast.Var) and last.target.name == var.name):
            return None
        if any(isinstance(n, ast.Var) and n.name == var.name for n in (bound, last.value)):
            return None  # `while k <= k`, `k += k`: no known trip count
        k, e, p = self.int_local(var), self.int_operand(bound), self.int_operand(last.value)
        if k is None or e is None or p is None:
            return None
        value = p.int_value
        if value is not None:  # a literal step: its sign says which way it goes
            forward = (last.op == "+") == (value > 0)
            if value == 0:
                return None
            p = literal_operand(self.m, abs(value))
        else:
            forward = last.op == "+"
        if forward != (op in _UPWARD):
            return None
        arrays = self.flat_body(stmts, var.name, (bound, last.value))
        if arrays is None:
            return None
        return Stepping(k, e, p, forward, op in ("<", ">"), last, arrays)

    def int_local(self, node: ast.Expr) -> Operand | None:
        """A plain local proven an int (not a closure's Cell), as an operand."""
        if not (isinstance(node, ast.Var) and node.namespace is None):
            return None
        info = self.lookup(node.name)
        if info is None or info.cell or not self.known_int(info.load):
            return None
        return info.load

    def int_operand(self, node: ast.Expr) -> Operand | None:
        """An int literal or a plain local proven an int."""
        if isinstance(node, ast.Literal) and type(node.value) is int:
            return literal_operand(self.m, node.value)
        return self.int_local(node)

    def flat_body(
        self, stmts: tuple[ast.Stmt, ...], var: str, fixed: tuple[ast.Expr, ...]
    ) -> tuple[Operand, ...] | None:
        """The locals indexed in a body that can have a copy, which it never assigns whole; None
        when it cannot: it holds what counts on its own or jumps, changes `var` elsewhere than
        in its last statement, or changes a variable in `fixed` (the bound, the step)."""
        replaced: set[str] = set()  # declared or assigned whole
        assigned: set[str] = set()  # the roots of what is assigned
        indexed: set[str] = set()
        for node in _walk(stmts[:-1]):
            kind = type(node)
            if kind in _NOT_FLAT:
                return None
            if kind is ast.Let:
                replaced.add(node.name)  # type: ignore[union-attr]
            elif kind is ast.Assign:
                root = _root(node.target)  # type: ignore[union-attr]
                if isinstance(root, ast.Var):
                    assigned.add(root.name)
                if isinstance(node.target, ast.Var):  # type: ignore[union-attr]
                    replaced.add(node.target.name)  # type: ignore[union-attr]
            elif kind is ast.Index and isinstance(node.target, ast.Var):  # type: ignore[union-attr]
                indexed.add(node.target.name)  # type: ignore[union-attr]
        names = {var, *(n.name for n in fixed if isinstance(n, ast.Var))}
        if names & (replaced | assigned):
            return None
        arrays = []
        for name in sorted(indexed - replaced):
            info = self.lookup(name)
            if info is not None and not info.cell and name not in names:
                arrays.append(info.load)
        return tuple(arrays)

    def run_test(self, stepping: Stepping, trips: str, ops: int) -> str:
        """The test for a run: a step > 0, the arrays arrays, no overflow of the step when
        that is not known already, and at least one iteration's operations in the room left,
        all that are left if they fit (how many: `trips`)."""
        k, e, p = stepping.var, stepping.bound, stepping.step
        tests = [] if p.int_value is not None else [f"{p} > 0"]
        tests += [f"type({a}) is list" for a in stepping.arrays]
        if self.step_in_range(stepping) is None:
            tests.append(f"{e} + {p} <= {I64_MAX}" if stepping.upward else f"{e} - {p} >= {I64_MIN}")
        gap = f"{e} - {k}" if stepping.upward else f"{k} - {e}"
        gap += " - 1" if stepping.strict else ""
        room = f"{self.counter}_room - {self.counter}"
        tests.append(
            f"(({trips} := ({gap}) // {p} + 1) * {ops} <= {room} or ({trips} := ({room}) // {ops}) > 0)"
        )
        return " and ".join(tests)

    @staticmethod
    def step_in_range(stepping: Stepping) -> bool | None:
        """Whether the last step stays an i64, when both the bound and the step are literals."""
        bound, step = stepping.bound.int_value, stepping.step.int_value
        if bound is None or step is None:
            return None
        return bound + step <= I64_MAX if stepping.upward else bound - step >= I64_MIN

    def counted_copy(
        self, node: ast.While, loop: LoopTarget, stepping: Stepping, trips: str, ops: int
    ) -> None:
        """`trips` iterations counted at once (`ops` each), then run in the body's copy, which
        counts nothing; if it fails, the operations of the iterations not begun are taken back."""
        start, stop = self.m.fresh("k"), self.m.fresh("last")
        k, p, counter = stepping.var, stepping.step, self.counter
        self.emit(f"{counter} += {trips} * {ops}")
        self.emit(f"{start} = {k}")
        self.emit(
            f"{stop} = {k} + ({trips} - 1) * {p}"
            if stepping.upward
            else f"{stop} = {k} - ({trips} - 1) * {p}"
        )
        self.emit("try:")
        with self.indented(blocks=1):
            self.emit(f"while {k} <= {stop}:" if stepping.upward else f"while {k} >= {stop}:")
            with self.indented(blocks=1), self.copy_facts(stepping):
                self.loops.append(loop)
                with self.scope():
                    self.block_body(node.body.stmts, want_value=False, counted=True)
                    self.emit("pass")
                self.loops.pop()
        self.emit("except:")
        with self.indented(blocks=2):
            done = f"({k} - {start})" if stepping.upward else f"({start} - {k})"
            self.emit(f"{counter} -= ({trips} - {done} // {p} - 1) * {ops}")
            self.emit("raise")

    @contextmanager
    def copy_facts(self, stepping: Stepping) -> Iterator[None]:
        """While the copy is compiled: its arrays are arrays, its step needs no test when the
        run tested it, and the head's count is in the run's."""
        saved = self.proven_lists, self.safe_step
        self.proven_lists = frozenset(a.text for a in stepping.arrays)
        self.safe_step = stepping.last if self.step_in_range(stepping) is not False else None
        self.pending_ops = 0
        try:
            yield
        finally:
            self.proven_lists, self.safe_step = saved
