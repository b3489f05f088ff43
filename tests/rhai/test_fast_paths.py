"""The run-time fast paths of issue 14 §5 keep Rhai's semantics (values, errors, limits).

Each fast path here skips work the general path does (a copy, a type test, a
call layer); these check that what a script can see is unchanged: arrays and
maps stay values, overflow and type errors are still the reference's, limits
still hold. The shapes of the generated code are asserted, never its speed
(benchmarks/rhai_speed.py measures that).
"""

from __future__ import annotations

from typing import Any

import pytest

from agentkernel.rhai import Engine, Limits, RhaiRuntimeError
from agentkernel.rhai.analysis.facts import Facts
from agentkernel.rhai.engine import _run_main
from agentkernel.rhai.runtime.runtime import Runtime
from agentkernel.rhai.syntax import ast as rhai_ast
from agentkernel.rhai.syntax.parse_support import ParseOptions
from agentkernel.rhai.syntax.parser import parse
from tests.rhai.operation_counts import our_count


def reads_only(source: str) -> bool:
    """The facts pass's word on the one closure `source` is."""
    stmt = parse(source, ParseOptions()).stmts[0]
    assert isinstance(stmt, rhai_ast.ExprStmt) and isinstance(stmt.expr, rhai_ast.Closure)
    facts = Facts.of([rhai_ast.Block((stmt,), (1, 1))], {}, ())
    return facts.reads_only(stmt.expr)


@pytest.mark.parametrize(
    ("source", "reads"),
    [
        ("|r| r.value > 90", True),
        ("|r| r.id", True),
        ("|r| if r.a { r.b[0] } else { `${r.c}` }", True),
        ("|r| r.items.push(1)", False),
        ("|r| { r.x = 1; true }", False),
        ("|r| f(r)", False),
        ("|r| { let y = r; y }", False),
        ("|r| || r", False),
    ],
)
def test_only_a_closure_that_reads_passes_items_uncopied(source: str, reads: bool) -> None:
    assert reads_only(source) is reads


def test_map_and_filter_with_a_reading_closure_keep_arrays_values() -> None:
    engine = Engine()
    assert engine.eval("let a = [#{x: [1]}]; let b = a.map(|r| r.x); b[0].push(2); [a[0].x, b[0]]") == [
        [1],
        [1, 2],
    ]
    assert engine.eval("let a = [[1], [2, 3]]; let b = a.filter(|v| v.len() > 1); b[0].push(4); a") == [
        [1],
        [2, 3],
    ]
    assert engine.eval("let a = [#{v: 1}, #{v: 2}]; let b = a.filter(|r| r.v > 1); b[0].v = 9; a[1].v") == 2
    assert engine.eval("[1, 2, 3].map(|x| x * 2)") == [2, 4, 6]
    with pytest.raises(RhaiRuntimeError, match="Unknown property 'nope' - a getter"):
        engine.eval("[1].map(|x| x.nope)")


def test_integer_overflow_is_caught_on_either_side() -> None:
    engine = Engine()
    for source in (
        "let x = 9223372036854775807; x += 1",
        "let x = -9223372036854775807; x -= 2",
        "let x = 9223372036854775807; x + 1",
        "let x = -9223372036854775807; x - 2",
        "let x = 9223372036854775807; x - -1",
        "let x = 3037000500; x * x",
    ):
        with pytest.raises(RhaiRuntimeError, match="overflow"):
            engine.eval(source)
    assert engine.eval("let x = 9223372036854775806; x += 1; x") == 9223372036854775807


def test_a_comparison_tested_inline_keeps_its_types_and_errors() -> None:
    engine = Engine()
    script = engine.compile('fn f(n) { if n < 2 { "small" } else { "big" } } [f(1), f(2.5), f(1.5)]')
    # the `if` alone in its block: compared first, then counted with the branch taken
    assert "if type(v1_n) is int: t3 = v1_n < 2" in script.module.source
    assert "t3 = cond(op_lt(v1_n, 2, rt))" in script.module.source
    assert engine.run(script) == ["small", "big", "small"]
    assert engine.eval('fn f(n) { if n < 2 { 1 } else { 2 } } f("a")') == 2  # two types: never less
    with pytest.raises(RhaiRuntimeError, match="Variable not found: y"):
        engine.eval("let x = 1; while x < y { x += 1 }")
    assert engine.eval("let x = 5; let n = 0; while x > 0 { x -= 1; n += 1 } n") == 5


