"""Char natives (Rhai 1.25 `string_more.rs`): case mapping, code points, min/max.

A case mapping that would need more than one character (`'ß'.to_upper()`)
leaves the char as it is, as the reference does.
"""

from __future__ import annotations

from agentkernel.rhai.runtime.values import Char
from agentkernel.rhai.stdlib.registry import Library, Mutated


def to_upper(c: Char) -> Char:
    upper = c.upper()
    return Char(upper) if len(upper) == 1 else c


def to_lower(c: Char) -> Char:
    lower = c.lower()
    return Char(lower) if len(lower) == 1 else c


def make_upper(c: Char) -> Mutated:
    return Mutated(to_upper(c))


def make_lower(c: Char) -> Mutated:
    return Mutated(to_lower(c))


def code_point(c: Char) -> int:
    """`'A'.to_int()` is 65."""
    return ord(c)


def max_char(a: Char, b: Char) -> Char:
    return a if a >= b else b


def min_char(a: Char, b: Char) -> Char:
    return a if a <= b else b


def register(lib: Library) -> None:
    lib.register("to_upper", (Char,), to_upper)
    lib.register("to_lower", (Char,), to_lower)
    lib.register("make_upper", (Char,), make_upper, pure=False)
    lib.register("make_lower", (Char,), make_lower, pure=False)
    lib.register("to_int", (Char,), code_point)
    lib.register("max", (Char, Char), max_char)
    lib.register("min", (Char, Char), min_char)


__all__ = ["register"]
