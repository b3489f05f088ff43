"""Typed methods: `fn int.calc(x)` beside a catch-all `fn calc(x)` (issue 14 §2, RHAI.md §9).

A method call dispatches on the receiver's type first (the reference's
`calc_typed_method_hash` of `type_of(receiver)`), then the catch-all, then
the natives; a plain call `calc(5, 2)` never reaches a typed method.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentkernel.rhai import Engine, RhaiRuntimeError, RhaiSyntaxError

CALC = """
fn int.calc(x) { `int ${this * x}` }
fn float.calc(x) { `float ${this * x}` }
fn string.calc(x) { `string ${this}${x}` }
fn bool.calc(x) { `bool ${!this}` }
fn array.calc(x) { `array ${this.len() + x}` }
fn map.calc(x) { `map ${this.a + x}` }
fn calc(x) { `any ${type_of(this)} ${x}` }
"""


def run(source: str) -> Any:
    return Engine().eval(source)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("5.calc(2)", "int 10"),
        ("1.5.calc(2.0)", "float 3.0"),
        ('"ab".calc("c")', "string abc"),
        ("true.calc(0)", "bool false"),
        ("[1, 2].calc(3)", "array 5"),
        ("#{a: 1}.calc(2)", "map 3"),
        ("'c'.calc(1)", "any char 1"),  # no char.calc: the catch-all
        ("().calc(1)", "any () 1"),
        ("(1..2).calc(1)", "any range 1"),
    ],
)
def test_the_receivers_type_picks_the_method_then_the_catch_all(call: str, expected: str) -> None:
    assert run(CALC + call) == expected


def test_a_variable_a_property_and_a_captured_variable_dispatch_on_their_value() -> None:
    source = (
        CALC + 'let x = 5; let m = #{n: "s", v: [1]}; let f = || x; [x.calc(1), m.n.calc(1), m.v.calc(1)]'
    )
    assert run(source) == ["int 5", "string s1", "array 2"]


def test_a_typed_method_on_another_type_without_a_catch_all_is_not_found() -> None:
    with pytest.raises(RhaiRuntimeError) as caught:
        run('fn int.calc(x) { this * x }\n"a".calc(2)')
    assert (
        str(caught.value)
        == "Function not found: calc (&str | ImmutableString | String, i64) (line 2, position 5)"
    )
    with pytest.raises(RhaiRuntimeError, match=r"^Function not found: calc \(bool, i64\)"):
        run("fn int.calc(x) { this * x } true.calc(2)")


def test_a_typed_method_is_not_a_plain_function() -> None:
    """`calc(5, 2)` looks for a `calc` of two parameters, as the reference does."""
    with pytest.raises(RhaiRuntimeError) as caught:
        run("fn int.calc(x) { this * x } calc(5, 2)")
    assert str(caught.value) == "Function not found: calc (i64, i64) (line 1, position 29)"
    with pytest.raises(RhaiRuntimeError, match=r"^Function not found: dbl \(i64\)"):
        run("fn int.dbl() { this * 2 } dbl(5)")
    # the catch-all of the same arity answers a plain call; the typed method does not
    assert run("fn int.calc(x) { this * x } fn calc(x) { -x } [calc(5), 5.calc(2)]") == [-5, 10]


def test_duplicates_are_the_references_syntax_error_and_other_types_are_not() -> None:
    with pytest.raises(RhaiSyntaxError) as caught:
        run("fn int.calc(x) { 1 }\nfn int.calc(y) { 2 }")
    assert (
        str(caught.value)
        == "Syntax error: Function calc with 1 parameter already exists (line 2, position 1)"
    )
    with pytest.raises(RhaiSyntaxError, match="Function calc with 1 parameter already exists"):
        run('fn int.calc(x) { 1 } fn "i64".calc(y) { 2 }')  # `int` is i64's alias
    source = "fn int.calc(x) { 1 } fn string.calc(x) { 2 } fn calc(x) { 3 } fn int.calc() { 4 }"
    assert run(source + ' [5.calc(0), "s".calc(0), true.calc(0), 5.calc()]') == [1, 2, 3, 4]


def test_this_in_a_typed_method_is_the_receiver_and_changes_it() -> None:
    assert run("fn int.inc(n) { this += n; this } let x = 4; let r = x.inc(3); [x, r]") == [7, 7]
    assert run('fn string.shout() { this.to_upper() + "!" } "hey".shout()') == "HEY!"
    assert run("fn array.add(v) { this.push(v) } let a = [1]; a.add(2); a") == [1, 2]
    with pytest.raises(RhaiRuntimeError, match=r"^Non-pure method 'push' cannot be called on constant"):
        run("fn array.add(v) { this.push(v) } const A = []; A.add(1)")


def test_a_custom_types_name_in_quotes() -> None:
    engine = Engine()
    custom = type("Custom Type", (), {"n": 3})
    engine.register_fn("make", custom)
    script = 'fn "Custom Type".m(x) { type_of(this) + x } fn m(x) { "other" } [make().m("!"), 1.m(0)]'
    assert engine.eval(script) == ["Custom Type!", "other"]


def test_pointers_call_the_typed_method_only_with_a_this() -> None:
    """`obj.call(Fn("calc"), x)` and a map's Fn property are method calls (typed first);
    `Fn("calc").call(5, 2)` is a plain call, as in the reference's `make_method_call`."""
    source = (
        CALC.replace("${type_of(this)} ", "")
        + """
        let p = Fn("calc");
        let m = #{a: 10, f: p};
        [5.call(p, 2), 5.call(p.curry(3)), m.f(1), 'c'.call(p, 1), p.call(7), call(p, 7)]
    """
    )
    assert run(source) == ["int 10", "int 15", "map 11", "any 1", "any 7", "any 7"]
    with pytest.raises(RhaiRuntimeError, match=r"^Function not found: calc \(i64, i64\)"):
        run('fn int.calc(x) { this * x } Fn("calc").call(5, 2)')


