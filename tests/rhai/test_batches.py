"""A reading closure's copies over many items (codegen/batches.py): `filter` and `map` give
the same values, stop at the same count with the same error at every limit, and bring a
host's periodic checkpoint as near, as calling the closure once an item does."""

from __future__ import annotations

import re

import pytest

from agentkernel.rhai import Engine
from agentkernel.rhai.codegen import compiler
from tests.rhai.operation_counts import outcome, periodic_looks, stops

BATCHED = [
    'let w = "a bb  ccc d".split(); w.filter(|x| x.len > 1)',
    'let w = "a bb ccc d".split(" "); w.map(|x| x.len * 2)',
    "let a = [5, 1, 8, 3, 9, 2]; a.filter(|x| x > 3)",
    "let a = [5, 1, 8, 3, 9, 2]; a.map(|x| x * x * 2)",
    "let a = [1, 2, 3]; a.map(|x| -x).filter(|x| x != -2)",
    "let a = [1, 2, 9223372036854775807]; a.map(|x| x * 3)",  # overflows at the last item
    "let a = [4, 0, 2]; a.map(|x| 8 / x)",  # divides by zero at the second
    'let a = ["a", 1, "b"]; a.filter(|x| x == 1)',  # mixed kinds: one by one
    "let a = []; a.filter(|x| x > 1).len()",
    'let a = ["ab", "c"]; let b = a.filter(|x| x.len > 1); b.push("d"); a.len() + b.len()',
    'fn f(w) { w.filter(|x| !(x.len == 2)) } f("aa b cc ddd".split())',
]


def batch_lines(source: str) -> list[str]:
    return re.findall(r"\w+\.rhai_batch = .*", Engine().compile(source).module.source)


def no_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiler, "batchable", lambda node: False)


@pytest.mark.parametrize("source", BATCHED)
def test_a_batch_stops_where_calling_each_item_does(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert batch_lines(source)
    batched = stops(source)
    no_batches(monkeypatch)
    assert not batch_lines(source)
    assert stops(source) == batched


@pytest.mark.parametrize(
    "source",
    [
        "let k = 2; [1, 2, 3].filter(|x| x > k)",  # captures a variable
        "[1, 2, 3].filter(|x| { print(x); x > 1 })",  # a call
        '["a", "b"].map(|x| x.to_upper())',  # a method: it may be the script's own
        "[1, 2, 3].map(|x| if x > 1 { 1 } else { 2 })",  # counts in its branches
        "[1, 2, 3].map(|x, i| x + i)",  # two parameters
        "[1, 2].filter(|x| x > 1 && x < 5)",  # counts what it evaluates
        '["a"].filter(|x| x in "abc")',  # `in` calls `contains`, which a script may define
        '["x", "yy"].map(|x| x + "!")',  # builds a string, which the data limit counts
    ],
)
def test_a_closure_that_may_count_or_call_has_no_batch(source: str) -> None:
    assert not batch_lines(source)
    Engine().eval(source, stdout=lambda line: None)


def test_only_the_kinds_a_copy_can_take_have_one() -> None:
    (line,) = batch_lines('["a"].filter(|w| w.len > 0)')
    assert "str:" in line and "int:" not in line  # an int has no `len`: its copy would fail
    (line,) = batch_lines("[1].filter(|x| x > 0)")
    assert "str:" in line and "int:" in line  # a string compares with an int too (false)


def test_a_batch_under_a_big_limit_and_without(monkeypatch: pytest.MonkeyPatch) -> None:
    source = "let a = []; for i in 0..3000 { a.push(i % 13) } a.filter(|x| x > 6).len() + a.map(|x| x * 2)[7]"
    assert Engine().eval(source) == sum(1 for i in range(3000) if i % 13 > 6) + 14
    limits = (20_000, 24_012, 24_019, 24_020, 24_024, 24_025, 10**6)  # 24,025 lets it finish
    batched = [outcome(source, limit) for limit in limits]
    no_batches(monkeypatch)
    assert [outcome(source, limit) for limit in limits] == batched
    assert "Too many operations" in batched[0] and "Too many operations" not in batched[-1]


def test_a_periodic_checkpoint_is_reached_as_often_with_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that looks at the clock every so many operations (scripting/rhai_adapter.py) looks
    at the same counts when a closure's items run in a batch."""

    def looks() -> list[int]:
        source = (
            'let w = "a bb ccc dddd ".split(); let t = 0;'
            "for i in 0..300 { t += w.filter(|x| x.len > 1).len() + w.map(|x| x.len)[2] } t"
        )
        return periodic_looks(source, 300 * 6)

    batched = looks()
    no_batches(monkeypatch)
    assert looks() == batched
    assert len(batched) > 30