@pytest.mark.parametrize("argument", ["5", '"x"', "1"])
def test_an_if_counted_in_its_branches_stops_where_two_counts_would(argument: str) -> None:
    """A block's count moved into the branches of its one `if` reaches the limit at the same
    count and position as the block's count and the branch's apart: the `if` up to 6, then
    the statement of the branch taken (the `else` block's first, or `n` in the `then`); with
    `"x"`, `1 + "x"` is a library function there, whose call counts 1 more at the operator."""
    source = f"fn f(n) {{\n  if n < 2 {{ n }} else {{\n    let a = 1;\n    a + n\n  }}\n}}\nf({argument})"
    stops = {"5": ((3, 5), 11), '"x"': ((3, 5), 12), "1": ((2, 14), 8)}[argument]
    for limit in range(3, stops[1] + 2):
        engine = Engine(limits=Limits(max_operations=limit))
        if limit > stops[1]:
            engine.eval(source)
            continue
        line, column = (2, 3) if limit <= 6 else (4, 7) if limit == 12 and argument == '"x"' else stops[0]
        with pytest.raises(
            RhaiRuntimeError, match=rf"Too many operations \(line {line}, position {column}\)"
        ):
            engine.eval(source)


def test_interpolation_joins_inline_and_still_checks_sizes() -> None:
    assert Engine().eval('let x = 5; `a${x}b${1.5}${[1, ()]}${"s"}${()}`') == "a5b1.5[1, ()]s"
    with pytest.raises(RhaiRuntimeError, match="Length of string too large"):
        Engine(limits=Limits(max_string_size=5)).eval("let x = 12345; `ab${x}`")


def test_pad_copies_containers_and_shares_plain_values() -> None:
    engine = Engine()
    assert engine.eval("let a = []; a.pad(3, [1]); a[0].push(2); a") == [[1, 2], [1], [1]]
    assert engine.eval("let a = [0]; a.pad(4, true); a") == [0, True, True, True]


def test_a_function_without_native_calls_still_nests_callbacks_at_its_depth() -> None:
    engine = Engine(limits=Limits(max_call_levels=5))
    source = (
        "fn down(n) { if n == 0 { [1].map(|x| deeper(x)) } else { down(n - 1) } } fn deeper(x) { x } down(N)"
    )
    assert engine.eval(source.replace("N", "1")) == [1]
    with pytest.raises(RhaiRuntimeError, match="Stack overflow"):
        engine.eval(source.replace("N", "4"))


def test_a_pure_native_called_at_once_still_yields_to_what_the_script_defines() -> None:
    """`x.name(arg)` calls a pure native seen before for the types at once
    (`Runtime.pure_method`); the library is shared by every script of an engine, so a
    script's own function or typed method of the name, a map's pointer of the name, a
    native registered later, must still win over what another script made it remember."""
    engine = Engine()
    assert engine.eval('"abc".contains("b")') is True  # remembered for (str, str)
    assert engine.eval('fn contains(c) { "mine " + c } "abc".contains("b")') == "mine b"
    assert engine.eval('fn string.contains(c) { "typed " + c } "abc".contains("b")') == "typed b"
    assert engine.eval('#{b: 1}.contains("b")') is True  # remembered for (map, str)
    assert engine.eval('let m = #{contains: |c| "map " + c}; m.contains("b")') == "map b"
    engine.register_fn("contains", lambda s, c: "host", params=[str, str])
    assert engine.eval('"abc".contains("b")') == "host"


