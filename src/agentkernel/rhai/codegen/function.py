"""What every part of the compiler shares: one Python function being written, and its state.

`FunctionCompiler` (compiler.py) is made of parts, one module each for what
they compile: statements.py, assignments.py, control.py, expressions.py,
chains.py, calls.py. This base holds what they all use: emitting lines at an
indentation, the scopes and the variables in sight, counting operations, the
facts known of operands (ints, bools), temporaries and copies, and `expr`,
which hands a node to the part that compiles it (`x_<Node>`). The few
entry points one part calls in another are declared here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agentkernel.rhai.analysis.facts import Facts
from agentkernel.rhai.analysis.scopes import Scopes, decl_key
from agentkernel.rhai.codegen.batches import BatchCopy
from agentkernel.rhai.codegen.loop_flags import SETTINGS, SHORT, Assumptions, LoopFlags
from agentkernel.rhai.codegen.module import Module
from agentkernel.rhai.codegen.nesting import MAX_BLOCKS, MAX_INDENT, Apart
from agentkernel.rhai.codegen.operands import CONSTANT, EXPR, TEMP, Operand
from agentkernel.rhai.codegen.variables import VarInfo, Visible
from agentkernel.rhai.codegen.windows import Window
from agentkernel.rhai.errors import Pos
from agentkernel.rhai.runtime.values import I64_MAX, I64_MIN
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.records import mutable_record, record

_SHORT_LITERAL = 40  # characters: a string constant this short is written into the code itself


@mutable_record
class LoopTarget:
    """The loop a `break` leaves: where its value goes."""

    result: Operand
    rests_at: int = 0  # how many blocks were being compiled outside the loop (`FunctionBase.rests`)


@record
class EntryBound:
    """At `stmt`, the first statement of a `while` body, the int local `local` lies within
    [low, high] (None: unbounded), as the loop's head just tested."""

    stmt: ast.Stmt
    local: Operand
    low: int | None
    high: int | None


