"""The public Python API of our Rhai (issue: Rhai, item 9) and its limits (RHAI.md §14)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import CodeType
from typing import Any

import pytest

from agentkernel.rhai import Engine, Limits, RhaiRuntimeError, RhaiSyntaxError
from agentkernel.rhai import engine as engine_module
from agentkernel.rhai.engine import LazyFunction
from agentkernel.rhai.runtime.values import Char
from agentkernel.rhai.stdlib import ANY


def test_eval_compile_run_and_output() -> None:
    engine = Engine()
    lines: list[str] = []
    script = engine.compile('fn add(a, b) { a + b } print("hi"); add(40, 2)')
    assert engine.run(script, stdout=lines.append) == 42
    assert engine.run(script, stdout=lines.append) == 42
    assert lines == ["hi", "hi"]
    assert engine.eval("`${1 + 1}`") == "2"


def test_call_fn_gets_a_fresh_scope_and_copies_arguments() -> None:
    engine = Engine()
    script = engine.compile("const BASE = 100; fn f(a) { a.push(1); a.len() + global::BASE }")
    data = [0]
    assert engine.call_fn(script, "f", [data]) == 102
    assert data == [0]  # arguments are values: the caller's list is untouched
    with pytest.raises(RhaiRuntimeError, match=r"Function not found: f \(\)"):
        engine.call_fn(script, "f", [])


def test_register_fn_typed_and_untyped() -> None:
    engine = Engine()
    engine.register_fn("twice", lambda x: x * 2, [int])
    engine.register_fn("describe", lambda v: f"got {type(v).__name__}")
    assert engine.eval("twice(21)") == 42
    assert engine.eval("21.twice()") == 42
    assert engine.eval("describe('c')") == "got Char"
    with pytest.raises(
        RhaiRuntimeError, match=r"Function not found: twice \(&str \| ImmutableString \| String\)"
    ):
        engine.eval('twice("x")')
    assert ANY is not None


def test_values_are_native_python() -> None:
    value = Engine().eval("#{ list: [1, 2.5, \"s\", 'c', (), true], range: 1..3 }")
    assert value["list"] == [1, 2.5, "s", "c", None, True]
    assert type(value["list"][3]) is Char
    assert value["range"].as_range() == range(1, 3)


def test_syntax_and_runtime_errors_carry_reference_texts() -> None:
    with pytest.raises(RhaiSyntaxError) as syntax:
        Engine().compile("let x = ;")
    assert syntax.value.display() == "Syntax error: Unexpected ';' (line 1, position 9)"
    with pytest.raises(RhaiRuntimeError) as runtime:
        Engine().eval("fn f() { g() } fn g() { nope() } f()")
    assert runtime.value.kind == "ErrorInFunctionCall"
    assert runtime.value.display() == (
        "Function not found: nope () (line 1, position 25)\n"
        "in call to function 'g' (line 1, position 10)\n"
        "in call to function 'f' (line 1, position 34)"
    )


@pytest.mark.parametrize(
    ("limits", "source", "message"),
    [
        (Limits(max_operations=50), "let x = 0; loop { x += 1; }", "Too many operations"),
        (Limits(max_call_levels=5), "f(0)", "Stack overflow"),
        (Limits(max_string_size=10), 'let s = "abc"; loop { s += s; }', "Length of string too large"),
        (Limits(max_array_size=10), "let a = []; loop { a.push(1); }", "Size of array/BLOB too large"),
        (
            Limits(max_map_size=3),
            "let m = #{}; let i = 0; loop { m[`k${i}`] = i; i += 1; }",
            "Size of object map",
        ),
        # a `print` that the `try` cannot drop: a body of `let`s of constants cannot fail, and
        # the reference's optimizer (so ours) drops such a `try` whole
        (Limits(max_variables=2), "let a = 1; let b = 2; let c = 3; print(c);", "Too many variables defined"),
    ],
)
def test_limits_stop_scripts_and_cannot_be_caught(limits: Limits, source: str, message: str) -> None:
    wrapped = f"fn f(n) {{ f(n + 1) }} try {{ {source} }} catch {{ 0 }}"
    with pytest.raises(RhaiRuntimeError, match=message) as caught:
        Engine(limits=limits).eval(wrapped)
    assert caught.value.catchable is False


def test_operation_counting_is_deterministic() -> None:
    source = "fn fib(n) { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } } fib(15)"
    counts = []
    for _ in range(3):
        engine = Engine(limits=Limits(max_operations=10**9))
        script = engine.compile(source)
        runtime = engine.new_runtime(script)
        script.main(runtime, 0, None)
        counts.append(runtime.operations)
    assert len(set(counts)) == 1 and counts[0] > 1000


def test_callbacks_do_not_eat_call_levels() -> None:
    # natives calling closures must not nest deeper with every item
    assert (
        Engine().eval("let a = []; for i in 0..500 { a.push(i) } a.map(|x| x + 1).filter(|x| x > 1).len()")
        == 499
    )


def test_closures_capture_by_reference_and_loops_share_or_not() -> None:
    engine = Engine()
    assert engine.eval("let y = 10; let f = |x| x + y; y = 100; f.call(1)") == 101
    assert engine.eval("let fs = []; for i in 0..3 { fs.push(|| i) } fs.map(|f| f.call())") == [2, 2, 2]
    assert engine.eval("let fs = []; for i in 0..3 { let j = i; fs.push(|| j) } fs.map(|f| f.call())") == [
        0,
        1,
        2,
    ]


def test_deep_python_recursion_is_a_rhai_error() -> None:
    with pytest.raises(RhaiRuntimeError, match="Stack overflow"):
        Engine(limits=Limits(max_call_levels=100_000)).eval("fn f(n) { f(n + 1) } f(0)")


def test_any_python_error_of_a_registered_function_is_catchable() -> None:
    engine = Engine()

    def broken() -> None:
        raise OSError("disk on fire")

    engine.register_fn("broken", broken)
    assert (
        engine.eval("try { broken() } catch (e) { return e }") == "internal error in 'broken'"
    )  # Python's words go to the log


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize(
    "source",
    [
        "stop()",
        "fn f() { stop() } f()",  # through a script function's error handler
        "try { stop() } catch (e) { 1 }",  # no `catch` sees it
        "[1].map(|x| stop())",  # through a native calling back
        "fn f() { if true { if true { stop() } } } f()",
    ],
)
def test_ctrl_c_and_system_exit_pass_through_unchanged(stop: type[BaseException], source: str) -> None:
    """Issue 10: Ctrl-C in a native was `Runtime error: KeyboardInterrupt`; it is the host's."""
    raised = stop()
    engine = Engine()

    def halt() -> None:
        raise raised

    engine.register_fn("stop", halt)
    with pytest.raises(stop) as caught:
        engine.eval(source)
    assert caught.value is raised
    script = engine.compile("fn g() { stop() }")
    with pytest.raises(stop) as caught:
        engine.call_fn(script, "g", [])
    assert caught.value is raised


