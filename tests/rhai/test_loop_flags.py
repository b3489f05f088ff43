"""Types tested once at a counted loop's entry (codegen/loop_flags.py) keep Rhai's semantics.

A variable is flagged only when the loop cannot change its type; these check
the analysis that says so, that loops which do change a variable's type still
run as Rhai does, and that size limits read once at the entry still hold.
"""

from __future__ import annotations

import re

import pytest

from agentkernel.rhai import Engine, Limits, RhaiRuntimeError
from agentkernel.rhai.analysis.facts import Facts
from agentkernel.rhai.analysis.loop_types import only_contains_argument, stable_types
from agentkernel.rhai.codegen.control import ControlFlow
from agentkernel.rhai.syntax import ast as rhai_ast
from agentkernel.rhai.syntax.parse_support import ParseOptions
from agentkernel.rhai.syntax.parser import parse
from tests.rhai.operation_counts import stops


def stable_in(source: str) -> tuple[set[str], set[str]]:
    """(containers, texts) that the first loop of `source` leaves of their type."""
    loop = next(
        s.expr
        for s in parse(source, ParseOptions()).stmts
        if isinstance(s, rhai_ast.ExprStmt) and isinstance(s.expr, rhai_ast.For)
    )
    found = stable_types((loop.body,))
    return set(found.containers), set(found.texts)


@pytest.mark.parametrize(
    ("source", "containers", "texts"),
    [
        ("for i in 0..3 { m[i] = 1; t += m[i]; }", {"m", "i"}, {"i", "t"}),
        ("for i in 0..3 { m.x = i; m[`k`].y += 1; }", {"m", "i"}, {"i"}),
        ("for i in 0..3 { m = #{}; t = 1; }", set(), set()),
        ("for i in 0..3 { t += 1; }", set(), {"t"}),
        ("for i in 0..3 { m.clear(); m[0].push(1); }", {"m"}, {"m"}),  # flags tested again after
        ("for i in 0..3 { push(a, i); }", {"i"}, {"i"}),
        ("for i in 0..3 { let m = 1; for k in m { try { k } catch (e) { e } } }", set(), set()),
        ("for i in 0..3 { m[i] = eval(`1`); }", set(), set()),
    ],
)
def test_only_what_a_loop_cannot_retype_is_stable(source: str, containers: set[str], texts: set[str]) -> None:
    assert stable_in(source) == (containers, texts)


def test_flags_are_tested_once_at_the_entry_of_a_counted_loop() -> None:
    # `m.len()` after the loop: `m` is not proven a map for the whole script (int_types.py)
    script = Engine().compile(
        'let m = #{}; let t = ""; for w in ["a", "b", "a"] { m[w] = (m[w] ?? 0) + 1; t += w; } [m.len(), t]'
    )
    entry, body = script.module.source.split("for v", 1)
    assert re.search(r"; p\d+ = type\(v\d+_m\) is dict", entry)
    assert re.search(r"; p\d+ = type\(v\d+_t\) is str", entry)
    # the body tests the flag (and sets it again only where a store-back may give a new value)
    assert not re.search(r"if [^\n]*type\(v\d+_m\) is dict", body.split("finally:")[0])
    assert Engine().run(script) == [2, "aba"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # retyped whole in the loop: never flagged, each iteration tests the type again
        ("let m = #{}; for i in 0..4 { if i == 2 { m = [0, 0, 0, 0]; } m[`${i}`] = i; } m", "error"),
        (
            "let m = #{}; for i in 0..4 { if i == 2 { m = [0, 0, 0, 0]; } "
            "if i >= 2 { m[i] = i; } else { m.x = i; } } m",
            [0, 0, 2, 3],
        ),
        ('let t = ""; for i in 0..4 { t += i; if i == 1 { t = 10; } } t', 15),
        ('let t = 5; for i in 0..3 { if i == 1 { t = "x"; } else { t += 1; } } t', "x1"),
        # not of the flagged type at the entry: the general path all along
        ("let m = [1, 2, 3]; for i in 0..3 { m[i] = i * 10; } m", [0, 10, 20]),
        ("let m = \"abc\"; for i in 0..3 { m[i] = 'z'; } m", "zzz"),
        ('let t = [1]; for i in 0..2 { t += "x"; } t', [1, "x", "x"]),
        # the same local is flagged in one loop and retyped in the next
        (
            "let m = #{}; for i in 0..2 { m[`k${i}`] = i; } for i in 0..2 { m = i; } m",
            1,
        ),
    ],
)
def test_a_loop_that_retypes_a_variable_runs_as_rhai_does(source: str, expected: object) -> None:
    if expected == "error":  # an array indexed by a string, once the map is gone
        with pytest.raises(RhaiRuntimeError, match="Data type incorrect"):
            Engine().eval(source)
        return
    assert Engine().eval(source) == expected