class FunctionBase:
    """The state of one Python function being generated: a script fn, a closure, the top level,
    or a part of one compiled apart (nesting.py)."""

    def __init__(
        self,
        module: Module,
        functions: dict[tuple[str, int], ast.FnDef],
        resolution: Scopes,
        facts: Facts,
        *,
        label: str,
        top_level: bool,
    ) -> None:
        self.m = module
        self.functions = functions
        self.resolution = resolution
        self.facts = facts
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
        self.main_top = False  # the next block is the script's top level (statements.py `ahead`)
        # the expression the script's last statement evaluates: the reference counts nothing
        # after it, so what it counts on a copy of its state there is its last report
        self.final_value: ast.Expr | None = None
        self.discarded: ast.Expr | None = None  # an expression statement's, whose value nobody reads
        # per block being compiled, the operations it counted ahead for its statements after the
        # current one: what a `break`, `continue`, `return` or `exit` leaving them un-counts
        self.rests: list[int] = []
        self.int_keys: frozenset[tuple[int, str]] = frozenset()  # declarations proven i64 (int_types.py)
        self.int_operands: set[Operand] = set()  # operands known to hold an int
        self.non_negative_operands: set[Operand] = set()  # of those, the ones never below 0
        self.bool_operands: set[Operand] = set()  # operands known to hold a bool
        self.text_operands: set[Operand] = set()  # locals known to hold a plain string
        self.map_operands: set[Operand] = set()  # locals known to hold an object map
        self.once: dict[int, Operand] = {}  # an assignment's indices, evaluated once (`evaluated_once`)
        self.counter: str | None = None  # the local a loop without calls counts in (counted_locally)
        # a `for` over a range counted by its variable (windows.py): its window once the body's
        # count is known, and before, the window its body's block is to take
        self.window: Window | None = None
        # a `for` variable holding a string's own characters, not `char`s (control.py
        # `walks_characters`): its operand text → the local saying the loop walks a string
        self.raw_chars: dict[str, str] = {}
        self.window_pending: Window | None = None
        self.loop_flags: LoopFlags | None = None  # that loop's types tested at its entry (loop_flags.py)
        self.loop_trips: str | None = None  # the iterations of the `for` about to open a count, if known
        # what a `while` head proves of an int local at its body's first statement (`entry_bound`)
        self.entry: EntryBound | None = None
        # a block's count (operations, position) moved into the branches of the `if` it holds
        # (control.py `x_If`), and the part of it the next block compiled counts with its own
        self.head_count: tuple[int, Pos | None] | None = None
        self.branch_extra: tuple[int, Pos | None] | None = None
        self.counts_emitted = 0  # counts emitted so far (stepped.py: a loop body's copy has none)
        # in a loop body's copy counted in runs (stepped.py): the locals proven to hold arrays,
        # and the statement stepping the loop when its overflow is ruled out
        self.proven_lists: frozenset[str] = frozenset()
        self.safe_step: ast.Stmt | None = None
        # a reading closure's copy run over a `filter`'s or `map`'s items at once (batches.py),
        # and the operand of its parameter → the kind of value it is known to hold there
        self.batch: BatchCopy | None = None
        # a `for` over a string's letters compiled a second time, as a copy run only when what
        # its entry tests holds (letter_walks.py): the tests assumed true, and said there
        self.assuming: Assumptions | None = None
        self.known_kinds: dict[str, str] = {}

    # -- emitting and counting --------------------------------------------------------------

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

    def uncount(self, since: int = 0) -> None:
        """Leaving the blocks being compiled from the `since`th on: the reference never counts
        their statements after this one, which they counted ahead here."""
        self.take_back(sum(self.rests[since:]))

    @property
    def count_into(self) -> str:
        """Where an operation counted here goes: a loop's local counter or the runtime's."""
        return self.counter if self.counter is not None else "rt.operations"

    def take_back(self, operations: int, prefix: str = "") -> None:
        """Un-count `operations` counted ahead that the reference does not count after all
        (`prefix`: a condition for it, `if x: `)."""
        if not operations:
            return
        self.emit(f"{prefix}{self.count_into} -= {operations}")

    def too_deep(self) -> bool:
        """Whether code nested further must go to a function of its own (see `nesting.py`)."""
        return self.blocks >= MAX_BLOCKS or self.ind >= MAX_INDENT

    def count(self, operations: int | str, pos: Pos | None) -> None:
        """Count operations inline; past the checkpoint the runtime decides (limit, clock).

        `Too many operations` is reported at the first statement of the block.
        """
        if self.batch is not None:  # a batch copy counts nothing: its caller counts its items
            self.batch.counted(operations, self.ind)
            return
        self.counts_emitted += 1
        self.emit(f"{self.counter or 'rt.operations'} += {operations}")
        self.check_count(pos)

    def check_count(self, pos: Pos | None) -> None:
        """Past the checkpoint, the runtime decides (`count`'s second half); a letter walk's
        copy never passes it (letter_walks.py)."""
        if self.assuming is not None:
            return
        window = self.window
        if window is not None:
            self.emit(f"if {window.counter} > {window.counter}_room: {window.settle()}", pos)
        elif self.counter is not None:
            # the local is zeroed as the runtime takes its count, before the check may raise
            local, taken = self.counter, f"{self.counter} - ({self.counter} := 0)"
            self.emit(f"if {local} > {local}_room: {local}_room = rt.settle({taken})", pos)
        else:
            self.emit("if rt.operations > rt.checkpoint: rt.reached_checkpoint()", pos)

    def hand_count(self) -> None:
        """Before a general path that counts in the runtime: the runtime takes the loop's count."""
        if self.window is not None:
            self.emit(self.window.hand_over())
        elif self.counter is not None:
            self.emit(f"rt.operations += {self.counter}; {self.counter} = 0")

    def take_room(self) -> None:
        """After it: the room left to the checkpoint, into the loop's locals."""
        if self.window is not None:
            self.emit(self.window.room())
        elif self.counter is not None:
            self.emit(f"{self.counter}_room = rt.checkpoint - rt.operations")

    def count_merged(self, head: tuple[int, Pos | None], operations: int, pos: Pos | None) -> None:
        """Count a block's `operations` (at `pos`) with the `head` an `if` moved into it: one
        addition and one test; only past the checkpoint are the two checked apart, each at its
        own position, as two counts would be (the condition between them cannot fail)."""
        head_ops, head_pos = head
        self.counts_emitted += 1
        if not operations:
            self.count(head_ops, head_pos)
            return
        if self.assuming is not None:  # a letter walk's copy: no checkpoint to pass
            self.emit(f"{self.count_into} += {head_ops + operations}")
            return
        total, past = (
            (self.counter, f"{self.counter} > {self.counter}_room")
            if self.counter
            else (
                "rt.operations",
                "rt.operations > rt.checkpoint",
            )
        )
        self.emit(f"{total} += {head_ops + operations}")
        self.emit(f"if {past}:")
        with self.indented():
            self.emit(f"{total} -= {operations}")
            self.check_count(head_pos)
            self.emit(f"{total} += {operations}")
            self.check_count(pos)

    def test(self, operand: Operand) -> str:
        """A Python condition for a Rhai bool: only `true`/`false` decide, anything else errors."""
        if operand in self.bool_operands:
            return operand.text
        return f"({operand} is True or ({operand} is not False and cond({operand})))"

    def type_test(self, operand: Operand, kind: str, *, negated: bool = False, unless: str = "") -> str:
        """`type(x) is kind` (`dict`, `list`, `str`; `is not` if `negated`), or the flag the
        counted loop around tested it into at its entry, when the loop leaves `x` of that type
        (loop_flags.py). `unless`: and the setting of that name is off (one flag for both)."""
        assert not (negated and unless)
        known = self.known_kinds.get(operand.text)
        if known is not None and not unless:
            return repr((known == kind) != negated)
        flags = self.loop_flags
        flag = flags.type_test(operand.text, kind, unless) if flags is not None else None
        if flag is not None and self.assuming is not None:
            return repr((self.assuming.hold(flag) == "True") != negated)
        if flag is not None:
            return f"not {flag}" if negated else flag
        test = f"type({operand}) is {'not ' if negated else ''}{kind}"
        return f"{test} and not {self.setting(unless)}" if unless else test

    def short_text_flag(self, operand: Operand) -> str | None:
        """The counted loop's flag saying `operand` is a string shorter than POLL_SIZE, when the
        loop keeps it one and never appends to it (loop_flags.py); else None."""
        flag = self.loop_flags.type_test(operand.text, SHORT) if self.loop_flags is not None else None
        return self.assuming.hold(flag) if flag is not None and self.assuming is not None else flag

    def receiver_stored(self, target: ast.Expr) -> None:
        """A method's call just stored a new receiver into `target` (a `Mutated`): when that is a
        variable, the counted loop's flags of it are tested again here (loop_flags.py: what the
        loop may not retype otherwise). Into a member, the variable keeps its type."""
        flags = self.loop_flags
        if flags is None or not isinstance(target, ast.Var) or target.namespace is not None:
            return
        info = self.lookup(target.name)
        if info is not None and not info.cell and flags.flaggable(info.py):
            flags.stored(info.py, self.m.placeholder(self.ind))  # the tests go in once it is compiled

    def setting(self, name: str) -> str:
        """`rt.<name>`, a setting fixed for a function's run (loop_flags.SETTINGS: the size limits,
        whether the inlined natives are the standard ones), or the local the counted loop around
        read it into."""
        assert name in SETTINGS, name  # anything else may change under a loop
        local = f"rt.{name}" if self.loop_flags is None else self.loop_flags.setting(name)
        if name == "natives_inline" and self.assuming is not None:
            return self.assuming.hold(local)
        return local

    def known_int(self, operand: Operand) -> bool:
        """Whether the operand is an int literal or proven to hold an i64 (int_types.py)."""
        return operand.is_int_literal or operand in self.int_operands

    def non_negative(self, operand: Operand) -> bool:
        """Whether the operand is an int ≥ 0: a literal, or a local proven never below 0."""
        value = operand.int_value
        return value >= 0 if value is not None else operand in self.non_negative_operands

    def int_checks(self, *operands: Operand) -> str:
        """`type(x) is int and …` for the operands not already known to be ints."""
        return " and ".join(f"type({o}) is int" for o in operands if not self.known_int(o)) or "True"

    def in_range_at_entry(self, stmt: ast.Assign, current: Operand, op: str, right: Operand) -> bool:
        """Whether `current op right`, the first statement of a `while` body whose head bounds
        `current` (`while x > 0 { x -= 1 }`), stays an i64: no overflow test is needed."""
        if stmt is self.safe_step:
            return True
        entry, step = self.entry, right.int_value
        if entry is None or entry.stmt is not stmt or entry.local != current or step is None:
            return False
        delta = step if op == "+" else -step if op == "-" else None
        if delta is None:
            return False
        if delta >= 0:
            return entry.high is not None and entry.high + delta <= I64_MAX
        return entry.low is not None and entry.low + delta >= I64_MIN

    def int_result(self, out: Operand, left: Operand, op: str, right: Operand) -> str:
        """The condition of integer arithmetic's fast path: both operands ints, and
        `out := left op right` within the i64 range. Adding a non-negative literal can
        only pass the top of the range, subtracting one only the bottom: one comparison."""
        value = f"({out} := {left} {op} {right})"
        step = right.int_value
        if step is not None and op in ("+", "-") and step != 0:
            upward = (op == "+") == (step > 0)
            in_range = f"{value} <= {I64_MAX}" if upward else f"{I64_MIN} <= {value}"
        elif op in ("+", "*") and self.non_negative(left) and self.non_negative(right):
            in_range = f"{value} <= {I64_MAX}"  # the sum or product of two ints ≥ 0 is ≥ 0
        else:
            in_range = f"{I64_MIN} <= {value} <= {I64_MAX}"
        ints = self.int_checks(left, right)
        return in_range if ints == "True" else f"{ints} and {in_range}"

    # -- operands ------------------------------------------------------------------------------

    def is_str_constant(self, operand: Operand) -> bool:
        """Whether the operand is an entry of the constants table holding a plain string."""
        if operand.place != CONSTANT:
            return False
        return type(self.m.constants[int(operand.text[2:-1])]) is str

    def str_literal(self, constant: Operand) -> str:
        """A short string of the constants table as a Python literal (no lookup at run time)."""
        value = self.m.constants[int(constant.text[2:-1])]
        return repr(value) if len(value) <= _SHORT_LITERAL else constant.text

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

    @staticmethod
    def copied(operand: Operand) -> str:
        """Inline copy: only arrays, maps and BLOBs need one; everything else is immutable."""
        return f"({operand} if type({operand}) not in CONTAINERS else rt.copy({operand}))"

    def value_copy(self, node: ast.Expr) -> Operand:
        """An expression's value for a second owner: copied when it may alias a variable."""
        operand = self.expr(node)
        if isinstance(node, ast.Var | ast.Property | ast.Index | ast.This) and not self.known_int(operand):
            copy = self.temp()
            self.emit(f"{copy} = {self.copied(operand)}")
            return copy
        return operand

    # -- variables and modules in sight ----------------------------------------------------------

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
            if key in self.resolution.non_negative_keys:
                self.non_negative_operands.add(info.load)
        if not info.cell and not self.dynamic:  # an `eval` may give a variable any value
            if key in self.resolution.text_keys:
                self.text_operands.add(info.load)
            if key in self.resolution.map_keys:
                self.map_operands.add(info.load)
        self.bind(name, info)
        return info

    def bind(self, name: str, info: VarInfo) -> None:
        """Put `name` in sight in the current scope."""
        self.scopes[-1][name] = info
        self.visible = Visible.of(name, info.py, info.cell, self.visible, info.const)

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

    # -- indices of an assignment, evaluated once ----------------------------------------------------

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

    # -- what the parts compile, and the other parts call -------------------------------------------

    def expr(self, node: Any) -> Operand:
        raise NotImplementedError  # compiler.py: the part that compiles the node

    def merges_into_if(self, kept: list[ast.Stmt]) -> bool:
        raise NotImplementedError  # control.py

    def kept(self, stmts: tuple[ast.Stmt, ...], want_value: bool) -> list[ast.Stmt]:
        raise NotImplementedError  # statements.py

    def stepped_while(self, node: ast.While, loop: LoopTarget, head: str) -> bool:
        raise NotImplementedError  # stepped.py

    def while_body(self, node: ast.While, loop: LoopTarget, head: str | None) -> None:
        raise NotImplementedError  # control.py

    def loop_body(self, body: ast.Block, loop: LoopTarget) -> None:
        raise NotImplementedError  # control.py

    def letter_copy(self, node: ast.For, loop: LoopTarget, var: VarInfo, iterable: Operand) -> bool:
        raise NotImplementedError  # letter_walks.py

    def block_body(
        self,
        stmts: tuple[ast.Stmt, ...],
        *,
        want_value: bool,
        counted: bool = False,
        pos: Pos | None = None,
        at_least: int = 0,
    ) -> Operand:
        raise NotImplementedError  # statements.py

    def assign(self, stmt: ast.Assign) -> None:
        raise NotImplementedError  # assignments.py

    def store(self, target: ast.Expr, value: Operand, pos: Pos) -> None:
        raise NotImplementedError  # assignments.py

    def link(self, link: Any, current: Operand) -> Operand:
        raise NotImplementedError  # chains.py

    def key_test(self, container: Operand, key: Operand, unless: str = "") -> list[str]:
        raise NotImplementedError  # chains.py

    def counted_predicate(
        self, cond: ast.Expr, call: ast.MethodCall, negated: bool, head: tuple[int, Pos | None]
    ) -> Operand:
        raise NotImplementedError  # chains.py


__all__ = ["FunctionBase", "LoopTarget"]
