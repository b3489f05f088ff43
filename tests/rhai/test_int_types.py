"""The int-typing speed pass (int_types.py, fed by scopes.py): proven ints skip checks, others do not."""

from __future__ import annotations

import pytest

from agentkernel.rhai import Engine, RhaiRuntimeError
from agentkernel.rhai.analysis.scopes import analyse
from agentkernel.rhai.syntax import ast as rast
from agentkernel.rhai.syntax.parser import parse


def ints_of(source: str) -> set[str]:
    script = parse(source)
    body = rast.Block(script.stmts, (1, 1))
    return {name for _, name in analyse((), body, script).int_keys}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("let x = 1; x += 2; let y = x * 3;", {"x", "y"}),
        ("for i in 0..10 { let j = i % 3; }", {"i", "j"}),
        ("const MAX = 5; let k = 0; while k < MAX { k += 1; }", {"MAX", "k"}),
        ("let x = 1; x = x + 0.5;", set()),  # becomes a float
        ('let x = 1; x = "a";', set()),
        ("let x = 1; x.set_bit(0, true);", set()),  # a method could change it
        ("let x = 1; let f = || x; x += 1;", set()),  # x is captured by a closure
        ("let a = [1]; let x = a[0];", set()),  # an element may be anything
        ("let x = 1; set_bit(x, 0, true);", set()),  # by-reference first argument
        ("let x; x = 1;", set()),  # starts as ()
        ("for x in [1, 2] { }", set()),
        ("let a = 1; let b = a; b = b / 2;", {"a", "b"}),
    ],
)
def test_what_counts_as_an_int(source: str, expected: set[str]) -> None:
    assert ints_of(source) == expected


def test_overflow_is_still_an_error_on_the_fast_path() -> None:
    with pytest.raises(RhaiRuntimeError, match="Addition overflow"):
        Engine().eval("let x = 9223372036854775807; let y = 1; x + y")
    with pytest.raises(RhaiRuntimeError, match="Multiplication overflow"):
        Engine().eval("let x = 4294967296; x * x")


def test_mixed_programs_keep_their_meaning() -> None:
    assert Engine().eval("let x = 1; let s = 0; for i in 0..5 { s += i * x; } s") == 10
    assert Engine().eval("let x = 2; x = x * 1.5; x") == 3.0
    assert Engine().eval("let n = 0; while n < 3 { n += 1; } n < 3 || n == 3") is True
