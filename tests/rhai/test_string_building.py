"""Building a string with `+=` or `append` is linear, the limits stay exact (issue 14 section 1).

CPython grows a string in place only when `s += x` runs on a local and
nothing else refers to the string; `rt.compound(op, s, x)` holds a second
reference, so each append copied the whole string (quadratic). The compiler
now emits Python's own `+=` on a local string, and for a captured variable,
a property or an element takes the string out of its holder first
(appends.py). The code's shape is asserted here; its speed is
benchmarks/rhai's (strings.rhai) and /tmp-free, never a test's.
"""

from __future__ import annotations

import re

import pytest

from agentkernel.rhai import Engine, Limits, RhaiRuntimeError
from agentkernel.rhai.codegen.script_module import compile_script
from agentkernel.rhai.syntax.compile_clock import CompileClock
from agentkernel.rhai.syntax.parse_support import ParseOptions
from agentkernel.rhai.syntax.parser import parse

BUILD = 'let s = ""; let n = 0; for i in 0..N { s += "ab"; n += 1; } s'


def generated(source: str) -> str:
    return compile_script(parse(source, ParseOptions(), CompileClock(None))).source


def test_a_local_string_is_appended_to_by_pythons_own_plus_equals() -> None:
    code = generated(BUILD.replace("N", "10"))
    assert re.search(r"\bv1_s \+= t\d+\n", code)  # on the variable itself: CPython extends it in place
    assert "rt.compound(K[" in code  # anything else (not a string, past the limit) takes the slow path
    assert "v2_n += " not in code  # an int keeps its own fast path


def test_appends_build_the_same_string_and_mixed_types_still_work() -> None:
    assert Engine().eval(BUILD.replace("N", "1000")) == "ab" * 1000
    assert Engine().eval("let s = \"a\"; s += 'b'; s += 1; s += [2]; s") == "ab1[2]"
    assert Engine().eval("let c = 'x'; c += \"yz\"; c") == "xyz"
    assert Engine().eval("let a = [1]; a += 2; a += [3]; a") == [1, 2, 3]


def test_max_string_size_is_exact_for_appends() -> None:
    engine = Engine(limits=Limits(max_string_size=10))
    assert engine.eval('let s = ""; for i in 0..5 { s += "ab"; } s') == "ab" * 5  # exactly 10
    with pytest.raises(RhaiRuntimeError, match="Length of string too large"):
        engine.eval('let s = ""; for i in 0..6 { s += "ab"; } s')


def test_the_data_limit_counts_what_appends_add() -> None:
    engine = Engine(limits=Limits(max_data_size=200_000, max_operations=10**9))
    with pytest.raises(RhaiRuntimeError, match="too large"):
        engine.eval('let s = ""; loop { s += "0123456789"; }')


@pytest.mark.parametrize(
    ("source", "holder"),
    [
        ('let s = ""; let f = || { s += "ab" }; f.call(); s', r"v\d+_s\.v = None"),  # a captured variable
        ('let o = #{s: ""}; o.s += "ab"; o.s', r"v\d+_o\[K\[\d+\]\] = None"),  # a property
        ('let a = [""]; a[0] += "ab"; a[0]', r"v\d+_a\[0\] = None"),  # an element
        ('let a = [""]; let i = 0; a[i] += "ab"; a[i]', r"v\d+_a\[v\d+_i\] = None"),
        ('let m = #{}; m["k"] = ""; m["k"] += "ab"; m.k', r"v\d+_m\[K\[\d+\]\] = None"),
        ('let s = ""; s.append("ab"); s', r"v\d+_s \+= t\d+"),  # append on a local
        ('let o = #{s: ""}; o.s.append("ab"); o.s', r"v\d+_o\[K\[\d+\]\] = None"),
    ],
)
def test_a_string_held_elsewhere_is_taken_out_before_growing(source: str, holder: str) -> None:
    """Its holder lets go, so the temporary is the string's one reference: CPython extends it."""
    code = generated(source)
    assert re.search(holder, code), code
    assert re.search(r"\bt\d+ \+= t\d+\n", code) or re.search(r"\bv\d+_s \+= t\d+\n", code)
    assert Engine().eval(source) == "ab"