def test_size_limits_read_at_the_entry_still_stop_the_loop() -> None:
    engine = Engine(limits=Limits(max_string_size=10, max_map_size=3))
    with pytest.raises(RhaiRuntimeError, match="Length of string"):
        engine.eval('let t = ""; for i in 0..20 { t += "ab"; } t')
    with pytest.raises(RhaiRuntimeError, match="Size of object map"):
        engine.eval("let m = #{}; for i in 0..20 { m[`k${i}`] = i; } m")


MERGED = [
    # the body's one `if` on a comparison of a local: its count goes into each branch
    'let m = #{}; for w in ["a", "", "b", 3, "a"] { if w != "" { m[`${w}`] = (m[`${w}`] ?? 0) + 1 } } m',
    "let n = 0; for i in 0..30 { if i < 12 { n += 1; n += 1 } else { n -= 1 } } n",
    'let n = 0; for w in ["x", "y", "x"] { if "x" == w { n += 10 } } n',
    "let n = 0; let k = 0; while k < 20 { k += 1; if k >= 10 { n += k } } n",
    # an inlined predicate, or its `!`: inline when it can be, else the method's general path
    'let e = ".!"; let n = 0; for c in "a.b!c" { if !e.contains(c) { n += 1 } } n',
    'let e = [".", "!"]; let n = 0; for c in [".", "b", 3] { if e.contains(c) { n += 1 } else { n -= 1 } } n',
    'fn contains(x) { x == "b" } let e = ""; let n = 0; for c in "abc" { if e.contains(c) { n += 10 } } n',
    'fn contains(x) { 5 } let e = ""; let n = 0; for c in "abc" { if !e.contains(c) { n += 10 } } n',
    'fn contains(x) { 5 } let e = ""; let n = 0; for c in "abc" { if e.contains(c) { n += 10 } } n',
    'let w = "ab"; let n = 0; for p in ["a", "b", "x"] { if w.starts_with(p) { n += 1 } } n',
]


