"""The reference's behaviour where docs/rhai.md §14.1 listed us apart (issue 14 §6):
`Fn` of a reserved name, error positions of indexed assignments, value tags."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agentkernel.rhai import Engine, Limits, RhaiRuntimeError
from agentkernel.rhai.runtime.values import type_name


def run(source: str) -> Any:
    return Engine().eval(source)


def error_of(source: str) -> str:
    with pytest.raises(RhaiRuntimeError) as caught:
        run(source)
    return str(caught.value)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("+", "'+' is a reserved symbol"),  # an operator token
        ("#{", "'#{' is a reserved symbol"),
        ("!in", "'!in' is a reserved symbol"),
        ("===", "'===' is a reserved symbol"),  # a reserved symbol that is no token
        ("->", "'->' is a reserved symbol"),
        ("_", "'_' is a reserved symbol"),
        ("let", "'let' is a reserved keyword"),  # a keyword
        ("print", "'print' is a reserved keyword"),  # a reserved word, even one callable as a function
        ("Fn", "'Fn' is a reserved keyword"),
        ("goto", "'goto' is a reserved keyword"),
    ],
)
def test_fn_of_a_reserved_name_is_the_references_syntax_error(name: str, message: str) -> None:
    """The reference's `FnPtr::try_from`: a keyword, reserved word or symbol is
    `ErrorParsing(Reserved)`, raised at run time at the argument's position."""
    assert error_of(f'let p = Fn("{name}");') == f"Syntax error: {message} (line 1, position 12)"


def test_fn_of_other_names() -> None:
    assert error_of('Fn("a b")') == "Function not found: a b (line 1, position 4)"
    assert error_of('Fn("_1")') == "Function not found: _1 (line 1, position 4)"  # not an identifier
    assert run('Fn("exit").name') == "exit"  # `exit` is listed by the reference but not reserved
    caught = run('try { Fn("+") } catch (e) { return e }')
    assert caught == {
        "error": "ErrorParsing",
        "message": "Syntax error: '+' is a reserved symbol",
        "line": 1,
        "position": 10,
    }


@pytest.mark.parametrize(
    ("source", "error"),
    [
        # a character, bit or byte of the wrong type: at the `=` (the reference's write-back)
        (
            'let s = "abc"; s[1] = "X"; s',
            "Data type incorrect: string (expecting char) (line 1, position 21)",
        ),
        (
            'let s = "abc"; s[1] += "X"; s',
            "Data type incorrect: string (expecting char) (line 1, position 21)",
        ),
        ('let x = 5; x[3] = "a"; x', "Data type incorrect: string (expecting bool) (line 1, position 17)"),
        (
            'let x = 5; x[1..3] = "a"; x',
            "Data type incorrect: string (expecting integer) (line 1, position 20)",
        ),
        (
            'let b = blob(3); b[1] = "a"; b',
            "Data type incorrect: string (expecting INT) (line 1, position 23)",
        ),
        # no indexer for the value: at its `[`
        ('let x = #{}; x["a"]["b"] = 1; x', "Indexer unavailable: () [string] = i64 (line 1, position 20)"),
        ('let x = (); x["a"] = 1;', "Indexer unavailable: () [string] = i64 (line 1, position 14)"),
        # the index itself: at the index
        (
            'let s = "abc"; s[10] = "X"; s',
            "String index 10 out of bounds: only 3 characters in string (line 1, position 18)",
        ),
        (
            "let a = [1,2]; a[2] = 3",
            "Array index 2 out of bounds: only 2 elements in array (line 1, position 18)",
        ),
        ('let a = [1]; a["x"] = 1', "Data type incorrect: string (expecting i64) (line 1, position 16)"),
    ],
)
def test_an_indexed_assignment_fails_where_the_reference_says(source: str, error: str) -> None:
    assert error_of(source) == error


# -- value tags ------------------------------------------------------------------------------------

