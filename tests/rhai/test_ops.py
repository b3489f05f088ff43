"""Rhai's operators (`rhai/ops.py`), called directly with Python values.

Each case is one of the reference's recorded results (`rhai-conformance/
stdlib.jsonl` "op" topics and `cases.jsonl`), translated from Rhai source
into `ops.binary(symbol, a, b)`; results compare as `<type_of>: <to_string>`.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import pytest

from agentkernel.rhai.errors import RhaiRuntimeError
from agentkernel.rhai.runtime import ops
from agentkernel.rhai.runtime.values import Char, FnPtr, Timestamp
from tests.rhai.fakes import S, closure, error, ir, op, r, show

OPERATOR_CASES = [
    # ==, != (stdlib.jsonl "op ==", "op !=")
    ("==", 7, 7, "bool: true"),
    ("==", True, False, "bool: false"),
    ("==", None, None, "bool: true"),
    ("==", 0.1 + 0.2, 0.3, "bool: true"),
    ("==", "abc", "abc", "bool: true"),
    ("==", Char("x"), Char("x"), "bool: true"),
    ("==", Char("q"), "q", "bool: true"),
    ("==", "q", Char("q"), "bool: true"),
    ("==", None, "", "bool: false"),
    ("==", bytearray([7] * 3), bytearray([7] * 3), "bool: true"),
    ("==", r(1, 4), ir(1, 3), "ERR Function not found: == (range, range=)"),
    ("==", r(2, 5), r(2, 5), "bool: true"),
    ("==", ir(0, 0), ir(0, 1), "bool: false"),
    ("==", [1, "two", 3.0], [1, "two", 3.0], "bool: true"),
    ("==", {"a": 1, "b": [2]}, {"b": [2], "a": 1}, "bool: true"),
    ("==", [1], 1, "bool: false"),
    ("==", [1, 2], [1, 2.0], "bool: true"),
    ("==", {"a": 1}, {"a": 1.0}, "bool: true"),
    ("==", 1, 1.0, "bool: true"),
    ("==", 1, "1", "bool: false"),
    ("==", FnPtr("a"), FnPtr("a"), "ERR Function not found: == (Fn, Fn)"),
    ("!=", 3, 4, "bool: true"),
    ("!=", False, False, "bool: false"),
    ("!=", None, None, "bool: false"),
    ("!=", "x", "y", "bool: true"),
    ("!=", Char("a"), Char("b"), "bool: true"),
    ("!=", r(1, 3), ir(1, 3), "bool: true"),
    ("!=", {"x": 1}, {"x": 2}, "bool: true"),
    ("!=", 1, 1.0, "bool: false"),
    ("!=", 1, "1", "bool: true"),
    # ordering (op >, >=, <, <=)
    (">", True, False, "bool: true"),
    (">", 2.5, 2, "bool: true"),
    (">", "b", "abc", "bool: true"),
    (">", Char("b"), "a", "bool: true"),
    (">", [2], [1], "ERR Function not found: > (array, array)"),
    (">=", 4, 4, "bool: true"),
    (">=", False, True, "bool: false"),
    (">=", None, None, "bool: false"),
    (">=", 1, 1.0001, "bool: false"),
    (">=", "abc", "abc", "bool: true"),
    (">=", Char("a"), Char("B"), "bool: true"),
    (">=", "a", Char("a"), "bool: true"),
    (">=", 1, "0", "bool: false"),
    ("<", -1, 0, "bool: true"),
    ("<", False, True, "bool: true"),
    ("<", None, None, "bool: false"),
    ("<", -0.0, 0.0, "bool: false"),
    ("<", 1.5, 2, "bool: true"),
    ("<", 1, 1.5, "bool: true"),
    ("<", Char("a"), "a", "bool: false"),
    ("<", 1, None, "bool: false"),
    ("<", "", Char("a"), "bool: true"),
    ("<", "B", "a", "bool: true"),
    ("<", r(1, 2), ir(1, 2), "ERR Function not found: < (range, range=)"),
    ("<=", 3, 2, "bool: false"),
    ("<=", 1e10, 1e11, "bool: true"),
    ("<=", 2.0, 2, "bool: true"),
    ("<=", 2, 1.99, "bool: false"),
    ("<=", "1", Char("1"), "bool: true"),
    ("<=", None, "x", "bool: false"),
    ("<", True, 1, "bool: false"),
    # bitwise (op & | ^)
    ("&", 12, 10, "i64: 8"),
    ("&", -1, 255, "i64: 255"),
    ("&", True, True, "bool: true"),
    ("&", 1, True, "ERR Function not found: & (i64, bool)"),
    ("|", 12, 3, "i64: 15"),
    ("|", 0, -8, "i64: -8"),
    ("|", 1.5, 2, "ERR Function not found: | (f64, i64)"),
    ("^", 12, 10, "i64: 6"),
    ("^", -1, 0, "i64: -1"),
    ("^", "a", "b", f"ERR Function not found: ^ ({S}, {S})"),
    ("^", True, True, "bool: false"),
    # ranges (op .., ..=)
    ("..", 3, 7, "range: 3..7"),
    ("..", -3, -1, "range: -3..-1"),
    ("..", 1.5, 3, "ERR Function not found: .. (f64, i64)"),
    ("..=", 3, 7, "range=: 3..=7"),
    ("..=", "a", "c", f"ERR Function not found: ..= ({S}, {S})"),
    # + (op +)
    ("+", 1.5, 2, "f64: 3.5"),
    ("+", "foo", "bar", "string: foobar"),
    ("+", Char("a"), Char("b"), "string: ab"),
    ("+", Char("a"), "bc", "string: abc"),
    ("+", "ab", Char("c"), "string: abc"),
    ("+", None, "z", "string: z"),
    ("+", "z", None, "string: z"),
    ("+", bytearray([1]), bytearray([2, 2]), "blob: [010202]"),
    ("+", [1, 2], [3], "array: [1, 2, 3]"),
    ("+", [], [], "array: []"),
    ("+", 42, " is the answer", "string: 42 is the answer"),
    ("+", "pi ", 3.5, "string: pi 3.5"),
    ("+", "b", bytearray(b"AA"), "string: bAA"),
    ("+", 1, True, "ERR Function not found: + (i64, bool)"),
    ("+", True, 1, "ERR Function not found: + (bool, i64)"),
    ("+", "x", [1, 2], "string: x[1, 2]"),
    ("+", "a", 1, "string: a1"),
    ("+", 9223372036854775807, 1, "ERR Addition overflow: 9223372036854775807 + 1"),
    ("+", {"a": 1}, {"a": 2, "b": 3}, 'map: #{"a": 2, "b": 3}'),
    ("+", bytearray(b"a"), Char("é"), "blob: [61c3a9]"),
    # - * / % **
    ("-", 10, 3, "i64: 7"),
    ("-", 5, 0.5, "f64: 4.5"),
    ("-", "x", 1, f"ERR Function not found: - ({S}, i64)"),
    ("-", "hello world", "o", "string: hell wrld"),
    ("-", "abc", Char("b"), "string: ac"),
    ("-", "", "x", "string: x"),
    ("-", -9223372036854775807 - 1, 1, "ERR Subtraction overflow: -9223372036854775808 - 1"),
    ("*", 6, 7, "i64: 42"),
    ("*", 3, 0.5, "f64: 1.5"),
    ("*", "ab", 3, f"ERR Function not found: * ({S}, i64)"),
    ("*", 2**62, 2, "ERR Multiplication overflow: 4611686018427387904 * 2"),
    ("/", 7, 2, "i64: 3"),
    ("/", -7, 2, "i64: -3"),
    ("/", -5, 2, "i64: -2"),
    ("/", 1, 0, "ERR Division by zero: 1 / 0"),
    ("/", -9223372036854775807 - 1, -1, "ERR Division overflow: -9223372036854775808 / -1"),
    ("/", 1.0, 0, "f64: inf"),
    ("/", -1.0, 0, "f64: -inf"),
    ("/", 0.0, 0.0, "f64: NaN"),
    ("/", 3, 2.0, "f64: 1.5"),
    ("/", 2.0, 3, "f64: 0.6666666666666666"),
    ("%", -7.5, 2, "f64: -1.5"),
    ("%", -5, 3, "i64: -2"),
    ("%", 5, -3, "i64: 2"),
    ("%", 5.0, 3, "f64: 2.0"),
    ("%", 7.0, 2.5, "f64: 2.0"),
    ("%", 1, 0, "ERR Modulo division by zero or overflow: 1 % 0"),
    ("%", -9223372036854775807 - 1, -1, "ERR Modulo division by zero or overflow: -9223372036854775808 % -1"),
    ("%", 1.0, 0.0, "f64: NaN"),
    ("**", 3, 40, "ERR Exponential overflow: 3 ** 40"),
    ("**", 2, 63, "ERR Exponential overflow: 2 ** 63"),
    ("**", 2, 62, "i64: 4611686018427387904"),
    ("**", 2, -1, "ERR Integer raised to a negative power: 2 ** -1"),
    ("**", 2, 10**12, "ERR Exponential overflow: 2 ** 1000000000000"),
    ("**", -1, 10**9 + 1, "i64: -1"),
    ("**", 4.0, -2, "f64: 0.0625"),
    ("**", 0, 0, "i64: 1"),
    ("**", 2.0, -1, "f64: 0.5"),
    ("**", 2, 2.0, "f64: 4.0"),
    ("**", -2, 0.5, "f64: NaN"),
    ("**", 10.0, 400, "f64: inf"),
    ("**", -10.0, 401, "f64: -inf"),
    ("**", 0.0, -1, "f64: inf"),
    # shifts (op >> <<)
    (">>", 256, 4, "i64: 16"),
    (">>", -17, 2, "i64: -5"),
    (">>", 1, -1, "i64: 2"),
    (">>", -1, 63, "i64: -1"),
    (">>", -16, 2, "i64: -4"),
    (">>", -5, 100, "i64: -1"),
    (">>", 5, 64, "i64: 0"),
    ("<<", 1, 63, "i64: -9223372036854775808"),
    ("<<", 8, -2, "i64: 2"),
    ("<<", 1, 70, "i64: 0"),
    ("<<", 1, -9223372036854775807 - 1, "i64: 0"),
    ("<<", 3.0, 1, "ERR Function not found: << (f64, i64)"),
    # in / !in (op in)
    ("in", 2, [1, 2, 3], "bool: true"),
    ("in", 5, ir(1, 5), "bool: true"),
    ("in", 5, r(1, 5), "bool: false"),
    ("in", 1, ir(5, 1), "bool: false"),
    ("in", "b", {"a": 1}, "bool: false"),
    ("in", Char("e"), "hello", "bool: true"),
    ("in", "ll", "hello", "bool: true"),
    ("in", 1.5, r(1, 5), "ERR Function not found: contains (range, f64)"),
    ("in", "2", [1, 2], "bool: false"),
    ("in", 0x141, bytearray(b"A"), "bool: true"),
    ("!in", 4, [1, 2, 3], "bool: true"),
]


@pytest.mark.parametrize(("symbol", "a", "b", "expected"), OPERATOR_CASES)
def test_binary_operators(symbol: str, a: Any, b: Any, expected: str) -> None:
    assert op(symbol, a, b) == expected


def test_binary_table_and_dispatch_agree() -> None:
    assert set(ops.BINARY) == {
        "+", "-", "*", "/", "%", "**", "<<", ">>", "&", "|", "^",
        "==", "!=", "<", "<=", ">", ">=", "..", "..=", "in", "!in",
    }  # fmt: skip
    assert ops.BINARY["+"](40, 2) == 42
    assert ops.equals([1, 2], [1, 2.0]) is True


def test_float_equality_is_relative_and_nan_is_quirky() -> None:
    assert ops.binary("==", 1e300, 1e300 * (1 + 2**-52)) is True
    assert ops.binary("==", math.inf, math.inf) is False
    assert ops.binary("==", math.nan, 0.0) is True  # the reference's f64::max ignores NaN
    assert ops.binary("!=", math.nan, math.nan) is False


def test_unary_operators() -> None:
    assert ops.unary("-", 7) == -7
    assert ops.unary("-", 2.5) == -2.5
    assert ops.unary("+", 2.5) == 2.5
    assert ops.unary("!", False) is True
    assert error(lambda: ops.unary("-", -(2**63))) == "Negation overflow: --9223372036854775808"
    assert error(lambda: ops.unary("!", 5)) == "Function not found: ! (i64)"
    assert error(lambda: ops.unary("-", "a")) == f"Function not found: - ({S})"
    assert error(lambda: ops.unary("-", True)) == "Function not found: - (bool)"


def test_operator_errors_are_arithmetic_without_position() -> None:
    with pytest.raises(RhaiRuntimeError) as info:
        ops.binary("+", 2**63 - 1, 1)
    assert (info.value.kind, info.value.pos) == ("ErrorArithmetic", None)
    with pytest.raises(RhaiRuntimeError) as info:
        ops.binary("+", True, 1)
    assert info.value.kind == "ErrorFunctionNotFound"
    assert info.value.extras == {"function": "+ (bool, i64)"}


def test_plus_copies_nested_containers() -> None:
    inner = [1]
    joined = ops.binary("+", [inner], [])
    joined[0].append(2)
    assert inner == [1]


COMPOUND_CASES = [
    ("&=", 14, 7, "i64: 6"),
    ("&", True, False, "bool: false"),
    ("&", True, 1, "ERR Function not found: & (bool, i64)"),
    ("+=", 9223372036854775807, 1, "ERR Addition overflow: 9223372036854775807 + 1"),
    ("+", 1.5, 1.5, "f64: 3.0"),
    ("+", Char("x"), "yz", "string: xyz"),
    ("+", Char("x"), "", "char: x"),
    ("+", [1], [2, 3], "array: [1, 2, 3]"),
    ("+", [1], [[2]], "array: [1, [2]]"),
    ("+", [1], 4, "array: [1, 4]"),
    ("+", bytearray([1]), bytearray([2]), "blob: [0102]"),
    ("+", bytearray(), 65, "blob: [41]"),
    ("+", bytearray(b"A"), 0x142, "blob: [4142]"),
    ("+", bytearray(), "hi", "blob: [6869]"),
    ("+", {"a": 1}, {"b": 2, "a": 9}, 'map: #{"a": 9, "b": 2}'),
    ("+", "b:", bytearray(b"aa"), "string: b:aa"),
    ("+", "abc", 5, "string: abc5"),
    ("-=", 5, 10, "i64: -5"),
    ("-", "hello world", "o", "string: hell wrld"),
    ("-", 10, 2.5, "f64: 7.5"),
    ("*", 6, -7, "i64: -42"),
    ("*", 0.5, 0.5, "f64: 0.25"),
    ("/", 1.0, 8.0, "f64: 0.125"),
    ("/", 9.0, 2, "f64: 4.5"),
    ("/", 1, 0, "ERR Division by zero: 1 / 0"),
    ("%", 20, 6, "i64: 2"),
    ("%", 5.5, 2.0, "f64: 1.5"),
    ("%", 5, 0, "ERR Modulo division by zero or overflow: 5 % 0"),
    ("**=", 9.0, 0.5, "f64: 3.0"),
    ("**", 5, 2, "i64: 25"),
    (">>", 1024, 3, "i64: 128"),
    (">>=", -1024, 3, "i64: -128"),
    ("<<", 3, 4, "i64: 48"),
    ("^", 255, 15, "i64: 240"),
    ("^=", True, True, "bool: false"),
    ("+", 5, 1.5, "f64: 6.5"),
    ("+", bytearray(), 1.5, "ERR Function not found: + (blob, f64)"),
]


@pytest.mark.parametrize(("symbol", "a", "b", "expected"), COMPOUND_CASES)
def test_compound_assignment(symbol: str, a: Any, b: Any, expected: str) -> None:
    try:
        got = show(ops.compound(symbol, a, b))
    except RhaiRuntimeError as err:
        got = "ERR " + err.message
    assert got == expected


def test_compound_plus_changes_containers_in_place() -> None:
    a = [1]
    assert ops.compound("+", a, 2) is a
    m = {"a": 1}
    assert ops.compound("+=", m, {"b": 2}) is m
    b = bytearray()
    assert ops.compound("+", b, 1) is b
    inner = [9]
    a2: list[Any] = []
    ops.compound("+", a2, inner)
    ops.compound("+", a2, [inner])
    a2[1].append(0)
    assert inner == [9]


def test_timestamp_operators() -> None:
    t = Timestamp(100.0)
    assert ops.binary("-", Timestamp(5.0), Timestamp(2.5)) == 2.5
    later = ops.binary("+", t, 1.5)
    assert type(later) is Timestamp and later.seconds == 101.5
    assert ops.binary(">", later, t) is True
    assert ops.binary("==", t, Timestamp(100.0)) is True
    assert ops.binary("-", t, 2).seconds == 98.0
    assert ops.binary("+", t, 0.0019).seconds == 100.001
    assert ops.binary("-", t, -1.5).seconds == 101.5
    assert error(lambda: ops.binary("+", t, 2**63 - 1)) == (
        "Timestamp overflow when adding 9223372036854775807 second(s)"
    )
    assert error(lambda: ops.binary("+", t, math.inf)) == "Integer overflow for timestamp add: inf"
    assert ops.binary("<", t, 1) is False


ODD_VALUES: list[Any] = [
    None, True, 0, -1, 2**63 - 1, -(2**63), 0.0, -0.0, math.nan, math.inf, -math.inf, 1e308, "", "é🦀",
    Char("x"), [], [1, [2]], {}, {"a": 1}, bytearray(), bytearray(b"\xff\x00"), r(0, 0), ir(-5, 5),
    r(2**63 - 1, -(2**63)), FnPtr("abs"), closure(lambda *a: None), Timestamp(0.0),
]  # fmt: skip


@pytest.mark.parametrize("symbol", sorted(ops.BINARY))
def test_operators_never_leak_python_errors(symbol: str) -> None:
    for a in ODD_VALUES:
        for b in ODD_VALUES:
            with contextlib.suppress(RhaiRuntimeError):
                ops.binary(symbol, a, b)
