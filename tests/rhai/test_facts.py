"""The facts pass: what the compiler asks about a node's subtree, found in one walk (analysis/facts.py).

Each fact decides a choice of the generated code (an operation count, a
dropped statement, an uncopied loop item, counting in a local…); these pin
what the walk records for small shapes. That the generated code did not
change when the separate walks became this one is shown by the conformance
suite and the exact operation counts.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentkernel.rhai.analysis.facts import Facts
from agentkernel.rhai.codegen.calls import SPECIAL_CALLS
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.parse_support import ParseOptions
from agentkernel.rhai.syntax.parser import parse


def facts_of(source: str) -> tuple[Facts, ast.Script, ast.Block]:
    script = parse(source, ParseOptions())
    functions = {(f.name, len(f.params)): f for f in script.functions if f.this_type is None}
    body = ast.Block(script.stmts, (1, 1))
    return Facts.of([*(f.body for f in script.functions), body], functions, SPECIAL_CALLS), script, body


def first(kind: type, node: Any) -> Any:
    """The first node of class `kind` at or below `node`, depth first."""
    if type(node) is kind:
        return node
    for child in ast.children(node):
        found = first(kind, child)
        if found is not None:
            return found
    return None


@pytest.mark.parametrize(
    ("source", "ops"),
    [
        ("40 + 2;", 2),  # the statement, and the constant the optimizer folds `40 + 2` to
        ("let x = a + b;", 4),
        ("f(a, [b, c]);", 6),  # the statement, the call, `a`, the array and its items
        ("let x = { a + b };", 1),  # a block in a field of its own counts when it runs
        ("if a { b } else { c }", 2),  # a statement there: itself and its condition
        ("let x = if a { b } else { c };", 4),  # in an expression, in a block there: 2 more
        ("{ a + b; }", 0),  # a block the reference's optimizer flattens counts nothing
        ("{ let y = a; }", 1),  # one it keeps (a `let` in it) counts 1, as a statement
        ("while true { a }", 1),  # `while true` is a loop there: its condition never counts
        ("`x${a + b}y`;", 7),  # an interpolation counts its texts and the expression in `${…}`
        ("export let x = a + 1;", 4),  # one statement
    ],
)
def test_a_statement_counts_its_nodes_and_a_folded_constant_as_one(source: str, ops: int) -> None:
    facts, script, _ = facts_of(source)
    assert facts.ops(script.stmts[0]) == ops


@pytest.mark.parametrize(
    ("source", "pure"),
    [
        ("1 + 2", True),
        ("a", True),
        ("[a, 1, #{b: c}]", True),
        ("{ let c = 3; c }", True),
        ("|x| x.push(1)", True),
        ("a + 1", False),
        ("f(1)", False),
        ("a.b", False),
        ("{ a = 1; }", False),
        ("1 / 0", False),  # the optimizer leaves a failing operator where it stands
    ],
)
def test_pure_is_what_the_reference_optimizer_drops(source: str, pure: bool) -> None:
    facts, script, _ = facts_of(source + ";")
    statement = script.stmts[0]
    assert isinstance(statement, ast.ExprStmt)
    assert facts.pure(statement.expr) is pure


@pytest.mark.parametrize(
    ("source", "changes"),
    [
        ("for x in a { x.push(1) }", True),
        ("for x in a { x[0] = 1 }", True),
        ("for x in a { print(x) }", True),  # a call's first argument goes to natives by reference
        ("for x in a { let f = || 1; }", True),  # a closure may change anything
        ("for x in a { let y = x; y.push(1) }", False),
        ("for x in a { t += x.len }", False),
        ("for x in f(x) { t += 1 }", False),  # the iterable is not the body
    ],
)
def test_a_for_loop_knows_whether_its_body_may_change_its_variable(source: str, changes: bool) -> None:
    facts, _, body = facts_of(source)
    assert facts.changes_variable(first(ast.For, body)) is changes


def test_nested_loops_each_see_only_their_own_body() -> None:
    facts, _, body = facts_of("for x in a { for y in b { x += y } for x in c { t += x } }")
    outer = first(ast.For, body)
    inner_y, inner_x = (s.expr for s in outer.body.stmts)
    assert facts.changes_variable(outer)
    assert not facts.changes_variable(inner_y) and not facts.changes_variable(inner_x)


def test_calls_natives_eval_and_loops_with_calls() -> None:
    facts, script, body = facts_of("fn f() { 1 } fn g() { print(1) } fn h() { [].len() } f()")
    plain, printing, method = (fn.body for fn in script.functions)
    assert not facts.calls_natives(plain) and facts.calls_natives(printing) and facts.calls_natives(method)
    assert not facts.calls_natives(body)  # only a function of this script: its depth is passed
    without_eval, _, body = facts_of('let x = 1; fn f() { eval("2") } x')
    assert not without_eval.uses_eval(body)  # a function's eval is the function's
    with_eval, _, body = facts_of('let x = 1; if x > 0 { eval("x") }')
    assert with_eval.uses_eval(body)
    loops, _, body = facts_of("while x < 3 { x += 1 } while x < 9 { f(x) } loop { let g = || 1; }")
    plain_loop, calling_loop, closure_loop = (s.expr for s in body.stmts if isinstance(s, ast.ExprStmt))
    assert not loops.has_calls(plain_loop) and loops.has_calls(calling_loop) and loops.has_calls(closure_loop)


def test_names_are_the_plain_variables_below_a_node_or_statements() -> None:
    facts, script, _ = facts_of("let a = b + c; d::e + f(g); { h }")
    assert facts.names(script.stmts[0]) == {"b", "c"}
    assert facts.names(script.stmts[1]) == {"g"}  # `d::e` is a module's, `f` a function
    assert facts.names(script.stmts) == {"b", "c", "g", "h"}