TAGGABLE = ["5", "-3", "2.5", '"héllo"', '"5"', "'c'"]
OTHERS = ["7", "0.5", '"lo"', "'h'", "[1, 2]", "#{a: 1}", "true", "()"]
BINARY = [
    "+",
    "-",
    "*",
    "/",
    "%",
    "**",
    "<<",
    ">>",
    "&",
    "|",
    "^",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "in",
    "!in",
]


def outcome(source: str) -> tuple[str, Any]:
    """A script's value and type, or its error text: what a tag must not change."""
    try:
        value = Engine().eval(source)
    except RhaiRuntimeError as exc:
        return "error", re.sub(r" \(line \d+, position \d+\)", "", str(exc))  # the scripts differ in length
    return type_name(value), value  # the Rhai type: a tagged value is still an i64, a string…


@pytest.mark.parametrize("value", TAGGABLE)
@pytest.mark.parametrize("op", BINARY)
def test_an_operator_sees_a_tagged_value_as_its_value(value: str, op: str) -> None:
    """Operators on a tagged value compute what they compute on the value, untagged."""
    for other in OTHERS:
        for left, right in (("x", other), (other, "x"), ("x", "x")):
            expr = f"{left} {op} {right}"
            plain = outcome(f"let x = {value}; {expr}")
            tagged = outcome(f"let x = {value}; x.set_tag(7); let r = {expr}; [r, tag(r)]")
            if plain[0] == "error":
                assert tagged == plain, expr
            else:
                assert tagged[1] == [plain[1], 0], expr


METHODS = [
    "x.to_string()", "x.to_debug()", "`<${x}>`", "type_of(x)", "x.len()", "x.len", "x.abs()",
    "x.to_float()", "x.to_int()", "x.is_odd", "x[0]", "x[1..3]", "x.contains(\"l\")", "x.to_upper()",
    "x.sub_string(1)", "x.index_of('l')", "x.split(\"l\")", "x.floor()", "-x", "!x", "x ?? 1",
    "[x, x].sort()", "[x].contains(x)", "[x] == [x]", "#{k: x} == #{k: x}", "x.max(3)", "x.bits().len()",
    "switch x { 5 => 1, \"héllo\" => 2, 'c' => 3, 2.5 => 4, _ => 0 }", "switch x { 1..9 => 1, _ => 0 }",
    "{ let n = 0; for c in x { n += 1 } n }", "#{\"héllo\": 1, \"5\": 2}[x]", "[1, 2, 3, 4, 5, 6][x]",
    "x.parse_int()", "x.to_chars()", "print(x)", "x.pad(8, \"-\")", "to_json(#{k: x, l: [x]})",
    "{ let b = blob(); b += x; b }", "{ let a = [1]; a += x; a.insert(0, x); a }", "[x].map(|v| v)",
]  # fmt: skip


@pytest.mark.parametrize("value", TAGGABLE)
def test_natives_indexing_and_switch_see_a_tagged_value_as_its_value(value: str) -> None:
    for expr in METHODS:
        plain = outcome(f"let x = {value}; {expr}")
        tagged = outcome(f"let x = {value}; x.set_tag(-2); {expr}")
        assert tagged == plain, expr


def test_a_tag_is_kept_by_copies_and_lost_by_operations() -> None:
    """The reference's Dynamic tag: `let y = x`, arguments, elements and properties copy it;
    an operator or function builds a new, untagged value."""
    source = """
        fn tag_in(v) { v.tag }
        let x = 40; x.set_tag(42);
        let y = x;
        let m = #{a: 1}; m.a.tag = 5;
        let s = "s"; set_tag(s, -7);
        [x.tag(), y.tag, tag_in(x), [x][0].tag, #{k: x}.k.tag, m.a.tag, tag(s), (x + 2).tag, x + 2, s + "!"]
    """
    assert run(source) == [42, 42, 42, 42, 42, 5, -7, 0, 42, "s!"]
    # a string changed in place keeps its tag; a new tag of 0 is no tag
    assert run('let s = "ab"; s.tag = 3; s.pad(4, "-"); [s, s.tag]') == ["ab--", 3]
    assert run("let x = 5; x.tag = 3; x.set_tag(0); [x.tag, type_of(x)]") == [0, "i64"]


