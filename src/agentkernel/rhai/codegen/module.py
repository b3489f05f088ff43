"""The pieces the Rhai compiler builds with: the generated module, operand rules, static facts.

Kept apart from `compiler.py` (which walks the syntax tree) so each stays a
size one can read: this module knows Python source text, not Rhai syntax.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from agentkernel.rhai.analysis.folding import NOT_CONSTANT, fold
from agentkernel.rhai.errors import Pos
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.compile_clock import CompileClock

BINARY_NAMES = {
    "+": "op_add", "-": "op_sub", "*": "op_mul", "/": "op_div", "%": "op_mod", "**": "op_pow",
    "<<": "op_shl", ">>": "op_shr", "&": "op_and", "|": "op_or", "^": "op_xor",
    "==": "op_eq", "!=": "op_ne", "<": "op_lt", "<=": "op_le", ">": "op_gt", ">=": "op_ge",
    "..": "op_range", "..=": "op_range_incl", "in": "op_in", "!in": "op_not_in",
}  # fmt: skip
INT_ARITHMETIC = frozenset({"+", "-", "*"})
INT_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
SPECIAL_CALLS = frozenset(
    {
        "print",
        "debug",
        "type_of",
        "Fn",
        "call",
        "curry",
        "eval",
        "is_def_var",
        "is_def_fn",
        "is_shared",
        "exit",
    }
)


Place = Literal["literal", "constant", "local", "boxed", "temp", "expr"]
"""What kind of Python text an operand is: decides whether it may change under us,
whether it can be subscripted as it is, whether its type is known. (Strings, not an
Enum: operands are made and hashed for every node compiled, and these cost least.)"""

LITERAL: Final = "literal"  # a Python literal: None, True, 5, (-2), 1.5
CONSTANT: Final = "constant"  # an entry of the constants table: K[3]
LOCAL: Final = "local"  # a Rhai variable's local, or its Cell's value: v1_x, v2_y.v
BOXED: Final = "boxed"  # a variable of the enclosing function, in a part compiled apart: B3[0]
TEMP: Final = "temp"  # a temporary of the generated code: t5
EXPR: Final = "expr"  # any other Python expression: t5.receiver


class Operand(NamedTuple):
    """Where a compiled expression's value is: Python text and its kind of place.

    Compile-time only: the generated code holds the text (`str(operand)`, or the
    operand in an f-string), so it costs nothing at run time.
    """

    text: str
    place: Place

    def __str__(self) -> str:
        return self.text

    @property
    def is_variable(self) -> bool:
        """A Rhai variable's storage: evaluating something else may rebind it."""
        return self.place == LOCAL or self.place == BOXED

    @property
    def is_int_literal(self) -> bool:
        """An int literal: no type check needed."""
        return self.int_value is not None

    @property
    def int_value(self) -> int | None:
        """The value of an int literal (`5`, `(-2)`), else None."""
        if self.place != LITERAL:
            return None
        digits = self.text.strip("()")
        return int(digits) if digits.lstrip("-").isdigit() else None

    @property
    def is_name(self) -> bool:
        """Usable as `x.attr`/`x[i]` in Python as it is (a literal is not: `True[0]` warns)."""
        return self.place == TEMP or self.place == LOCAL


NONE = Operand("None", LITERAL)
TRUE = Operand("True", LITERAL)
FALSE = Operand("False", LITERAL)


def joined(operands: Iterable[Operand | str]) -> str:
    """`a, b, c`: operands as Python arguments or list items."""
    return ", ".join(map(str, operands))


@dataclass
class VarInfo:
    py: str
    const: bool
    cell: bool
    boxed: bool = False  # held in a part's box (nesting.py), not in a local of its own

    @property
    def load(self) -> Operand:
        return Operand(f"{self.py}.v" if self.cell else self.py, BOXED if self.boxed else LOCAL)


class Visible:
    """One variable in sight at a point of the generated code, linked to those before it.

    `eval` and `is_def_var` need the variables a call site can see. Each
    declaration adds one link to the chain and each call site keeps the head
    as a constant, so a script with many variables and many `eval` calls
    compiles in linear time (issue 9); the values are read at run time from
    the frame (see `abi.rt_scope`). A link with no `name` marks a frame
    boundary: what follows lives in the calling function's frame (code
    compiled apart, see `nesting.py`). `index` >= 0 reads slot `index` of the
    list in local `local` instead of the local itself. `const`: `eval` may
    not assign it.
    """

    __slots__ = ("cell", "const", "index", "local", "name", "parent")

    def __init__(
        self,
        name: str | None,
        local: str,
        index: int,
        cell: bool,
        parent: Visible | None,
        const: bool = False,
    ) -> None:
        self.name = name
        self.local = local
        self.index = index
        self.cell = cell
        self.parent = parent
        self.const = const

    @staticmethod
    def of(name: str, local: str, cell: bool, parent: Visible | None, const: bool = False) -> Visible:
        return Visible(name, local, -1, cell, parent, const)

    def names(self) -> Iterator[str]:
        """The names in sight, innermost first (a shadowed one more than once)."""
        link: Visible | None = self
        while link is not None:
            if link.name is not None:
                yield link.name
            link = link.parent


