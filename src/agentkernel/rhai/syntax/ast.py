"""The Rhai syntax tree: frozen records (records.py), one per construct (RHAI.md §1–§12).

This module is the contract between the parser (which builds it) and the
compiler (which turns it into Python). Every node carries `pos`, the 1-based
(line, position) that the reference implementation reports for an error
raised *at that node* (RHAI.md §15). Checked against the `kind: runtime`
cases of the conformance suite, the rules are:

| node | `pos` | errors reported there |
|---|---|---|
| Literal, ArrayLit, MapLit | first token (`[`, `#{`; the `-` of a folded `-5`) | |
| Interpolated | the opening back-tick | string too long |
| Var | the name; for `global::X` the namespace (`global`) | Variable not found |
| This | `this` | 'this' not bound |
| Unary, Binary, And, Or | the operator | Function not found: + (bool, i64), overflow |
| Call | the function name | Function not found, "in call to function" |
| MethodCall | the method name (`dot_pos`: its `.`/`?.`) | Function not found: foo (i64) |
| Property | the property name (`dot_pos`: its `.`/`?.`) | Unknown property, No writable property |
| Index | its `[`/`?[` | Indexer unavailable |
| Closure | its opening bar | |
| Block | `{` | |
| If, Switch, While, Loop, DoLoop, For | the keyword | |
| Break, Continue, Return, Throw | the keyword | Runtime error: <thrown> |
| Let, TryCatch, Import | the keyword | Too many modules imported |
| Export | the variable's name | Variable not found |
| Assign | the `=` / `op=` operator | compound-assign overflow, s[i] = "X" type errors |
| ExprStmt | `start_pos(expr)` | |
| FnDef | the `fn` keyword | |

Some errors are reported at a *child's* position instead:
* array/string/bit-field bounds and index type errors: `expr_pos(node.index)`;
* a non-bool condition (`if`, `while`, `do`, `&&`, `||`, switch guard): `expr_pos(cond)`;
* "For loop expects iterable type": `start_pos(iterable)`;
* "Module not found" for `import`: `start_pos(path)`;
* assigning to an undefined variable: the target Var's `pos`.

`expr_pos` is the reference's `Expr::position()`: `pos`, except that a
property/method/index chain reports the first `.`/`[` after its root (as the
reference's chain node does). `start_pos` is `Expr::start_position()`: the
leftmost token of chains, `&&`/`||`/`??` and namespaced variables, but still
the operator for other binary operators and calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TypeAlias

from agentkernel.rhai.syntax.literals import Char
from agentkernel.rhai.syntax.records import class_fields, record

Pos: TypeAlias = tuple[int, int]  # (line, position), both 1-based; (0, 0) = none


# -- expressions ---------------------------------------------------------------


@record
class Literal:
    """`42`, `4.2`, `"s"`, `'c'` (a Char), `true`, `()` (None)."""

    value: bool | int | float | str | Char | None
    pos: Pos


@record
class Interpolated:
    """A back-tick string: literal text parts and `${ … }` blocks, in order."""

    parts: tuple[str | Block, ...]
    pos: Pos


@record
class ArrayLit:
    items: tuple[Expr, ...]
    pos: Pos


@record
class MapLit:
    """`#{a: 1, "b c": 2}`: keys are always literal names, in source order."""

    items: tuple[tuple[str, Expr], ...]
    pos: Pos


@record
class Var:
    """A variable; `namespace` is "global" for `global::NAME` (nested
    namespaces joined with `::`), else None. For a namespaced variable `pos`
    is the namespace's position, where "Variable not found" is reported."""

    name: str
    pos: Pos
    namespace: str | None = None


@record
class This:
    pos: Pos


@record
class Unary:
    """`-x`, `+x`, `!x`. (A `-` before a number literal is folded into it.)"""

    op: str
    operand: Expr
    pos: Pos


@record
class Binary:
    """Every binary operator except `&&`/`||` and assignment.

    `op` is the source text: `+ - * / % ** << >> & | ^ == != < <= > >= .. ..= in !in ??`.
    """

    op: str
    left: Expr
    right: Expr
    pos: Pos


@record
class And:
    """`a && b`: short-circuit, both operands must be bool."""

    left: Expr
    right: Expr
    pos: Pos


@record
class Or:
    """`a || b`: short-circuit, both operands must be bool."""

    left: Expr
    right: Expr
    pos: Pos