LIBRARY = """
fn double(x) { x * 2 }
fn quadruple(x) { double(double(x)) }
fn unused() { 1 }
fn int.plus(y) { this + y }
fn broken(items) {
    let n = items.len();
    n - "a"
}
"""


def test_a_function_is_compiled_on_its_first_call_and_then_called_directly() -> None:
    engine = Engine()
    script = engine.compile(LIBRARY + "quadruple(5) + 3.plus(1)")
    assert all(isinstance(fn.body, LazyFunction) for fn in script.functions.values())
    assert isinstance(script.methods[("plus", 1, "i64")].body, LazyFunction)
    assert engine.run(script) == 24
    called = [("double", 1), ("quadruple", 1)]
    assert not any(isinstance(script.functions[key].body, LazyFunction) for key in called)
    assert script.namespace["f_double_1"] is script.functions[("double", 1)].body
    assert not isinstance(script.methods[("plus", 1, "i64")].body, LazyFunction)
    assert isinstance(script.functions[("unused", 0)].body, LazyFunction)  # never called: never compiled
    assert engine.call_fn(script, "unused", []) == 1


def test_an_error_in_a_function_compiled_late_has_its_line_in_the_whole_script() -> None:
    engine = Engine()
    script = engine.compile(LIBRARY + "broken([1])")
    with pytest.raises(RhaiRuntimeError, match=r"\(line 8, position 7\)\nin call to function 'broken'"):
        engine.run(script)
    with pytest.raises(RhaiRuntimeError, match=r"\(line 8, position 7\)"):
        engine.call_fn(script, "broken", [[1, 2]], run_top_level=False)


def test_threads_calling_a_function_first_at_once_compile_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine()
    script = engine.compile(LIBRARY)
    compiles: list[str] = []
    compile_part = engine_module._compiled

    def counted(part: str, filename: str, first_line: int) -> CodeType:
        compiles.append(part[:12])
        return compile_part(part, filename, first_line)

    monkeypatch.setattr(engine_module, "_compiled", counted)
    start = threading.Barrier(8)

    def call() -> Any:
        start.wait()
        return engine.call_fn(script, "quadruple", [3], run_top_level=False)

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(lambda _: call(), range(8))) == [12] * 8
    assert sorted(compiles) == ["def f_double", "def f_quadru"]