@dataclass
class Chunk:
    """One Python function's lines, kept apart while it is generated.

    Every function (script fn, closure, top level, a part compiled apart)
    is a function of the module itself, never nested in another: CPython
    takes time quadratic in their number to compile nested functions, and
    nesting would add up their indentation (issue 9).
    """

    lines: list[str] = field(default_factory=list)
    positions: dict[int, Pos] = field(default_factory=dict)  # index in `lines` -> Rhai position
    operator_lines: set[int] = field(default_factory=set)


@dataclass
class Module:
    """The Python source being generated, its line → position table and constants."""

    clock: CompileClock = field(default_factory=CompileClock)
    function_names: frozenset[str] = frozenset()  # the script's functions, usable as pointers
    constants: list[Any] = field(default_factory=list)
    _constant_index: dict[tuple[type, Any], int] = field(default_factory=dict)
    _open: list[Chunk] = field(default_factory=lambda: [Chunk()])
    _done: list[Chunk] = field(default_factory=list)
    counter: int = 0

    def emit(self, indent: int, text: str, pos: Pos | None = None, *, operator: bool = False) -> None:
        chunk = self._open[-1]
        if pos is not None:
            chunk.positions[len(chunk.lines)] = pos
        if operator:
            chunk.operator_lines.add(len(chunk.lines))
        chunk.lines.append("    " * indent + text)

    def emit_module_level(self, text: str) -> None:
        """A statement of the module itself, run once the functions are defined."""
        self._open[0].lines.append(text)

    def begin_function(self) -> None:
        """Emit into a new function of the module until `end_function`."""
        self._open.append(Chunk())

    def end_function(self) -> None:
        self._done.append(self._open.pop())

    def constant_object(self, value: Any) -> Operand:
        """A constant that is not hashable (an array or map switch pattern): never shared."""
        self.constants.append(value)
        return Operand(f"K[{len(self.constants) - 1}]", CONSTANT)

    def constant(self, value: Any) -> Operand:
        key = (type(value), value)
        index = self._constant_index.get(key)
        if index is None:
            index = self._constant_index[key] = len(self.constants)
            self.constants.append(value)
        return Operand(f"K[{index}]", CONSTANT)

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def finish(self) -> tuple[list[str], dict[int, Pos], set[int]]:
        """The module's source, one text per function (the module's own statements last),
        and its 1-based line → position table and operator lines, counted across them."""
        texts: list[str] = []
        positions: dict[int, Pos] = {}
        operator_lines: set[int] = set()
        first = 1
        for chunk in [*self._done, *self._open]:
            positions.update((first + index, pos) for index, pos in chunk.positions.items())
            operator_lines.update(first + index for index in chunk.operator_lines)
            texts.append("".join(line + "\n" for line in chunk.lines))
            first += len(chunk.lines)
        return texts, positions, operator_lines


@dataclass
class LoopTarget:
    result: Operand


def literal_operand(module: Module, value: Any) -> Operand:
    kind = type(value)
    if value is None or kind is bool:
        return Operand(repr(value), LITERAL)
    if kind is int:
        return Operand(repr(value) if value >= 0 else f"({value!r})", LITERAL)
    if kind is float and value == value and value not in (float("inf"), float("-inf")):
        return Operand(repr(value) if value >= 0 else f"({value!r})", LITERAL)
    return module.constant(value)


PURE_NODES = (ast.Literal, ast.Var, ast.This, ast.Closure)


def is_pure(node: Any) -> bool:
    """Side-effect-free and unable to fail visibly: what the reference's optimizer drops."""
    if isinstance(node, PURE_NODES):
        return True
    if isinstance(node, ast.Block):  # `{ let c = 3; }`: nothing outside can see it
        return all(
            (isinstance(s, ast.ExprStmt) and is_pure(s.expr))
            or (isinstance(s, ast.Let) and (s.value is None or is_pure(s.value)))
            for s in node.stmts
        )
    if isinstance(node, ast.ArrayLit):
        return all(is_pure(i) for i in node.items)
    if isinstance(node, ast.MapLit):
        return all(is_pure(v) for _, v in node.items)
    return fold(node) is not NOT_CONSTANT  # `1 + 2`: the reference folds it, then drops it


