"""Hostile scripts at compile time (issue 9, items 1, 2, 6): only Rhai errors, never Python's.

A script may nest as deep as the parser's limits allow, write literals of any
length and call `exit` anywhere; compiling it either succeeds with the
reference's result or fails with a Rhai syntax error. Python's own limits
(int-string conversion, 20 statically nested blocks, 100 levels of
indentation, SyntaxWarnings) must never show through (S20, S21).
"""

from __future__ import annotations

import itertools
import math
import re
import time
import warnings

import pytest

from agentkernel.rhai import Engine, Limits, RhaiRuntimeError, RhaiSyntaxError
from agentkernel.rhai import engine as engine_module
from agentkernel.rhai.codegen import script_module
from agentkernel.rhai.runner import run_source

UNLIMITED_DEPTH = Limits(max_expr_depth=0, max_fn_expr_depth=0)


def nested(opening: str, middle: str, closing: str, depth: int) -> str:
    return opening * depth + middle + closing * depth


# -- item 1: literals ----------------------------------------------------------------------------


def test_a_decimal_literal_of_any_length_is_a_float_as_in_the_reference() -> None:
    """Rust's `i64::from_str` fails, `f64::from_str` gives inf: no Python int-string limit."""
    assert Engine().eval("1" * 5000) == math.inf
    assert Engine().eval("-" + "9" * 5000) == -math.inf
    assert Engine().eval("0" * 5000 + "7") == 7
    assert Engine().eval("1" + "_1" * 3000 + ".5") == math.inf


def test_a_hex_literal_past_64_bits_is_the_reference_syntax_error() -> None:
    with pytest.raises(RhaiSyntaxError) as raised:
        Engine().compile("let x = 0x" + "f" * 5000 + ";")
    assert raised.value.display() == f"Syntax error: Invalid number: '{'f' * 5000}' (line 1, position 9)"


# -- item 1: nesting never reaches Python's limits ----------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (nested("loop { ", "break 7;", " break 1; }", 19), 1),
        ("let r = " + nested("loop { ", "break 7;", " break; }", 19) + "; r", None),
        ("let r = 0; " + nested("while true { ", "r += 1; break;", " break; }", 19) + " r", 1),
        (nested("try { ", "1", " } catch {}", 18), None),
        ("let n = 0; " + nested("for i in 0..2 { ", "n += 1;", " }", 12) + " n", 4096),
        ("let x = 1; " + nested("do { ", "x += 1;", " } while false;", 15) + " x", 2),
    ],
)
def test_deep_loops_and_try_compile_at_the_default_limits(source: str, expected: object) -> None:
    assert Engine().eval(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("let n = 0; " + nested("loop { ", "n += 1; break;", " n += 100; break; }", 80) + " n", 7901),
        (
            "let r = (); try { "
            + nested("try { ", 'throw "x";', ' } catch (e) { throw e + "y"; }', 50)
            + " } catch (e) { r = e } r",
            "x" + "y" * 50,
        ),
        (nested("if true { ", "1", " }", 80), 1),
        ("let f = " + "|| " * 60 + "41; f" + ".call()" * 60 + " + 1", 42),
        ("let a = (); a" + "?.b" * 200, None),
        (nested("() ?? (", "5", ")", 100), 5),
        (nested("true && (", "true", ")", 100), True),
        (nested("{ ", "3", " }", 100), 3),
        (nested("`${", "1", "}`", 60), "1"),
    ],
    ids=["loops", "try", "if", "closures", "optional chain", "coalesce", "and", "blocks", "interpolation"],
)
def test_nesting_as_deep_as_the_parser_allows_compiles(source: str, expected: object) -> None:
    """With the depth limits off (the parser's hard cap of 256 levels) the compiler still copes."""
    assert Engine(limits=UNLIMITED_DEPTH).eval(source) == expected


