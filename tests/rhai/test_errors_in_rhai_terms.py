"""Every run-time error a script sees is in Rhai's words, never Python's (issue 9, weak spots; S20).

Each native, operator and built-in special function is called with
arguments of every type; whatever fails must fail as the reference does:
`Function not found`, `Data type incorrect`, …, with no Python exception
name or text in the message.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable
from typing import Any

import pytest

from agentkernel.rhai import Engine, Limits, RhaiError, RhaiRuntimeError
from agentkernel.rhai.runtime import ops
from agentkernel.rhai.runtime.runtime import Runtime
from agentkernel.rhai.runtime.values import Char, FnPtr, RangeVal, Timestamp
from agentkernel.rhai.stdlib import default_library

PYTHON_WORDS = re.compile(
    r"internal error:|Traceback|\b(Type|Value|Key|Index|Attribute|Overflow|ZeroDivision|Unicode\w*|Recursion"
    r"|Memory|Assertion|NotImplemented)Error\b|unhashable|NoneType|object of type|object at 0x|<function"
)
LIMITS = Limits(max_operations=100_000, max_string_size=10_000, max_array_size=10_000, max_map_size=1_000)


def values() -> list[Any]:
    """One value of each type (fresh each time: natives may change them)."""
    return [None, True, 7, -1.5, Char("a"), "abc", [1, "a"], {"a": 1}, RangeVal(1, 5), FnPtr("f"),
            Timestamp.now(), bytearray(b"ab")]  # fmt: skip


VALUE_SOURCES = ["()", "true", "7", "-1.5", "'a'", '"abc"', '[1, "a"]', "#{a: 1}", "1..5", 'Fn("f")', "|x| x",
                 "blob(2)"]  # fmt: skip


def leaks(call: Callable[[], Any]) -> str | None:
    """The message of a failure that speaks Python, if `call` fails so."""
    try:
        call()
    except RhaiRuntimeError as err:
        text = err.display()
        return text if PYTHON_WORDS.search(text) else None
    except RhaiError:
        return None
    return None


def test_natives_with_arguments_of_every_type() -> None:
    library = default_library()
    rt = Runtime(limits=LIMITS, library=library)
    found = []
    for name in sorted(library.function_names() - {"sleep"}):  # sleep(7) would really wait
        for arity in (1, 2):
            if not library.has_function(name, arity):
                continue
            for picks in itertools.product(range(len(VALUE_SOURCES)), repeat=arity):
                fresh = values()
                args = [fresh[i] for i in picks]
                text = leaks(lambda: rt.call_native(name, args))  # noqa: B023 (called at once)
                if text:
                    found.append(f"{name}{tuple(args)!r}: {text}")
    assert found == []


def test_operators_with_operands_of_every_type() -> None:
    found = []
    for (symbol, operator), (a, b) in itertools.product(
        ops.BINARY.items(), itertools.product(values(), values())
    ):
        text = leaks(lambda: operator(a, b))  # noqa: B023 (called at once)
        if text:
            found.append(f"{a!r} {symbol} {b!r}: {text}")
    assert found == []


SPECIALS = ["is_def_fn({0}, {1})", "is_def_var({0})", "Fn({0})", "call({0}, {1})", "{0}.curry({1})",
            "eval({0})", "type_of({0})", "{0}.call({1})", "let m = #{{}}; m[{0}] = {1}; m",
            "switch {0} {{ {1} => 1, _ => 2 }}", "{0} in {1}", "for x in {0} {{}}", "{0}[{1}]",
            "let v = {0}; v[{1}] = 1;"]  # fmt: skip


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # Python's, about generated code for `true[0]`
@pytest.mark.parametrize("template", SPECIALS)
def test_special_forms_with_operands_of_every_type(template: str) -> None:
    engine = Engine(limits=LIMITS)
    found = []
    for a, b in itertools.product(VALUE_SOURCES, VALUE_SOURCES):
        source = "fn f(x) { x } " + template.format(a, b)
        try:
            compiled = engine.compile(source)
        except RhaiError:
            continue  # e.g. a switch case that is not a literal: a syntax error, fine
        text = leaks(lambda: engine.run(compiled, stdout=lambda _: None))  # noqa: B023 (called at once)
        if text:
            found.append(f"{source}: {text}")
    assert found == []


def test_is_def_fn_wants_a_name_and_a_count() -> None:
    engine = Engine()
    assert engine.eval('fn f(x) { x } [is_def_fn("f", 1), is_def_fn("f", 2), is_def_fn("f", -1)]') == [
        True,
        False,
        False,
    ]
    # the reference's checks in its `is_def_fn`: a name, then a count, each where it stands
    with pytest.raises(RhaiRuntimeError, match=r"^Data type incorrect: map \(expecting string\)"):
        engine.eval("is_def_fn(#{}, 1)")
    with pytest.raises(RhaiRuntimeError, match=r"^Data type incorrect: array \(expecting i64\)"):
        engine.eval('is_def_fn("f", [1])')


def test_a_failing_native_is_a_catchable_error_without_python_in_it(caplog: pytest.LogCaptureFixture) -> None:
    engine = Engine()
    engine.register_fn("explode", lambda: 1 // 0)
    with caplog.at_level(logging.ERROR, logger="agentkernel.rhai"):
        caught = engine.eval("try { explode() } catch (e) { return e }")
    assert caught == "internal error in 'explode'"
    assert "ZeroDivisionError" in caplog.text  # the operator's log keeps the cause