def test_a_pure_native_called_at_once_fails_and_counts_as_the_full_path_does() -> None:
    engine = Engine(limits=Limits(max_data_size=1300))
    engine.register_fn("half", lambda s, n: 1 // (n % 2 - 1) * n, params=[str, int])
    assert engine.eval('"a".half(2)') == -2  # remembered for (str, int)
    with pytest.raises(RhaiRuntimeError, match=r"^Runtime error: internal error in 'half'"):
        engine.eval('"a".half(3)')  # a Python failure: the full path words it
    assert engine.eval('"ab".split(1)') == ["a", "b"]  # remembered for (str, int)
    assert engine.eval('let s = "x"; s.pad(500, "-"); s.split(250).len()') == 2
    with pytest.raises(RhaiRuntimeError, match=r"too large \(line 1, position 33\)"):  # what it built counts
        engine.eval('let s = "x"; s.pad(600, "-"); s.split(300).len()')


def test_not_of_a_bool_is_inline_and_of_anything_else_the_operator() -> None:
    engine = Engine()
    assert "op_unary(" in engine.compile("let x = true; !x").module.source
    assert engine.eval('let x = "abc".contains("z"); [!x, !!x]') == [True, False]
    with pytest.raises(RhaiRuntimeError, match=r"^Function not found: ! \(i64\)"):
        engine.eval("let x = 1; !x")


def test_a_strings_character_at_a_literal_index_is_read_inline_as_the_full_path_reads_it() -> None:
    engine = Engine()
    assert "CHAR_OF(" in engine.compile('let s = "héy"; s[-1]').module.source
    assert engine.eval('let s = "héy"; [s[0], s[1], s[-1], s[-3]]') == ["h", "é", "y", "h"]
    assert engine.eval('let s = "héy"; type_of(s[1])') == "char"
    assert engine.eval('let s = "ab"; s.set_tag(7); s[1]') == "b"  # tagged: the full path
    for index in ("3", "-4"):
        with pytest.raises(RhaiRuntimeError, match=rf"^String index {index} out of bounds"):
            engine.eval(f'let s = "héy"; s[{index}]')


def test_contains_and_len_run_inline_only_while_they_are_the_standard_natives() -> None:
    """`s.contains(x)` of a string and `.len` of a string or an array run as Python's own `in`
    and `len` (`Runtime.natives_inline`); a host's registration of either, a script's
    `contains(x)` or any typed method must still win, and other receivers take the full path."""
    engine = Engine()
    source = engine.compile('let s = "héllo"; [s.contains("é"), s.contains(s[1]), s.len]').module.source
    assert "rt.natives_inline" in source
    assert engine.eval('let s = "héllo"; [s.contains("é"), s.contains(s[4]), s.contains("x"), s.len]') == [
        True,
        True,
        False,
        5,
    ]
    assert engine.eval("let a = [1, 2]; let m = #{len: 7}; let b = blob(3); [a.len, m.len, b.len]") == [
        2,
        7,
        3,
    ]
    assert engine.eval('let s = "ab"; s.set_tag(1); [s.len, s.contains("b")]') == [
        2,
        True,
    ]  # tagged: full path
    long = "x" * 300
    assert engine.eval(f'let s = "{long}y"; s.contains("y")') is True  # a long receiver: the full path
    assert engine.eval('fn contains(c) { "mine " + c } "abc".contains("b")') == "mine b"
    assert engine.eval('fn int.double() { this * 2 } "abc".contains("b")') is True  # typed methods: full path
    engine.library.getter(str, "len", lambda s: 99)
    assert engine.eval('"abc".len') == 99
    engine.register_fn("contains", lambda s, c: "host", params=[str, str])
    assert engine.eval('"abc".contains("b")') == "host"


def test_storing_at_an_int_index_fails_and_stores_as_the_full_path_does() -> None:
    """`a[i] = literal` with `i` proven an int lets Python's bounds check stand for the
    test (a negative index counts from the end in both); anything else is the full path."""
    engine = Engine()
    assert "raise IndexError" in engine.compile("let a = [1, 2]; let i = 1; a[i] = 0; a").module.source
    assert engine.eval("let a = [1, 2]; let i = -1; a[i] = 9; a") == [1, 9]
    assert engine.eval("let a = [[1, 2], [3]]; let i = 1; a[0][i] = 7; a") == [[1, 7], [3]]
    assert engine.eval("let b = blob(3); let i = 1; b[i] = 300; b") == bytearray(b"\x00\x2c\x00")
    assert engine.eval("let s = \"abc\"; let i = 1; s[i] = 'x'; s") == "axc"
    failures = {
        "let a = [1, 2]; let i = 5; a[i] = 1;": "Array index 5 out of bounds: only 2 elements in array "
        "(line 1, position 30)",
        "let a = [1, 2]; let i = -3; a[i] = 9;": "Array index -3 out of bounds: only 2 elements in array "
        "(line 1, position 31)",
        'let s = "abc"; let i = 1; s[i] = 120;': "Data type incorrect: i64 (expecting char) "
        "(line 1, position 32)",
        "let m = #{}; let i = 1; m[i] = 2;": "Data type incorrect: i64 (expecting string) "
        "(line 1, position 27)",
    }
    for script, message in failures.items():
        with pytest.raises(RhaiRuntimeError) as caught:
            engine.eval(script)
        assert str(caught.value) == message
    assert engine.eval("let a = [1, 2]; let i = 1; try { a[i + 5] = 1 } catch (e) { a[i] = 0 } a") == [1, 0]


def test_an_engine_library_keeps_the_inline_natives_standard_without_being_filled() -> None:
    """An engine's library is filled on first use; it says the inline natives are the
    standard ones before that (`then_keeps_inline`), which holds once it is filled."""
    from agentkernel.rhai.stdlib import build_library, engine_natives, inlines_standard

    filled = build_library()
    engine_natives.register(filled)
    assert inlines_standard(filled)
    engine = Engine()
    assert engine.library.inline_standard is True and type(engine.library).__name__ == "_Unfilled"
    assert engine.eval('"abc".contains("b")') is True


def test_a_string_compared_to_a_string_literal_is_equal_as_the_operator_says() -> None:
    """`s == "lit"` / `s != "lit"` compare at once when `s` is a plain string; a char, a
    tagged string, a number take the operator (`op_eq`/`op_ne`), which decides as before."""
    engine = Engine()
    assert "is str else op_ne(" in engine.compile('let s = "a"; s != ""').module.source
    checks = {
        'let s = "é"; [s == "é", s != "e", "" == s, "é" != s]': [True, True, False, False],
        'let c = "ab"[0]; [c == "a", c != "a", "a" == c]': [True, False, True],
        'let x = 1; [x == "1", "1" != x]': [False, True],
        'let s = "ab"; s.set_tag(3); [s == "ab", "ab" != s]': [True, False],
    }
    for script, expected in checks.items():
        assert engine.eval(script) == expected


def test_appending_a_string_literal_still_grows_and_checks_the_string() -> None:
    engine = Engine(limits=Limits(max_string_size=5))
    assert engine.eval('let s = "ab"; s += "cd"; let a = [1]; a += "x"; [s, a]') == ["abcd", [1, "x"]]
    with pytest.raises(RhaiRuntimeError, match="Length of string too large"):
        engine.eval('let s = "abcd"; s += "ef"; s')


def test_a_pure_native_of_no_or_two_arguments_called_at_once_still_yields_to_the_script() -> None:
    """`x.name()` and `x.name(a, b)` call a pure native seen before for the types at once
    (`Runtime.pure_method0`, `pure_method2`), under the rules of `pure_method`."""
    engine = Engine()
    assert "rt.pure_method0(" in engine.compile('"ab".to_upper()').module.source
    assert engine.eval('["abc".to_upper(), "abcdef".sub_string(1, 3)]') == ["ABC", "bcd"]  # remembered
    assert engine.eval('["abc".to_upper(), "abcdef".sub_string(1, 3)]') == ["ABC", "bcd"]  # at once
    assert engine.eval('fn to_upper() { "mine " + this } "abc".to_upper()') == "mine abc"
    assert engine.eval('fn sub_string(a, b) { a + b } "abc".sub_string(1, 3)') == 4
    assert engine.eval('fn string.to_upper() { "typed" } "abc".to_upper()') == "typed"
    assert engine.eval("let m = #{len: || 5}; m.len()") == 5  # a map's pointer: never at once
    engine.register_fn("to_upper", lambda s: "host", params=[str])
    assert engine.eval('"abc".to_upper()') == "host"
    limited = Engine(limits=Limits(max_data_size=1300))
    assert limited.eval('let s = "x"; s.pad(200, "-"); s.to_upper().len()') == 200
    with pytest.raises(RhaiRuntimeError, match="too large"):  # what it built counts, at once too
        limited.eval('let s = "x"; s.pad(600, "-"); let a = s.to_upper(); let b = s.to_upper(); a + b')


def test_the_chars_a_loop_walks_are_values_whatever_the_script_does_with_them() -> None:
    """`for c in s` hands out one shared `Char` per character (`runtime._CHARS`): a tag or
    a change in place made to `c` in one loop is never seen by the next loop's `c`."""
    engine = Engine()
    assert engine.eval(
        'let a = []; for c in "aa" { c.set_tag(5); a.push(c.tag) } for c in "aa" { a.push(c.tag) } a'
    ) == [
        5,
        5,
        0,
        0,
    ]
    assert engine.eval(
        'let a = []; for c in "ab" { c.make_upper(); a.push(c) } for c in "ab" { a.push(c) } a'
    ) == [
        "A",
        "B",
        "a",
        "b",
    ]
    assert engine.eval('let n = 0; for c in "héllo" { if type_of(c) == "char" { n += 1 } } n') == 5


def test_a_while_head_spares_its_first_statement_only_the_overflow_it_rules_out() -> None:
    """`while x > 0 { x -= 1 }`: the head proves `x - 1` an i64 (no test); at the edge of the
    range, or for a step past it, the test stays and the overflow is still the reference's."""
    engine = Engine()
    source = engine.compile("let x = 3; while x > 0 { x -= 1; } x").module.source
    assert "compound" not in source and " = v1_x - 1\n" in source
    assert engine.eval("let x = 3; while x > 0 { x -= 1; } x") == 0
    assert engine.eval("let x = 0; while 5 > x { x += 2; } x") == 6
    assert engine.eval("let x = -9223372036854775807; while x >= -9223372036854775807 { x -= 1; } x") == -(
        2**63
    )
    assert (
        engine.eval("let x = 9223372036854775806; while x < 9223372036854775807 { x += 1; } x") == 2**63 - 1
    )
    with pytest.raises(RhaiRuntimeError, match=r"^Addition overflow: 9223372036854775807 \+ 1"):
        engine.eval("let x = 9223372036854775806; while x <= 9223372036854775807 { x += 1; } x")
    with pytest.raises(RhaiRuntimeError, match=r"^Subtraction overflow"):
        engine.eval("let x = -9223372036854775807; while x > -9223372036854775808 { x -= 2; } x")
    assert engine.eval("let x = 1.5; while x > 0 { x -= 1; } x") == -0.5  # not an int: the full path


def test_an_int_index_read_keeps_rhai_bounds_and_types() -> None:
    """`a[i]` with `i` known to be an int reads a list through Python's own bounds check:
    a negative index counts from the end, out of range and other types take the slow path."""
    engine = Engine()
    script = engine.compile("let a = [1, 2, 3]; let i = -1; a[i]")
    assert "if type(v2_a) is not list: raise IndexError" in script.module.source
    assert "t5 = v2_a[v3_i]" in script.module.source
    assert engine.run(script) == 3
    for i, stop in ((3, "Array index 3 out of bounds"), (-4, "Array index -4 out of bounds")):
        with pytest.raises(RhaiRuntimeError, match=stop):
            engine.eval(f"let a = [1, 2, 3]; let i = {i}; a[i]")
    assert engine.eval('let a = "abc"; let i = 1; a[i]') == "b"
    assert engine.eval("let a = blob(3, 7); let i = 2; a[i]") == 7
    with pytest.raises(RhaiRuntimeError, match="expecting string"):
        engine.eval("let a = #{}; let i = 2; a[i]")


def test_a_sum_of_locals_never_below_zero_tests_only_the_top_of_the_range() -> None:
    """`k += p` with both proven ≥ 0 (int_types.py `non_negative_declarations`) compares
    with the i64 maximum only, and still stops at it; one that may go below 0 keeps both."""
    engine = Engine()
    source = "let k = 9223372036854775800; for p in 0..10 { k += p } k"
    assert "if not ((t" in engine.compile(source).module.source
    with pytest.raises(RhaiRuntimeError, match="overflow"):
        engine.eval(source)
    below = "let k = -9223372036854775800; for p in 0..10 { k -= p; k = k + (-p) } k"
    assert "if not (-9223372036854775808 <= (t" in engine.compile(below).module.source
    with pytest.raises(RhaiRuntimeError, match="overflow"):
        engine.eval(below)
    assert engine.eval("let k = 5; let j = k % 3; for p in 1..4 { j = j * p + k / 2 } j") == 32


def test_an_index_not_proven_int_tries_a_map_key_first_and_keeps_lists() -> None:
    """`x[k]` with `k` of unknown type tests for a map's string key first, then a list's int
    index, then the slow path; reads and stores alike."""
    engine = Engine()
    script = engine.compile('fn f(x, k) { x[k] = x[k] + 1; x[k] } [f(#{a: 1}, "a"), f([5, 6], 1)]')
    assert "if type(v1_x) is dict and type(v2_k) is str else" in script.module.source
    assert engine.run(script) == [2, 7]
    with pytest.raises(RhaiRuntimeError, match="out of bounds"):
        engine.eval("fn f(x, k) { x[k] } f([5], 1)")
    with pytest.raises(RhaiRuntimeError, match="expecting string"):
        engine.eval("fn f(x, k) { x[k] } f(#{}, 1)")


def test_a_for_over_a_calls_new_list_walks_it_uncopied_and_any_other_a_copy() -> None:
    """`for x in s.split(" ")` walks the native's list as it is (nothing else holds it); a list
    a call gives back that something else holds is copied first, so the loop cannot see it grow."""
    engine = Engine()
    source = 'let c = 0; for w in "a b c".split(" ") { c += 1 } c'
    assert "rt.iterate_new(" in engine.compile(source).module.source
    assert engine.eval(source) == 3
    held_by_a_map = "let m = #{items: [1, 2]}; fn get() { this.items } let n = 0;"
    assert engine.eval(held_by_a_map + "for x in m.get() { m.items.push(x); n += 1 } [n, m.items]") == [
        2,
        [1, 2, 1, 2],
    ]
    held_by_a_variable = "let a = [1, 2]; fn same(x) { x } let n = 0;"
    assert engine.eval(held_by_a_variable + "for x in same(a) { a.push(x); n += 1 } [n, a]") == [
        2,
        [1, 2, 1, 2],
    ]
    assert engine.eval("let a = [1, 2]; let n = 0; for x in a.map(|v| v) { a.push(x); n += 1 } [n, a]") == [
        2,
        [1, 2, 1, 2],
    ]
    with pytest.raises(RhaiRuntimeError, match="too large"):  # the data limit still sees the walked list
        Engine(limits=Limits(max_data_size=5000)).eval(
            'let s = "ab ".pad(3000, "x "); let k = []; for w in s.split(" ") { k.push(w) } k.len()'
        )


def test_split_at_whitespace_cuts_where_rust_cuts_whichever_way_it_runs() -> None:
    """`s.split()` runs Python's `split` unless the text holds \\x1c-\\x1f, which Python cuts at and
    Rust's White_Space does not: both ways give the reference's pieces."""
    engine = Engine()
    assert engine.eval('"  a\\u3000b\\u0085c\\td  ".split()') == ["a", "b", "c", "d"]
    assert engine.eval('"a\\u001cb c\\u001f".split()') == ["a\x1cb", "c\x1f"]
    assert engine.eval('"a\\u001cb\\u2028c".split()') == ["a\x1cb", "c"]


def test_not_and_logic_results_are_tested_as_the_bools_they_are() -> None:
    """`!x`, `a && b` and `a || b` give a bool or fail: an `if` on one tests it as it is, and a
    value that is not a bool still fails where it stands."""
    engine = Engine()
    source = engine.compile("let x = true; let y = false; if !x || y { 1 } else { 2 }").module.source
    assert "cond(t" not in source and "is not False and cond" not in source  # `!x` is used as it is
    assert engine.eval("let x = true; let y = false; if !x || y { 1 } else { 2 }") == 2
    assert engine.eval("let x = false; if !x && !x { 1 } else { 2 }") == 1
    with pytest.raises(RhaiRuntimeError, match=r"^Function not found: ! \(i64\)"):
        engine.eval("let x = 5; if !x { 1 }")
    with pytest.raises(RhaiRuntimeError, match=r"^Data type incorrect: i64 \(expecting bool\)"):
        engine.eval("let x = true; let y = 5; if x && y { 1 }")


def test_contains_copies_its_argument_only_for_the_full_path() -> None:
    """`s.contains(c)` of a string runs on the argument itself; an array's gets the copy a value
    needs, so what it holds cannot change the variable it came from."""
    engine = Engine()
    source = engine.compile("let s = \"abc\"; let c = 'b'; s.contains(c)").module.source
    lines = source.splitlines()
    inline = next(index for index, line in enumerate(lines) if " in v" in line)  # the fast path's work
    assert "rt.copy" not in "".join(lines[inline - 1 : inline + 1])  # nor its test
    assert "rt.copy" in "".join(lines[inline + 1 :])  # the general path's copy
    assert engine.eval('let s = "abc"; let c = \'b\'; [s.contains(c), s.contains("x")]') == [True, False]
    assert engine.eval("let a = [[1], [2]]; let x = [2]; let r = a.contains(x); x.push(3); [r, x]") == [
        True,
        [2, 3],
    ]


STEPPED = [
    "let x = 300; while x > 0 { x -= 1; } x",
    "let a = []; a.pad(60, true); let k = 4; while k <= 59 { a[k] = false; k += 4; } a",
    "let n = 90; let p = 7; let s = 0; while n >= p { s += n; n -= p; } [n, s]",
    "let t = 0; for i in 1..30 { let k = 0; while k < 100 { t += k; k += i; } } t",
    "let a = [0, 0, 0]; let k = 0; try { while k <= 5 { a[k] = 1; k += 1; } } catch { } let j = 0; "
    "while j < 9 { j += 1; } [a, k]",
    "let x = 9223372036854775790; try { while x <= 9223372036854775807 { x += 4; } } catch { } x",
    "let a = \"abc\"; let k = 0; while k < 3 { a[k] = 'z'; k += 1; } a",
    "let k = 5; let p = 0; let n = 0; while k < 9 && n < 20 { n += 1; } [k, n]",
]


def outcomes(source: str, limits: range) -> list[object]:
    """What `source` gives under each operation limit: its value, or its error's text."""
    seen: list[object] = []
    for limit in limits:
        try:
            seen.append(Engine(limits=Limits(max_operations=limit)).eval(source))
        except RhaiRuntimeError as error:
            seen.append(str(error))
    return seen


@pytest.mark.parametrize("source", STEPPED)
def test_a_loop_counted_in_runs_stops_and_fails_where_counting_each_iteration_does(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `while` of known trip count counts the iterations that fit before the checkpoint at
    once and runs them in a copy of its body that counts nothing (codegen/stepped.py): under
    every limit, the script stops at the same place with the same error, or gives the same
    value, as when every loop counts each iteration inline; a failure inside the copy leaves
    the count of the failing iteration."""
    total = our_count(source)
    limits = range(max(1, total - 700), total + 2)
    at_entry = (total, outcomes(source, limits))
    monkeypatch.setattr(Facts, "has_loop_calls", lambda facts, node: True)  # every loop counts inline
    assert " // " not in Engine().compile(source).module.source
    assert (our_count(source), outcomes(source, limits)) == at_entry


def test_only_a_loop_stepping_a_bounded_int_is_counted_in_runs() -> None:
    """The copy exists for a loop whose last statement steps the head's int local; its arrays
    lose their type test there, and a body that counts on its own, jumps or changes the
    bound keeps the loop as it was."""
    engine = Engine()
    sieve = engine.compile(
        "let a = []; a.pad(9, 1); let k = 2; while k < 9 { a[k] = 0; k += 2; } a"
    ).module.source
    assert sieve.count("while v") == 2 and sieve.count("raise IndexError") == 1
    for plain in (
        "let k = 0; while k < 9 { k += 1; if k == 3 { break } } k",  # a jump
        "let k = 0; let e = 9; while k < e { e -= 1; k += 1; } k",  # the bound changes
        "let k = 0; while k < 9 { k += 1; k += 1; } k",  # stepped twice
        "let k = 0; while k < 9 { k += 1; let j = k; } k",  # not stepped last
        "let k = 0; let s = 0.5; while k < 9 { s += k; k += 1; } s",  # a float's `+=`: its count
        "let k = 0; while k < 9 { k -= 1; } k",  # away from the bound
    ):
        assert " // " not in engine.compile(plain).module.source, plain
    assert engine.eval("let k = 0; while k < 9 { k += 1; let j = k; } k") == 9
    assert engine.eval("let k = 0; let e = 9; while k < e { e -= 1; k += 1; } k") == 5


def test_a_step_not_above_zero_or_an_array_that_is_none_runs_the_loop_as_it_was() -> None:
    """The test before a run sends a step ≤ 0, a container that is no array, or iterations past
    the room left to the checkpoint to the loop counting each iteration."""
    engine = Engine(limits=Limits(max_operations=2_000))
    with pytest.raises(RhaiRuntimeError, match=r"Too many operations \(line 1, position 39\)"):
        engine.eval("let k = 0; let p = 0; while k < 5 { k += p; }")
    assert engine.eval("let b = blob(4); let k = 0; while k < 4 { b[k] = 7; k += 1; } b") == bytearray(
        b"\x07" * 4
    )
    with pytest.raises(RhaiRuntimeError, match=r"Too many operations \(line 1, position 31\)"):
        engine.eval("let k = 0; while k < 1000 { k += 1; }")


def test_a_loop_whose_bound_or_step_is_its_own_variable_counts_each_iteration() -> None:
    engine = Engine(limits=Limits(max_operations=500))
    for source in ("let k = 1; while k <= k { k += 1; }", "let k = 1; while k < 1000 { k += k; } k"):
        assert " // " not in engine.compile(source).module.source
    with pytest.raises(RhaiRuntimeError, match="Too many operations"):
        engine.eval("let k = 1; while k <= k { k += 1; }")
    assert engine.eval("let k = 1; while k < 1000 { k += k; } k") == 1024


def test_the_string_changing_natives_are_the_ones_the_code_generator_calls_at_once() -> None:
    from agentkernel.rhai.codegen.chains import CHANGING_STRING_METHODS
    from agentkernel.rhai.stdlib import build_library

    """`codegen/chains.py` names the natives of a string receiver that may be called at once
    as they change it: every one of the standard library's that needs no context."""
    library = build_library()
    natives = [*library._exact.values(), *(n for overloads in library._loose.values() for n in overloads)]
    found = {
        native.name
        for native in natives
        if not native.pure and not native.needs_context and native.params and native.params[0] is str
    }
    assert found == CHANGING_STRING_METHODS


def test_trim_and_len_run_inline_only_while_they_are_the_standard_natives() -> None:
    """`s.trim()` of a string variable and `x.len()` of a string or an array run as the
    standard natives' own work (Rust's White_Space trimmed, not Python's whitespace); a
    script's own `trim()`/`len()`, a typed method or a host's registration still wins, and a
    constant is still refused."""
    engine = Engine()
    source = 'let s = " \\u3000a\\u001c\\t "; s.trim(); let a = [1, 2]; [s, s.len(), a.len(), "xyz".len()]'
    assert ".strip(" in engine.compile(source).module.source
    assert engine.eval(source) == ["a\x1c", 2, 2, 3]
    assert engine.eval('let m = #{a: 1}; let s = " b "; s.trim(); [m.len(), s]') == [1, "b"]
    assert engine.eval('fn trim() { this = "mine" } let s = " b "; s.trim(); s') == "mine"
    assert engine.eval("fn len() { 7 } let s = [1]; s.len()") == 7
    assert engine.eval('fn string.len() { 9 } let s = "ab"; s.len()') == 9
    with pytest.raises(RhaiRuntimeError, match="constant"):
        engine.eval('const S = " a "; S.trim();')
    engine.register_fn("trim", lambda s: None, params=[str])
    assert engine.eval('let s = " b "; s.trim(); s') == " b "


def test_a_string_changing_native_called_at_once_stores_back_as_the_full_path_does() -> None:
    """A native seen to change a string receiver (`make_upper`, `crop`…) is called at once on
    the next such call (`Runtime.changing_method`); the variable gets the new string, a
    constant is still refused, a script's function of the name still wins."""
    engine = Engine()
    source = 'let s = "ab"; s.make_upper(); let t = "xyz"; t.crop(1, 5); '
    source += 'let u = "ab"; let c = u.pop(); [s, t, u, c]'
    assert "rt.changing_method(" in engine.compile(source).module.source
    assert engine.eval(source) == ["AB", "yz", "a", "b"]
    assert engine.eval(source) == ["AB", "yz", "a", "b"]  # remembered: at once
    assert engine.eval('fn make_upper() { this = "mine" } let s = "ab"; s.make_upper(); s') == "mine"
    with pytest.raises(RhaiRuntimeError, match="constant"):
        engine.eval('const S = "ab"; S.make_upper();')


class _LookingRuntime(Runtime):
    """A runtime that looks (at a clock, say) every 1,000 operations, as a kernel tool's does."""

    looks = 0

    def reached_checkpoint(self) -> None:
        super().reached_checkpoint()
        self.looks += 1
        self.checkpoint = min(self.limit_or_inf, self.operations + 1_000)


def looked(source: str) -> tuple[Any, int, int]:
    """What `source` gives under a runtime that looks every 1,000 operations: its value, its
    count and how many times it looked."""
    engine = Engine()
    script = engine.compile(source)
    rt = _LookingRuntime(library=engine.library, functions=dict(script.functions))
    rt.checkpoint = 1_000
    return _run_main(rt, script), rt.operations, rt.looks


def test_a_loop_counted_in_runs_still_reaches_each_periodic_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between two looks of a host's periodic check, a stepped loop runs the iterations that
    fit in a copy and one counting itself: the host looks as often, at the same counts."""
    source = "let a = []; a.pad(5000, 0); let k = 0; while k < 5000 { a[k] = k; k += 1; } a[4999]"
    assert " // " in Engine().compile(source).module.source
    in_runs = looked(source)
    monkeypatch.setattr(Facts, "has_loop_calls", lambda facts, node: True)  # every loop counts inline
    assert looked(source) == in_runs == (4999, our_count(source), 59)
