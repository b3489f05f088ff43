"""A `for` over a range of ints counted by its variable (codegen/windows.py) stops where
counting each iteration stops: at every limit, the same error at the same place, or the
same value; and a host's periodic checkpoint comes as often."""

from __future__ import annotations

import re

import pytest

from agentkernel.rhai import Engine
from agentkernel.rhai.codegen.control import ControlFlow
from tests.rhai.operation_counts import outcome, periodic_looks, stops

WINDOWED = [
    "let s = 0; for i in 0..40 { s += i } s",
    "let s = 0; for i in -5..=5 { s += i * i } s",
    "let n = 30; let s = 0; for i in 1..n { s += i } s",
    "let s = 1; for i in 5..5 { s += 1 } for i in 0..3 { s += i } s",
    'let t = ""; for i in 0..20 { t += i } t.len()',  # a slow path counting on its own (append_text)
    "let n = 0; for i in 0..50 { n += i; if n > 100 { break } } n",
    "let n = 0; for i in 0..40 { if i % 3 == 0 { continue } n += 1 } n",
    "let t = 0; for i in 0..6 { let k = 0; while k < i { k += 1; t += k } } t",
    "let t = 0; for i in 0..6 { for j in 0..i { t += j } } t",
    'fn trim() { this = "xyz"; 1 } let t = 0; for i in 0..15 { let s = " ab "; s.trim(); t += s.len() } t',
    "let a = [1, 2]; let t = 0; for i in 0..10 { t += a[i] } t",  # fails at i = 2
    "let a = []; for i in 0..30 { a.push(i) } a.len()",
    "fn f(k) { let s = 0; for i in 0..30 { s += i; if s > k { return s } } s } f(50) + f(9000)",
]


def window_lines(source: str) -> list[str]:
    return re.findall(r"rt\.window\(.*", Engine().compile(source).module.source)


@pytest.mark.parametrize("source", WINDOWED)
def test_a_window_stops_where_counting_each_iteration_does(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert window_lines(source)
    windowed = stops(source)
    monkeypatch.setattr(ControlFlow, "int_range", lambda self, iterable: False)
    assert not window_lines(source)
    assert stops(source) == windowed


@pytest.mark.parametrize(
    "source",
    [
        "let s = 0; for i in 0..10 { i += 1; s += i } s",  # the body assigns the variable
        "let x = 2.5; let s = 0; for i in 0..3 { s += i } for i in 0..x.to_int() { s += i } s",
        "let s = 0; for (v, k) in 0..4 { s += v * k } s",  # a counter beside it
        "let s = 0; for x in [1, 2, 3] { s += x } s",  # not a range
        "let s = 0; for i in 0..4 { s += i; print(i) } s",  # a call: counted in the runtime
    ],
)
def test_a_loop_the_variable_cannot_count_has_no_window(source: str) -> None:
    lines = window_lines(source)
    assert len(lines) <= 1  # the second script's first loop has one
    if len(lines) == 1:
        assert "x.to_int()" in source
    Engine().eval(source, stdout=lambda line: None)


def test_a_window_runs_unlimited_and_under_a_big_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    source = "let s = 0; for i in 0..100000 { s += i % 7 } s"
    assert Engine().eval(source) == sum(i % 7 for i in range(100_000))
    assert window_lines(source)
    stopped = [f"{limit}: {outcome(source, limit)}" for limit in (149_999, 150_000, 150_001, 10**6)]
    monkeypatch.setattr(ControlFlow, "int_range", lambda self, iterable: False)
    assert [f"{limit}: {outcome(source, limit)}" for limit in (149_999, 150_000, 150_001, 10**6)] == stopped
    assert "Too many operations" in stopped[0] and "Too many operations" not in stopped[-1]


def test_a_periodic_checkpoint_is_reached_as_often_in_a_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that looks at the clock every so many operations (scripting/rhai_adapter.py) looks
    as often, at the same counts, when the loop counts by its variable."""

    def looks() -> list[int]:
        source = 'let t = ""; for i in 0..3000 { t += "ab"; if i % 500 == 0 { t += i } } t.len()'
        return periodic_looks(source, 6020)

    windowed = looks()
    monkeypatch.setattr(ControlFlow, "int_range", lambda self, iterable: False)
    assert looks() == windowed
    assert len(windowed) > 3000 * 6 // 97 - 5