def test_tags_of_other_types_and_wrong_tags() -> None:
    """Arrays, maps and bools keep a tag as the reference's do (a copy keeps it, a change in
    place keeps it, an operator's result has none); a map's `.tag` is its property, as in the
    reference; the host gets a tagged bool as a bool."""
    assert run("let a = [1]; a.set_tag(5); a.push(2); let b = a; [a.tag(), b.tag, a, tag(a + b)]") == [
        5,
        5,
        [1, 2],
        0,
    ]
    assert run("let m = #{}; m.tag = 12; let n = m; [n.tag, tag(n)]") == [12, 0]
    assert run("let m = #{}; m.set_tag(3); m.k = 1; let n = m; [n.tag, tag(n), n]") == [None, 3, {"k": 1}]
    result = run("let t = true; t.set_tag(4); [t, tag(t), tag(!t), #{t: t}]")
    assert result == [True, 4, 0, {"t": True}]
    assert type(result[0]) is bool and type(result[3]["t"]) is bool
    assert (
        error_of("let x = 1; x.set_tag(1.5); x")
        == "Function not found: set_tag (i64, f64) (line 1, position 14)"
    )
    assert error_of("let x = 1; x.set_tag(2147483648)") == (
        "2147483648 is too large to fit into a tag (must be between -2147483648 and 2147483647)"
        " (line 1, position 14)"
    )


def test_ranges_fns_and_timestamps_keep_a_tag() -> None:
    """The reference's `Dynamic` holds a tag beside every value (`types/dynamic.rs`,
    `set_tag`): a range, an Fn and a timestamp keep theirs through copies, and what is made
    from them (`curry`, `ts + 1`, `r.start`) has none; the tag changes nothing else."""
    source = """
        let f = Fn("abs"); f.set_tag(3); let g = f; f.tag = 4;
        let r = 1..3; r.set_tag(-3); let s = 0; for i in r { s += i }
        let q = 1..=3; q.tag = 5; let a = [q];
        let t = timestamp(); t.set_tag(2147483647);
        [f.tag, g.tag, tag(f.curry(1)), f.call(-2), type_of(f), `${f}`,
         r.tag, s, type_of(r), r.contains(2), tag(r.start),
         a[0].tag, q == 1..=3, to_json(#{r: q}), t.tag, tag(t + 1), type_of(t)]
    """
    assert run(source) == [
        *[4, 3, 0, 2, "Fn", "Fn(abs)"],
        *[-3, 3, "range", True, 0],
        *[5, True, '{"r":1..=3}', 2147483647, 0, "timestamp"],
    ]
    closure = "let k = 1; let f = |x| x + k; f.set_tag(9); [f.call(1), f.tag, call(f, 2), [1, 2].map(f)]"
    assert run(closure) == [2, 9, 3, [2, 3]]


def test_a_blob_keeps_a_tag_as_an_array_does() -> None:
    """A BLOB's tag, as the reference keeps it: copies keep it, changes in place (`push`,
    `+=`, `b[0] = …`, through an array or a map) keep it, a new BLOB (`b + c`, `extract`)
    has none; everything else computes as on the untagged BLOB."""
    source = """
        let b = blob(2, 7); b.set_tag(3); let c = b; b.push(1);
        let a = [c]; a[0].push(2); let m = #{b: c}; m.b[1] = 4;
        b += 1; b += blob(1, 2); b[0] = 9; let s = 0; for x in b { s += x }
        [b.tag, c.tag, a[0].tag, m.b.tag, m.b, type_of(b), b.len(), tag(b + c), tag(b.extract(0, 1)),
         b == c, s, `${c}`, b.to_array(), 7 in b]
    """
    result = run(source)
    assert result == [
        *[3, 3, 3, 3, bytearray(b"\x07\x04"), "blob", 5, 0, 0],
        *[False, 20, "[0707]", [9, 7, 1, 1, 2], True],
    ]
    engine = Engine(limits=Limits(max_data_size=1000))
    with pytest.raises(RhaiRuntimeError, match="Size of array/BLOB too large"):
        engine.eval("let b = blob(400); b.set_tag(1); let a = []; for i in 0..3 { let t = b; a.push(t) }")


