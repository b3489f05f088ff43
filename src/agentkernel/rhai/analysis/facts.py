"""What the compiler asks about a script's nodes, found in one walk before code generation.

Code generation meets a node before what is below it is compiled, yet many
of its choices depend on that whole subtree:

* `ops`: the operations a statement counts, as the reference counts them
  after its optimizer folded constant expressions to one (folding.py);
* `pure`: side-effect free and unable to fail visibly, so a statement whose
  value is unused is dropped, as the reference's optimizer drops it;
* `calls_natives`: a function body that may call a native keeps
  `rt.depth_hint` for natives that call back into the script;
* `has_calls`: a statement that calls nothing needs no count ahead for callbacks;
* `has_loop_calls`: a loop that calls nothing but methods compiled inline counts its
  operations in a local;
* `reads_only`: a closure that only reads gets items uncopied from `filter`
  and `map` (stdlib/higher_order.py);
* `changes_variable`: a `for` loop whose body may change its variable in
  place (else its items need no copy);
* `uses_eval`: the top level calls `eval` (its variables are then dynamic);
* `names`: the variables a part compiled apart mentions (nesting.py).

`Facts.of` walks every function and the top level once, bottom up, and
records these per node (by its id: the tree lives as long as the compile);
the compiler only looks them up. Who declares what, and which closure
captures it, is the other pass (scopes.py).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from agentkernel.rhai.analysis.folding import NOT_CONSTANT, fold
from agentkernel.rhai.runtime.values import FnPtr
from agentkernel.rhai.stdlib import INLINED_NAMES
from agentkernel.rhai.syntax import ast

# what a node's subtree holds, as bits (each set when the node or any node below it has it)
_EVAL = 1  # a call of `eval`
_NATIVE = 2  # something that may call a native: a method, an import, a call of no script function
_CALLS = 4  # a call, a method call or a closure, which count operations of their own
_NOT_READING = 8  # a node that does more than read (a call, an assignment, a `let`…)
_PURE = 16  # the node itself is pure (not inherited)
# a call a loop counting in a local cannot hold: any but a method call the compiler may run
# inline, whose general path hands the runtime the count first (codegen/inline_methods.py)
_LOOP_CALLS = 32
# `a.push(x)` too: appended at once, and its general path hands the count over the same way
# (codegen/chains.py)
_COUNTED_AROUND = INLINED_NAMES | {("push", 1)}
_INHERITED = _EVAL | _NATIVE | _CALLS | _NOT_READING | _LOOP_CALLS

_READING_NODES = frozenset(
    {
        ast.Literal, ast.Var, ast.Property, ast.Index, ast.Unary, ast.Binary, ast.And, ast.Or,
        ast.Interpolated, ast.Block, ast.If, ast.ExprStmt,
    }
)  # fmt: skip
# the bits a node has of its own, by its class (a plain call's depend on the call: `_call_bits`)
_OWN_BITS: dict[type, int] = {kind: _NOT_READING * (kind not in _READING_NODES) for kind in ast.CHILD_FIELDS}
_OWN_BITS[ast.Call] |= _CALLS | _LOOP_CALLS
_OWN_BITS[ast.Closure] |= _CALLS | _LOOP_CALLS
_OWN_BITS[ast.MethodCall] |= _CALLS | _NATIVE
_OWN_BITS[ast.Import] |= _NATIVE  # an import runs the module at depth + 1
_PURE_NODES = frozenset({ast.Literal, ast.Var, ast.This, ast.Closure})
_FOLDABLE = frozenset(
    {
        ast.Literal, ast.ArrayLit, ast.MapLit, ast.Unary, ast.Binary, ast.And, ast.Or,
        ast.Interpolated, ast.Block, ast.Call, ast.MethodCall, ast.If, ast.Switch, ast.Property,
        ast.Index,
    }
)  # fmt: skip  # the classes folding.fold may fold (it says NOT_CONSTANT of every other)
_COUNTED_APART = frozenset({ast.Interpolated, ast.Block, ast.Closure, ast.Export})  # see `_count`
_PURE_BY_PARTS = frozenset({ast.Block, ast.ArrayLit, ast.MapLit})  # see `_pure_parts`
_PURE_STATEMENTS = frozenset({ast.If, ast.For, ast.While, ast.DoLoop, ast.Switch})  # `_pure_statement`
_CHAIN_LINKS = (ast.Property, ast.Index, ast.MethodCall)
# the calls the reference evaluates itself, not as a native's call (its `make_function_call`)
_KEYWORD_CALLS = frozenset(
    {"Fn", "call", "curry", "eval", "is_def_var", "is_def_fn", "is_shared", "type_of", "exit"}
)
_JUMPS = frozenset({ast.Return, ast.Break, ast.Continue, ast.Throw})
_CALLED_OPERATORS = frozenset({"in", "!in"})
# the statements the reference parses as statements of their own (its `parse_stmt`): in an
# expression it wraps one in a block (`Expr::Stmt`), which counts 1 more (`_statement_form_ops`)
_STATEMENT_FORMS = frozenset({ast.If, ast.Switch, ast.While, ast.Loop, ast.DoLoop, ast.For})
_SELF_EVALUATED = frozenset({"is_def_var", "is_shared", "type_of"})  # see `_keyword_ops`
_CALL_STATEMENTS = frozenset({"is_def_fn"})  # keywords counted as call statements (`_call_statement`)


class Facts:
    """The facts of one script's nodes (see the module's docstring for what each means)."""

    def __init__(
        self,
        functions: Mapping[tuple[str, int], object],
        special_calls: Collection[str],
        capturing: Collection[int] = (),
        *,
        optimized: bool = True,
    ) -> None:
        """`functions`: the script functions a plain call reaches, by name and arity;
        `special_calls`: the names the compiler compiles itself (print, eval, …);
        `capturing`: the ids of the closures that capture a variable (scopes.py);
        `optimized`: False for a text `eval` runs, which the reference never optimizes."""
        self._functions = functions
        self._special = special_calls
        self._capturing = capturing
        # per node (by id): its bits, its ops, and the first and last place of its subtree in the walk
        self._facts: dict[int, tuple[int, int, int, int]] = {}
        self._folds: dict[int, Any] = {}  # folding.fold's memo: each node folded once
        self._places = 0  # nodes walked so far
        self._var_places: list[int] = []  # where the walk met a plain variable, in order
        self._var_names: list[str] = []  # and its name
        self._changing: set[int] = set()  # the `for` loops whose body may change their variable
        self._watched: dict[str, list[int]] = {}  # `for` loops being walked, not yet changing, by variable
        # >0 while the walk is where the reference runs the tree as parsed, its optimizer's work
        # not seen: a closure's body (its pointer holds the body as parsed) or an `eval`'s text
        self._unoptimized = 0 if optimized else 1
        self._kept: set[int] = set()  # the statements there, which no optimizer drops unused
        self._counting: set[int] = set()  # `(a ?? 0) + 1`s, whose `0` counts apart (`counts_up`)

    @classmethod
    def of(
        cls,
        bodies: Iterable[ast.Block],
        functions: Mapping[tuple[str, int], object],
        special_calls: Collection[str],
        capturing: Collection[int] = (),
        *,
        optimized: bool = True,
    ) -> Facts:
        """The facts of every node in `bodies` (a script's functions' bodies and its top level)."""
        facts = cls(functions, special_calls, capturing, optimized=optimized)
        for body in bodies:
            facts._visit(body)
            if optimized:
                facts._reduce_return(body)
        return facts

    # -- what the compiler asks ------------------------------------------------------------

    def ops(self, node: object) -> int:
        """The operations a statement (or a loop's condition) counts: its nodes, a folded
        constant as one, nested blocks not (they count when they run)."""
        return self._facts[id(node)][1]

    def constant(self, node: object) -> Any:
        """The constant an `if` or a `switch` on a constant folds to (folding.py), or
        NOT_CONSTANT: the reference's optimizer leaves only the arm taken."""
        return self._folds.get(id(node), NOT_CONSTANT)

    def pure(self, node: object) -> bool:
        return bool(self._facts[id(node)][0] & _PURE)

    def counts_up(self, node: ast.Binary) -> bool:
        """`(m[k] ?? 0) + 1`: an int literal added to or taken from `a ?? <int literal>`, the
        idiom of counting. Its count (`ops` of the statement) leaves out the `??`'s literal,
        which the compiler counts where `a` is `()` and the literal is evaluated."""
        return id(node) in self._counting

    def droppable(self, stmt: ast.ExprStmt) -> bool:
        """Whether the reference's optimizer drops this statement when its value is unused:
        a pure one, not where the tree runs as parsed (a closure's body, an `eval`'s text)."""
        return bool(self._facts[id(stmt.expr)][0] & _PURE) and id(stmt) not in self._kept

    def calls_natives(self, node: object) -> bool:
        return bool(self._facts[id(node)][0] & _NATIVE)

    def has_calls(self, node: object) -> bool:
        return bool(self._facts[id(node)][0] & _CALLS)

    def has_loop_calls(self, node: object) -> bool:
        """Calls other than of the methods compiled inline (stdlib `INLINED`)."""
        return bool(self._facts[id(node)][0] & _LOOP_CALLS)

    def reads_only(self, closure: ast.Closure) -> bool:
        return not self._facts[id(closure.body)][0] & _NOT_READING

    def uses_eval(self, node: object) -> bool:
        return bool(self._facts[id(node)][0] & _EVAL)

    def changes_variable(self, loop: ast.For) -> bool:
        return id(loop) in self._changing

    def names(self, node: object) -> set[str]:
        """The plain variable names `node` (or a tuple of statements) mentions, at any depth."""
        found: set[str] = set()
        for item in node if isinstance(node, tuple) else (node,):
            _, _, first, last = self._facts[id(item)]
            low, high = bisect_left(self._var_places, first), bisect_right(self._var_places, last)
            found.update(self._var_names[low:high])
        return found

    # -- the walk --------------------------------------------------------------------------

    def _visit(self, node: Any) -> int:
        """Record the facts of `node` and of everything below it; returns its bits."""
        kind = type(node)
        first = self._places
        self._places = first + 1
        if kind is ast.Literal or kind is ast.Var:  # the commonest nodes: leaves, pure, counting one
            if kind is ast.Var and node.namespace is None:
                self._var_places.append(first)
                self._var_names.append(node.name)
            self._facts[id(node)] = (_PURE, 1, first, first)
            return _PURE
        if kind in _CHANGES:
            self._changes(node, kind)
        facts = self._facts
        bits = below = 0
        if kind is ast.Closure:
            self._unoptimized += 1
        elif kind is ast.ExprStmt and self._unoptimized:
            self._kept.add(id(node))
        for field in ast.CHILD_FIELDS[kind]:
            value = getattr(node, field)
            if value is None:
                continue
            if type(value) is tuple:
                for item in ast.nodes_in(value):
                    bits |= self._visit(item)
                    below += facts[id(item)][1]
                continue
            if kind is ast.For and value is node.body:
                self._watch(node)
            bits |= self._visit(value)
            if type(value) is not ast.Block:
                below += facts[id(value)][1]
        if kind is ast.For:
            self._unwatch(node)
        elif kind is ast.Closure:
            self._unoptimized -= 1
            if id(node) not in self._capturing:  # a constant pointer there (parser.rs `parse_anon_fn`)
                self._folds[id(node)] = FnPtr("anon$")
        bits = (bits & _INHERITED) | _OWN_BITS[kind]
        if kind is ast.Call:
            bits |= self._call_bits(node)
        elif kind is ast.MethodCall and (node.name, len(node.args)) not in _COUNTED_AROUND:
            bits |= _LOOP_CALLS
        elif kind is ast.Binary and node.op in _CALLED_OPERATORS:
            bits |= _CALLS | _LOOP_CALLS  # `x in y` is a call of `contains` there
        if kind in _FOLDABLE and not self._unoptimized and fold(node, self._folds) is not NOT_CONSTANT:
            # the reference's optimizer made it one constant (a `switch` the arm taken, a block
            # of one constant), and drops it unused
            ops = 1
            bits |= _PURE
        elif kind in _STATEMENT_FORMS:
            ops = self._statement_form_ops(node, kind)
            if self._pure_itself(node, kind):
                bits |= _PURE
        else:
            ops = self._count(node, kind, below) if kind in _COUNTED_APART else 1 + below
            if kind is ast.MethodCall:
                ops = self._keyword_ops(node, self._chain_ops(node))
            elif kind is ast.Property or kind is ast.Index:
                ops = self._chain_ops(node)
            elif kind is ast.Let and node.value is None:
                ops += 1  # `let x;` evaluates a `()` there
            elif kind is ast.TryCatch and not self._unoptimized and self._pure_parts(node.body, ast.Block):
                ops = 0  # a `try` that cannot fail: a block there, of statements it drops
            elif kind is ast.Assign and type(node.target) in _CHAIN_LINKS:
                ops -= 1  # a chain assigned into is not evaluated as an expression there
            elif (kind is ast.And or kind is ast.Or) and not self._unoptimized:
                ops = self._logic_ops(node, kind is ast.And, ops)
            elif kind is ast.Binary and self._counts_up(node):
                ops -= facts[id(node.left.right)][1]
                self._counting.add(id(node))
            elif kind is ast.Binary and node.op == "??":
                ops -= sum(type(side) is ast.Binary and side.op == "??" for side in (node.left, node.right))
            elif (kind is ast.Call and node.namespace is None) or kind is ast.MethodCall:
                ops = self._keyword_ops(node, ops)
            elif kind in _JUMPS:
                ops -= 1  # a statement there, counted as one: its statement here counts it
            elif kind is ast.ExprStmt:
                ops -= self._statement_discount(node.expr)
            if kind is ast.Call and self._native_call(node):
                ops += 1  # evaluated as an expression there, then called (exec_native_fn_call)
            if self._pure_itself(node, kind):
                bits |= _PURE
        facts[id(node)] = (bits, ops, first, self._places - 1)
        return bits

    def _counts_up(self, node: ast.Binary) -> bool:
        """`counts_up`'s test, once the node's operands are walked."""
        inner = node.left
        return (
            node.op in ("+", "-")
            and _int_literal(node.right)
            and type(inner) is ast.Binary
            and inner.op == "??"
            and _int_literal(inner.right)
            and self._folds.get(id(inner), NOT_CONSTANT) is NOT_CONSTANT
        )

    def _fold(self, node: Any) -> Any:
        """The constant `node` is where the walk is: folded (folding.py), or only a literal
        where the tree runs as parsed (the parser makes `-5` one too)."""
        if not self._unoptimized:
            return fold(node, self._folds)
        kind = type(node)
        if kind is ast.Literal:
            return node.value
        if kind is ast.Unary and node.op == "-" and type(node.operand) is ast.Literal:
            value = node.operand.value
            return -value if isinstance(value, int | float) and type(value) is not bool else NOT_CONSTANT
        return NOT_CONSTANT

    def _chain_ops(self, node: ast.Index | ast.Property | ast.MethodCall) -> int:
        """What a dot/index chain of n steps counts as the reference evaluates it (its
        `eval_dot_index_chain`): 1 the expression, its root, 1 each step taken (an index, a
        property, a call); and first the steps' arguments, 1 each step and what each
        evaluates (an index, a method's arguments) — unless the chain is one step whose
        argument needs nothing evaluated (`x.p`, `x.f()`, `x[1]`)."""
        facts = self._facts
        steps: list[ast.Index | ast.Property | ast.MethodCall] = []
        root: Any = node
        while isinstance(root, _CHAIN_LINKS):
            steps.append(root)
            root = root.target
        arguments = 0
        for step in steps:
            if type(step) is ast.Index:
                arguments += facts[id(step.index)][1]
            elif type(step) is ast.MethodCall:
                arguments += sum(facts[id(arg)][1] for arg in step.args)
        if isinstance(node, ast.MethodCall):
            evaluates_nothing = not node.args
        elif isinstance(node, ast.Index):
            evaluates_nothing = fold(node.index, self._folds) is not NOT_CONSTANT
        else:
            evaluates_nothing = True
        short = len(steps) == 1 and evaluates_nothing
        evaluated = 0 if short else len(steps) + arguments
        return 1 + evaluated + facts[id(root)][1] + len(steps)

    def _reduce_return(self, body: ast.Block) -> None:
        """A function's or the script's last statement (what follows a jump is dead code)
        as the reference's optimizer leaves it (`optimize_stmt_block`, `reduce_return`):
        `return x` is the statement `x` (a call statement when `x` is a call or an operator),
        and `return;` is dropped."""
        jump = next((s for s in body.stmts if type(s) is ast.ExprStmt and type(s.expr) in _JUMPS), None)
        last = jump if jump is not None or not body.stmts else body.stmts[-1]
        if not isinstance(last, ast.ExprStmt) or not isinstance(last.expr, ast.Return):
            return
        value = last.expr.value
        if value is None or self._call_statement(value):
            bits, ops, first, end = self._facts[id(last)]
            self._facts[id(last)] = (bits, 0 if value is None else ops - 1, first, end)

    def _statement_form_ops(self, node: Any, kind: type) -> int:
        """What an `if`, `switch` or loop counts where it is reached, as an expression (the
        reference's block around it, 1, the statement, 1, and its head): the condition of an
        `if`, the subject of a `switch`, the iterable of a `for`, the condition of a `while`
        (not of `while true`, a plain loop there); a `do` loop's condition counts with its body,
        an `else if` in its branch, a `switch`'s arm taken in that arm (codegen/control.py)."""
        if kind is ast.If:
            head: Any = node.cond
        elif kind is ast.Switch:
            head = node.subject
        elif kind is ast.For:
            head = node.iterable
        elif kind is ast.While and not (type(node.cond) is ast.Literal and node.cond.value is True):
            head = node.cond
        else:
            return 2
        return 2 + self._facts[id(head)][1]

    def _statement_discount(self, expr: Any) -> int:
        """How much less than 1 + its expression a statement of one expression counts: an
        `if`, `switch` or loop that no constant folded is a statement there (2: no block around
        it, no statement of ours beside its own); a block the reference's optimizer flattens
        into the enclosing one (its `optimize_stmt_block`: no `let`, `import` or `eval` in it)
        counts nothing of its own, one that it keeps 1; a call is a call statement (1)."""
        kind = type(expr)
        if kind in _STATEMENT_FORMS and self._folds.get(id(expr), NOT_CONSTANT) is NOT_CONSTANT:
            return 2
        if kind is ast.Block:  # (a block in a field of its own counts nothing here: 1 in all)
            return 0 if self._unoptimized or any(block_dependent(s) for s in expr.stmts) else 1
        return 1 if not self._unoptimized and self._call_statement(expr) else 0

    def _call_bits(self, node: ast.Call) -> int:
        bits = _EVAL if node.name == "eval" else 0
        if (
            node.namespace is not None
            or node.name in self._special
            or (node.name, len(node.args)) not in self._functions
        ):
            bits |= _NATIVE
        return bits

    def _count(self, node: Any, kind: type, below: int) -> int:
        """`ops` of an interpolation, a block, a closure or an export that is no constant (any
        other node counts 1 and its children, a block in a field of its own not counted: its
        statements count when it runs)."""
        if kind is ast.Interpolated:
            return 1 + sum(self._part_ops(part) for part in node.parts)
        if kind is ast.Block or kind is ast.Closure:
            return 1
        if node.decl is not None:  # an export: `export let x = …` is one statement
            return self._facts[id(node.decl)][1]
        return 1 + below

    def _part_ops(self, part: str | ast.Block) -> int:
        """What a part of an interpolation counts there: its text 1 (none when empty), a
        `${ … }` a block (`Expr::Stmt`: 1 and its statements), which its optimizer makes the
        one expression it holds (`()` dropped) or, of several statements, keeps."""
        if type(part) is str:
            return 1 if part else 0
        assert isinstance(part, ast.Block)
        statements = sum(self._facts[id(s)][1] for s in part.stmts)
        if self._unoptimized:
            return 1 + statements
        only = part.stmts[0] if len(part.stmts) == 1 else None
        if type(only) is ast.ExprStmt:
            value = fold(only.expr, self._folds)
            return 0 if value is None else self._facts[id(only.expr)][1]
        return 1 + statements

    def _pure_parts(self, node: Any, kind: type) -> bool:
        """Whether a block, array or map that is no constant is pure by its parts: a block whose
        statements are pure expressions or `let`s of them (`{ let c = 3; }`: nothing outside
        can see it), an array or map of pure items."""
        facts = self._facts
        if kind is ast.Block:
            return all(
                (type(s) is ast.ExprStmt and facts[id(s.expr)][0] & _PURE)
                or (type(s) is ast.Let and (s.value is None or facts[id(s.value)][0] & _PURE))
                for s in node.stmts
            )
        if kind is ast.ArrayLit:
            return all(facts[id(item)][0] & _PURE for item in node.items)
        return all(facts[id(value)][0] & _PURE for _, value in node.items)  # a map

    def _keyword_ops(self, node: ast.Call | ast.MethodCall, ops: int) -> int:
        """What the reference counts of the calls it evaluates itself: `is_def_var`,
        `is_shared` and `type_of` (`x.type_of()` too) and `p.curry(…)` 1 less
        than a native's (no call of a function), `Fn` of a
        string literal 1 (its optimizer makes it a constant pointer); and a call of a script
        function whose body is empty 1 less (it returns before counting the call)."""
        if node.name in _SELF_EVALUATED and (type(node) is ast.Call or not node.args):
            return ops - 1
        if type(node) is ast.MethodCall and node.name == "curry":  # a pointer's method there
            return ops - 1
        if type(node) is ast.Call:
            fn = self._functions.get((node.name, len(node.args)))
            if isinstance(fn, ast.FnDef) and not fn.body.stmts:  # the reference returns at once
                return ops - 1
        if type(node) is ast.Call and node.name == "Fn" and len(node.args) == 1 and not self._unoptimized:
            return 1 if type(node.args[0]) is ast.Literal and type(node.args[0].value) is str else ops
        return ops

    def _native_call(self, node: ast.Call) -> bool:
        """A call of a native that the reference makes through `exec_native_fn_call`, which
        counts one more than the call's expression (not a keyword it evaluates itself)."""
        return (
            node.namespace is None
            and node.name not in _KEYWORD_CALLS
            and (node.name, len(node.args)) not in self._functions
        )

    def _call_statement(self, expr: Any) -> bool:
        """A statement that is a call, which the reference's optimizer makes a `Stmt::FnCall`,
        evaluated without counting the expression: a native's call, an operator (a call there)."""
        kind = type(expr)
        if kind is ast.Call:
            return self._native_call(expr) or (expr.namespace is None and expr.name in _CALL_STATEMENTS)
        if kind is ast.Unary:  # `!x` (its other unary operators are calls of functions there)
            return expr.op == "!" and self._fold(expr) is NOT_CONSTANT
        return kind is ast.Binary and expr.op != "??" and self._fold(expr) is NOT_CONSTANT

    def _logic_ops(self, node: ast.And | ast.Or, is_and: bool, ops: int) -> int:
        """`&&`/`||` with a constant side, as the reference's optimizer leaves it: `x && true`
        and `true && x` are `x`, `false && x` and `x && false` (x pure) one constant `false`;
        `||` the same with `false` and `true` swapped. Only the count follows it."""
        left, right = fold(node.left, self._folds), fold(node.right, self._folds)
        if left is is_and:
            return self._facts[id(node.right)][1]
        if right is is_and:
            return self._facts[id(node.left)][1]
        if left is (not is_and) or (right is (not is_and) and self.pure(node.left)):
            return 1
        return ops

    def _pure_itself(self, node: Any, kind: type) -> bool:
        """Whether a node that is no constant is pure, once its children are known."""
        if kind in _PURE_NODES:
            return True
        if kind in _PURE_BY_PARTS:
            return self._pure_parts(node, kind)
        return kind in _PURE_STATEMENTS and self._pure_statement(node, kind)

    def _pure_statement(self, node: Any, kind: type) -> bool:
        """The reference's `Stmt::is_pure` (its optimizer drops such a statement unused): an
        `if` or a `for` of pure parts, a `switch` of pure parts with a default arm, a loop
        that never runs its body or runs it once (a `let` is never pure here)."""
        pure = self.pure
        if kind is ast.If:
            rest = node.otherwise
            return (
                pure(node.cond)
                and self._block_pure(node.then)
                and (rest is None or (pure(rest) if type(rest) is ast.If else self._block_pure(rest)))
            )
        if kind is ast.For:
            return pure(node.iterable) and self._block_pure(node.body)
        if kind is ast.While:
            return type(node.cond) is ast.Literal and node.cond.value is False
        if kind is ast.DoLoop:
            return (
                type(node.cond) is ast.Literal
                and node.cond.value is node.until
                and self._block_pure(node.body)
            )
        return (  # a switch
            pure(node.subject)
            and node.default is not None
            and pure(node.default)
            and all(
                all(pure(p) for p in case.patterns)
                and (case.condition is None or pure(case.condition))
                and pure(case.body)
                for case in node.cases
            )
        )

    def _block_pure(self, block: ast.Block) -> bool:
        return all(type(s) is ast.ExprStmt and self.pure(s.expr) for s in block.stmts)

    # -- `for` loops whose variable their body may change ------------------------------------

    def _watch(self, loop: ast.For) -> None:
        """Watch what `loop`'s body changes, as it is walked (its iterable does not count)."""
        self._watched.setdefault(loop.var, []).append(id(loop))

    def _unwatch(self, loop: ast.For) -> None:
        """The body is walked: a loop still waiting is one whose variable nothing changed.
        Loops nest, so a loop still waiting is the last one of its variable."""
        waiting = self._watched.get(loop.var)
        if waiting and waiting[-1] == id(loop):
            waiting.pop()

    def _changes(self, node: Any, kind: type) -> None:
        """What `node` may change in place: a variable assigned into, a method's receiver, a
        call's first argument (natives take it by reference); a closure may change anything."""
        if kind is ast.Closure:
            for waiting in self._watched.values():
                self._changing.update(waiting)
            self._watched.clear()
            return
        if kind is ast.Call:
            if not node.args:
                return
            root = node.args[0]
        else:
            root = node.target
            while isinstance(root, _CHAIN_LINKS):
                root = root.target
        if type(root) is ast.Var and root.namespace is None:
            self._changing.update(self._watched.pop(root.name, ()))


def block_dependent(stmt: ast.Stmt) -> bool:
    """The reference's `Stmt::is_block_dependent`: a statement that keeps its block apart
    from the enclosing one (a `let` or `const`, an `import`, an `export`, a call of `eval`)."""
    if isinstance(stmt, ast.ExprStmt):
        expr = stmt.expr
        return isinstance(expr, ast.Call) and expr.name == "eval" and expr.namespace is None
    return isinstance(stmt, ast.Let | ast.Import | ast.Export)


_CHANGES = frozenset({ast.Assign, ast.MethodCall, ast.Call, ast.Closure})  # the nodes `_changes` looks at


def _int_literal(node: ast.Expr) -> bool:
    return type(node) is ast.Literal and type(node.value) is int


__all__ = ["Facts", "block_dependent"]