@pytest.mark.parametrize("source", MERGED)
def test_an_if_counted_in_its_branches_in_a_loop_stops_where_counting_apart_does(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = Engine().compile(source).module.source
    assert re.search(r"rt\.settle(_window)?\(", local)
    counted_locally = stops(source)
    monkeypatch.setattr(Facts, "has_loop_calls", lambda facts, node: True)  # every loop counts inline
    monkeypatch.setattr(ControlFlow, "merges_into_if", lambda self, kept: False)  # and each block apart
    inline = Engine().compile(source).module.source
    assert not re.search(r"rt\.settle(_window)?\(", inline)
    assert stops(source) == counted_locally


def test_push_keeps_a_list_flagged_unless_the_script_defines_its_own() -> None:
    assert Engine().eval("let a = []; for i in 0..4 { a.push(i); a[0] += 1 } a") == [4, 1, 2, 3]
    # a script's own `push` that changes `this` (the reference prints `#{"n": 3}`)
    own = "fn push(x) { this = #{ n: x }; } let a = []; for i in 0..3 { a.push(i); a.n += 1 } a"
    lines = Engine().compile(own).module.source.splitlines()
    stored = next(i for i, line in enumerate(lines) if line.strip().startswith("v") and ".receiver" in line)
    assert re.fullmatch(r" *p\d+ = type\(v\d+_a\) is list.*", lines[stored + 1])  # the flag tested again
    assert Engine().eval(own) == {"n": 3}
    assert Engine().eval("fn push(x) { this = #{ n: x }; } let a = []; a.push(1); a") == {"n": 1}
    with pytest.raises(RhaiRuntimeError, match="constant"):
        Engine().eval("const a = []; for i in 0..3 { a.push(i) } a")


@pytest.mark.parametrize(
    ("source", "printed"),
    [  # what the reference Rhai 1.25 prints: a script's own method of an inlined name retypes `this`
        (
            'fn contains(x) { this = [x]; false } let s = "abc"; let n = 0; '
            'for c in ["a", "b"] { if s.contains(c) { n += 1 } n += s.len(); } print([s, n]);',
            '[["b"], 2]',
        ),
        (
            "fn trim() { this = #{ t: 1 }; } let m = #{}; let n = 0; "
            "for i in 0..3 { m[`k${i}`] = i; if i == 1 { m.trim(); } n += m.len(); } print([m, n]);",
            '[#{"k2": 2, "t": 1}, 4]',
        ),
        (  # a list at the entry, a string after the first store-back: `s[0]` is then a char
            'fn contains(x) { this = "zz"; false } let s = ["a", "b"]; let out = []; '
            'for i in 0..2 { out.push(s[0]); s.contains("q"); } print(out);',
            '["a", z]',
        ),
    ],
)
def test_a_flag_is_tested_again_where_a_method_stores_its_receiver_back(source: str, printed: str) -> None:
    compiled = Engine().compile(source).module.source
    assert re.search(r"_[sm] = t\d+\.receiver\n *p\d+ = type\(v\d+_[sm]\) is", compiled)
    out: list[str] = []
    Engine().eval(source, stdout=out.append)
    assert out == [printed]


def test_a_string_the_loop_never_appends_to_is_tested_short_once() -> None:
    """An inlined method's receiver must be short enough not to need a look at the clock: a
    string the loop only reads is measured at its entry, one it grows at each call."""
    read = Engine().compile('let e = ".!?"; let n = 0; for c in "a.b!" { if e.contains(c) { n += 1 } } n')
    entry, body = read.module.source.split("for v", 1)
    assert re.search(r"p\d+ = type\(v\d+_e\) is str and len\(v\d+_e\) < 256", entry)
    assert not re.search(r"if [^\n]*len\(v\d+_e\)", body)  # (a store-back measures it again)
    grown = Engine().compile(
        'let s = ""; let n = 0; for i in 0..300 { s += "a"; if s.contains("b") { n += 1 } } n'
    )
    assert re.search(r"len\(v\d+_s\) < 256", grown.module.source.split("for v", 1)[1])
    appended = Engine().compile(
        'let s = ""; let n = 0; for i in 0..300 { s.append("a"); if s.contains("b") { n += 1 } } n'
    )
    assert re.search(r"len\(v\d+_s\) < 256", appended.module.source.split("for v", 1)[1])
    assert Engine().eval('let e = ".!?"; let n = 0; for c in "a.b!" { if e.contains(c) { n += 1 } } n') == 2
    long = '"' + "x" * 300 + '"'
    assert (
        Engine().eval(f'let e = {long}; let n = 0; for c in "axb" {{ if e.contains(c) {{ n += 1 }} }} n') == 1
    )


COUNTED_UP = [
    'let m = #{a: 1.5, b: "x", n: 4}; [(m.a ?? 0) + 1, (m.b ?? 0) + 1, (m.z ?? 5) - 7, (m.n ?? 0) + 1]',
    'let c = #{}; for w in ["a", "b", "a", "c", "a"] { c[w] = (c[w] ?? 0) + 1 } c',
    "let u = (); (u ?? 9223372036854775807) + 1",  # the reference: `Addition overflow`
    "let m = #{c: 9223372036854775807}; (m.c ?? 0) + 1",
    "let u = (); (u ?? -9223372036854775807) - 2",
    "let a = [(), 1, ()]; let t = 0; for x in a { t += (x ?? 10) + 2 } t",
]


def outcome(source: str, limit: int | None = None) -> str:
    try:
        return repr(Engine(limits=Limits(max_operations=limit or 0)).eval(source))
    except RhaiRuntimeError as error:
        return str(error)


@pytest.mark.parametrize("source", COUNTED_UP)
def test_a_count_up_tests_its_value_once_and_runs_as_coalesce_then_add(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`(a ?? d) + n` compiled as one test of `a` gives what `a ?? d` then `+ n` gives: the
    value or the error. Under an operation limit it stops no sooner: `d` is counted only where
    `a` is `()` and `d` evaluated, where `a ?? d` counts it ahead and takes it back."""
    assert re.search(
        r"elif t\d+ is None or type\(t\d+\) is TaggedUnit", Engine().compile(source).module.source
    )
    fused = [outcome(source, limit) for limit in (None, *range(1, 60))]
    monkeypatch.setattr(Facts, "_counts_up", lambda self, node: False)
    apart = [outcome(source, limit) for limit in (None, *range(1, 60))]
    assert fused[0] == apart[0]
    for limit, (one, other) in enumerate(zip(fused, apart, strict=True)):
        if other.startswith("Too many operations"):  # counted ahead: it may stop sooner
            assert one.startswith("Too many operations") or one == fused[0], limit
        else:
            assert one == other, limit
    if "9223372036854775807" in source:
        assert "overflow" in fused[0]


@pytest.mark.parametrize(
    ("source", "only_indexed"),
    [
        ("for i in 0..3 { t += w[i % 2]; }", {"w"}),
        ("for i in 0..3 { t += w[i]; w[0] = 1; }", set()),  # stored into
        ("for i in 0..3 { t += w[i]; w.push(1); }", set()),  # a method called on it
        ("for i in 0..3 { t += w[i]; w[0].append(`x`); }", set()),  # on one of its items
        ("for i in 0..3 { t += w[i]; f(w); }", set()),  # given to a function
        ("for i in 0..3 { t += w[i]; let v = w; }", set()),  # named alone
        ("for i in 0..3 { t += w[i][0]; }", {"w"}),
        ("for i in 0..3 { let w = [1]; t += w[i]; }", set()),  # a variable of the loop's own
    ],
)
def test_a_loop_keeps_the_items_of_what_it_only_indexes(source: str, only_indexed: set[str]) -> None:
    loop = parse(source, ParseOptions()).stmts[0]
    assert isinstance(loop, rhai_ast.ExprStmt) and isinstance(loop.expr, rhai_ast.For)
    assert set(stable_types((loop.expr.body,)).only_indexed) == only_indexed


def test_an_item_of_an_array_of_strings_the_loop_only_reads_is_appended_without_a_test() -> None:
    script = Engine().compile('let w = ["a", "bc"]; let t = ""; for i in 0..5 { t += w[i % 2]; t += "-"; } t')
    entry, body = script.module.source.split("for v", 1)
    items = re.search(
        r"; (p\d+) = type\(v\d+_w\) is list and len\(v\d+_w\) <= 64 and len\(v\d+_w\) <= len\(r\d+\) "
        r"and all_texts\(v\d+_w\)",
        entry,
    )
    assert items is not None
    unlimited = re.search(r"; (p\d+) = type\(v\d+_t\) is str and not (s\d+)", entry)
    assert unlimited is not None
    assert f"if {unlimited.group(1)} and {items.group(1)}:\n" in body
    assert Engine().run(script) == "a-bc-a-bc-a-"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # not all strings, or too many to look through: each item is tested
        ('let w = ["a", 1, \'c\']; let t = ""; for i in 0..3 { t += w[i]; } t', "a1c"),
        ('let w = []; for i in 0..65 { w.push("x"); } let t = ""; for i in 0..65 { t += w[i]; } t.len()', 65),
        ('let w = "ab"; let t = ""; for i in 0..2 { t += w[i]; } t', "ab"),  # a string's chars
        ('let w = #{a: "x"}; let t = ""; for i in 0..2 { t += w["a"]; } t', "xx"),
        ('let w = ["a", "b"]; let t = ""; for i in 0..3 { t += w[i]; } t', "error"),  # out of bounds
        ('let w = ["a", "b"]; let t = ""; for i in 0..2 { t += w[-1 - i]; } t', "ba"),
        ('let w = ["a", "b"]; let t = 0; for i in 0..2 { t += w[i]; } t', "0ab"),  # an int's `+=` of a string
    ],
)
def test_appending_items_of_an_array_the_loop_only_reads_runs_as_rhai_does(
    source: str, expected: object
) -> None:
    if expected == "error":
        with pytest.raises(RhaiRuntimeError):
            Engine().eval(source)
    else:
        assert Engine().eval(source) == expected


def test_an_array_is_looked_through_only_by_a_loop_of_as_many_iterations() -> None:
    """A loop entered often for few iterations does not pay for looking through a long array
    at each entry: only a `for` over a range at least as long as the array looks."""
    source = 'let w = ["a", "b", "c"]; let t = ""; for i in 0..3 { print(i); for j in 0..2 { t += w[j] } } t'
    assert re.search(r"len\(v\d+_w\) <= len\(r\d+\)", Engine().compile(source).module.source)
    assert Engine().eval(source, stdout=lambda line: None) == "ababab"  # 2 < 3: not looked through
    unknown = Engine().compile(
        'let w = ["a", "b"]; let t = ""; let k = 0; while k < 4 { t += w[k % 2]; k += 1 } t'
    )
    assert "all_texts" not in unknown.module.source  # a `while`: its iterations are not known at its entry
    assert Engine().run(unknown) == "abab"


def test_an_appending_loop_under_a_string_limit_still_stops_at_it() -> None:
    source = 'let w = ["ab", "cd"]; let t = ""; for i in 0..100 { t += w[i % 2]; } t.len()'
    assert Engine(limits=Limits(max_string_size=200)).eval(source) == 200
    with pytest.raises(RhaiRuntimeError, match="Length of string"):
        Engine(limits=Limits(max_string_size=199)).eval(source)


def test_a_statement_if_keeps_no_value_and_an_expression_if_does() -> None:
    script = Engine().compile("let n = 0; for i in 0..4 { if i % 2 == 0 { n += 1 } else { n += 10 } } n")
    body = script.module.source.split("for v", 1)[1]
    assert not re.search(r"\bt\d+ = None\b", body.split("finally:")[0])
    assert Engine().run(script) == 22
    assert Engine().eval("let i = 3; let x = if i > 2 { `big` } else if i > 1 { `mid` }; x") == "big"
    assert Engine().eval("let i = 1; if i > 2 { `big` } else if i > 1 { `mid` }") is None
    assert Engine().eval("let i = 2; if i > 2 { `big` } else if i > 1 { `mid` } else { 0 }") == "mid"
    assert Engine().eval("let s = 0; for i in 0..3 { if i > 0 { } else { s += 1 } } s") == 1


@pytest.mark.parametrize(
    ("source", "walks"),
    [
        ("for c in s { if e.contains(c) { n += 1 } }", True),
        ("for c in s { if !e.contains(c) && f.contains(c) { n += 1 } }", True),
        ("for c in s { if e.contains(c) { n += 1 } print(c) }", False),  # named alone
        ('for c in s { if c.contains("a") { n += 1 } }', False),  # the receiver
        ("for c in s { if e.contains(c, 1) { n += 1 } }", False),
        ("for c in s { n += 1 }", False),  # not named at all: nothing to gain
        ('for c in s { let c = "x"; if e.contains(c) { n += 1 } }', False),
    ],
)
def test_a_character_named_only_by_contains_may_walk_the_strings_own_letters(
    source: str, walks: bool
) -> None:
    loop = parse(source, ParseOptions()).stmts[0]
    assert isinstance(loop, rhai_ast.ExprStmt) and isinstance(loop.expr, rhai_ast.For)
    assert only_contains_argument(loop.expr.body, "c") is walks


WALKED = [
    'let e = ".!?"; let n = 0; for c in "Hi! Ok? Fine." { if e.contains(c) { n += 1 } } n',
    'let e = "аб"; let n = 0; for c in "абв" { if !e.contains(c) { n += 10 } else { n += 1 } } n',
    "let e = ['a', 'b']; let n = 0; for c in \"abc\" { if e.contains(c) { n += 1 } } n",  # chars: equal
    'let e = ["a", "b"]; let n = 0; for c in "abc" { if e.contains(c) { n += 1 } } n',  # strings too
    'fn contains(x) { type_of(x) == "char" } let e = ""; let n = 0; '
    'for c in "ab" { if e.contains(c) { n += 1 } } n',
    'let e = "ab"; let n = 0; for c in ["a", \'b\', 3] { if e.contains(c) { n += 1 } } n',  # not a string
    'let e = #{a: 1}; let n = 0; for c in "ab" { if e.contains(c) { n += 1 } } n',  # a map: an error
    'let e = "x"; let n = []; for c in "axbx" { n.push(e.contains(c)) } n',
    'let s = "abc"; let t = ""; for c in s { if "b".contains(c) { t += "B" } else { t += "-" } } t',
]


@pytest.mark.parametrize("source", WALKED)
def test_a_loop_walking_a_strings_own_letters_runs_and_stops_as_over_chars(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert re.search(r"if \(w\d+ := type\(", Engine().compile(source).module.source)
    walked = stops(source)
    monkeypatch.setattr(ControlFlow, "walks_characters", lambda self, node: False)
    assert not re.search(r"if \(w\d+ := type\(", Engine().compile(source).module.source)
    assert stops(source) == walked


def test_a_range_loop_whose_variable_only_contains_takes_walks_its_ints() -> None:
    """A range's items are ints: its loop is counted by its variable, never walked letter by
    letter (the two once met and left the letters' flag unset: an internal error)."""
    assert Engine().eval("let e = [1, 5]; let n = 0; for c in 0..6 { if e.contains(c) { n += 1 } } n") == 2
    with pytest.raises(RhaiRuntimeError, match=r"Function not found: contains \(&str"):
        Engine().eval('let e = ""; let n = 0; for c in 0..3 { if e.contains(c) { n += 1 } } n')