def test_unit_keeps_a_tag_and_stays_unit() -> None:
    """`()` keeps a tag as every value of the reference does (`Union::Unit((), tag, _)`), and
    is still `()` wherever `()` decides: `==`, `??`, `?.`, `switch`, printing, the host."""
    source = """
        let x = (); x.set_tag(3); let y = x; let m = #{a: x};
        [x.tag, y.tag, m.a.tag, type_of(x), x == (), () == x, x != (), `${x}`, x.to_debug(),
         x ?? 5, m.a?.foo, x?.len(), switch x { () => 1, _ => 2 }, [x] == [()], [x].index_of(()),
         to_json(m), x]
    """
    result = run(source)
    assert result == [
        3,
        3,
        3,
        "()",
        True,
        True,
        False,
        "",
        "()",
        5,
        None,
        None,
        1,
        True,
        0,
        '{"a":null}',
        None,
    ]
    assert result[-1] is None  # the host gets a plain ()
    assert run("let x; x.tag = -1; x.set_tag(0); [x.tag, x ?? 5]") == [0, 5]


def test_a_tagged_string_counts_toward_the_data_limit() -> None:
    """Each tagged copy is a string of its own: storing them cannot slip past `max_data_size`."""
    engine = Engine(limits=Limits(max_data_size=1_000_000))
    source = 'let s = "x"; s.pad(300000, "y"); let a = [];'
    source += " for i in 0..5 { let t = s; t.set_tag(i + 1); a.push(t) }"
    with pytest.raises(RhaiRuntimeError, match="Length of string too large"):
        engine.eval(source)


@pytest.mark.parametrize(
    ("source", "shown", "position"),
    [
        ("let f = |x, y| x * y; f.call(1)", "(i64)", 25),  # too few: no function of that arity
        ("let f = |x| x; f.call()", "()", 18),
        ("let k = 3; let f = |x, y| x * y * k; f.call(1)", "(i64, i64)", 40),  # the captured k first
    ],
)
def test_a_closure_called_with_too_few_arguments_is_not_found(source: str, shown: str, position: int) -> None:
    """The reference's `make_method_call`: the closure's parameters (its captured variables
    first) are not as many as the arguments, so it is called by name and arity, and is not
    found. Its name hashes the body with the reference's own hasher: only its form is checked."""
    message = error_of(source)
    assert re.fullmatch(
        rf"Function not found: anon\$[0-9a-f]{{16}} {re.escape(shown)} \(line 1, position {position}\)",
        message,
    ), message


# -- what `catch (e)` binds ------------------------------------------------------------------------


def caught(body: str, prelude: str = "") -> Any:
    return run(f"{prelude} let r = (); try {{ {body} }} catch (e) {{ r = e }} r")


def test_an_undefined_function_is_caught_as_the_references_map() -> None:
    """The reference's `Stmt::TryCatch`: a map of the error's `dump_fields`, its message
    without the outer position, and where it was."""
    assert caught("undefined_fn(1)") == {
        "error": "ErrorFunctionNotFound",
        "function": "undefined_fn (i64)",
        "line": 1,
        "message": "Function not found: undefined_fn (i64)",
        "position": 20,
    }
    assert caught("f(1)", "fn f(x) { undefined_fn(x) }") == {
        "error": "ErrorInFunctionCall",
        "function": "f",
        "source": "",
        "line": 1,
        "message": "Function not found: undefined_fn (i64) (line 1, position 11)\nin call to function 'f'",
        "position": 47,
    }


def test_a_closures_error_is_caught_with_the_closures_name() -> None:
    """`ErrorInFunctionCall` holds the closure's `fn_def.name` (`anon$…`), shown as `in
    closure call` and kept as the map's `function`."""
    error = caught("g.call(1)", "let g = |x| undefined_fn(x);")
    assert re.fullmatch(r"anon\$[0-9a-f]{16}", error.pop("function")), error
    assert error == {
        "error": "ErrorInFunctionCall",
        "source": "",
        "line": 1,
        "message": "Function not found: undefined_fn (i64) (line 1, position 13)\nin closure call",
        "position": 50,
    }


