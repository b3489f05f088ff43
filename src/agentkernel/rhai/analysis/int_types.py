"""Which local variables always hold an i64 — so compiled code can skip its type checks.

A speed pass, proven conservatively: a variable counts as an int only when
every value ever assigned to it is an int expression (int literals, other
such variables, integer arithmetic on them — which raises rather than leave
the i64 range — and `for` over an int range), and when nothing can change it
behind the compiler's back: no method call on it, no by-reference native call
with it first, no index/property assignment into it, no capture by a
closure. Anything else (parameters, catch variables, eval'd scopes) is left
to the normal checked path. The facts come from the scope analysis
(`scopes.py`, which also finds the captures); the decision is a fixed point,
so a variable built from other int variables qualifies too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.records import field, mutable_record

DeclKey = tuple[int, str]  # a declaration: its node's id and the name (scopes.decl_key)
INT_RESULT_OPS = frozenset({"+", "-", "*", "/", "%", "**", "<<", ">>", "&", "|", "^"})
UNKNOWN = object()  # an assignment whose value can never be proven int


@mutable_record
class IntFacts:
    """What the scope analysis (scopes.py) found: every value assigned to each
    declaration, the declarations changed behind the compiler's back, and which
    declaration each variable read (`bound`, by the Var node's id)."""

    assigned: dict[DeclKey, list[Any]] = field(default_factory=dict)
    excluded: set[DeclKey] = field(default_factory=set)
    changed: set[DeclKey] = field(default_factory=set)  # changed in place: `a[i] = v`, `a.b = v`
    bound: dict[int, DeclKey] = field(default_factory=dict)


def _int_dependencies(value: Any, bound: dict[int, DeclKey]) -> set[DeclKey] | None:
    """The declarations `value` is an int through, or None when it is not an int expression
    (an int literal, a variable, integer arithmetic on them, a `for` over an int range)."""
    return _dependencies(value, bound, INT_RESULT_OPS, ("-", "+"), non_negative=False)


def _dependencies(
    value: Any, bound: dict[int, DeclKey], ops: frozenset[str], unary: tuple[str, ...], *, non_negative: bool
) -> set[DeclKey] | None:
    """The declarations `value` is built from by the operators `ops` and `unary` out of int
    literals (≥ 0 if `non_negative`, and then a range's start alone), or None if it is not."""
    if value is UNKNOWN:
        return None
    found: set[DeclKey] = set()
    pending = [value]
    if isinstance(value, tuple) and value[0] == "range":
        pending = [value[1].left] if non_negative else [value[1].left, value[1].right]
    while pending:
        expr = pending.pop()
        if isinstance(expr, ast.Literal):
            if type(expr.value) is not int or (non_negative and expr.value < 0):
                return None
        elif isinstance(expr, ast.Var):
            key = bound.get(id(expr))
            if key is None:
                return None
            found.add(key)
        elif isinstance(expr, ast.Unary) and expr.op in unary:
            pending.append(expr.operand)
        elif isinstance(expr, ast.Binary) and expr.op in ops:
            pending += (expr.left, expr.right)
        else:
            return None
    return found


def int_declarations(facts: IntFacts) -> frozenset[DeclKey]:
    """The declarations that always hold an i64.

    A declaration is an int when all its values are int expressions of int
    declarations: "not an int" spreads from each failing declaration to those
    built from it, once each, so the pass is linear however long the chains
    of variables.
    """
    dependents: dict[DeclKey, list[DeclKey]] = {}
    failing: list[DeclKey] = []
    ints: set[DeclKey] = set()
    for key, values in facts.assigned.items():
        needs: set[DeclKey] = set()
        for value in values:
            found = _int_dependencies(value, facts.bound)
            if found is None:
                needs = set()
                failing.append(key)
                break
            needs |= found
        else:
            if key in facts.excluded or key in facts.changed:
                failing.append(key)
                continue
            ints.add(key)
            for need in needs:
                dependents.setdefault(need, []).append(key)
            failing += [need for need in needs if need not in facts.assigned]
    _drop_dependents(ints, dependents, failing)
    return frozenset(ints)


NON_NEGATIVE_OPS = frozenset({"+", "*", "/", "%"})  # on non-negative i64s: non-negative, or an error


def non_negative_declarations(facts: IntFacts, ints: frozenset[DeclKey]) -> frozenset[DeclKey]:
    """Of the int declarations `ints`, those that never hold a value below 0: every value is
    built by `+`, `*`, `/`, `%` from non-negative literals and such declarations (overflow
    raises, so a sum or product of them that completes is one too), or a `for` over a range
    that starts at one. Adding or multiplying two then needs no test of the i64 range's bottom."""
    candidates = set(ints)
    dependents: dict[DeclKey, list[DeclKey]] = {}
    failing: list[DeclKey] = []
    for key in ints:
        for value in facts.assigned.get(key, ()):
            found = _dependencies(value, facts.bound, NON_NEGATIVE_OPS, ("+",), non_negative=True)
            if found is None:
                failing.append(key)
                break
            for need in found:
                dependents.setdefault(need, []).append(key)
                if need not in ints:
                    failing.append(key)
    for key in failing:
        candidates.discard(key)
    _drop_dependents(candidates, dependents, failing)
    return frozenset(candidates)


def text_declarations(facts: IntFacts) -> frozenset[DeclKey]:
    """The declarations that always hold a plain string: every value a string literal or an
    interpolation, and nothing changes them behind the compiler's back (a tag is set by a
    method call)."""
    return _declarations_of(
        facts,
        lambda v: type(v) is ast.Interpolated or (type(v) is ast.Literal and type(v.value) is str),
        facts.excluded | facts.changed,
    )


def map_declarations(facts: IntFacts) -> frozenset[DeclKey]:
    """The declarations that always hold an object map: every value a map literal; stores
    into one at a key or property keep it a map, so only what else may change it counts."""
    return _declarations_of(facts, lambda v: type(v) is ast.MapLit, facts.excluded)


def _declarations_of(
    facts: IntFacts, test: Callable[[Any], bool], excluded: set[DeclKey]
) -> frozenset[DeclKey]:
    return frozenset(
        key for key, values in facts.assigned.items() if key not in excluded and all(map(test, values))
    )


def _drop_dependents(
    kept: set[DeclKey], dependents: dict[DeclKey, list[DeclKey]], failing: list[DeclKey]
) -> None:
    """Take out of `kept` every declaration that depends, directly or not, on one in `failing`."""
    while failing:
        for dependent in dependents.get(failing.pop(), ()):
            if dependent in kept:
                kept.discard(dependent)
                failing.append(dependent)


__all__ = [
    "INT_RESULT_OPS",
    "UNKNOWN",
    "DeclKey",
    "IntFacts",
    "int_declarations",
    "map_declarations",
    "non_negative_declarations",
    "text_declarations",
]