@record
class Index:
    """`target[index]`, or `target?[index]` when `optional`."""

    target: Expr
    index: Expr
    pos: Pos
    optional: bool = False


@record
class Property:
    """`target.name`, or `target?.name` when `optional`; `pos` is the name's,
    `dot_pos` the `.`/`?.` before it."""

    target: Expr
    name: str
    pos: Pos
    optional: bool = False
    dot_pos: Pos = (0, 0)


@record
class Call:
    """A function-call-style call `name(args)`; `namespace` for `ns::name(...)`
    (nested namespaces are joined with `::`, e.g. "a::b").

    Built-ins that are keywords (`print`, `debug`, `type_of`, `Fn`, `call`,
    `curry`, `eval`, `is_def_var`, `is_def_fn`, `is_shared`) are Calls too;
    the compiler gives them their special meaning.
    """

    name: str
    args: tuple[Expr, ...]
    pos: Pos
    namespace: str | None = None
    capture: bool = False  # `name!(args)`: run in the caller's scope


@record
class MethodCall:
    """`target.name(args)`, or `target?.name(args)` when `optional`; `pos` is
    the method name's, `dot_pos` the `.`/`?.` before it."""

    target: Expr
    name: str
    args: tuple[Expr, ...]
    pos: Pos
    optional: bool = False
    dot_pos: Pos = (0, 0)


@record
class Closure:
    """`|a, b| expr` or `|x| { … }`; the body is always a Block."""

    params: tuple[str, ...]
    body: Block
    pos: Pos


@record
class Block:
    """`{ stmts }`: its value is the last statement's value (`()` when empty)."""

    stmts: tuple[Stmt, ...]
    pos: Pos


@record
class If:
    cond: Expr
    then: Block
    otherwise: Block | If | None
    pos: Pos


@record
class SwitchCase:
    """One arm: `p1 | p2 [if cond] => body`. Patterns are literal expressions:
    Literal (a `-` before a number is already folded in), ArrayLit/MapLit of
    literals, `Call("Fn", (Literal(name),))`, or a range `Binary('..'|'..=')`
    whose operands are int Literals or Literal(None) (an open end: `5..` is
    `5..i64::MAX`, `..5` is `0..5`). A statement arm (`1 => let x = 2`) is
    wrapped in a Block. `pos` is the first pattern's."""

    patterns: tuple[Expr, ...]
    condition: Expr | None
    body: Expr
    pos: Pos


@record
class Switch:
    subject: Expr
    cases: tuple[SwitchCase, ...]
    default: Expr | None
    pos: Pos


@record
class While:
    cond: Expr
    body: Block
    pos: Pos


@record
class Loop:
    body: Block
    pos: Pos


@record
class DoLoop:
    """`do { } while cond` (until=False) or `do { } until cond` (until=True)."""

    body: Block
    cond: Expr
    until: bool
    pos: Pos


@record
class For:
    """`for var in iterable { }` or `for (var, counter) in iterable { }`."""

    var: str
    counter: str | None
    iterable: Expr
    body: Block
    pos: Pos


@record
class Break:
    value: Expr | None
    pos: Pos


@record
class Continue:
    pos: Pos


@record
class Return:
    value: Expr | None
    pos: Pos


@record
class Throw:
    """`throw expr` or bare `throw` (value None: rethrow inside catch, else `()`)."""

    value: Expr | None
    pos: Pos


Expr: TypeAlias = (
    Literal
    | Interpolated
    | ArrayLit
    | MapLit
    | Var
    | This
    | Unary
    | Binary
    | And
    | Or
    | Index
    | Property
    | Call
    | MethodCall
    | Closure
    | Block
    | If
    | Switch
    | While
    | Loop
    | DoLoop
    | For
    | Break
    | Continue
    | Return
    | Throw
)


# -- statements ------------------------------------------------------------------


@record
class Let:
    """`let name [= value];` or `const NAME [= value];` (value None = `()`)."""

    name: str
    value: Expr | None
    const: bool
    pos: Pos


@record
class Assign:
    """`target = value` or `target op= value` (`op` is e.g. "+", None for plain `=`).

    `target` is a Var, This, or an Index/Property chain rooted in a Var or
    This (never a MethodCall). `pos` is the `=`/`op=` operator.
    """

    target: Expr
    op: str | None
    value: Expr
    pos: Pos