def count_ops(node: Any) -> int:
    """The static operation count of a statement: its nodes, nested blocks excluded.

    A block that is an operand itself (`let x = { … }`, an `if`'s body) counts
    nothing here (its statements count when it runs); one in a list
    (`f({ … })`, `[{ … }]`) counts one.
    """
    return _count_ops(node, {})


def _count_ops(node: Any, memo: dict[int, Any]) -> int:
    """`count_ops`, with the folds of the tree's nodes remembered (folding.py): an
    expression the reference's optimizer folds to a constant counts one."""
    if fold(node, memo) is not NOT_CONSTANT:
        return 1
    if isinstance(node, ast.Interpolated):
        return 1 + sum(
            _count_ops(s, memo) for part in node.parts if isinstance(part, ast.Block) for s in part.stmts
        )
    if isinstance(node, ast.Block | ast.Closure):
        return 1
    if isinstance(node, ast.Export) and node.decl is not None:
        return count_ops(node.decl)  # `export let x = …` is one statement
    total = 1
    for value in ast.child_values(node):
        if type(value) is tuple:
            total += sum(_count_ops(item, memo) for item in ast.nodes_in(value))
        elif not isinstance(value, ast.Block):
            total += _count_ops(value, memo)
    return total


def is_mutable_pattern(value: Any) -> bool:
    return type(value) in (list, dict)


def may_change(body: Any, name: str) -> bool:
    """Whether `body` might change variable `name` in place (conservative).

    A loop variable that is only read needs no copy of its element: reads,
    `let x = name` and passing it as an argument copy on their own.
    """

    def root(node: Any) -> Any:
        while isinstance(node, ast.Property | ast.Index | ast.MethodCall):
            node = node.target
        return node

    def names_it(node: Any) -> bool:
        return isinstance(node, ast.Var) and node.name == name and node.namespace is None

    def walk(node: Any) -> bool:
        if isinstance(node, ast.Assign) and names_it(root(node.target)):
            return True
        if isinstance(node, ast.MethodCall) and names_it(root(node.target)):
            return True
        if isinstance(node, ast.Call) and node.args and names_it(node.args[0]):
            return True
        if isinstance(node, ast.Closure):
            return True
        return any(walk(child) for child in ast.children(node))

    return walk(body)


_READING_NODES = (
    ast.Literal, ast.Var, ast.Property, ast.Index, ast.Unary, ast.Binary, ast.And, ast.Or,
    ast.Interpolated, ast.Block, ast.If, ast.ExprStmt,
)  # fmt: skip


def only_reads(closure: ast.Closure) -> bool:
    """Whether a closure's body only reads: no call, method call, assignment, `let` or
    nested closure, so nothing it does can change or keep its arguments.

    A native that calls such a closure for each item of an array (`filter`, `map`) may
    pass the item itself instead of a copy (`higher_order.py`): the copy protects the
    array from a callback that changes its argument, which this one cannot do, and what
    it returns is copied by the native anyway.
    """
    pending: list[Any] = list(closure.body.stmts)
    while pending:
        node = pending.pop()
        if not isinstance(node, _READING_NODES):
            return False
        pending.extend(ast.children(node))
    return True


def list_index_test(container: Operand, index: Operand, index_is_int: bool = False) -> str:
    """Python test for the fast path of `container[index]`: a list and an in-range int
    (`index_is_int`: the index is proven to hold an int, int_types.py)."""
    value = index.int_value
    if value is not None:
        bound = f"{value} < len({container})" if value >= 0 else f"{-value} <= len({container})"
        return f"type({container}) is list and {bound}"
    # a negative index (from the end) takes the slow path: one `len` a test, not two
    in_range = f"0 <= {index} < len({container})"
    if index_is_int:
        return f"type({container}) is list and {in_range}"
    return f"type({container}) is list and type({index}) is int and {in_range}"


def fn_py_name(name: str, arity: int, this_type: str | None = None) -> str:
    """The generated function's name; a typed method's carries its type (any text: hex)."""
    if this_type is not None:
        return f"m_{name}_{arity}_{this_type.encode().hex()}"
    return f"f_{name}_{arity}"


def anon_for(node: ast.Closure) -> str:
    from agentkernel.rhai.runtime.runtime import anon_name

    return anon_name(f"{node.pos}:{node.params}")
