"""The standard library (`rhai/stdlib/`), called directly with Python values.

Each case is one of the reference's recorded results (mostly
`rhai-conformance/stdlib.jsonl`, some `cases.jsonl`), translated from Rhai
source into a direct call: `"abc".len()` becomes `call("len", "abc")`.
Results compare as `<type_of>: <to_string>`, errors by their message
(positions are the runtime's business). Callbacks run through `FakeContext`,
a test double of the interpreter seam (see `tests/rhai/fakes.py`).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from agentkernel.rhai.engine import Engine
from agentkernel.rhai.errors import RhaiRuntimeError
from agentkernel.rhai.runtime import failures, ops
from agentkernel.rhai.runtime.context import NativeContext
from agentkernel.rhai.runtime.printing import to_debug, to_string
from agentkernel.rhai.runtime.values import Char, FnPtr, IterVal, Timestamp, type_name
from agentkernel.rhai.stdlib import ANY, Library, build_library, default_library
from tests.rhai.fakes import LIB, FakeContext, S, ThisCell, call, closure, error, ir, method, r, show


def test_fake_context_satisfies_the_protocol() -> None:
    ctx: NativeContext = FakeContext()
    assert ctx.limits.max_string_size == 0


def test_resolution_is_by_exact_type() -> None:
    assert LIB.resolve("len", ["abc"]) is not None
    assert LIB.resolve("len", [5]) is None
    assert LIB.resolve("is_odd", [True]) is None  # a bool is not an i64
    assert LIB.resolve("bytes", [Char("a")]) is None  # a char is not a string
    assert LIB.resolve("range", [r(1, 10), 2]) is not None
    assert LIB.resolve("range", [ir(1, 10), 2]) is None  # only an exclusive range takes a step
    assert LIB.resolve("index_of", [[1], FnPtr("f")]).params[1] is FnPtr  # type: ignore[union-attr]


def test_function_not_found_texts() -> None:
    ctx = FakeContext()
    assert error(lambda: LIB.call(ctx, "len", [5])) == "Function not found: len (i64)"
    assert error(lambda: LIB.call(ctx, "nope", [])) == "Function not found: nope ()"
    signature = f"foo (i64, f64, bool, {S}, (), array, map, char, Fn, range, range=, timestamp)"
    args = [1, 1.5, True, "s", None, [1], {}, Char("c"), FnPtr("x"), r(1, 2), ir(1, 2), Timestamp(0.0)]
    with pytest.raises(RhaiRuntimeError) as info:
        LIB.call(ctx, "foo", args)
    assert info.value.message == f"Function not found: {signature}"
    assert info.value.extras == {"function": signature}


def test_register_resolve_and_wildcards() -> None:
    lib = Library()
    lib.register("f", (int, int), lambda a, b: "ints")
    lib.register("g", (ANY, ANY), lambda a, b: "any-any")
    lib.register("g", (int, ANY), lambda a, b: "int-any")
    ctx = FakeContext()
    assert lib.call(ctx, "f", [1, 2]) == "ints"
    assert lib.call(ctx, "g", [1, "x"]) == "int-any"
    assert lib.call(ctx, "g", ["x", 1]) == "any-any"
    assert lib.has_function("g", 2) and not lib.has_function("g", 1)
    assert error(lambda: lib.call(ctx, "f", [1, "x"])) == f"Function not found: f (i64, {S})"


def test_python_failures_inside_natives_become_rhai_errors() -> None:
    lib = Library()
    lib.register("boom", (), lambda: 1 // 0)
    with pytest.raises(RhaiRuntimeError) as info:
        lib.call(FakeContext(), "boom", [])
    assert info.value.kind == "ErrorRuntime"


def _purity(name: str, args: list[Any]) -> bool:
    native = LIB.resolve(name, args)
    assert native is not None, name
    return native.pure


def test_purity_flags() -> None:
    changing: list[tuple[str, list[Any]]] = [
        ("push", [[], 1]),
        ("trim", ["x"]),
        ("set_bit", [1, 1, True]),
        ("make_upper", [Char("a")]),
        ("take", [1]),
        ("mixin", [{}, {}]),
        ("for_each", [[], FnPtr("f")]),
        ("get", [[1], 0]),  # the reference marks array `get` non-pure
    ]
    reading: list[tuple[str, list[Any]]] = [
        ("len", ["x"]),
        ("map", [[], FnPtr("f")]),
        ("keys", [{}]),
        ("get", [{}, "a"]),
    ]
    assert [_purity(name, args) for name, args in changing] == [False] * len(changing)
    assert [_purity(name, args) for name, args in reading] == [True] * len(reading)


def test_default_library_is_a_copy_to_extend() -> None:
    mine, other = default_library(), default_library()
    assert mine is not other and build_library() is not LIB
    mine.register_python("double", lambda x: x * 2, (int,))
    mine.register_python("count_args", lambda *args: len(args))
    ctx = FakeContext()
    assert mine.call(ctx, "double", [21]) == 42
    assert mine.call(ctx, "count_args", [1, "a", None]) == 3 and mine.has_function("count_args", 7)
    assert mine.call(ctx, "len", ["abc"]) == 3  # typed overloads still win
    assert other.resolve("double", [1]) is None and not other.has_function("count_args", 0)


# -- strings ---------------------------------------------------------------------------------------


def test_string_reading() -> None:
    assert call("len", "") == 0
    assert call("len", "héllo") == 5
    assert call("bytes", "abc") == 3 and call("bytes", "héllo") == 6
    assert error(lambda: call("bytes", Char("a"))) == "Function not found: bytes (char)"
    assert call("is_empty", " ") is False
    assert call("contains", "hello", "ell") and call("contains", "hello", "")
    assert call("contains", "hello", Char("h"))
    assert call("starts_with", "x", "") and call("starts_with", "hello", "he")
    assert call("ends_with", "filename.rhai", ".rhai") and not call("ends_with", "filename.rhai", "RHAI")
    assert call("ends_with", "abc", "") and call("ends_with", "abc", Char("c"))
    assert show(call("get", "hello", 1)) == "char: e"
    assert call("get", "héllo", 5) is None and call("get", "hello", 10) is None
    assert show(call("get", "hello", -1)) == "char: o"
    assert error(lambda: call("get", 42, 0)) == "Function not found: get (i64, i64)"


def test_string_searching() -> None:
    assert call("index_of", "hello", Char("o")) == 4
    assert call("index_of", "hello", "l") == 2
    assert call("index_of", "hello", Char("l")) == 2
    assert call("index_of", "hello", "l", 3) == 3
    assert call("index_of", "hello", "l", -2) == 3
    assert call("index_of", "hello", "l", 9) == -1
    assert call("index_of", "hello", "z") == -1
    assert call("index_of", "", "") == -1
    assert error(lambda: call("index_of", "abc", 1)) == f"Function not found: index_of ({S}, i64)"


def test_sub_string() -> None:
    assert call("sub_string", "hello world", 6) == "world"
    assert call("sub_string", "hello world", -5) == "world"
    assert call("sub_string", "hello", 1, 3) == "ell"
    assert call("sub_string", "hello", 1) == "ello"
    assert call("sub_string", "hello", -3) == "llo"
    assert call("sub_string", "hello", r(1, 3)) == "el"
    assert call("sub_string", "hello", ir(1, 3)) == "ell"
    assert call("sub_string", "hello", 10) == ""
    assert call("sub_string", "hello", 2, -1) == ""
    assert call("sub_string", "hello", -10, 2) == "he"


def test_case_mapping() -> None:
    assert call("to_upper", "ßtraße") == "SSTRASSE"
    assert show(call("to_upper", Char("ß"))) == "char: ß"
    assert error(lambda: call("to_upper", [1])) == "Function not found: to_upper (array)"
    assert error(lambda: call("to_lower", 65)) == "Function not found: to_lower (i64)"
    assert method("make_lower", "HeLLo WORLD") == ("hello world", None)
    assert method("make_lower", "ÀÉÎ")[0] == "àéî"
    assert method("make_upper", "straße")[0] == "STRASSE"
    assert show(method("make_upper", Char("ß"))[0]) == "char: ß"
    assert show(method("make_lower", Char("1"))[0]) == "char: 1"
    assert show(method("make_upper", Char("a"))[0]) == "char: A"
    assert error(lambda: call("make_lower", 5)) == "Function not found: make_lower (i64)"


def test_string_changes_come_back_as_mutated() -> None:
    assert method("trim", "  padded \t\n") == ("padded", None)
    assert error(lambda: call("trim", 5)) == "Function not found: trim (i64)"
    assert method("trim", "\x1cx") == ("\x1cx", None)  # not Rust whitespace
    assert method("clear", "text") == ("", None)
    assert method("truncate", "abc", -3)[0] == ""
    assert method("truncate", "hello", 2)[0] == "he"
    assert error(lambda: call("truncate", 12, 1)) == "Function not found: truncate (i64, i64)"
    assert method("crop", "abcdef", r(2, 4))[0] == "cd"
    assert method("crop", "abcdef", ir(2, 4))[0] == "cde"
    assert method("crop", "abcdef", 1, 3)[0] == "bcd"
    assert method("crop", "hello", 2)[0] == "llo"
    assert method("crop", "hello", 1, 3)[0] == "ell"
    assert method("crop", "hello", 9)[0] == ""
    assert method("remove", "abc", Char("c"))[0] == "ab"
    assert method("remove", "banana", "an")[0] == "ba"
    assert error(lambda: call("remove", "banana", 1)) == f"Function not found: remove ({S}, i64)"
    assert method("replace", "a-b-c", Char("-"), Char("+"))[0] == "a+b+c"
    assert method("replace", "abc", "", "-")[0] == "-a-b-c-"
    assert method("replace", "hello", "l", "L")[0] == "heLLo"
    assert method("replace", "hello", Char("l"), "LL")[0] == "heLLLLo"
    assert method("pop", "ab") == ("a", Char("b"))
    assert method("pop", "") == ("", None)
    assert method("pop", "héllo", 3) == ("hé", "llo")
    assert method("pop", "ab", 5) == ("", "ab")
    assert method("set", "abc", 10, Char("X"))[0] == "abc"
    assert method("set", "abc", -1, Char("X"))[0] == "abX"
    assert method("append", "x", [1, 2])[0] == "x[1, 2]"
    assert method("append", "abc", "d")[0] == "abcd"
    assert method("append", "a", bytearray(b"hi"))[0] == "ahi"
    assert error(lambda: call("chop", "abc", 1)) == f"Function not found: chop ({S}, i64)"
    assert error(lambda: call("push", "x", Char("y"))) == f"Function not found: push ({S}, char)"
    assert error(lambda: call("insert", "abc", 1, Char("x"))) == (
        f"Function not found: insert ({S}, i64, char)"
    )
    assert error(lambda: call("reverse", "abc")) == f"Function not found: reverse ({S})"
    assert error(lambda: call("shift", "abc")) == f"Function not found: shift ({S})"


def test_string_pad() -> None:
    assert method("pad", "hello", 8, "*")[0] == "hello***"
    assert method("pad", "hello", 8, Char("*"))[0] == "hello***"
    assert method("pad", "ab", 7, "xyz")[0] == "abxyzxy"
    assert method("pad", "hello", 3, "*")[0] == "hello"
    assert method("pad", "x", 5, "")[0] == "x"  # the reference never returns here
    ctx = FakeContext(max_string_size=5)
    assert error(lambda: call("pad", "x", 6, "*", ctx=ctx)) == "Length of string too large"
    assert error(lambda: call("pad", "x", 10**18, "*")) == "Length of string too large"


def test_split() -> None:
    assert call("split", "x  y\tz") == ["x", "y", "z"]
    assert call("split", "  a\tb\nc ") == ["a", "b", "c"]
    assert call("split", "") == [""]
    assert call("split", "a,b,,c", Char(",")) == ["a", "b", "", "c"]
    assert call("split", "a,b,c", ",", 2) == ["a", "b,c"]
    assert call("split", "abc", 1) == ["a", "bc"]
    assert call("split", "abc", -1) == ["ab", "c"]
    assert call("split", "abc", 0) == ["abc", ""]
    assert call("split", "ab", "") == ["", "a", "b", ""]
    assert call("split", "abc", "", 2) == ["", "abc"]
    assert call("split", "abc", "z") == ["abc"]
    assert call("split_rev", "a,b,c", Char(",")) == ["c", "b", "a"]
    assert call("split_rev", "one::two::three", "::", 2) == ["three", "one::two"]
    assert call("split_rev", "a b", " ", 1) == ["a b"]
    assert call("split_rev", "a-b-c", "-") == ["c", "b", "a"]
    assert call("split_rev", "abc", "", 2) == ["", "abc"]
    assert error(lambda: call("split_rev", "abc", 1)) == f"Function not found: split_rev ({S}, i64)"


def test_chars_and_conversions_of_strings() -> None:
    assert list(call("chars", "abcdef", 3)) == ["d", "e", "f"]
    assert list(call("chars", "abcdef", 2, 2)) == ["c", "d"]
    assert list(call("chars", "abcdef", -2)) == ["e", "f"]
    assert list(call("chars", "abcdef", r(1, 3))) == ["b", "c"]
    assert list(call("chars", "abcdef", ir(1, 3))) == ["b", "c", "d"]
    stream = call("chars", "hello")
    assert show(stream) == "range: rhai::packages::iter_basic::CharsStream"
    assert list(stream) == list(stream) == ["h", "e", "l", "l", "o"]  # each `for` walks afresh
    assert all(type(c) is Char for c in stream)
    assert error(lambda: call("chars", 12)) == "Function not found: chars (i64)"
    assert call("to_chars", "") == [] and len(call("to_chars", "a b")) == 3
    assert call("to_blob", "") == bytearray() and len(call("to_blob", "abc")) == 3
    assert error(lambda: call("to_blob", 12)) == "Function not found: to_blob (i64)"
    assert show(call("min", Char("x"), Char("c"))) == "char: c"
    assert call("max", "a", "b") == "b"


# -- conversions -----------------------------------------------------------------------------------


def test_parse_int() -> None:
    assert call("parse_int", "123") == 123
    assert call("parse_int", "-0042") == -42
    assert call("parse_int", " 42") == 42
    assert call("parse_int", "+5") == 5
    assert call("parse_int", "7fFf", 16) == 32767
    assert call("parse_int", "101", 2) == 5
    assert call("parse_int", "-9223372036854775808") == -(2**63)
    bad = "Error parsing integer number"
    assert error(lambda: call("parse_int", "4x")) == f"{bad} '4x': invalid digit found in string"
    assert error(lambda: call("parse_int", "1_000")) == f"{bad} '1_000': invalid digit found in string"
    assert error(lambda: call("parse_int", "0x10")) == f"{bad} '0x10': invalid digit found in string"
    assert error(lambda: call("parse_int", "-")) == f"{bad} '-': invalid digit found in string"
    assert error(lambda: call("parse_int", "")) == f"{bad} '': cannot parse integer from empty string"
    assert error(lambda: call("parse_int", "9223372036854775808")) == (
        f"{bad} '9223372036854775808': number too large to fit in target type"
    )
    assert error(lambda: call("parse_int", "-" + "9" * 5000)).endswith(
        "number too small to fit in target type"
    )
    assert error(lambda: call("parse_int", "١٢")) == f"{bad} '١٢': invalid digit found in string"
    assert error(lambda: call("parse_int", "1", 1)) == "Invalid radix: '1'"
    with pytest.raises(RhaiRuntimeError) as info:
        call("parse_int", "x")
    assert info.value.kind == "ErrorArithmetic"


def test_parse_float() -> None:
    assert call("parse_float", "  -1.5e-3  ") == -0.0015
    assert call("parse_float", " 2.5 ") == 2.5
    assert call("parse_float", "1e3") == 1000.0
    assert call("parse_float", "inf") == math.inf
    assert math.isnan(call("parse_float", "NaN"))
    assert call("parse_float", ".5") == 0.5 and call("parse_float", "5.") == 5.0
    bad = "Error parsing floating-point number"
    assert error(lambda: call("parse_float", "")) == f"{bad} '': cannot parse float from empty string"
    assert error(lambda: call("parse_float", "x")) == f"{bad} 'x': invalid float literal"
    assert error(lambda: call("parse_float", "1_0")) == f"{bad} '1_0': invalid float literal"
    assert error(lambda: call("parse_float", 1.5)) == "Function not found: parse_float (f64)"


def test_to_int_to_float_to_string() -> None:
    assert call("to_int", 42) == 42 and call("to_int", 3.99) == 3 and call("to_int", -3.7) == -3
    assert call("to_int", Char("A")) == 65
    assert call("to_int", math.nan) == 0
    assert error(lambda: call("to_int", 1e30)) == "Integer overflow: to_int(1000000000000000000000000000000)"
    assert error(lambda: call("to_int", math.inf)) == "Integer overflow: to_int(inf)"
    assert error(lambda: call("to_int", "12")) == f"Function not found: to_int ({S})"
    assert error(lambda: call("to_int", True)) == "Function not found: to_int (bool)"
    assert show(call("to_float", 7)) == "f64: 7.0" and call("to_float", 2.5) == 2.5
    assert call("to_string", 1e100) == "1e100"
    assert call("to_string", "s") == "s"
    assert call("to_string", -0.0) == "0.0"
    assert call("to_string", -42) == "-42"
    assert call("to_string", None) == ""
    assert call("to_debug", [1, "two", Char("3")]) == '[1, "two", 3]'
    assert call("to_debug", FnPtr("abs")) == "Fn(abs)"
    assert call("to_debug", 123456789012345678.0) == "1.2345678901234568e17"
    assert call("to_debug", False) == "false"
    assert call("to_debug", bytearray([16, 16])) == "[1010]"
    assert call("to_debug", "a\tb") == '"a\\tb"'
    assert call("to_debug", None) == "()"
    assert error(lambda: call("to_char", 65)) == "Function not found: to_char (i64)"


def test_float_display_forms() -> None:
    assert to_debug(1e15) == "1000000000000000.0"
    assert to_string(1e15) == "1e15"
    assert to_debug(1e-7) == "1e-7" and to_string(1e-7) == "0.0000001"
    assert to_string([1e15, Char("c")]) == "[1000000000000000.0, c]"
    assert to_string(bytearray(range(10))) == "[0001020304050607 0809]"


# -- math ------------------------------------------------------------------------------------------


FLOAT_RESULTS = [
    ("E", (), 5.43656365691809 / 2),
    ("PI", (), 3.141592653589793),
    ("acos", (1.0,), 0.0),
    ("acosh", (1.0,), 0.0),
    ("asin", (1.0,), 1.5707963267948966),
    ("asinh", (0.0,), 0.0),
    ("asinh", (1.0,), 0.881373587019543),
    ("asinh", (-3.0,), -1.8184464592320668),
    ("atan", (0.0,), 0.0),
    ("atan", (1.0, 1.0), 0.7853981633974483),
    ("atanh", (0.5,), 0.5493061443340548),
    ("atanh", (0.0,), 0.0),
    ("ceiling", (1.1,), 2.0),
    ("ceiling", (-1.1,), -1.0),
    ("ceiling", (2.0,), 2.0),
    ("cos", (-0.0,), 1.0),
    ("cos", (math.pi,), -1.0),
    ("cosh", (1.0,), 1.5430806348152437),
    ("exp", (0.0,), 1.0),
    ("exp", (1.0,), 2.718281828459045),
    ("floor", (-0.0,), 0.0),
    ("floor", (2.5,), 2.0),
    ("floor", (3.7,), 3.0),
    ("fraction", (1.125,), 0.125),
    ("int", (-8.75,), -8.0),
    ("hypot", (-5.0, 12.0), 13.0),
    ("hypot", (0.0, 0.0), 0.0),
    ("ln", (math.e,), 1.0),
    ("log", (1000.0,), 3.0),
    ("log", (0.001,), -3.0),
    ("log", (100.0,), 2.0),
    ("log", (1024.0, 2.0), 10.0),
    ("log", (8.0, 2.0), 3.0),
    ("round", (1.5,), 2.0),
    ("round", (-1.5,), -2.0),
    ("round", (2.5,), 3.0),
    ("round", (0.49999999999999994,), 0.0),
    ("sin", (math.pi / 2,), 1.0),
    ("sin", (-1.0,), -0.8414709848078965),
    ("sin", (math.pi,), 1.2246467991473532e-16),
    ("sinh", (0.0,), 0.0),
    ("sinh", (1.0,), 1.1752011936438014),
    ("sinh", (-1.0,), -1.1752011936438014),
    ("sqrt", (16.0,), 4.0),
    ("tan", (0.0,), 0.0),
    ("tan", (-1.0,), -1.5574077246549023),
    ("tanh", (0.0,), 0.0),
    ("tanh", (100.0,), 1.0),
    ("to_degrees", (math.pi,), 180.0),
    ("to_degrees", (1.0,), 57.29577951308232),
    ("to_degrees", (0.0,), 0.0),
    ("to_radians", (180.0,), 3.141592653589793),
    ("abs", (-5.5,), 5.5),
    ("min", (1.5, 2), 1.5),
    ("max", (1, 2.5), 2.5),
]


@pytest.mark.parametrize(("name", "args", "expected"), FLOAT_RESULTS)
def test_float_functions(name: str, args: tuple[Any, ...], expected: float) -> None:
    got = call(name, *args)
    assert type(got) is float and got == expected, (got, expected)


def test_float_functions_return_nan_and_inf_like_rust() -> None:
    for name, arg in [
        ("acos", 2.0),
        ("asin", -1.5),
        ("sqrt", -4.0),
        ("atanh", 2.0),
        ("acosh", 0.5),
        ("sin", math.inf),
    ]:
        assert math.isnan(call(name, arg)), name
    assert call("ln", 0.0) == -math.inf and math.isnan(call("ln", -1.0))
    assert call("exp", 1000.0) == math.inf
    assert call("sinh", -1000.0) == -math.inf and call("cosh", 1000.0) == math.inf
    assert call("atanh", 1.0) == math.inf
    assert call("floor", math.inf) == math.inf and math.isnan(call("fraction", math.inf))
    assert math.copysign(1, call("ceiling", -0.3)) == -1.0
    assert to_string(call("E") * 2.0) == "5.43656365691809"


def test_float_only_functions_refuse_ints() -> None:
    for name in ["ceiling", "cos", "cosh", "exp", "is_nan", "ln", "round", "sin", "sinh", "sqrt", "tan"]:
        assert LIB.resolve(name, [1]) is None and LIB.resolve(name, [1.0]) is not None, name
    assert error(lambda: call("int", 4)) == "Function not found: int (i64)"
    assert error(lambda: call("hypot", 3, 4)) == "Function not found: hypot (i64, i64)"
    assert error(lambda: call("log", 10.0, 10)) == "Function not found: log (f64, i64)"
    assert error(lambda: call("round", 2.567, 1)) == "Function not found: round (f64, i64)"
    assert error(lambda: call("to_degrees", 1)) == "Function not found: to_degrees (i64)"


def test_number_predicates_and_signs() -> None:
    assert call("is_odd", 7) and call("is_odd", -7) and not call("is_odd", 0)
    assert call("is_odd", 2**63 - 1) and not call("is_even", -3)
    assert error(lambda: call("is_even", 2.0)) == "Function not found: is_even (f64)"
    assert call("is_zero", -0.0) and call("is_zero", 0) and not call("is_zero", 3)
    assert error(lambda: call("is_zero", "")) == f"Function not found: is_zero ({S})"
    assert call("is_finite", -123.5) and not call("is_finite", math.inf) and not call("is_finite", math.nan)
    assert call("is_infinite", -math.inf) and not call("is_nan", 1.0)
    assert call("sign", 0) == 0 and call("sign", -5) == -1 and call("sign", -2.5) == -1
    assert error(lambda: call("sign", math.nan)) == "Sign of NaN is undefined"
    assert error(lambda: call("sign", "-1")) == f"Function not found: sign ({S})"
    assert call("abs", -5) == 5
    assert error(lambda: call("abs", -(2**63))) == "Negation overflow: --9223372036854775808"
    assert error(lambda: call("abs", "x")) == f"Function not found: abs ({S})"
    assert call("min", 3, 9) == 3 and call("max", 3, 9) == 9 and call("max", 10, 3) == 10
    assert error(lambda: call("max", True, False)) == "Function not found: max (bool, bool)"
    assert error(lambda: call("max", [1, 2])) == "Function not found: max (array)"


# -- bits ------------------------------------------------------------------------------------------


def test_bit_functions() -> None:
    assert call("get_bit", 0b1010, 1) is True
    assert (
        error(lambda: call("get_bit", 1, -65))
        == "Bit-field index -65 out of bounds: only 64 bits in bit-field"
    )
    assert call("get_bit", -(2**63), -1) is True
    assert call("get_bits", 0b110110, 1, 3) == 3
    assert call("get_bits", 0b1010, 1, 2) == 1
    assert call("get_bits", -1, 0, 64) == -1
    assert call("get_bits", -1, 60, 10) == 15
    assert call("get_bits", 0x12345678, r(4, 12)) == 0x67
    assert error(lambda: call("get_bits", 1, ir(0, 64))) == (
        "Bit-field index 64 out of bounds: only 64 bits in bit-field"
    )
    assert error(lambda: call("get_bits", "x", 0, 1)) == f"Function not found: get_bits ({S}, i64, i64)"
    assert method("set_bit", 0, 3, True) == (8, None)
    assert method("set_bit", 15, 0, False)[0] == 14
    assert method("set_bit", 0b1010, 0, True)[0] == 11
    assert method("set_bit", 0, 63, True)[0] == -(2**63)
    assert (
        error(lambda: call("set_bit", 0, 64, True))
        == "Bit-field index 64 out of bounds: only 64 bits in bit-field"
    )
    assert error(lambda: call("set_bit", 0, 1, 1)) == "Function not found: set_bit (i64, i64, i64)"
    assert method("set_bits", 0, 4, 4, 0xF)[0] == 240
    assert method("set_bits", 0, r(0, 8), 0x1FF)[0] == 255
    assert method("set_bits", 0, 0, 64, -5)[0] == -5
    assert method("set_bits", 0, 60, 8, 0xFF)[0] == -(2**63) + 2**62 + 2**61 + 2**60
    assert error(lambda: call("set_bits", 0, 0, 4, "1")) == (
        f"Function not found: set_bits (i64, i64, i64, {S})"
    )


def test_bit_iterators() -> None:
    assert len(list(call("bits", 10))) == 64
    assert list(call("bits", 0b1101, r(0, 4))) == [True, False, True, True]
    assert list(call("bits", 0b1101, 2)) == [True, True] + [False] * 60
    assert list(call("bits", 0b1101, 1, 2)) == [False, True]
    assert list(call("bits", -1, ir(62, 70))) == [True, True]
    assert show(call("bits", 1)) == "range: rhai::packages::iter_basic::BitRange"
    assert error(lambda: call("bits", "x")) == f"Function not found: bits ({S})"
    assert error(lambda: call("bits", 1, 64)) == "Bit-field index 64 out of bounds: only 64 bits in bit-field"


def test_hex_octal_binary() -> None:
    assert call("to_hex", 255) == "ff" and call("to_hex", -1) == "ffffffffffffffff"
    assert call("to_octal", 64) == "100" and call("to_octal", 511) == "777" and call("to_octal", 0) == "0"
    assert (
        call("to_binary", 0) == "0" and call("to_binary", 255) == "11111111" and call("to_binary", 5) == "101"
    )
    assert error(lambda: call("to_hex", 10.0)) == "Function not found: to_hex (f64)"


# -- ranges and time -------------------------------------------------------------------------------


def test_range_function_and_steps() -> None:
    assert show(call("range", 0, 5)) == "range: 0..5"
    assert list(call("range", 0, 10, 3)) == [0, 3, 6, 9]
    assert list(call("range", 5, 0, -2)) == [5, 3, 1]
    assert list(call("range", 0, 5, -1)) == []
    assert list(call("range", r(0, 10), 4)) == [0, 4, 8]
    assert list(call("range", 0.0, 1.0, 0.25)) == [0.0, 0.25, 0.5, 0.75]
    assert list(call("range", 2**63 - 3, 2**63 - 1, 5)) == []
    assert show(call("range", 0, 9, 3)) == "range: rhai::packages::iter_basic::StepRange<i64>"
    with pytest.raises(RhaiRuntimeError) as info:
        call("range", 0, 10, 0)
    assert info.value.kind == "ErrorInFunctionCall"
    assert info.value.display() == "step value cannot be zero\nin call to function 'range'"
    assert error(lambda: call("range", "a", "b")) == f"Function not found: range ({S}, {S})"
    assert error(lambda: call("range", ir(1, 5), 2)) == "Function not found: range (range=, i64)"


def test_range_properties() -> None:
    assert call("end", r(3, 9)) == 9 and call("end", ir(3, 9)) == 9 and call("start", ir(4, 9)) == 4
    assert error(lambda: call("end", 5)) == "Function not found: end (i64)"
    assert error(lambda: call("start", [4])) == "Function not found: start (array)"
    assert (
        call("is_exclusive", r(1, 2)) and not call("is_exclusive", ir(1, 2)) and call("is_exclusive", r(0, 0))
    )
    assert call("is_inclusive", ir(1, 2)) and not call("is_inclusive", r(1, 2))
    assert error(lambda: call("is_inclusive", "1..2")) == f"Function not found: is_inclusive ({S})"
    assert not call("is_empty", ir(5, 5)) and call("is_empty", r(5, 1)) and not call("is_empty", r(1, 10))
    assert call("contains", r(1, 10), 5) and not call("contains", r(1, 10), 10)
    ctx = FakeContext()
    assert LIB.get_property(ctx, r(0, 100), "end") == 100
    assert LIB.get_property(ctx, ir(10, 20), "end") == 20
    assert LIB.get_property(ctx, r(1, 2), "is_exclusive") is True
    assert LIB.get_property(ctx, ir(0, 0), "is_inclusive") is True


def test_timestamps() -> None:
    t = call("timestamp")
    assert type(t) is Timestamp and show(t) == "timestamp: <timestamp>"
    assert call("elapsed", t) >= 0.0
    assert LIB.get_property(FakeContext(), t, "elapsed") >= 0.0
    assert error(lambda: call("elapsed", Timestamp(t.seconds + 100))) == "Time-stamp is later than now"
    assert call("sleep", 0) is None and call("sleep", -1.0) is None and call("sleep", math.nan) is None


# -- arrays ----------------------------------------------------------------------------------------


def test_array_reading() -> None:
    assert call("len", [1, 2, 3]) == 3 and call("len", []) == 0
    assert error(lambda: call("len", 5)) == "Function not found: len (i64)"
    assert call("get", [10, 20, 30], 1) == 20 and call("get", [1, 2, 3], 9) is None
    assert call("get", [1, 2, 3], -1) == 3 and call("get", [1, 2, 3], -5) == 1
    assert call("contains", [1, 2, 3], 2) and not call("contains", [], None)
    assert call("index_of", [5, 6, 7, 6], 6) == 1
    assert call("index_of", [1, 2, 3], 5) == -1
    assert call("index_of", [1, 2, 2], 2, 2) == 2
    assert call("index_of", [1, 2, 3], "2") == -1
    assert call("extract", [1, 2, 3, 4, 5], r(1, 3)) == [2, 3]
    assert call("extract", [1, 2, 3, 4, 5], 1, 2) == [2, 3]
    assert call("extract", [1, 2, 3], 0, -1) == []
    assert call("extract", [1, 2, 3], -2) == [2, 3]
    nested = [[1]]
    call("get", nested, 0).append(2)
    assert nested == [[1]]
    assert error(lambda: call("crop", [1, 2, 3], 1)) == "Function not found: crop (array, i64)"


def test_array_growing() -> None:
    a: list[Any] = [1]
    inner = [2]
    assert call("push", a, inner) is None
    inner.append(3)
    assert a == [1, [2]]
    assert method("append", [], [])[0] == []
    assert method("append", [1, 2, 3], [4])[0] == [1, 2, 3, 4]
    assert method("insert", [1, 2, 3], 0, 0)[0] == [0, 1, 2, 3]
    assert method("insert", [1, 2, 3], 1, 9)[0] == [1, 9, 2, 3]
    assert method("insert", [1, 2, 3], -1, 9)[0] == [1, 2, 9, 3]
    assert method("insert", [1, 2, 3], 10, 9)[0] == [1, 2, 3, 9]
    assert method("pad", [1, 2], 5, 0)[0] == [1, 2, 0, 0, 0]
    assert method("pad", [1, 2, 3], 2, 0)[0] == [1, 2, 3]
    padded = method("pad", [], 2, [0])[0]
    padded[0].append(1)
    assert padded == [[0, 1], [0]]
    assert method("set", [1, 2, 3], 0, "z")[0] == ["z", 2, 3]
    assert method("set", [1, 2, 3], -1, 9)[0] == [1, 2, 9]
    assert method("set", [1, 2, 3], 9, 9)[0] == [1, 2, 3]
    assert method("splice", [1, 2, 3, 4, 5], r(1, 3), ["x", "y", "z"])[0] == [1, "x", "y", "z", 4, 5]
    assert method("splice", [1, 2, 3, 4, 5], ir(1, 3), [])[0] == [1, 5]
    assert method("splice", [1, 2, 3], 1, 1, [9, 9])[0] == [1, 9, 9, 3]
    assert method("splice", [1, 2], 5, 1, [9])[0] == [1, 2, 9]
    assert error(lambda: call("splice", [1], 0, 1, 5)) == "Function not found: splice (array, i64, i64, i64)"


def test_array_size_limits() -> None:
    ctx = FakeContext(max_array_size=3)
    a = [1, 2, 3]
    assert error(lambda: call("push", a, 4, ctx=ctx)) == "Size of array/BLOB too large"
    assert error(lambda: call("pad", [1], 10, 0, ctx=ctx)) == "Size of array/BLOB too large"
    assert error(lambda: call("pad", [], 10**15, 0)) == "Size of array/BLOB too large"
    with pytest.raises(RhaiRuntimeError) as info:
        call("pad", [1], 10, 0, ctx=ctx)
    assert info.value.catchable is False


def test_array_shrinking() -> None:
    assert method("pop", [1, 2, 3]) == ([1, 2], 3)
    assert method("pop", []) == ([], None)
    assert method("shift", []) == ([], None)
    assert method("shift", [1, 2]) == ([2], 1)
    assert method("remove", [1, 2, 3], -1) == ([1, 2], 3)
    assert method("remove", [1, 2, 3], 1) == ([1, 3], 2)
    assert method("remove", [1, 2, 3], 5) == ([1, 2, 3], None)
    assert method("clear", [1, 2])[0] == []
    assert method("truncate", [1, 2, 3, 4, 5], 2)[0] == [1, 2]
    assert method("chop", [1, 2, 3, 4], 2)[0] == [3, 4]
    assert method("chop", [1, 2, 3], -1)[0] == []
    assert method("split", [1, 2, 3, 4], 1) == ([1], [2, 3, 4])
    assert method("split", [1, 2], 0) == ([], [1, 2])
    assert method("split", [1, 2], 5) == ([1, 2], [])
    assert method("drain", [1, 2, 3, 4, 5], ir(1, 3)) == ([1, 5], [2, 3, 4])
    assert method("drain", [1, 2, 3, 4, 5], 3, 10) == ([1, 2, 3], [4, 5])
    assert method("retain", [1, 2, 3], 9, 1) == ([1, 2, 3], [])
    assert method("retain", [1, 2, 3, 4], r(1, 3)) == ([2, 3], [1, 4])
    assert method("reverse", [1, 2, 3])[0] == [3, 2, 1]
    assert method("dedup", [1, 1, 2, 2, 2, 1, 3, 3])[0] == [1, 2, 1, 3]
    assert method("dedup", [])[0] == []
    assert method("dedup", [1, 1.0, "1"])[0] == [1, "1"]


def test_array_sorting() -> None:
    assert method("sort", [3, 1, 2])[0] == [1, 2, 3]
    assert method("sort", ["b", "a"])[0] == ["a", "b"]
    assert method("sort", [True, False])[0] == [False, True]
    assert len(method("sort", [2.5, math.nan, 1.0])[0]) == 3  # NaN compares equal: no failure
    assert method("sort", [2.5, -1.0, 0.5])[0] == [-1.0, 0.5, 2.5]
    assert method("sort_desc", ["b", "c", "a"])[0] == ["c", "b", "a"]
    different = "Function not found: elements of different types cannot be sorted"
    assert error(lambda: call("sort", [1, "a"])) == different
    assert error(lambda: call("sort", [2.5, 1])) == different
    assert error(lambda: call("sort_desc", [1, "x"])) == different
    assert error(lambda: call("sort", [r(1, 2), ir(1, 2)])) == different
    assert error(lambda: call("sort", [[1], [2]])) == "Function not found: elements of array cannot be sorted"
    assert error(lambda: call("sort", [r(1, 2), r(0, 1)])) == (
        "Function not found: elements of core::ops::range::Range<i64> cannot be sorted"
    )
    assert method("sort", [None, None])[0] == [None, None]
    assert call("order", [3, 1, 2]) == [1, 2, 3] and call("order_desc", [1, 3, 2]) == [3, 2, 1]
    assert error(lambda: call("sorted", [1])) == "Function not found: sorted (array)"


def test_missing_array_functions_are_not_found() -> None:
    absent: list[tuple[str, list[Any]]] = [("join", [[1], ","]), ("flatten", [[[1]]]), ("chunks", [[1], 2])]
    for name, args in absent:
        assert LIB.resolve(name, args) is None, name
    assert error(lambda: call("array", 3)) == "Function not found: array (i64)"


# -- callbacks -------------------------------------------------------------------------------------


def test_map_filter_and_friends() -> None:
    ctx = FakeContext()
    assert call("map", [1, 2, 3], closure(lambda x: x * 10), ctx=ctx) == [10, 20, 30]
    assert call("map", [1, 2, 3], closure(lambda x, i: x * i), ctx=ctx) == [0, 2, 6]
    assert call("filter", [1, 2, 3], closure(lambda x: x > 1), ctx=ctx) == [2, 3]
    assert call("filter", [1, 2, 3], closure(lambda x, i: i > 0), ctx=ctx) == [2, 3]
    assert call("filter", [1, 2, 3], closure(lambda this: this.value > 1), ctx=ctx) == [2, 3]
    assert call("filter", [1, 2, 3], "is_odd", ctx=ctx) == [1, 3]
    assert call("all", [2, 4, 6], closure(lambda x: x % 2 == 0), ctx=ctx) is True
    assert call("all", [2, 4, 5], closure(lambda x: x % 2 == 0), ctx=ctx) is False
    assert call("all", [1, 2], closure(lambda x: x), ctx=ctx) is False
    assert call("some", [1], closure(lambda x: "yes"), ctx=ctx) is False
    assert call("some", [1, 2, 3], closure(lambda x: x > 2), ctx=ctx) is True
    assert call("find", [1, 5, 9], closure(lambda x: x > 3), ctx=ctx) == 5
    assert call("find", [1, 5, 9], closure(lambda x: x > 30), ctx=ctx) is None
    assert call("find", [1, 5, 9, 12], closure(lambda x: x > 3), 2, ctx=ctx) == 9
    assert call("find_map", [1, 5, 9], closure(lambda x: x * 100 if x > 3 else None), ctx=ctx) == 500
    assert call("find_map", [1, 2], closure(lambda x: None), ctx=ctx) is None
    assert call("index_of", [1, 5, 9], closure(lambda x: x > 30), ctx=ctx) == -1
    assert call("index_of", [1, 5, 9], closure(lambda x: x > 3), ctx=ctx) == 1
    assert error(lambda: call("all", [1, 2], 5)) == "Function not found: all (array, i64)"
    assert error(lambda: call("some", [1], 1)) == "Function not found: some (array, i64)"
    assert error(lambda: call("filter", [1, 2], None)) == "Function not found: filter (array, ())"


def test_callback_by_name_errors_are_wrapped_in_the_caller() -> None:
    with pytest.raises(RhaiRuntimeError) as info:
        call("map", [1, 2], "no_such_function")
    assert info.value.kind == "ErrorInFunctionCall"
    assert info.value.extras == {"function": "map"}
    assert (
        info.value.display() == "Function not found: no_such_function (i64, i64)\nin call to function 'map'"
    )
    assert error(lambda: call("map", [1], "bad name")) == "Function not found: bad name"


def test_closure_errors_are_not_wrapped() -> None:
    def bad(x: Any) -> Any:
        raise failures.runtime("bad")

    with pytest.raises(RhaiRuntimeError) as info:
        call("map", [1, 2, 3], closure(bad))
    assert info.value.kind == "ErrorRuntime"


def test_reduce() -> None:
    ctx = FakeContext()
    add = closure(lambda acc, x: ops.binary("+", acc, x))
    assert error(lambda: call("reduce", [1, 2, 3, 4], add, ctx=ctx)) == "Function not found: + ((), i64)"
    assert call("reduce", [1, 2, 3], add, 0, ctx=ctx) == 6
    assert call("reduce", [1, 2, 3], closure(lambda s, x: x if s is None else s + x), ctx=ctx) == 6
    assert call("reduce", ["1", "2", "3"], add, "", ctx=ctx) == "123"
    assert call("reduce", [1, 2, 3], closure(lambda s, x, i: (s or 0) + x * i), ctx=ctx) == 8
    assert call("reduce", [], add, 7, ctx=ctx) == 7
    assert call("reduce_rev", ["a", "b"], add, "", ctx=ctx) == "ba"
    assert call("reduce_rev", [1, 2, 3], closure(lambda s, x, i: (s or []) + [i]), ctx=ctx) == [2, 1, 0]
    assert call("reduce", [3, 1, 2], "max", 0, ctx=ctx) == 3


def test_for_each_binds_this_and_passes_the_index() -> None:
    seen: list[int] = []
    call("for_each", [1, 2, 3], closure(lambda i: seen.append(i)))
    assert seen == [0, 1, 2]

    def double(this: ThisCell) -> None:
        this.value = this.value * 2

    a = [1, 2, 3]
    assert method("for_each", a, closure(double)) == ([2, 4, 6], None)


def test_drain_and_retain_with_callbacks() -> None:
    ctx = FakeContext(functions={"big": lambda x: x > 2})
    a = [1, 2, 3, 4, 5, 6]
    assert call("drain", a, closure(lambda x: x % 2 == 0), ctx=ctx) == [2, 4, 6] and a == [1, 3, 5]
    b = [1, 2, 3, 4]
    assert call("drain", b, "big", ctx=ctx) == [3, 4] and b == [1, 2]
    assert call("drain", [1, 2, 3], closure(lambda x, i: i == 1), ctx=ctx) == [2]
    c = [1, 2, 3]
    assert call("retain", c, closure(lambda x, i: i > 0), ctx=ctx) == [1] and c == [2, 3]
    assert error(lambda: call("drain", [1, 2], "x", 1)) == f"Function not found: drain (array, {S}, i64)"


def test_zip_dedup_sort_with_callbacks() -> None:
    ctx = FakeContext()
    assert call("zip", [1, 2], [10, 20], closure(lambda x, y, i: x + y + i), ctx=ctx) == [11, 23]
    assert call("zip", [], [1], closure(lambda a, b: a), ctx=ctx) == []
    assert call("zip", [1, 2, 3], [1], closure(lambda a, b: a * b), ctx=ctx) == [1]
    a = [1, 2, 4, 5, 7, 10]
    call("dedup", a, closure(lambda x, y: y - x == 1), ctx=ctx)
    assert a == [1, 4, 7, 10]
    b = [3, 1, 2]
    call("sort", b, closure(lambda x, y: y - x), ctx=ctx)
    assert b == [3, 2, 1]
    c = [3, 1, 2]
    call("sort_by", c, closure(lambda x, y: x - y), ctx=ctx)
    assert c == [1, 2, 3]
    d = [1, 3, 2]
    call("sort", d, closure(lambda x, y: x > y), ctx=ctx)
    assert d == [3, 2, 1]
    assert call("order_by", [1, 3, 2], closure(lambda x, y: y - x), ctx=ctx) == [3, 2, 1]

    def failing(x: Any, y: Any) -> Any:
        raise failures.thrown(None, "no")

    e = [2, "a", 1]
    call("sort", e, closure(failing), ctx=ctx)
    assert sorted(map(type_name, e)) == ["i64", "i64", "string"]


def test_callbacks_respect_limits_errors() -> None:
    def stop(x: Any) -> Any:
        raise failures.too_many_operations()

    with pytest.raises(RhaiRuntimeError) as info:
        call("sort", [2, 1], closure(lambda x, y: stop(x)))
    assert info.value.kind == "ErrorTooManyOperations"
    with pytest.raises(RhaiRuntimeError) as info:
        call("map", [1], "stop_now", ctx=FakeContext(functions={"stop_now": stop}))
    assert info.value.kind == "ErrorTooManyOperations"


# -- maps ------------------------------------------------------------------------------------------


def test_map_functions() -> None:
    m = {"z": 1, "a": 2, "m": 3}
    assert call("keys", m) == ["a", "m", "z"]
    assert call("keys", {"with space": 1, "1": 2}) == ["1", "with space"]
    assert call("values", {}) == [] and show(call("values", {"x": [1], "y": {"z": None}})) == (
        'array: [[1], #{"z": ()}]'
    )
    assert error(lambda: call("values", [1])) == "Function not found: values (array)"
    assert call("len", {"a": 1}) == 1 and call("is_empty", {}) is True
    assert call("contains", {"a": 1}, "a") and error(lambda: call("contains", {}, Char("a"))) == (
        "Function not found: contains (map, char)"
    )
    assert call("get", {"a": 1}, "a") == 1 and call("get", {"a": 1}, "z") is None
    assert method("set", {"a": 1}, "z", 3)[0] == {"a": 1, "z": 3}
    assert method("remove", {"a": 1, "b": 2}, "a") == ({"b": 2}, 1)
    assert method("remove", {}, "zz") == ({}, None)
    assert method("clear", {"a": 1})[0] == {}
    assert method("mixin", {"a": 1, "b": 2}, {"b": 20, "c": 30})[0] == {"a": 1, "b": 20, "c": 30}
    assert method("mixin", {"a": 1}, {"a": {"nested": True}})[0] == {"a": {"nested": True}}
    assert method("fill_with", {"a": 1}, {"a": 2, "b": 3})[0] == {"a": 1, "b": 3}
    assert error(lambda: call("fill_with", {"a": 1}, 5)) == "Function not found: fill_with (map, i64)"


def test_map_size_limit() -> None:
    ctx = FakeContext(max_map_size=1)
    assert error(lambda: call("set", {"a": 1}, "b", 2, ctx=ctx)) == "Size of object map too large"


def test_map_callbacks() -> None:
    ctx = FakeContext()
    m = {"a": 1, "b": 2}
    assert call("map", m, closure(lambda k, v: v * 10), ctx=ctx) == {"a": 10, "b": 20}
    assert call("map", m, closure(lambda this, k: k + str(this.value)), ctx=ctx) == {"a": "a1", "b": "b2"}
    assert call("filter", m, closure(lambda k, v: v > 1), ctx=ctx) == {"b": 2}
    n = {"a": 1, "b": 2, "c": 3}
    assert call("drain", n, closure(lambda k, v: v != 2), ctx=ctx) == {"a": 1, "c": 3} and n == {"b": 2}
    o = {"a": 1, "b": 2, "c": 3}
    assert call("retain", o, closure(lambda k, v: k == "a"), ctx=ctx) == {"b": 2, "c": 3} and o == {"a": 1}

    def fail_on_b(k: str, v: Any) -> bool:
        if k == "b":
            raise failures.thrown(None, "b")
        return True

    p = {"a": 1, "b": 2, "c": 3}
    with pytest.raises(RhaiRuntimeError):
        call("drain", p, closure(fail_on_b), ctx=ctx)
    assert p == {"b": 2, "c": 3}


def test_to_json() -> None:
    value = {"a": 1, "b": "two", "c": [True, None]}
    assert call("to_json", value) == '{"a":1,"b":"two","c":[true,null]}'
    assert call("to_json", {}) == "{}"
    assert call("to_json", {"a": 1.0}) == '{"a":1.0}'
    assert call("to_json", {"a": "é\n\t"}) == '{"a":"é\\n\\t"}'
    assert call("to_json", {"f": FnPtr("x")}) == '{"f":"x"}'
    assert call("to_json", {"f": FnPtr("x", (1,))}) == '{"f":["x",1]}'
    assert call("to_json", {"t": r(1, 3), "u": ir(1, 3)}) == '{"t":1..3,"u":1..=3}'
    assert call("to_json", {"c": Char("c"), "q": Char("'")}) == "{\"c\":'c',\"q\":'\\''}"
    assert call("to_json", {"b": bytearray([1, 255]), "x": 1e20, "d": {"e": None}}) == (
        '{"b":[1,255],"d":{"e":null},"x":1e20}'
    )
    assert error(lambda: call("to_json", [1, 2])) == "Function not found: to_json (array)"
    assert error(lambda: call("to_json", "x")) == f"Function not found: to_json ({S})"


# -- BLOBs -----------------------------------------------------------------------------------------


def test_blob_construction_and_reading() -> None:
    assert show(call("blob", 3, 0x1FF)) == "blob: [ffffff]"
    assert (
        show(call("blob", 2)) == "blob: [0000]"
        and call("blob") == bytearray()
        and call("blob", -5) == bytearray()
    )
    assert error(lambda: call("blob", "a")) == f"Function not found: blob ({S})"
    assert error(lambda: call("blob", 10**12)) == "Size of array/BLOB too large"
    assert error(lambda: call("blob", 4, ctx=FakeContext(max_array_size=3))) == "Size of array/BLOB too large"
    assert call("to_array", bytearray()) == [] and call("to_array", bytearray([255] * 3)) == [255, 255, 255]
    assert error(lambda: call("to_array", "ab")) == f"Function not found: to_array ({S})"
    assert call("as_string", bytearray(b"hello")) == "hello"
    assert call("as_string", bytearray(b"\xffa")) == "\ufffda"
    assert error(lambda: call("as_string", "already")) == f"Function not found: as_string ({S})"
    assert call("len", bytearray(9)) == 9 and call("is_empty", bytearray(1)) is False
    assert call("contains", bytearray(b"A"), 0x141) is True
    assert call("get", bytearray([1, 2]), -1) == 2 and call("get", bytearray([1]), 5) == 0
    assert call("extract", bytearray(b"hello"), ir(1, 4)) == bytearray(b"ello")
    assert show(call("extract", bytearray(b"hello"), 0, 2)) == "blob: [6865]"


def test_blob_changes() -> None:
    assert method("append", bytearray([1]), bytearray([2, 2]))[0] == bytearray([1, 2, 2])
    assert method("append", bytearray(), "hello")[0] == bytearray(b"hello")
    assert method("append", bytearray(), Char("é"))[0] == bytearray("é".encode())
    assert method("append", bytearray(), 0x141)[0] == bytearray(b"A")
    assert method("push", bytearray(), 0x142)[0] == bytearray(b"B")
    assert method("insert", bytearray([1, 1]), 5, 0x1FF)[0] == bytearray([1, 1, 255])
    assert method("set", bytearray([1, 2]), 0, 0x1FF)[0] == bytearray([255, 2])
    assert method("chop", bytearray([1] * 4), -3)[0] == bytearray()
    assert method("chop", bytearray([1, 2, 3]), 2)[0] == bytearray([2, 3])
    assert method("clear", bytearray(5))[0] == bytearray()
    assert method("shift", bytearray()) == (bytearray(), 0)
    assert method("pop", bytearray([1, 2])) == (bytearray([1]), 2)
    assert method("remove", bytearray([1, 2]), -1) == (bytearray([1]), 2)
    assert method("reverse", bytearray(b"abc"))[0] == bytearray(b"cba")
    assert method("retain", bytearray(b"abcdef"), ir(1, 3)) == (bytearray(b"bcd"), bytearray(b"aef"))
    assert method("retain", bytearray(b"ab"), 5, 1) == (bytearray(), bytearray(b"ab"))
    assert method("drain", bytearray(b"abcdef"), 1, 2) == (bytearray(b"adef"), bytearray(b"bc"))
    assert method("split", bytearray(b"abc"), 1) == (bytearray(b"a"), bytearray(b"bc"))
    assert method("splice", bytearray(b"abc"), 1, 1, bytearray(b"XY"))[0] == bytearray(b"aXYc")
    assert method("splice", bytearray(b"abc"), 1, 0, bytearray(b"X"))[0] == bytearray(b"abcX")
    assert method("truncate", bytearray(b"abc"), 1)[0] == bytearray(b"a")
    assert method("pad", bytearray(b"a"), 3, 0x2E)[0] == bytearray(b"a..")
    assert error(lambda: call("pad", bytearray(), 5, 0, ctx=FakeContext(max_array_size=3))) == (
        "Size of BLOB too large"
    )


def test_blob_binary_codecs() -> None:
    b = bytearray(8)
    call("write_be", b, 0, 8, 6.25)
    assert call("parse_be_float", b, 0, 8) == 6.25
    call("write_be", b, r(0, 8), -0.5)
    assert call("parse_be_float", b, r(0, 8)) == -0.5
    assert error(lambda: call("parse_be_float", bytearray(8), "0", 8)) == (
        f"Function not found: parse_be_float (blob, {S}, i64)"
    )
    assert call("parse_be_int", bytearray(b"AB"), 0, 2) == 4702320960928219136
    assert (
        error(lambda: call("parse_be_int", [1, 2], 0, 2))
        == "Function not found: parse_be_int (array, i64, i64)"
    )
    c = bytearray(8)
    call("write_le", c, 0, 8, 2.5)
    assert call("parse_le_float", c, 0, 8) == 2.5
    call("write_le", c, r(0, 8), math.pi)
    assert call("parse_le_float", c, r(0, 8)) == math.pi
    call("write_le", c, 0, 8, -2)
    assert call("parse_le_int", c, r(0, 8)) == -2
    call("write_le", c, 0, 8, 513)
    assert call("parse_le_int", c, ir(0, 1)) == 513
    assert show(method("write_be", bytearray(4), 0, 4, 0x01020304)[0]) == "blob: [00000000]"
    assert show(method("write_be", bytearray(8), ir(0, 3), 1.0)[0]) == "blob: [3ff0000000000000]"
    assert show(method("write_be", bytearray(8), r(0, 8), 0.1)[0]) == "blob: [3fb999999999999a]"
    assert show(method("write_be", bytearray(4), 2, 10, 0x1234)[0]) == "blob: [00000000]"
    assert show(method("write_le", bytearray(8), r(0, 8), -2)[0]) == "blob: [feffffffffffffff]"
    assert show(method("write_le", bytearray(3), 1, 1, 0x1FF)[0]) == "blob: [00ff00]"
    assert error(lambda: call("write_be", bytearray(4), 0, 4, "x")) == (
        f"Function not found: write_be (blob, i64, i64, {S})"
    )
    assert show(method("write_utf8", bytearray(b"......"), r(0, 3), "héllo")[0]) == "blob: [68c3a92e2e2e]"
    assert call("as_string", method("write_utf8", bytearray(b"......"), ir(1, 4), "ab")[0]) == ".ab..."
    assert call("as_string", method("write_ascii", bytearray(b"....."), r(1, 4), "abc")[0]) == ".abc."
    assert call("as_string", method("write_ascii", bytearray(b"....."), 0, 5, "aéb")[0]) == "ab..."


# -- Fn pointers, core, properties -----------------------------------------------------------------


def test_fn_pointer_natives() -> None:
    anon = closure(lambda x: x)
    assert call("is_anonymous", anon) is True and call("is_anonymous", FnPtr("f")) is False
    assert error(lambda: call("is_anonymous", "abs")) == f"Function not found: is_anonymous ({S})"
    ctx = FakeContext()
    assert LIB.get_property(ctx, FnPtr("to_upper"), "name") == "to_upper"
    assert LIB.get_property(ctx, FnPtr("k", (1,)), "name") == "k"
    assert LIB.get_property(ctx, anon, "is_anonymous") is True


def test_take_and_tags() -> None:
    x = [1, 2]
    assert method("take", x) == (None, [1, 2])
    assert call("tag", 1) == 0
    assert LIB.get_property(FakeContext(), None, "tag") == 0
    assert method("set_tag", 1, 3)[0] == 1
    assert error(lambda: call("set_tag", 1, 1.5)) == "Function not found: set_tag (i64, f64)"
    assert error(lambda: call("set_tag", 1, 2**40)).startswith("1099511627776 is too large to fit into a tag")


def test_properties() -> None:
    ctx = FakeContext()
    assert LIB.get_property(ctx, "🦀🦀", "len") == 2
    assert LIB.get_property(ctx, "héllo", "bytes") == 6
    assert LIB.get_property(ctx, bytearray(9), "len") == 9
    assert LIB.get_property(ctx, bytearray(1), "is_empty") is False
    assert LIB.get_property(ctx, [1, 2, 3], "is_empty") is False
    assert LIB.get_property(ctx, 4.01, "ceiling") == 5.0
    assert LIB.get_property(ctx, 1.125, "fraction") == 0.125
    assert LIB.get_property(ctx, -8.75, "int") == -8.0
    assert LIB.get_property(ctx, 1.5, "round") == 2.0
    assert LIB.get_property(ctx, -1.5, "round") == -2.0
    assert LIB.get_property(ctx, -1e308 * 10.0, "is_finite") is False
    assert LIB.get_property(ctx, 1e308 * 10, "is_infinite") is True
    assert LIB.get_property(ctx, 2**63 - 1, "is_odd") is True
    assert LIB.get_property(ctx, 0.0, "is_zero") is True and LIB.get_property(ctx, 3, "is_zero") is False
    assert len(list(LIB.get_property(ctx, 1, "bits"))) == 64
    assert "".join(reversed(list(LIB.get_property(ctx, "xyz", "chars")))) == "zyx"
    assert error(lambda: LIB.get_property(ctx, 5, "foo")) == (
        "Unknown property 'foo' - a getter is not registered for type 'i64'"
    )
    assert error(lambda: LIB.get_property(ctx, 1, "e5")) == (
        "Unknown property 'e5' - a getter is not registered for type 'i64'"
    )
    assert error(lambda: LIB.get_property(ctx, "s", "foo")) == (
        "Unknown property 'foo' - a getter is not registered for type 'string'"
    )
    assert error(lambda: LIB.get_property(ctx, None, "c")) == (
        "Unknown property 'c' - a getter is not registered for type '()'"
    )
    with pytest.raises(RhaiRuntimeError) as info:
        LIB.get_property(ctx, [1], "x")
    assert info.value.kind == "ErrorDotExpr"
    assert info.value.extras == {"property": info.value.message}


def test_setters() -> None:
    ctx = FakeContext()
    assert LIB.set_property(ctx, 1, "tag", 5) == 1
    assert error(lambda: LIB.set_property(ctx, 1, "tag", "t")) == (
        "No writable property 'tag' - a setter is not registered for type 'i64' to handle 'string'"
    )
    assert error(lambda: LIB.set_property(ctx, [1], "len", 5)) == (
        "No writable property 'len' - a setter is not registered for type 'array' to handle 'i64'"
    )
    assert error(lambda: LIB.set_property(ctx, "s", "len", 1)) == (
        "No writable property 'len' - a setter is not registered for type 'string' to handle 'i64'"
    )
    assert error(lambda: LIB.set_property(ctx, 1, "b", 2)) == (
        "No writable property 'b' - a setter is not registered for type 'i64' to handle 'i64'"
    )


# -- indexing --------------------------------------------------------------------------------------


def iget(obj: Any, index: Any) -> Any:
    return LIB.index_get(FakeContext(), obj, index)


def iset(obj: Any, index: Any, value: Any, ctx: FakeContext | None = None) -> Any:
    return LIB.index_set(ctx or FakeContext(), obj, index, value)


def test_array_indexing() -> None:
    a = [1, [2, 3]]
    assert iget(a, 0) == 1 and iget(a, -1) == [2, 3] and iget(a, -2) == 1
    assert iget(a, 1) is a[1]  # the element itself: chained updates write through
    assert iset([1, 2, 3], 1, 5) == [1, 5, 3]
    assert error(lambda: iget([], 0)) == "Array index 0 out of bounds: array is empty"
    assert error(lambda: iget([1], 1)) == "Array index 1 out of bounds: only 1 element in array"
    assert error(lambda: iget([1, 2], 5)) == "Array index 5 out of bounds: only 2 elements in array"
    assert error(lambda: iget([1, 2], -3)) == "Array index -3 out of bounds: only 2 elements in array"
    assert error(lambda: iset([1, 2], 2, 3)) == "Array index 2 out of bounds: only 2 elements in array"
    assert error(lambda: iget([1, 2], "x")) == "Data type incorrect: string (expecting i64)"
    assert error(lambda: iget([1, 2], 1.0)) == "Data type incorrect: f64 (expecting i64)"
    assert error(lambda: iget([1, 2, 3], r(1, 3))) == (
        "Data type incorrect: core::ops::range::Range<i64> (expecting i64)"
    )
    with pytest.raises(RhaiRuntimeError) as info:
        iget([1], 5)
    assert info.value.kind == "ErrorArrayBounds" and info.value.extras == {"length": 1, "index": 5}


def test_map_indexing() -> None:
    m: dict[str, Any] = {"a": 1}
    assert iget(m, "a") == 1 and iget(m, "b") is None
    assert iset(m, "k k", 2) is m and m == {"a": 1, "k k": 2}
    assert error(lambda: iget({"a": 1}, 1)) == "Data type incorrect: i64 (expecting string)"
    assert error(lambda: iset({}, Char("a"), 1)) == "Data type incorrect: char (expecting string)"
    assert (
        error(lambda: iset({"a": 1}, "b", 2, FakeContext(max_map_size=1))) == "Size of object map too large"
    )


def test_string_indexing() -> None:
    assert show(iget("hello", 0)) == "char: h" and show(iget("hello", -1)) == "char: o"
    assert iget("hello", r(1, 3)) == "el" and iget("hello", ir(1, 3)) == "ell"
    assert iget("hello", ir(0, 9)) == "hello" and iget("a", ir(0, 0)) == "a"
    assert iget("hello", ir(2, 2)) == ""  # the reference's quirk
    assert iget("hello", r(3, 1)) == "" and iget("", r(0, 5)) == ""
    assert error(lambda: iget("abc", 3)) == "String index 3 out of bounds: only 3 characters in string"
    assert error(lambda: iget("abc", 7)) == "String index 7 out of bounds: only 3 characters in string"
    assert error(lambda: iget("", 0)) == "String index 0 out of bounds: string is empty"
    assert error(lambda: iget("a", -2)) == "String index -2 out of bounds: only 1 character in string"
    assert error(lambda: iget("abc", "x")) == "Data type incorrect: string (expecting i64)"
    assert iset("abc", 1, Char("X")) == "aXc"
    assert iset("abc", -1, Char("X")) == "aXc"  # the reference writes at |index|
    assert error(lambda: iset("abc", 1, "X")) == "Data type incorrect: string (expecting char)"
    assert iset("hello", r(1, 3), "EL") == "hELlo"
    assert iset("hello", ir(1, 3), 42) == "h42o"
    assert (
        error(lambda: iset("ab", 5, Char("x"))) == "String index 5 out of bounds: only 2 characters in string"
    )


def test_bit_field_indexing() -> None:
    assert iget(0b1010, 1) is True and iget(0b1010, -1) is False
    assert iget(0x12345678, r(4, 12)) == 103
    assert iget(-1, r(0, 64)) == -1 and iget(-1, ir(60, 63)) == -1
    assert iget(5, r(3, 1)) == 0
    assert error(lambda: iget(1, 64)) == "Bit-field index 64 out of bounds: only 64 bits in bit-field"
    assert error(lambda: iget(1, r(-1, 3))) == "Bit-field index -1 out of bounds: only 64 bits in bit-field"
    assert iset(0, 3, True) == 8 and iset(15, 0, False) == 14 and iset(0, 63, True) == -(2**63)
    assert iset(0, r(4, 8), 0xFF) == 0xF0
    assert error(lambda: iset(0, 1, 1)) == "Data type incorrect: i64 (expecting bool)"
    assert error(lambda: iset(0, r(0, 2), True)) == "Data type incorrect: bool (expecting integer)"


def test_blob_indexing_and_unindexable_values() -> None:
    b = bytearray(b"AB")
    assert iget(b, -1) == 0x42
    assert iset(b, 0, 0x161) is b and b == bytearray(b"aB")
    assert error(lambda: iset(b, 0, "x")) == "Data type incorrect: string (expecting INT)"
    assert error(lambda: iget(b, 2)) == "Array index 2 out of bounds: only 2 elements in array"
    assert error(lambda: iget(None, "a")) == "Indexer unavailable: () [string]"
    assert error(lambda: iset(None, "b", 1)) == "Indexer unavailable: () [string] = i64"
    assert error(lambda: iget(1.5, 0)) == "Indexer unavailable: f64 [i64]"
    with pytest.raises(RhaiRuntimeError) as info:
        iget(None, "a")
    assert info.value.kind == "ErrorIndexingType"


def test_iteration_of_iterator_values() -> None:
    stream = call("range", 0, 6, 2)
    assert type(stream) is IterVal
    assert list(LIB.iterate(stream) or []) == [0, 2, 4]
    assert LIB.iterate([1]) is None


# -- safety ----------------------------------------------------------------------------------------


ODD: list[Any] = [None, -1, 0, 3, 2**63 - 1, -(2**63), 0.5, math.nan, "ab", Char("x"), [1, "a"], {"a": 1},
                  bytearray(b"ab"), r(-3, 2), ir(1, 70), FnPtr("abs"), Timestamp(0.0)]  # fmt: skip


def _no_leak(action: Callable[[], Any], label: Any) -> None:
    """`action` gives a value or a Rhai error: never a Python error turned "internal"."""
    try:
        action()
    except RhaiRuntimeError as err:
        assert ": internal" not in err.message and "Error: " not in err.message, (label, err.message)


def test_natives_never_leak_python_errors() -> None:
    """Every native and arity, every odd receiver, a fixed sample of odd other arguments."""
    lib = build_library()
    rng = random.Random(1725)
    for name in sorted(lib.function_names() - {"sleep"}):
        for arity in range(5):
            if not lib.has_function(name, arity):
                continue
            for first in ODD if arity else [None]:
                for _ in range(25 if arity > 1 else 1):
                    args = [first, *(rng.choice(ODD) for _ in range(arity - 1))][:arity]
                    ctx = FakeContext(max_string_size=1000, max_array_size=1000)
                    _no_leak(partial(lib.call, ctx, name, args), (name, args))


def test_indexing_and_properties_never_leak_python_errors() -> None:
    ctx = FakeContext()
    for obj, index in itertools.product(ODD, ODD):
        _no_leak(partial(LIB.index_get, ctx, obj, index), (obj, index))
        _no_leak(partial(LIB.index_set, ctx, obj, index, Char("c")), (obj, index))
        _no_leak(partial(LIB.index_set, ctx, obj, index, index), (obj, index))
        _no_leak(partial(ops.compound, "+=", obj, index), (obj, index))
    for obj in ODD:
        for prop in ("len", "tag", "end", "is_empty", "bits", "nope"):
            _no_leak(partial(LIB.get_property, ctx, obj, prop), (obj, prop))
            _no_leak(partial(LIB.set_property, ctx, obj, prop, 1), (obj, prop))


def test_huge_sizes_are_refused_before_allocating() -> None:
    requests: list[Callable[[], Any]] = [
        lambda: call("pad", "x", 2**40, "*"),
        lambda: call("pad", [], 2**40, 0),
        lambda: call("pad", bytearray(), 2**40, 0),
        lambda: call("blob", 2**40),
        lambda: call("blob", 2**40, 1),
    ]
    for fn in requests:
        with pytest.raises(RhaiRuntimeError) as info:
            fn()
        assert info.value.kind == "ErrorDataTooLarge" and info.value.catchable is False


# -- the standard library filled on first use (issue 31: start-up) ---------------------------------------


def test_a_default_library_is_filled_by_its_first_use_whatever_it_is() -> None:
    """Each method of a library not yet filled answers as the filled library does."""
    full = build_library()
    assert default_library().function_names() == full.function_names()
    assert default_library().has_function("sub_string", 3)
    assert default_library().resolve("len", ["abc"]) == full.resolve("len", ["abc"])
    assert default_library().call(FakeContext(), "sub_string", ["hello", 1, 3]) == "ell"
    assert default_library().copy().function_names() == full.function_names()
    assert default_library().get_property(FakeContext(), "abc", "len") == 3


def test_a_function_registered_before_any_use_still_wins_over_the_standard_one() -> None:
    """Filling after the host's registration would put the standard overload back over it."""
    lib = default_library()
    lib.register("to_upper", (str,), lambda s: "mine")
    assert lib.call(FakeContext(), "to_upper", ["abc"]) == "mine"
    engine = Engine()
    engine.register_fn("to_upper", lambda s: "mine", [str])
    assert engine.eval('"abc".to_upper()') == "mine"
    assert Engine().eval('"abc".to_upper()') == "ABC"


def test_a_runtime_made_before_the_library_is_filled_keeps_its_fast_path_table() -> None:
    engine = Engine()
    script = engine.compile('let s = "a b"; s.contains(" ")')
    runtime = engine.new_runtime(script)
    assert engine.eval('parse_json(`{"a": 1}`).a') == 1  # the engine's own natives come with the fill
    assert runtime.pure_calls is engine.library.pure_calls
    assert engine.run(script) is True