@record
class ExprStmt:
    expr: Expr
    pos: Pos


@record
class TryCatch:
    body: Block
    var: str | None
    handler: Block
    pos: Pos


@record
class Import:
    """`import "path" as name;` (alias None when `as` is left out)."""

    path: Expr
    alias: str | None
    pos: Pos


@record
class Export:
    """`export name [as alias];`, or `export let/const name = …;` (then `decl` is that
    declaration): at the end of a module's top level, `alias` names the variable's value
    for the importer (`m::alias`). `pos` is the variable's name (Variable not found)."""

    name: str
    alias: str
    pos: Pos
    decl: Let | None = None


Stmt: TypeAlias = Let | Assign | ExprStmt | TryCatch | Import | Export


@record
class FnDef:
    """`[private] fn name(params) { }`; `this_type` for typed methods `fn int.dbl()`.

    `this_type` is the type name as written, except that `int` and `float`
    become "i64" and "f64" (as the reference stores them). `pos` is the `fn`.
    """

    name: str
    params: tuple[str, ...]
    body: Block
    pos: Pos
    private: bool = False
    this_type: str | None = None


@record
class Script:
    """A whole compiled source: top-level statements and hoisted functions."""

    stmts: tuple[Stmt, ...]
    functions: tuple[FnDef, ...] = ()
    source: str | None = None


# -- positions -----------------------------------------------------------------

_CHAIN = (Property, MethodCall, Index)


def expr_pos(expr: Expr) -> Pos:
    """The reference's `Expr::position()`: where an error about the value of
    `expr` as a whole is reported (a non-bool condition, for instance).

    That is `expr.pos`, except for a property/method/index chain, which the
    reference reports at the first `.`/`?.`/`[`/`?[` after the chain's root.
    """
    if not isinstance(expr, _CHAIN):
        return expr.pos
    link: Property | MethodCall | Index = expr
    while isinstance(link.target, _CHAIN):
        link = link.target
    return link.pos if isinstance(link, Index) else link.dot_pos


def start_pos(expr: Expr) -> Pos:
    """The reference's `Expr::start_position()`: the leftmost position of a
    chain, of `&&`/`||`/`??`, else `expr.pos` (an operator's for other binary
    operators, which the reference treats as calls)."""
    while True:
        if isinstance(expr, _CHAIN):
            expr = expr.target
        elif isinstance(expr, And | Or) or (isinstance(expr, Binary) and expr.op == "??"):
            expr = expr.left
        else:
            return expr.pos


# -- walking -------------------------------------------------------------------

Node: TypeAlias = Expr | Stmt | SwitchCase | FnDef


def children(node: object) -> Iterator[Node]:
    """The nodes directly inside `node`, in field order: the one visitor every walker uses.

    A field holding a node gives it; a field holding a tuple gives the nodes in
    it, at any depth (a map literal's `(name, value)` pairs, an interpolation's
    text and blocks); names, operators, flags and positions are no children.
    Anything that is not a node has none.
    """
    for name in CHILD_FIELDS.get(type(node), ()):
        value = getattr(node, name)
        if type(value) is tuple:
            yield from nodes_in(value)
        elif value is not None:
            yield value


def nodes_in(items: tuple[object, ...]) -> Iterator[Node]:
    """The nodes in a tuple field, at any depth of tuples, in order (text parts skipped)."""
    for item in items:
        if type(item) is tuple:
            yield from nodes_in(item)
        elif type(item) in CHILD_FIELDS:
            yield item  # type: ignore[misc]  # a node: CHILD_FIELDS has every node class


def _child_fields() -> dict[type, tuple[str, ...]]:
    """Per node class, the fields whose declared type names a node class (or Expr/Stmt)."""
    classes = [kind for kind in globals().values() if isinstance(kind, type) and class_fields(kind)]
    node_names = {kind.__name__ for kind in classes} | {"Expr", "Stmt"}
    return {
        kind: tuple(
            name
            for name in class_fields(kind)
            if node_names.intersection(re.findall(r"\w+", kind.__annotations__[name]))
        )
        for kind in classes
    }


CHILD_FIELDS: dict[type, tuple[str, ...]] = _child_fields()
"""Per node class, the fields that may hold nodes, in order: a node, None, or a tuple holding
nodes (see `nodes_in`). `children` reads them; so does the facts pass (analysis/facts.py),
which counts a node in a tuple apart from one in a field of its own."""