@pytest.mark.parametrize(
    ("body", "prelude", "value"),
    [
        ("f()", "fn f() { throw 5 }", 5),
        ("f()", "fn f() { g() } fn g() { throw [1] }", [1]),  # through every call level
        ("g.call()", 'let g = || { throw "x" };', "x"),
        ("f()", "fn f() { [1].map(|x| { throw 7 }) }", 7),  # a callback's closure, in a function
        ('eval("throw 8")', "", 8),
    ],
)
def test_a_value_thrown_inside_a_call_is_caught_as_itself(body: str, prelude: str, value: Any) -> None:
    """The reference's catch looks through `ErrorInFunctionCall` (`unwrap_inner`): a thrown
    value is bound as itself however deep it was thrown, not as a map of the call."""
    assert caught(body, prelude) == value


# -- `call`, `curry` and `is_def_fn` corners, tags at their edges, `parse_json`, `eval` ------------


@pytest.mark.parametrize(
    ("source", "error", "position"),
    [
        # the reference's `make_function_call`: the first argument must be an Fn, found where it stands
        (
            'fn inc() { this += 1; } let x = 5; call(x, Fn("inc"))',
            "Data type incorrect: i64 (expecting Fn)",
            41,
        ),
        ("let f = |y| this + y; call(3, f, 4)", "Data type incorrect: i64 (expecting Fn)", 28),
        ('call("not a fn ptr", 1)', "Data type incorrect: string (expecting Fn)", 6),
        ("curry(5, 1)", "Data type incorrect: i64 (expecting Fn)", 7),
        ("is_def_fn(1, 1)", "Data type incorrect: i64 (expecting string)", 11),
        # with too few arguments each is a plain function of that name, not found at the call
        ('curry(Fn("a"))', "Function not found: curry (Fn)", 1),
        ("call()", "Function not found: call ()", 1),
        # its `make_method_call`: `x.call()` with no Fn fails at the call, one of another type where it stands
        ("let x = 5; x.call()", "Data type incorrect: i64 (expecting Fn)", 14),
        ('let x = 5; x.call("s", 1)', "Data type incorrect: string (expecting Fn)", 19),
        ("let x = 5; x.curry(1)", "Data type incorrect: i64 (expecting Fn)", 14),
        # an Fn called on a value passes it as `this`, so its function has one parameter fewer
        ('fn inc(a) { this += a; } let x = 5; x.call(Fn("inc"))', "Function not found: inc (i64)", 39),
        ("let f = |y| this + y; call(f, 4)", "'this' not bound (line 1, position 13)\nin closure call", 23),
    ],
)
def test_call_and_curry_corners_fail_as_the_reference(source: str, error: str, position: int) -> None:
    assert error_of(source) == f"{error} (line 1, position {position})"


def test_an_fn_called_on_a_value_changes_it_in_place() -> None:
    """`x.call(f, …)` binds `this` to `x` itself: what the function does to it stays."""
    assert run('fn inc() { this += 1; } let x = 5; x.call(Fn("inc")); x.call(Fn("inc")); x') == 7
    assert run("let f = |y| this + y; let x = 3; x.call(f, 4)") == 7
    assert run("let f = |y| { this += y; }; let x = 3; x.call(f, 4); x") == 7
    assert run('let x = [1]; x.call(Fn("push"), 2); x') == [1, 2]


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("let x = 1; x.set_tag(2147483647); x.tag", 2147483647),
        ("let x = 1; x.set_tag(-2147483648); x.tag", -2147483648),
        ("let x = 5; x.tag = -7; let y = x; [y.tag, tag(y + 0)]", [-7, 0]),
        ("let x = 5; x.tag = 7; x.tag += 1; x.tag", 8),
    ],
)
def test_tags_at_the_edges_of_their_range(source: str, value: Any) -> None:
    assert run(source) == value


