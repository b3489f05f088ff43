"""The int-typing speed pass (int_types.py, fed by scopes.py): proven ints skip checks, others do not."""

from __future__ import annotations

import pytest

from agentkernel.rhai import Engine, Limits, RhaiRuntimeError
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


def texts_and_maps_of(source: str) -> tuple[set[str], set[str]]:
    script = parse(source)
    scopes = analyse((), rast.Block(script.stmts, (1, 1)), script)
    return {name for _, name in scopes.text_keys}, {name for _, name in scopes.map_keys}


@pytest.mark.parametrize(
    ("source", "texts", "maps"),
    [
        ('let g = `g${1}`; let s = "a"; s = `${s}b`;', {"g", "s"}, set()),
        ('let s = "a"; s.make_upper();', set(), set()),  # a method (a tag, another type)
        ("let s = \"ab\"; s[0] = 'x';", set(), set()),  # changed in place
        ('let s = "a"; s = 1;', set(), set()),
        ('let m = #{}; m["a"] = 1; m.b = 2; m.c.d = 3;', set(), {"m"}),  # stores keep a map a map
        ("let m = #{}; m = [1];", set(), set()),
        ("let m = #{}; m.clear();", set(), set()),
        ("let m = #{}; let f = || m;", set(), set()),  # captured: a Cell
        ("let m; m = #{};", set(), set()),  # starts as ()
    ],
)
def test_what_counts_as_a_string_or_a_map(source: str, texts: set[str], maps: set[str]) -> None:
    assert texts_and_maps_of(source) == (texts, maps)


def test_a_proven_map_and_string_key_are_read_and_stored_without_type_tests() -> None:
    """`m[k]` with `m` proven a map and `k` a string: `.get` at once; a store tests only the
    map limit; `eval` may rebind anything, so a script calling it keeps every test."""
    engine = Engine()
    source = 'let m = #{a: 1}; let k = `a`; m[k] = m[k] + 1; m.b = m.a; m["c"] = 3; [m[k], m.b, m.c, m.zz]'
    generated = engine.compile(source).module.source
    assert "is dict" not in generated and "type(v2_k) is str" not in generated
    assert engine.eval(source) == [2, 2, 3, None]
    for script, message in {
        'let m = #{a: 1}; eval("m = 5"); m.a': "Unknown property 'a'",
        'let m = #{a: 1}; eval("m = [1]"); m["x"]': "Data type incorrect: string",
        'let s = "ab"; eval("s = 5"); let m = #{}; m[s]': "Data type incorrect: i64",
    }.items():
        with pytest.raises(RhaiRuntimeError, match=message):
            engine.eval(script)
    with pytest.raises(RhaiRuntimeError, match="Size of object map too large"):
        Engine(limits=Limits(max_map_size=1)).eval('let m = #{}; let k = `a`; m[k] = 1; m["b"] = 2;')


def test_a_remainder_or_quotient_of_non_negative_ints_is_python_s_own() -> None:
    """`i % 10` with `i` never below 0 (a `for` over a range from 0): Python's `%`, no test;
    the result is an int ≥ 0 too. Other signs keep Rhai's truncating division."""
    engine = Engine()
    source = "let s = 0; for i in 0..9 { s += (i * 37) % 101 + i / 2; } s"
    generated = engine.compile(source).module.source
    assert "op_mod" not in generated and "op_div" not in generated
    assert engine.eval(source) == sum((i * 37) % 101 + i // 2 for i in range(9))
    assert engine.eval("let i = 7; let j = -2; [i % j, i / j, -7 % 2, -7 / 2]") == [1, -3, -1, -3]
    with pytest.raises(RhaiRuntimeError, match="Division by zero"):
        engine.eval("for i in 0..3 { let j = i / i; }")
