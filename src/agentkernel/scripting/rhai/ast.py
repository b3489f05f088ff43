"""The Rhai syntax tree: frozen dataclasses, one per construct (RHAI.md §1–§12).

This module is the contract between the parser (which builds it) and the
compiler (which turns it into Python). Every node carries `pos`, the 1-based
(line, position) that the reference implementation reports for an error
raised *at that node* (RHAI.md §15): for a binary operator that is the
operator's position, for a call the function name's, for an index the `[`,
for a property the name after the dot, for a statement its first token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from agentkernel.scripting.rhai.values import Char

Pos: TypeAlias = tuple[int, int]  # (line, position), both 1-based; (0, 0) = none


# -- expressions ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    """`42`, `4.2`, `"s"`, `'c'` (a Char), `true`, `()` (None)."""

    value: None | bool | int | float | str | Char
    pos: Pos


@dataclass(frozen=True, slots=True)
class Interpolated:
    """A back-tick string: literal text parts and `${ … }` blocks, in order."""

    parts: tuple[str | Block, ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class ArrayLit:
    items: tuple[Expr, ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class MapLit:
    """`#{a: 1, "b c": 2}`: keys are always literal names, in source order."""

    items: tuple[tuple[str, Expr], ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class Var:
    """A variable; `namespace` is "global" for `global::NAME`, else None."""

    name: str
    pos: Pos
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class This:
    pos: Pos


@dataclass(frozen=True, slots=True)
class Unary:
    """`-x`, `+x`, `!x`. (A `-` before a number literal is folded into it.)"""

    op: str
    operand: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Binary:
    """Every binary operator except `&&`/`||` and assignment.

    `op` is the source text: `+ - * / % ** << >> & | ^ == != < <= > >= .. ..= in !in ??`.
    """

    op: str
    left: Expr
    right: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class And:
    """`a && b`: short-circuit, both operands must be bool."""

    left: Expr
    right: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Or:
    """`a || b`: short-circuit, both operands must be bool."""

    left: Expr
    right: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Index:
    """`target[index]`, or `target?[index]` when `optional`."""

    target: Expr
    index: Expr
    pos: Pos
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Property:
    """`target.name`, or `target?.name` when `optional`."""

    target: Expr
    name: str
    pos: Pos
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Call:
    """A function-call-style call `name(args)`; `namespace` for `ns::name(...)`.

    Built-ins that are keywords (`print`, `debug`, `type_of`, `Fn`, `call`,
    `curry`, `eval`, `is_def_var`, `is_def_fn`, `is_shared`) are Calls too;
    the compiler gives them their special meaning.
    """

    name: str
    args: tuple[Expr, ...]
    pos: Pos
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class MethodCall:
    """`target.name(args)`, or `target?.name(args)` when `optional`."""

    target: Expr
    name: str
    args: tuple[Expr, ...]
    pos: Pos
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Closure:
    """`|a, b| expr` or `|x| { … }`; the body is always a Block."""

    params: tuple[str, ...]
    body: Block
    pos: Pos


@dataclass(frozen=True, slots=True)
class Block:
    """`{ stmts }`: its value is the last statement's value (`()` when empty)."""

    stmts: tuple[Stmt, ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: Block
    otherwise: Block | If | None
    pos: Pos


@dataclass(frozen=True, slots=True)
class SwitchCase:
    """One arm: `p1 | p2 [if cond] => body`. Patterns are literal expressions
    (Literal, ArrayLit, MapLit, Unary minus on a number) or a range
    `Binary('..'|'..=')` of int literals."""

    patterns: tuple[Expr, ...]
    condition: Expr | None
    body: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Switch:
    subject: Expr
    cases: tuple[SwitchCase, ...]
    default: Expr | None
    pos: Pos


@dataclass(frozen=True, slots=True)
class While:
    cond: Expr
    body: Block
    pos: Pos


@dataclass(frozen=True, slots=True)
class Loop:
    body: Block
    pos: Pos


@dataclass(frozen=True, slots=True)
class DoLoop:
    """`do { } while cond` (until=False) or `do { } until cond` (until=True)."""

    body: Block
    cond: Expr
    until: bool
    pos: Pos


@dataclass(frozen=True, slots=True)
class For:
    """`for var in iterable { }` or `for (var, counter) in iterable { }`."""

    var: str
    counter: str | None
    iterable: Expr
    body: Block
    pos: Pos


@dataclass(frozen=True, slots=True)
class Break:
    value: Expr | None
    pos: Pos


@dataclass(frozen=True, slots=True)
class Continue:
    pos: Pos


@dataclass(frozen=True, slots=True)
class Return:
    value: Expr | None
    pos: Pos


@dataclass(frozen=True, slots=True)
class Throw:
    """`throw expr` or bare `throw` (value None: rethrow inside catch, else `()`)."""

    value: Expr | None
    pos: Pos


Expr: TypeAlias = (
    Literal | Interpolated | ArrayLit | MapLit | Var | This | Unary | Binary | And | Or | Index
    | Property | Call | MethodCall | Closure | Block | If | Switch | While | Loop | DoLoop | For
    | Break | Continue | Return | Throw
)


# -- statements ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Let:
    """`let name [= value];` or `const NAME [= value];` (value None = `()`)."""

    name: str
    value: Expr | None
    const: bool
    pos: Pos


@dataclass(frozen=True, slots=True)
class Assign:
    """`target = value` or `target op= value` (`op` is e.g. "+", None for plain `=`).

    `target` is a Var, This, Index or Property chain ending in one of those.
    """

    target: Expr
    op: str | None
    value: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class ExprStmt:
    expr: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class TryCatch:
    body: Block
    var: str | None
    handler: Block
    pos: Pos


@dataclass(frozen=True, slots=True)
class Import:
    """`import "path" as name;` (alias None when `as` is left out)."""

    path: Expr
    alias: str | None
    pos: Pos


Stmt: TypeAlias = Let | Assign | ExprStmt | TryCatch | Import


@dataclass(frozen=True, slots=True)
class FnDef:
    """`[private] fn name(params) { }`; `this_type` for typed methods `fn int.dbl()`."""

    name: str
    params: tuple[str, ...]
    body: Block
    pos: Pos
    private: bool = False
    this_type: str | None = None


@dataclass(frozen=True, slots=True)
class Script:
    """A whole compiled source: top-level statements and hoisted functions."""

    stmts: tuple[Stmt, ...]
    functions: tuple[FnDef, ...] = field(default=())
    source: str | None = None