@pytest.mark.parametrize(
    ("source", "error", "position"),
    [
        # `lang_core.rs`'s `set_tag`, the setter of `tag` too: an ErrorArithmetic at the call or the property
        ("let x = 1; x.set_tag(2147483648)", "2147483648 is too large", 14),
        ("let x = 1; x.set_tag(-2147483649)", "-2147483649 is too small", 14),
        ("let x = 1; x.tag = 2147483648", "2147483648 is too large", 14),
        ("let x = 1; x.tag = -2147483649", "-2147483649 is too small", 14),
        ("let x = 5; x.set_tag(2147483647); x.tag += 1", "2147483648 is too large", 37),
        ('let x = "a"; set_tag(x, 4000000000)', "4000000000 is too large", 14),
    ],
)
def test_tags_past_the_edges_of_their_range(source: str, error: str, position: int) -> None:
    edges = "must be between -2147483648 and 2147483647"
    assert error_of(source) == f"{error} to fit into a tag ({edges}) (line 1, position {position})"
    assert caught(source)["error"] == "ErrorArithmetic"


def test_parse_json_of_bad_text_is_the_references_error() -> None:
    """`parse_json` evaluates the text as a map literal (`api/json.rs`): `bad` is a variable
    it does not know, at the text's own position, wherever the call stands."""
    assert error_of('let m = parse_json("bad");') == "Variable not found: bad (line 1, position 1)"
    assert caught('parse_json("bad")') == {
        "error": "ErrorVariableNotFound",
        "line": 1,
        "message": "Variable not found: bad",
        "position": 1,
        "variable": "bad",
    }


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ('let K = 10; let f = |x| x + K; eval("let K = 100;"); [f.call(5), K]', [15, 100]),
        ('let K = 10; let f = |x| x + K; K = 20; eval("let K = 100;"); [f.call(5), K]', [25, 100]),
        (
            'let K = 10; let f = |x| { K += 1; x + K }; eval("let K = 1;"); [f.call(5), f.call(5), K]',
            [16, 17, 1],
        ),
    ],
)
def test_a_closure_keeps_its_captured_variable_after_eval_declares_another(source: str, value: Any) -> None:
    assert run(source) == value


def error_with_source(source: str, name: str) -> str:
    engine = Engine()
    with pytest.raises(RhaiRuntimeError) as caught:
        engine.run(engine.compile(source, source_name=name))
    return str(caught.value)


@pytest.mark.parametrize(
    ("source", "text"),
    [
        (
            "let c = |a| a.foo();\nc.call(1)",
            "Function not found: foo (i64) @ 'lib.rhai' (line 1, position 15)\n"
            "in closure call (from 'lib.rhai') (line 2, position 3)",
        ),
        (
            'eval("x + 1")',
            "Variable not found: x @ 'lib.rhai' (line 1, position 1)\n"
            "in call to function 'eval' (from 'lib.rhai') (line 1, position 6)",
        ),
        (
            "fn f() { x }\nf()",
            "Variable not found: x @ 'lib.rhai' (line 1, position 10)\n"
            "in call to function 'f' (from 'lib.rhai') (line 2, position 1)",
        ),
    ],
)
def test_a_call_levels_error_names_the_scripts_source_as_the_references(source: str, text: str) -> None:
    """The reference's `ErrorInFunctionCall` carries the running script's source (its
    rhai-run sets the file's name): a closure's and `eval`'s level say ` (from 'src')` too,
    and the error inside `@ 'src'` (texts of /work/rhai-ref/rhai-run, Rhai 1.25.0)."""
    assert error_with_source(source, "lib.rhai") == text
    assert "from '" not in error_of(source) and "@ '" not in error_of(source)


def test_a_caught_closure_or_eval_error_holds_the_source() -> None:
    source = (
        "let c = |a| a.foo(); let r = [];"
        "try { c.call(1) } catch (e) { r.push(e.source) }"
        'try { eval("x") } catch (e) { r.push(e.source) } r'
    )
    engine = Engine()
    assert engine.run(engine.compile(source, source_name="m")) == ["m", "m"]
    assert engine.run(engine.compile(source)) == ["", ""]
