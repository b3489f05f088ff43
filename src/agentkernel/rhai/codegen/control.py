"""Compiling control flow: blocks, `if`, `switch`, the loops, `break`/`continue`/`return`/`throw`.

A loop with no call in it counts its operations in a local (`counted_locally`);
its head's own count is added to its body's (`pending_ops`), as the reference
counts the condition at each iteration.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agentkernel.rhai.analysis.facts import block_dependent
from agentkernel.rhai.analysis.folding import NOT_CONSTANT
from agentkernel.rhai.analysis.loop_types import NOTHING_STABLE, only_contains_argument, stable_types
from agentkernel.rhai.codegen.function import EntryBound, FunctionBase, LoopTarget
from agentkernel.rhai.codegen.inline_methods import PREDICATES
from agentkernel.rhai.codegen.loop_flags import Kept, LoopFlags
from agentkernel.rhai.codegen.module import Placeholder, literal_operand
from agentkernel.rhai.codegen.nesting import BREAK, CONTINUE, RETURN
from agentkernel.rhai.codegen.operands import INT_COMPARISONS, NONE, TEMP, Operand
from agentkernel.rhai.codegen.operator_names import BINARY_NAMES
from agentkernel.rhai.codegen.windows import Window
from agentkernel.rhai.errors import Pos, RhaiSyntaxError
from agentkernel.rhai.runtime.values import RangeVal
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.literals import Char

_SCALARS = frozenset({int, float, bool, str, Char, type(None)})  # constants shared by every use
_BOUNDS = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}  # each comparison, its sides swapped


class ControlFlow(FunctionBase):
    """Blocks, conditionals, loops and jumps."""

    def x_Block(self, node: ast.Block) -> Operand:
        out = self.temp() if node is not self.discarded else None  # a statement's: no value kept
        with self.scope():
            value = self.block_body(node.stmts, want_value=True)
        self.keep_value(out, value)
        return NONE if out is None else out

    def folded_arm(self, node: ast.If | ast.Switch) -> Operand | None:
        """An `if` or a `switch` on a constant whose arm taken is a scalar constant: that
        constant, as the reference's optimizer leaves it (its other arms never run)."""
        value = self.facts.constant(node)
        return self.m.constant(value) if type(value) in _SCALARS else None

    def x_If(self, node: ast.If) -> Operand:
        folded = self.folded_arm(node)
        if folded is not None:
            return folded
        head, self.head_count = self.head_count, None
        out = self.temp() if node is not self.discarded else None  # a statement's: no value kept
        if head is not None:
            return self.if_counted_in_branches(node, head, out)
        inline = self.inline_comparison(node.cond)
        if inline is not None:  # `if n < 2`: compared and tested on one line
            self.emit(f"if {inline}:", node.cond.pos, operator=True)
        else:
            condition = self.expr(node.cond)
            self.emit(f"if {self.test(condition)}:", ast.expr_pos(node.cond))
        with self.indented(), self.scope():
            self.keep_value(out, self.block_body(node.then.stmts, want_value=True))
        if node.otherwise is None and out is None:
            return NONE
        self.emit("else:")
        with self.indented():
            if node.otherwise is None:
                self.keep_value(out, NONE)
            else:
                if type(node.otherwise) is ast.If and self.facts.constant(node.otherwise) is NOT_CONSTANT:
                    # an `else if`: a statement of the `else` block there, counted when reached
                    self.count(self.facts.ops(node.otherwise) - 1, ast.expr_pos(node.otherwise.cond))
                if out is None:
                    self.discarded = node.otherwise
                self.keep_value(out, self.expr(node.otherwise))
        return NONE if out is None else out

    def keep_value(self, out: Operand | None, value: Operand) -> None:
        """End a branch: its value into `out`, or (a statement's `if`) nothing but a `pass`,
        so that the branch is never empty."""
        self.emit(f"{out} = {value}" if out is not None else "pass")

    def if_counted_in_branches(
        self, node: ast.If, head: tuple[int, Pos | None], out: Operand | None
    ) -> Operand:
        """`if a < b { … } else { … }` alone in its block, whose count (`head`) each branch
        adds to its own (statements.py `block_body`). On ints the comparison cannot fail, so
        counting it later changes nothing; on anything else it is counted first, as before,
        and taken back once compared, so that the branch's count is the same. An inlined
        predicate (`s.contains(c)`, chains.py `counted_predicate`) likewise."""
        head_ops, head_pos = head
        predicate = self.predicate_of(node.cond)
        if predicate is not None:
            return self.branches_counted(node, head, self.counted_predicate(node.cond, *predicate, head), out)
        parts = self.comparison_parts(node.cond)
        assert parts is not None  # merges_into_if
        fast, ints, slow = parts
        test = self.temp()
        if ints == "True":
            self.emit(f"{test} = {fast}", node.cond.pos, operator=True)
        else:
            self.emit(f"if {ints}: {test} = {fast}", node.cond.pos, operator=True)
            self.emit("else:")
            with self.indented():
                self.count(head_ops, head_pos)
                self.emit(f"{test} = cond({slow})", node.cond.pos, operator=True)
                self.emit(f"{self.counter or 'rt.operations'} -= {head_ops}")
        return self.branches_counted(node, head, test, out)

    def branches_counted(
        self, node: ast.If, head: tuple[int, Pos | None], test: Operand | str, out: Operand | None
    ) -> Operand:
        """`if test { … } else { … }` into `out` (None: a statement's, no value kept), each
        branch counting `head` with its own block."""
        head_ops, head_pos = head
        self.emit(f"if {test}:")
        with self.indented(), self.scope():
            self.branch_extra = head
            self.keep_value(out, self.block_body(node.then.stmts, want_value=True))
        self.emit("else:")
        with self.indented():
            if node.otherwise is None:
                self.count(head_ops, head_pos)
                if out is not None:
                    self.emit(f"{out} = None")
            else:
                self.branch_extra = head
                if out is None:
                    self.discarded = node.otherwise
                self.keep_value(out, self.expr(node.otherwise))
        return NONE if out is None else out

    def merges_into_if(self, kept: list[ast.Stmt]) -> bool:
        """Whether a block's count can go into the branches of the one `if` it holds (on a
        comparison of locals and literals, or an inlined predicate, with a block or nothing for
        `else`): a function's `if n < 2 { … } else { … }` then counts once per call, not twice,
        and a loop's `if !ends.contains(c) { … }` once an iteration."""
        if len(kept) != 1 or not isinstance(kept[0], ast.ExprStmt):
            return False
        node = kept[0].expr
        return (
            isinstance(node, ast.If)
            and type(node.otherwise) is not ast.If
            and self.facts.constant(node) is NOT_CONSTANT
            and (self.comparison_parts(node.cond) is not None or self.predicate_of(node.cond) is not None)
        )

    def predicate_of(self, cond: ast.Expr) -> tuple[ast.MethodCall, bool] | None:
        """`x.contains(c)` or `!x.contains(c)` (an inlined predicate, inline_methods.py) of a
        plain local and plain locals or literals: the call, and whether it is negated."""
        negated = isinstance(cond, ast.Unary) and cond.op == "!"
        call = cond.operand if isinstance(cond, ast.Unary) and negated else cond
        if self.dynamic or not isinstance(call, ast.MethodCall) or call.optional:
            return None
        if (call.name, len(call.args)) not in PREDICATES or not self.plain_local(call.target):
            return None
        if not all(isinstance(a, ast.Literal) or self.plain_local(a) for a in call.args):
            return None
        return call, negated

    def plain_local(self, node: ast.Expr) -> bool:
        """A variable of this function's own (not a closure's Cell, not a constant of a module)."""
        if not (isinstance(node, ast.Var) and node.namespace is None):
            return False
        info = self.lookup(node.name)
        return info is not None and not info.cell

    def x_Switch(self, node: ast.Switch) -> Operand:
        folded = self.folded_arm(node)
        if folded is not None:
            return folded
        out = self.temp()
        subject = self.expr(node.subject)
        self.emit(f"{out} = None")
        done = self.m.fresh("sw")
        self.emit(f"{done} = False")
        counted = self.facts.constant(node) is NOT_CONSTANT  # else it counted as its constant
        for case in node.cases:
            tests = [self.pattern_test(subject, p) for p in case.patterns]
            self.emit(f"if not {done} and ({' or '.join(tests)}):")
            with self.indented():
                if case.condition is not None:
                    if counted and type(case.condition) is not ast.Literal:  # a `true` is not run
                        self.count(self.facts.ops(case.condition), case.condition.pos)
                    condition = self.expr(case.condition)
                    self.emit(f"if cond({condition}):", case.condition.pos)
                    self.ind += 1
                value = self.switch_arm(case.body, counted)
                self.emit(f"{out} = {value}")
                self.emit(f"{done} = True")
                if case.condition is not None:
                    self.ind -= 1
        if node.default is not None:
            self.emit(f"if not {done}:")
            with self.indented():
                value = self.switch_arm(node.default, counted)
                self.emit(f"{out} = {value}")
        return out

    def switch_arm(self, body: ast.Expr, counted: bool) -> Operand:
        """The arm taken, counted as the reference evaluates it: an expression as itself; a
        block its block there, 1, and a block of its own when it keeps one (a `let` in it:
        `{ let y = 1; y }`), or the one expression it holds, its optimizer's promotion."""
        if not counted:
            return self.expr(body)
        if type(body) is not ast.Block:
            self.count(self.facts.ops(body), ast.expr_pos(body))
            return self.expr(body)
        only = body.stmts[0] if len(body.stmts) == 1 else None
        if type(only) is ast.ExprStmt and type(only.expr) is not ast.Block:
            self.count(self.facts.ops(only.expr), ast.expr_pos(only.expr))
            return self.expr(only.expr)
        kept = any(block_dependent(s) for s in body.stmts)
        self.count(2 if kept else 1, body.pos)
        return self.expr(body)

    def pattern_test(self, subject: Operand, pattern: Any) -> str:
        if isinstance(pattern, ast.Binary) and pattern.op in ("..", "..="):
            start = self.constant_value(pattern.left)
            end = self.constant_value(pattern.right)
            return f"switch_in_range({subject}, {start!r}, {end!r}, {pattern.op == '..='})"
        value = self.constant_value(pattern)
        operand = (
            self.m.constant_object(value) if type(value) in (list, dict) else literal_operand(self.m, value)
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

    @contextmanager
    def counted_locally(self, loop: ast.While | ast.Loop | ast.DoLoop | ast.For) -> Iterator[None]:
        """Count a loop's operations in a local rather than in `rt.operations`, when
        nothing in it can count on its own (no call but of a method compiled inline, whose
        general path hands the runtime the count first; a `for`'s iterable may call).

        The local holds what was counted since the runtime last saw it, beside the room
        left to the checkpoint: past that room the runtime takes the count and decides
        (`Runtime.settle`), so the limit trips at the very same block as counting inline
        would; the rest is added when the loop ends, however it ends. (An operator without a
        built-in counts its call in the runtime: checked there, and again when the loop ends.)
        """
        trips, self.loop_trips = self.loop_trips, None  # a `for`'s over a range (walk_range), this loop's
        # a `for` evaluates its iterable once, before the loop: only its body must be call-free
        if self.counter is not None or self.facts.has_loop_calls(
            loop.body if isinstance(loop, ast.For) else loop
        ):
            yield
            return
        counter = self.m.fresh("o")
        self.emit(f"{counter} = 0; {counter}_room = rt.checkpoint - rt.operations")
        entry = self.m.last_line()
        self.emit("try:")
        with self.indented(blocks=2):
            self.counter = counter
            self.loop_flags = self.flags_for(loop, trips)
            try:
                yield
            finally:
                self.counter = None
                self.m.extend_line(entry, self.loop_flags.assignments())
                for line, tests in self.loop_flags.refreshes():
                    self.m.fill(line, tests)
                self.loop_flags = None
        window, self.window = self.window, None  # a `for`'s over a range (x_For), if its body took one
        self.emit("finally:")
        with self.indented():
            self.emit(f"rt.operations += {counter if window is None else window.pending()}")
        # an operator's library call (runtime/library_ops.py) counts in the runtime, which the
        # local's room did not see: the limit holds the whole count at the latest here
        self.emit("if rt.operations > rt.checkpoint: rt.reached_checkpoint()", loop.pos)

    def flags_for(self, loop: ast.While | ast.Loop | ast.DoLoop | ast.For, trips: str | None) -> LoopFlags:
        """What the counted `loop` may test once at its entry (loop_flags.py): the plain locals
        it leaves of their type (a `for`'s iterable is evaluated before, once), found when the
        body first asks for a flag (the names the body declares are never among them, so the
        scopes it has opened by then change nothing); `trips`: how many iterations it will
        run, when known at its entry (what an array may be looked through for)."""

        def analyse() -> Kept:
            if self.dynamic:  # an `eval` may give a variable any value
                stable = NOTHING_STABLE
            elif isinstance(loop, ast.While | ast.DoLoop):
                stable = stable_types((loop.cond, loop.body))
            else:  # a `for`'s own variables are declared already, and set by each iteration
                names = (loop.var, loop.counter) if isinstance(loop, ast.For) else ()
                own = frozenset(name for name in names if name)
                stable = stable_types((loop.body,)).without(own)
            locals_of = self.plain_locals
            return (
                locals_of(stable.containers),
                locals_of(stable.texts),
                locals_of(stable.fixed_texts),
                locals_of(stable.only_indexed),
            )

        return LoopFlags(analyse, self.m.fresh, trips)

    def plain_locals(self, names: frozenset[str]) -> frozenset[str]:
        """The operand texts of the variables `names` in sight that are plain locals."""
        found = (self.lookup(name) for name in names)
        return frozenset(info.py for info in found if info is not None and not info.cell and not info.boxed)

    def loop_body(self, body: ast.Block, loop: LoopTarget) -> None:
        self.loops.append(loop)
        with self.scope():
            # an empty body still counts 1 an iteration, as the reference's does
            self.block_body(body.stmts, want_value=False, pos=body.pos, at_least=1)
            self.emit("pass")
        self.loops.pop()

    def x_While(self, node: ast.While) -> Operand:
        loop = LoopTarget(self.temp(), len(self.rests))
        self.emit(f"{loop.result} = None")
        head = self.inline_comparison(node.cond)
        with self.counted_locally(node):
            if head is None or not self.stepped_while(node, loop, head):
                self.emit("while True:" if head is None else f"while {head}:", node.cond.pos, operator=True)
                with self.indented(blocks=1):
                    self.while_body(node, loop, head)
        return loop.result

    def while_body(self, node: ast.While, loop: LoopTarget, head: str | None) -> None:
        """A `while` loop's iteration: its condition when not in its head, then its body."""
        # the condition, at each iteration, as the reference (`while true` is a plain loop there)
        forever = type(node.cond) is ast.Literal and node.cond.value is True
        self.pending_ops = 0 if forever else self.facts.ops(node.cond)
        self.entry = self.entry_bound(node) if head is not None else None
        if head is None:
            condition = self.expr(node.cond)
            self.emit(f"if not {self.test(condition)}: break", ast.expr_pos(node.cond))
        self.loop_body(node.body, loop)

    def entry_bound(self, node: ast.While) -> EntryBound | None:
        """What `while x > 5` (or `<`, `<=`, `>=`, either way round) proves of `x`, a local
        known to hold an int, at the body's first statement, where nothing has changed it yet."""
        cond = node.cond
        if not node.body.stmts or not (isinstance(cond, ast.Binary) and cond.op in _BOUNDS):
            return None
        op, var, limit = cond.op, cond.left, cond.right
        if isinstance(var, ast.Literal):  # `5 < x` is `x > 5`
            op, var, limit = _BOUNDS[op], limit, var
        if not (isinstance(var, ast.Var) and var.namespace is None and isinstance(limit, ast.Literal)):
            return None
        info = self.lookup(var.name)
        if info is None or info.cell or type(limit.value) is not int or not self.known_int(info.load):
            return None
        value = limit.value
        low = value + 1 if op == ">" else value if op == ">=" else None
        high = value - 1 if op == "<" else value if op == "<=" else None
        return EntryBound(node.body.stmts[0], info.load, low, high)

    def inline_comparison(self, node: ast.Expr) -> str | None:
        """A comparison of plain local variables and number literals as one Python test:
        ints compared directly, anything else through the operator and `cond`."""
        parts = self.comparison_parts(node)
        if parts is None:
            return None
        fast, ints, slow = parts
        return fast if ints == "True" else f"({fast} if {ints} else cond({slow}))"

    def comparison_parts(self, node: ast.Expr) -> tuple[str, str, str] | None:
        """`inline_comparison`'s parts: the comparison of ints (or of a string and a string
        literal, by `==`/`!=`), the test that the sides are such ("True" when known), and the
        comparison of anything else (a Rhai value)."""
        if not (isinstance(node, ast.Binary) and node.op in INT_COMPARISONS) or self.dynamic:
            return None
        text = self.text_comparison(node)
        if text is not None:
            return text
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
        return (
            f"{left} {node.op} {right}",
            self.int_checks(left, right),
            f"{BINARY_NAMES[node.op]}({left}, {right}, rt)",
        )

    def text_comparison(self, node: ast.Binary) -> tuple[str, str, str] | None:
        """`comparison_parts` of `word != ""`: a plain local and a string literal, compared by
        Python's own equality when the local holds a string (a char, a tag: the operator)."""
        sides = (node.left, node.right)
        literals = [s for s in sides if isinstance(s, ast.Literal) and type(s.value) is str]
        if node.op not in ("==", "!=") or len(literals) != 1:
            return None
        other = node.right if literals[0] is node.left else node.left
        if not (isinstance(other, ast.Var) and other.namespace is None):
            return None
        info = self.lookup(other.name)
        if info is None or info.cell:
            return None
        constant = self.m.constant(literals[0].value)
        literal = self.str_literal(constant)
        left, right = (literal, info.load) if literals[0] is node.left else (info.load, literal)
        slow = (constant, info.load) if literals[0] is node.left else (info.load, constant)
        return (
            f"{left} {node.op} {right}",
            self.type_test(info.load, "str"),
            f"{BINARY_NAMES[node.op]}({slow[0]}, {slow[1]}, rt)",
        )

    def x_Loop(self, node: ast.Loop) -> Operand:
        loop = LoopTarget(self.temp(), len(self.rests))
        self.emit(f"{loop.result} = None")
        with self.counted_locally(node):
            self.emit("while True:")
            with self.indented(blocks=1):
                self.pending_ops = 0  # the reference counts only the body at each iteration
                self.loop_body(node.body, loop)
        return loop.result

    def x_DoLoop(self, node: ast.DoLoop) -> Operand:
        loop = LoopTarget(self.temp(), len(self.rests))
        first = self.m.fresh("first")
        self.emit(f"{loop.result} = None")
        self.emit(f"{first} = True")
        with self.counted_locally(node):
            self.emit("while True:")
            with self.indented(blocks=1):
                self.pending_ops = self.facts.ops(node.cond)  # the condition, at each iteration
                self.emit(f"if not {first}:")
                with self.indented():
                    condition = self.expr(node.cond)
                    test = "" if node.until else "not "
                    self.emit(f"if {test}{self.test(condition)}: break", ast.expr_pos(node.cond))
                self.emit(f"{first} = False")
                # its body counted the condition ahead: a `break` or `continue` takes it back too,
                # as the reference evaluates it after the body (and not at all after a `continue`)
                self.rests.append(self.pending_ops)
                try:
                    self.loop_body(node.body, loop)
                finally:
                    self.rests.pop()
        return loop.result

    def x_For(self, node: ast.For) -> Operand:
        loop = LoopTarget(self.temp(), len(self.rests))
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
            read_only = not self.facts.changes_variable(node)
            direct = (over_range or read_only) and not var.cell and str(var.load) == var.py
            if direct:  # `for v_x in …`: the item needs no copy and goes straight to the variable
                item = var.load
            head = f"{index}, {item} in enumerate(" if counter is not None else f"{item} in ("
            # a call's new list (`s.split(" ")`): no copy when nothing else holds it
            walk = "iterate_new" if isinstance(node.iterable, ast.Call | ast.MethodCall) else "iterate"
            owner = self.counter is None
            span = self.walk_range(iterable) if owner and self.int_range(node.iterable) else None
            # a range's items are ints: only another iterable may be walked letter by letter
            raw = span is None and direct and read_only and counter is None and self.walks_characters(node)
            with self.counted_locally(node):
                # a string's characters without a call of the runtime's (what `iterate` does)
                walked = f"map(CHAR_OF, {iterable}) if type({iterable}) is str else rt.{walk}({iterable})"
                copied = False
                if raw:  # its own one-letter strings, the `char`s made only where needed
                    flag = self.m.fresh("w")
                    walked = f"{iterable} if ({flag} := type({iterable}) is str) else rt.{walk}({iterable})"
                    self.raw_chars[var.load.text] = flag
                    copied = self.letter_copy(node, loop, var, iterable)  # then the loop goes in its `else`
                    self.ind += copied
                window = None
                if span is not None:
                    walked = span
                    if self.counter is not None and read_only and counter is None:  # counted by its variable
                        window = self.open_window(item, span)
                self.emit(f"for {head}{walked}):", ast.start_pos(node.iterable))
                with self.indented(blocks=1):
                    self.pending_ops = 0  # the reference counts only the body at each iteration
                    if not direct:
                        self.emit(f"{var.load} = {item if over_range or read_only else self.copied(item)}")
                    if counter is not None:
                        self.emit(f"{counter.load} = {index}")
                    flags = self.loop_flags if read_only and not var.cell and not raw else None
                    if flags is not None:  # its types tested once an iteration (loop_flags.py)
                        top = self.m.placeholder(self.ind)
                        flags.iterate(var.load.text)
                    self.loop_body(node.body, loop)
                    if flags is not None:
                        self.m.fill(top, flags.iteration_tests(var.load.text))
                if window is not None:
                    self.close_window(*window)
                self.ind -= copied
                self.raw_chars.pop(var.load.text, None)
        return loop.result

    def walks_characters(self, node: ast.For) -> bool:
        """Whether a `for` may walk a string's own characters rather than `char`s: its variable
        is named only as the argument of `contains` (loop_types.py), where a one-letter string
        does what the `char` does; the general path of such a call makes the `char`."""
        return not self.dynamic and only_contains_argument(node.body, node.var)

    def int_range(self, iterable: ast.Expr) -> bool:
        """Whether a `for` walks a range of ints for sure: a constant one, or `a..b` / `a..=b`
        of int literals and locals proven ints (the operator has no other meaning on them)."""
        if type(self.facts.constant(iterable)) is RangeVal:
            return True
        if not (isinstance(iterable, ast.Binary) and iterable.op in ("..", "..=")):
            return False
        return all(self.proven_int(side) for side in (iterable.left, iterable.right))

    def proven_int(self, node: ast.Expr) -> bool:
        if isinstance(node, ast.Literal):
            return type(node.value) is int
        if not (isinstance(node, ast.Var) and node.namespace is None):
            return False
        info = self.lookup(node.name)
        return info is not None and not info.cell and self.known_int(info.load)

    def walk_range(self, iterable: Operand) -> str:
        """A `for` over a range of ints walks the Python range from a local, made before the
        loop's count opens: its length bounds what the loop's entry may look through
        (`loop_trips`, loop_flags.py)."""
        walk = self.m.fresh("r")
        self.emit(f"{walk} = rt.iterate({iterable})")
        self.loop_trips = f"len({walk})"
        return walk

    def open_window(self, item: Operand, walk: str) -> tuple[str, Window, Placeholder]:
        """Before the `for` line of a loop over a range counted by its variable (windows.py):
        the window its body's block takes; the line that starts it, filled once the body's
        count is known (`close_window`)."""
        assert self.counter is not None
        window = Window(item.text, self.m.fresh("b"), self.m.fresh("l"), self.counter)
        self.window_pending = window
        return walk, window, self.m.placeholder(self.ind)

    def close_window(self, walk: str, window: Window, entry: Placeholder) -> None:
        """After the body: the window's entry, if its block took it (statements.py `block_body`)."""
        self.window_pending = None
        if window.per is not None:
            self.m.fill(entry, window.entry(walk))

    def x_Break(self, node: ast.Break) -> Operand:
        value = self.expr(node.value) if node.value is not None else NONE
        if not self.loops and self.apart is not None:  # the loop is in the function this part came from
            self.emit(self.apart.jump(BREAK, value))
            return NONE
        if node.value is not None and self.loops:
            self.emit(f"{self.loops[-1].result} = {value}")
        if self.loops:
            self.uncount(self.loops[-1].rests_at)
        self.emit("break")
        return NONE

    def x_Continue(self, node: ast.Continue) -> Operand:
        if not self.loops and self.apart is not None:
            self.emit(self.apart.jump(CONTINUE, NONE))
        else:
            self.uncount(self.loops[-1].rests_at if self.loops else 0)
            self.emit("continue")
        return NONE

    def x_Return(self, node: ast.Return) -> Operand:
        value = self.expr(node.value) if node.value is not None else NONE
        self.uncount()
        self.emit(f"return {value}" if self.apart is None else self.apart.jump(RETURN, value))
        return NONE

    def x_Throw(self, node: ast.Throw) -> Operand:
        if node.value is None and self.catch_vars:
            self.emit(f"raise {self.catch_vars[-1]}")
        else:
            value = self.expr(node.value) if node.value is not None else NONE
            self.emit(f"raise rt.throw({value})", node.pos)
        return NONE


__all__ = ["ControlFlow"]