@pytest.mark.parametrize(
    "source",
    [
        'let s = ""; let f = || { s += "ab" }; for i in 0..N { f.call(); } s',
        'let o = #{s: ""}; for i in 0..N { o.s += "ab"; } o.s',
        'let a = [0, ""]; for i in 0..N { a[1] += "ab"; } a[-1]',
        'let a = [0, ""]; for i in 0..N { a[-1] += "ab"; } a[1]',
        'let m = #{}; m["k"] = ""; for i in 0..N { m["k"] += "ab"; } m.k',
        'let s = ""; for i in 0..N { s.append("ab"); } s',
        'let o = #{s: #{t: [""]}}; for i in 0..N { o.s.t[0].append("ab"); } o.s.t[0]',
    ],
)
def test_every_kind_of_target_builds_the_same_string_within_the_limit(source: str) -> None:
    assert Engine().eval(source.replace("N", "500")) == "ab" * 500
    exact = Engine(limits=Limits(max_string_size=10))
    assert exact.eval(source.replace("N", "5")) == "ab" * 5  # exactly the limit
    with pytest.raises(RhaiRuntimeError, match="Length of string too large"):
        exact.eval(source.replace("N", "6"))


def test_what_is_appended_is_the_text_the_general_path_would_add() -> None:
    source = """
        let o = #{s: ""}; let a = [""]; let s = "";
        for x in ['c', 1, 2.5, (), [1, "x"], #{k: 1}, true, blob(2, 65)] {
            o.s += x; a[0] += x; s.append(x);
        }
        [o.s, a[0], s]
    """
    text = 'c12.5[1, "x"]#{"k": 1}trueAA'
    assert Engine().eval(source) == [text, text, text]


def test_non_strings_keep_their_own_meaning() -> None:
    engine = Engine()
    assert engine.eval("let o = #{a: [1]}; o.a += 2; o.a += [3]; o.a") == [1, 2, 3]
    assert engine.eval("let o = #{n: 1}; o.n += 2; o.n") == 3
    assert engine.eval("let a = [[1]]; a[0].append([2]); a[0]") == [1, 2]
    assert engine.eval("let c = 'x'; let o = #{c: c}; o.c += \"yz\"; o.c") == "xyz"
    with pytest.raises(RhaiRuntimeError, match=r"Function not found: append \(i64, i64\)"):
        engine.eval("let x = 5; x.append(1)")
    with pytest.raises(RhaiRuntimeError, match="cannot be called on constant"):
        engine.eval('const s = "a"; s.append("b")')


def test_a_script_defined_append_method_still_answers() -> None:
    assert Engine().eval('fn append(x) { this += x + x; } let s = "a"; s.append("b"); s') == "abb"


def test_an_assignments_index_is_evaluated_once() -> None:
    """The reference evaluates the value, then the target's indices, once each."""
    printed: list[str] = []
    engine = Engine()
    source = 'let a = [1, 2]; a[{print("i"); 0}] += {print("v"); 1}; a[{print("j"); 1}] = 5; a'
    assert engine.run(engine.compile(source), stdout=printed.append) == [2, 5]
    assert printed == ["v", "i", "j"]


def test_the_data_limit_counts_appends_to_any_holder_and_not_what_is_stored_back() -> None:
    limited = Engine(limits=Limits(max_data_size=200_000, max_operations=10**9))
    for source in (
        'let o = #{s: ""}; loop { o.s += "0123456789"; }',
        'let a = [""]; loop { a[0].append("0123456789"); }',
    ):
        with pytest.raises(RhaiRuntimeError, match="too large"):
            limited.eval(source)
    # an array grown in place and stored back is not counted again: 5,000 appends stay under 200 KB
    assert limited.eval("let o = #{a: []}; for i in 0..5000 { o.a += i; } o.a.len()") == 5000
    assert limited.eval("let a = [[]]; for i in 0..5000 { a[0] += i; } a[0].len()") == 5000


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("let x = 5; `a{b}${x}c'd\"e\\\\f`", "a{b}5c'd\"e\\\\f"),  # raw text: no escapes
        (
            "let x = 'é'; let y = [1, \"z\"]; `${x}|${y}|${()}|${1.5}|${true}|${#{a: 1}}`",
            'é|[1, "z"]||1.5|true|#{"a": 1}',
        ),
        ('let x = "s"; let n = -3; `{{${x}}}${n}${n + 1}\\n\\t\\u2003`', "{{s}}-3-2\\n\\t\\u2003"),
        ('let s = "ab"; s.set_tag(3); `${s}${s.len}`', "ab2"),
        ("let x = 1; `line\nnext\u2028\x00${x}`", "line\nnext\u2028\x001"),  # the text holds them as they are
    ],
)
def test_an_interpolation_joins_its_parts_as_to_string_writes_them(source: str, expected: str) -> None:
    """Compiled as an f-string: its literal text escaped, each value as `to_string` gives it,
    with and without a size limit (which joins through `rt.interpolate`)."""
    assert "f'" in generated(source)
    assert Engine().eval(source) == expected
    assert Engine(limits=Limits(max_string_size=1000)).eval(source) == expected