def outcome(source: str) -> object:
    """The value, or the error's text with its position, of `source`."""
    try:
        return Engine(limits=UNLIMITED_DEPTH).eval(source, stdout=lambda _text: None)
    except RhaiRuntimeError as exc:
        return (exc.display(), exc.pos)


DEEP_CASES = {
    "scopes": ("let x = 1; ", "x += 1; let x = 100; x += 1;", " x", 2),
    "break value": ("let out = loop { ", "break 42;", " }; out", 42),
    "continue": ("let n = 0; for i in 0..5 { ", "n += i; continue;", " n = 999; } n", 10),
    "return": ("fn f(a) { ", "return a * 2;", " 0 } f(21)", 42),
    "closure": ("let y = 1; let f = 0; ", "f = |v| v + y;", " y = 10; f.call(1)", 11),
    "caught error": ("try { ", "let z = [1]; z[5]", " } catch (e) { return e.position }", None),
    "rethrow": ("try { try { throw 5 } catch { ", "throw;", " } } catch (e) { return e }", 5),
    "eval": ("let q = 1; ", 'eval("q += 1"); eval("let w = q + 1"); q = w;', " q", None),
    "uncaught": ("let x = 1;\n", "\nx.nope()", "", None),
    "exit": ("let v = 7; ", "if v > 1 { exit(v) }", " 0", 7),
}


@pytest.mark.parametrize("depth", [40, 80])  # compiled apart once, then twice over
@pytest.mark.parametrize("case", DEEP_CASES, ids=list(DEEP_CASES))
def test_deep_code_keeps_rhai_semantics(case: str, depth: int) -> None:
    """Code nested deeper than one Python function may hold (compiled apart, see nesting.py)
    behaves as the same code nested shallowly: variables, loops, returns, errors and positions."""
    before, inner, after, expected = DEEP_CASES[case]
    shallow = before + nested("if true { ", inner, " }", 2) + after
    deep = before + nested("if true { ", inner, " }", depth) + after
    parts = re.findall("^def h", Engine(limits=UNLIMITED_DEPTH).compile(deep).module.source, re.M)
    assert len(parts) >= depth // 40
    shallow_outcome, deep_outcome = outcome(shallow), outcome(deep)
    if isinstance(shallow_outcome, tuple) or case == "caught error":  # positions move with the depth
        shift = len("if true { ") * (depth - 2)
        if isinstance(shallow_outcome, tuple):
            text, pos = shallow_outcome
            line, column = pos
            moved = (line, column) if "\n" in inner else (line, column + shift)
            assert deep_outcome == (text.replace(f"position {column})", f"position {moved[1]})"), moved)
        else:
            assert deep_outcome == shallow_outcome + shift  # type: ignore[operator]
    else:
        assert deep_outcome == shallow_outcome
    if expected is not None:
        assert deep_outcome == expected


def test_deep_code_counts_operations_as_shallow_code_does() -> None:
    """Each level of `if true { }` costs the same operations, however deep the code compiles apart."""

    def operations(depth: int) -> int:
        engine = Engine(limits=Limits(max_operations=10**9, max_expr_depth=0))
        script = engine.compile(
            "let n = 0; for i in 0..10 { " + nested("if true { ", "n += i", " }", depth) + " } n"
        )
        runtime = engine.new_runtime(script)
        assert script.main(runtime, 0, None) == 45
        return runtime.operations

    counts = [operations(depth) for depth in range(2, 60, 3)]
    steps = {b - a for a, b in itertools.pairwise(counts)}
    assert len(steps) == 1, counts


# -- item 1: nothing of Python escapes compile ---------------------------------------------------


