"""Compiling the standard string methods inline: `s.trim()`, `s.sub_string(0, 3)`, `s.contains(x)`, ….

A method call is a registry lookup and a Python call or two (`rt.pure_method`,
`rt_method`); for the commonest natives of a string that is most of what the
call costs. So a call whose name and number of arguments are in `INLINE` is
compiled as

    if <the receiver and the arguments have the native's types> and rt.natives_inline:
        <the native's own work, as Python>
    else:
        <the general path>

`rt.natives_inline` is off when a script function of the name and arity, a
typed method, or a host's registration would win over the standard native
(stdlib `INLINED` lists what it covers: a test holds the two tables equal).
The fast path keeps what the general one does around the native: a receiver
long enough to be worth a look at the clock takes the general path, a string
built counts toward the data limit, a method that changes its receiver
(`trim`) stores the new value where the receiver came from (only for a
variable that is no constant: the general path words the error on a constant).
Operation counts are the call's node's, counted before either path runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple

from agentkernel.rhai.codegen.function import FunctionBase
from agentkernel.rhai.codegen.operands import TEMP, Operand
from agentkernel.rhai.runtime.pacing import POLL_SIZE
from agentkernel.rhai.stdlib.text import WHITESPACE
from agentkernel.rhai.syntax import ast

TEXT = "text"  # a string or a char
INT = "int"
START = "start"  # an int ≥ 0 (a negative one counts from the end: the general path)

Python = Callable[[FunctionBase, str, list[str]], str]
"""The native's work as a Python expression, from the receiver's and the arguments' texts."""


class Inline(NamedTuple):
    """How compiled code runs one standard method of a plain receiver."""

    python: Python
    args: tuple[str, ...] = ()  # each argument's kind: TEXT, INT or START
    receivers: tuple[str, ...] = ("str",)  # the Python types of the receivers it covers
    mutates: bool = False  # the expression is the receiver's new value; the call gives `()`
    sized: bool = True  # the work grows with the receiver: a long one takes the general path
    builds: bool = False  # a new string: counted toward the data limit
    bounded_by: int | None = None  # the argument whose value bounds the work, if any (a count)


def _slice(c: FunctionBase, s: str, args: list[str]) -> str:
    """`s.sub_string(start)` / `s.sub_string(start, count)` for a start ≥ 0: a slice (a count
    ≤ 0, or a start past the end, gives an empty string, as the native)."""
    start = "" if args[0] == "0" else args[0]
    if len(args) == 1:
        return f"{s}[{start}:]"
    end = args[1] if not start else f"{start} + {args[1]}"
    return f"{s}[{start}:{end}]"


def _trimmed(c: FunctionBase, s: str, args: list[str]) -> str:
    """Rust's `trim`: its whitespace (char::is_whitespace), not Python's `str.strip()`'s."""
    return f"{s}.strip({c.str_literal(c.m.constant(WHITESPACE))})"


INLINE: dict[tuple[str, int], Inline] = {
    ("len", 0): Inline(lambda c, s, a: f"len({s})", receivers=("str", "list"), sized=False),
    ("is_empty", 0): Inline(lambda c, s, a: f"not {s}", sized=False),
    ("to_upper", 0): Inline(lambda c, s, a: f"{s}.upper()", builds=True),
    ("to_lower", 0): Inline(lambda c, s, a: f"{s}.lower()", builds=True),
    ("trim", 0): Inline(_trimmed, mutates=True, builds=True),
    ("make_upper", 0): Inline(lambda c, s, a: f"{s}.upper()", mutates=True, builds=True),
    ("make_lower", 0): Inline(lambda c, s, a: f"{s}.lower()", mutates=True, builds=True),
    ("contains", 1): Inline(lambda c, s, a: f"({a[0]} in {s})", (TEXT,)),
    ("starts_with", 1): Inline(lambda c, s, a: f"{s}.startswith({a[0]})", (TEXT,)),
    ("ends_with", 1): Inline(lambda c, s, a: f"{s}.endswith({a[0]})", (TEXT,)),
    ("index_of", 1): Inline(lambda c, s, a: f"({s}.find({a[0]}) if {s} else -1)", (TEXT,)),
    ("sub_string", 1): Inline(_slice, (START,), builds=True),
    ("sub_string", 2): Inline(_slice, (START, START), builds=True, bounded_by=1),
}


Fit = Literal["none", "opened", "certain"]  # how `inline_method` compiled a call

