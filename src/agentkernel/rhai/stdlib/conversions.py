"""Conversions (RHAI.md §13 "Conversions"): parse_int, parse_float, to_int, to_float,
to_string, to_debug.

Parsing follows Rust's `i64::from_str_radix` and `f64::from_str` on the
trimmed text, with their error texts: no `_`, no `0x`, no Unicode digits.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from agentkernel.rhai.runtime import numeric
from agentkernel.rhai.runtime.context import NativeContext
from agentkernel.rhai.runtime.failures import arithmetic
from agentkernel.rhai.runtime.printing import calls_to_format, to_debug, to_string
from agentkernel.rhai.stdlib.registry import ANY, Library
from agentkernel.rhai.stdlib.text import trim

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


@cache
def _radix_digits(radix: int) -> re.Pattern[str]:
    """The ASCII digits of `radix`, either case (`c.lower() in _DIGITS[:radix]`): compiled on first
    use, not at import (35 patterns: a part of `agentkernel rhai run`'s start-up)."""
    return re.compile(f"[{re.escape(_DIGITS[:radix] + _DIGITS[10:radix].upper())}]+")


_FLOAT = re.compile(
    r"[+-]?(?:inf|infinity|nan|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)", re.IGNORECASE
)


def _int_failure(original: str, reason: str) -> Exception:
    return arithmetic(f"Error parsing integer number '{original}': {reason}")


def parse_int_radix(s: str, radix: int) -> int:
    """`parse_int(s, radix)`: whitespace trimmed, an optional sign, digits of the radix."""
    if not 2 <= radix <= 36:
        raise arithmetic(f"Invalid radix: '{radix}'")
    body = trim(s)
    if not body:
        raise _int_failure(s, "cannot parse integer from empty string")
    negative = body[0] == "-"
    digits = body[1:] if body[0] in "+-" else body
    if not digits or not _radix_digits(radix).fullmatch(digits):
        raise _int_failure(s, "invalid digit found in string")
    significant = digits.lstrip("0")
    value = int(significant, radix) if 0 < len(significant) <= 64 else (0 if not significant else None)
    if value is not None:
        value = -value if negative else value
        if numeric.I64_MIN <= value <= numeric.I64_MAX:
            return value
    reason = (
        "number too small to fit in target type" if negative else "number too large to fit in target type"
    )
    raise _int_failure(s, reason)


def parse_int(s: str) -> int:
    return parse_int_radix(s, 10)


def parse_float(s: str) -> float:
    """`parse_float(s)`: Rust's float syntax (`1e3`, `.5`, `inf`, `NaN`) after trimming."""
    body = trim(s)
    if not body:
        raise arithmetic(f"Error parsing floating-point number '{s}': cannot parse float from empty string")
    if not _FLOAT.fullmatch(body):
        raise arithmetic(f"Error parsing floating-point number '{s}': invalid float literal")
    return float(body)


def int_to_int(x: int) -> int:
    return x


def float_to_float(x: float) -> float:
    return x


def int_to_float(x: int) -> float:
    return float(x)


def any_to_string(ctx: NativeContext, value: Any) -> str:
    ctx.count_apart(calls_to_format(value))
    return to_string(value)


def any_to_debug(ctx: NativeContext, value: Any) -> str:
    ctx.count_apart(calls_to_format(value))
    return to_debug(value)


def register(lib: Library) -> None:
    lib.register("parse_int", (str,), parse_int)
    lib.register("parse_int", (str, int), parse_int_radix)
    lib.register("parse_float", (str,), parse_float)
    lib.register("to_int", (int,), int_to_int)
    lib.register("to_int", (float,), numeric.float_to_int)
    lib.register("to_float", (int,), int_to_float)
    lib.register("to_float", (float,), float_to_float)
    lib.register("to_string", (ANY,), any_to_string, needs_context=True)
    lib.register("to_debug", (ANY,), any_to_debug, needs_context=True)


__all__ = ["parse_float", "parse_int", "parse_int_radix", "register"]