@pytest.mark.parametrize(
    "source", ["true[0]", "()[0]", "let a = ()?.x[0]; a", "let t = true; t[0]", "(1)[0]", "false.x", '"a"[0]']
)
def test_no_syntax_warning_from_generated_code(source: str) -> None:
    """`true[0]` once compiled to Python `True[0]`, which CPython warns about on stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            Engine().eval(source)
        except RhaiRuntimeError as exc:
            assert "internal error" not in exc.message


def test_an_unexpected_python_exception_at_compile_is_a_rhai_syntax_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The catch-all at the compile boundary: no traceback, a clear Rhai-style error."""

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("a bug in the code generator")

    monkeypatch.setattr(script_module, "compile_script", broken)
    with pytest.raises(RhaiSyntaxError) as raised:
        Engine().compile("1 + 1")
    assert raised.value.display() == (
        "Syntax error: the script could not be compiled"
        " (internal error: ValueError: a bug in the code generator)"
    )

    def too_deep(*args: object, **kwargs: object) -> None:
        raise RecursionError

    monkeypatch.setattr(script_module, "compile_script", too_deep)
    with pytest.raises(RhaiSyntaxError, match=r"^Syntax error: Expression exceeds maximum complexity$"):
        Engine().compile("1 + 1")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("is_def_fn([1], 1)", "Data type incorrect: array (expecting string)"),
        ("is_def_fn(#{}, 1)", "Data type incorrect: map (expecting string)"),
        ('is_def_fn("f", [1])', "Data type incorrect: array (expecting i64)"),
    ],
)
def test_no_internal_python_error_from_compiled_calls(source: str, message: str) -> None:
    with pytest.raises(RhaiRuntimeError) as raised:
        Engine().eval(source)
    assert raised.value.message == message


def test_rhai_run_exits_2_on_these_syntax_errors() -> None:
    outcome = run_source("0b" + "1" * 70)
    assert (outcome.exit_code, outcome.error) == (
        2,
        f"Syntax error: Invalid number: '{'1' * 70}' (line 1, position 1)",
    )
    assert run_source(nested("loop { ", "break 3;", " break; }", 19) + ";").exit_code == 0


# -- item 2: compile is bounded ------------------------------------------------------------------


def test_compile_stops_at_its_deadline() -> None:
    source = "let x = 1;\n" * 2000
    with pytest.raises(RhaiRuntimeError) as raised:
        Engine().compile(source, deadline=time.monotonic() - 1)
    assert (raised.value.kind, raised.value.message, raised.value.catchable) == (
        "ErrorTerminated",
        "Script terminated",
        False,
    )
    assert Engine().compile(source, deadline=time.monotonic() + 600) is not None


def test_sources_and_eval_texts_have_a_maximum_size() -> None:
    engine = Engine(max_source_size=1000)
    with pytest.raises(RhaiSyntaxError) as raised:
        engine.compile("1;" * 501)
    assert raised.value.display() == "Syntax error: Script is too large: 1,002 characters, more than 1,000"
    with pytest.raises(RhaiRuntimeError) as evaluated:
        engine.eval('let s = ""; s.pad(1001, "1"); eval(s)')
    assert evaluated.value.display().splitlines() == [
        "Syntax error: Script is too large: 1,001 characters, more than 1,000 (line 1, position 36)",
        "in call to function 'eval' (line 1, position 36)",
    ]


def test_eval_stops_at_the_callers_deadline() -> None:
    engine = Engine()
    script = engine.compile('let s = ""; s.pad(20000, "x += 1;"); eval(s)')
    runtime = engine.new_runtime(script)
    runtime.eval_hook = engine.evaluator(deadline=time.monotonic() - 1)
    with pytest.raises(RhaiRuntimeError) as raised:
        engine_module._run_main(runtime, script)
    assert (raised.value.kind, raised.value.catchable) == ("ErrorTerminated", False)


# -- item 6: exit ---------------------------------------------------------------------------------


def test_exit_ends_the_evaluation_with_its_value_from_anywhere() -> None:
    engine = Engine()
    assert engine.eval("exit(5); 6") == 5
    assert engine.eval("exit(); 6") is None
    assert engine.eval('let x = 1; eval("exit(x + 1)"); 9') == 2
    assert engine.eval("fn f() { try { exit(3) } catch { 4 } } f(); 5") == 3
    assert engine.eval("[1, 2].map(|v| exit(v * 10)); 0") == 10
