"""`ast.children()`: the one visitor the walkers over the syntax tree use (issue 10, shape 4).

It finds a class's child fields from their declared types, so it is checked
here against a walk that knows nothing of types: every record in any field
(tuples flattened), over every node of the scripts of the ABI corpus.
"""

from __future__ import annotations

from collections.abc import Iterator

from agentkernel.rhai.errors import RhaiSyntaxError
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.parser import ParseOptions, parse
from agentkernel.rhai.syntax.records import record_fields
from tests.rhai.test_abi import corpus

NO_LIMITS = ParseOptions(max_expr_depth=0, max_fn_expr_depth=0)


def _records_in(value: object) -> Iterator[object]:
    """Every record in a field's value, tuples flattened: the brute-force oracle."""
    if isinstance(value, tuple):
        for item in value:
            yield from _records_in(item)
    elif record_fields(value):
        yield value


def _brute_children(node: object) -> list[object]:
    return [child for name in record_fields(node) for child in _records_in(getattr(node, name))]


def _every_node(root: object) -> Iterator[object]:
    pending = [root]
    while pending:
        node = pending.pop()
        yield node
        pending.extend(_brute_children(node))


def test_children_are_every_node_in_every_field_in_order() -> None:
    checked = 0
    for source in corpus():
        try:
            script = parse(source, NO_LIMITS)
        except RhaiSyntaxError:
            continue
        for node in _every_node(script):
            assert list(ast.children(node)) == _brute_children(node), node
            checked += 1
    assert checked > 15_000


def test_fields_that_hold_no_nodes_give_none() -> None:
    node = ast.MapLit((("a", ast.Literal(1, (1, 5))), ("b", ast.Var("x", (1, 9)))), (1, 1))
    assert list(ast.children(node)) == [ast.Literal(1, (1, 5)), ast.Var("x", (1, 9))]
    text = ast.Interpolated(("a", ast.Block((), (1, 3)), "b"), (1, 1))
    assert list(ast.children(text)) == [ast.Block((), (1, 3))]
    assert list(ast.children(ast.Var("x", (1, 1)))) == []
    assert list(ast.children("not a node")) == []
    assert list(ast.children(ast.Return(None, (1, 1)))) == []