# the inlined methods that give a bool and cannot fail on the fast path: an `if` on one (or on
# its `!`) counts in its branches (control.py `if_counted_in_branches`)
PREDICATES = frozenset({("contains", 1), ("starts_with", 1), ("ends_with", 1), ("is_empty", 0)})


def inline_method(
    c: FunctionBase,
    node: ast.MethodCall,
    receiver: Operand,
    args: list[Operand],
    out: Operand,
    const: str,
    *,
    negated: bool = False,
) -> Fit:
    """Emit `if <fast path applies>: <inline work>` and open its `else:` (the caller emits the
    general path into it and closes it: `c.ind -= 1`): "opened". "none", having emitted
    nothing, when the method has no inline form here; "certain" when the fast path is sure to
    apply (a letter walk's copy, letter_walks.py): its work alone, no `if`, no general path.
    `negated`: the fast path gives the result's `not` (a predicate's, under `!`)."""
    inline = INLINE.get((node.name, len(args)))
    if inline is None or (inline.mutates and not (const == "False" and c.is_lvalue(node.target))):
        return "none"
    guard = _guard(c, inline, receiver, args)
    if guard is None:
        return "none"
    if guard == "True":
        _inline_work(c, inline, node, receiver, args, out, negated)
        return "certain"
    c.emit(f"if {guard}:")
    with c.indented():
        _inline_work(c, inline, node, receiver, args, out, negated)
    c.emit("else:")
    c.ind += 1
    return "opened"


def _inline_work(
    c: FunctionBase,
    inline: Inline,
    node: ast.MethodCall,
    receiver: Operand,
    args: list[Operand],
    out: Operand,
    negated: bool,
) -> None:
    """The fast path's lines: the native's work in Python, its result into `out`."""
    texts = [c.str_literal(a) if c.is_str_constant(a) else str(a) for a in args]  # literals written in
    value = inline.python(c, str(receiver), texts)
    if negated:
        value = f"not ({value})"
    held = c.temp() if inline.mutates else out
    c.emit(f"{held} = {value}", node.pos)
    if inline.builds:
        c.emit(f"if {c.setting('data_limit')}: rt.account({held})", node.pos)
    if inline.mutates:
        c.store(node.target, Operand(held.text, TEMP), node.pos)
        c.emit(f"{out} = None")


def _guard(c: FunctionBase, inline: Inline, receiver: Operand, args: list[Operand]) -> str | None:
    """The run-time test of the fast path: the native's own types, a short receiver, no override
    (None: a literal argument the fast path never takes, as `sub_string(-2)`)."""
    tests = []
    bound = args[inline.bounded_by].int_value if inline.bounded_by is not None else None
    sized = inline.sized and (bound is None or bound >= POLL_SIZE)  # `s.sub_string(0, 3)`: small work
    short = c.short_text_flag(receiver) if sized and inline.receivers == ("str",) else None
    if short is not None:  # a string of a length the loop around keeps, tested at its entry
        tests.append(short)
        sized = False
    elif not c.is_str_constant(receiver):
        tests.append(" or ".join(c.type_test(receiver, kind) for kind in inline.receivers))
        if len(inline.receivers) > 1:
            tests[-1] = f"({tests[-1]})"
    if sized:
        tests.append(f"len({receiver}) < {POLL_SIZE}")
    for kind, arg in zip(inline.args, args, strict=True):
        tested = _arg_tests(c, kind, arg)
        if tested is None:
            return None
        tests.extend(tested)
    tests.append(c.setting("natives_inline"))
    return " and ".join(test for test in tests if test != "True") or "True"


def _arg_tests(c: FunctionBase, kind: str, arg: Operand) -> list[str] | None:
    """What the fast path tests of one argument of `kind`; None when a literal never fits."""
    if kind == TEXT:
        if c.is_str_constant(arg):
            return []
        walked = c.raw_chars.get(arg.text)  # a string's own character: one of TEXT when it walks one
        if walked == "True":  # a letter walk's copy (letter_walks.py): it walks a string
            return []
        return [f"({walked} or type({arg}) in TEXT)" if walked else f"type({arg}) in TEXT"]
    value = arg.int_value
    if value is not None:  # a literal
        return [] if kind == INT or value >= 0 else None
    tests = [] if c.known_int(arg) else [f"type({arg}) is int"]
    if kind == START and not c.non_negative(arg):
        tests.append(f"{arg} >= 0")
    return tests


__all__ = ["INLINE", "PREDICATES", "Inline", "inline_method"]