def test_a_typed_push_turns_off_the_push_fast_path() -> None:
    assert run("fn array.push(v) { this.insert(0, v) } let a = [1]; a.push(2); a") == [2, 1]


def test_is_def_fn_with_a_type_and_the_metadata_list() -> None:
    source = 'fn int.c(x) { 1 } private fn c(a) { 2 } [is_def_fn("i64", "c", 1), is_def_fn("int", "c", 1),'
    source += ' is_def_fn("c", 1), is_def_fn("string", "c", 1), is_def_fn("i64", "c", 0)]'
    # the reference stores `int` as "i64" and compares the text as given
    assert run(source) == [True, False, True, False, False]
    assert run('fn int.c(x) { 1 } is_def_fn("c", 1)') is False  # a typed method is not a plain function
    metadata = run("fn int.c(x) { 1 } private fn c(a) { 2 } fn d() {} get_fn_metadata_list()")
    assert metadata == [
        {"access": "private", "is_anonymous": False, "name": "c", "params": ["a"]},
        {"access": "public", "is_anonymous": False, "name": "c", "params": ["x"], "this_type": "i64"},
        {"access": "public", "is_anonymous": False, "name": "d", "params": []},
    ]
    assert run('fn int.c(x) { 1 } fn c() {} get_fn_metadata_list("c", 1).len()') == 1


def test_call_fn_calls_the_catch_all_else_a_typed_method_without_this() -> None:
    engine = Engine()
    script = engine.compile("fn int.calc(x) { x * 10 } fn int.bad() { this } fn calc(x) { -x }")
    assert engine.call_fn(script, "calc", [2]) == -2
    only_typed = engine.compile("fn int.calc(x) { x * 10 } fn int.bad() { this }")
    assert engine.call_fn(only_typed, "calc", [2]) == 20
    with pytest.raises(RhaiRuntimeError, match="'this' not bound"):
        engine.call_fn(only_typed, "bad", [])
