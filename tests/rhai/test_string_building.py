"""Building a string with `+=` is linear, the limits stay exact (issue 14 section 1).

CPython grows a string in place only when `s += x` runs on the variable
itself and nothing else refers to the string; `rt.compound(op, s, x)`
holds a second reference, so each append copied the whole string
(quadratic). The compiler now emits Python's own `+=` on a local string.
Its shape is asserted here; its speed is benchmarks/rhai's, never a test's.
"""

from __future__ import annotations

import pytest

from agentkernel.scripting.rhai import Engine, Limits, RhaiRuntimeError
from agentkernel.scripting.rhai.compile_clock import CompileClock
from agentkernel.scripting.rhai.parse_support import ParseOptions
from agentkernel.scripting.rhai.parser import parse
from agentkernel.scripting.rhai.script_module import compile_script

BUILD = 'let s = ""; let n = 0; for i in 0..N { s += "ab"; n += 1; } s'


def generated(source: str) -> str:
    return compile_script(parse(source, ParseOptions(), CompileClock(None))).source


def test_a_local_string_is_appended_to_by_pythons_own_plus_equals() -> None:
    code = generated(BUILD.replace("N", "10"))
    assert "v1_s += K[" in code  # on the variable itself: CPython extends the string in place
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
