"""i64 and f64 arithmetic the way Rust does it (RHAI.md §5).

Integers are checked: a result outside i64 raises the reference's
ErrorArithmetic text. Floats follow IEEE 754 and never raise, where Python
would (`1.0 / 0`, `math.sqrt(-1)`, `10.0 ** 400`, `(-8.0) ** 0.5`).
Float comparisons use the reference's relative epsilon (its checked build
does), which is why `0.1 + 0.2 == 0.3` is true in Rhai.
"""

from __future__ import annotations

import math
import sys

from agentkernel.rhai.errors import RhaiRuntimeError
from agentkernel.rhai.runtime.failures import arithmetic
from agentkernel.rhai.runtime.printing import format_float_rust

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
_U64 = 2**64
_U32_MAX = 2**32 - 1
EPSILON = sys.float_info.epsilon
INF = math.inf
NAN = math.nan


def wrap_i64(value: int) -> int:
    """Two's-complement wrap into i64 (Rust's wrapping arithmetic and bit casts)."""
    value &= _U64 - 1
    return value - _U64 if value > I64_MAX else value


# -- checked integers ------------------------------------------------------------------------


def int_div(x: int, y: int) -> int:
    """`/` on i64: truncates toward zero; zero divisor and MIN / -1 fail."""
    if y == 0:
        raise arithmetic(f"Division by zero: {x} / {y}")
    if y == -1 and x == I64_MIN:
        raise arithmetic(f"Division overflow: {x} / {y}")
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def int_rem(x: int, y: int) -> int:
    """`%` on i64: the sign of the dividend; zero divisor and MIN % -1 fail."""
    if y == 0 or (y == -1 and x == I64_MIN):
        raise arithmetic(f"Modulo division by zero or overflow: {x} % {y}")
    r = abs(x) % abs(y)
    return -r if x < 0 else r


def int_pow(x: int, y: int) -> int:
    """`**` on i64: a negative exponent fails, and so does any result outside i64.
    Large exponents are decided without computing a huge Python integer."""
    if y > _U32_MAX:
        raise arithmetic(f"Exponential overflow: {x} ** {y}")
    if y < 0:
        raise arithmetic(f"Integer raised to a negative power: {x} ** {y}")
    if x in (0, 1) or y == 0:
        return 1 if y == 0 else x
    if x == -1:
        return -1 if y & 1 else 1
    if y >= 64:
        raise arithmetic(f"Exponential overflow: {x} ** {y}")
    r: int = x**y
    if I64_MIN <= r <= I64_MAX:
        return r
    raise arithmetic(f"Exponential overflow: {x} ** {y}")


def int_neg(x: int) -> int:
    if x == I64_MIN:
        raise arithmetic(f"Negation overflow: -{x}")
    return -x


def shift_left(x: int, y: int) -> int:
    """`<<` never fails: 64 or more gives 0, a negative amount shifts right."""
    if y < 0:
        return shift_right(x, I64_MAX if y == I64_MIN else -y)
    if y >= 64:
        return 0
    return wrap_i64(x << y)


def shift_right(x: int, y: int) -> int:
    """`>>` is arithmetic; 64 or more gives 0 or -1, a negative amount shifts left."""
    if y < 0:
        return shift_left(x, I64_MAX if y == I64_MIN else -y)
    return x >> (y if y < 64 else 63)


# -- IEEE floats ------------------------------------------------------------------------------


def fdiv(x: float, y: float) -> float:
    """`/` on f64: a zero divisor gives ±inf or NaN."""
    try:
        return x / y
    except ZeroDivisionError:
        if x == 0 or math.isnan(x):
            return NAN
        return INF if (x > 0) == (math.copysign(1.0, y) > 0) else -INF


def frem(x: float, y: float) -> float:
    """`%` on f64: Rust's remainder, with the sign of the dividend (C `fmod`)."""
    try:
        return math.fmod(x, y)
    except ValueError:
        return NAN


def _is_odd_integer(y: float) -> bool:
    return math.isfinite(y) and y == math.floor(y) and math.fmod(y, 2.0) != 0.0


def powf(x: float, y: float) -> float:
    """`**` on f64 (Rust `powf`): overflow gives ±inf, a negative base with a fraction NaN."""
    try:
        return math.pow(x, y)
    except OverflowError:
        return -INF if x < 0 and _is_odd_integer(y) else INF
    except ValueError:
        if x == 0:
            negative = math.copysign(1.0, x) < 0 and _is_odd_integer(y)
            return -INF if negative else INF
        return NAN


def rust_max(a: float, b: float) -> float:
    """Rust's `f64::max`: a NaN argument is ignored."""
    if a != a:
        return b
    if b != b:
        return a
    return a if a >= b else b


def _scale(x: float, y: float) -> float:
    """The reference's comparison scale: 1 when either side is zero, else the larger
    magnitude, a NaN ignored as Rust's `f64::max` does (so NaN against 0 gives 0)."""
    if x * y == 0.0:
        return 1.0
    ax, ay = abs(x), abs(y)
    return ax if ax >= ay or ay != ay else ay


def feq(x: float, y: float) -> bool:
    """`==` on f64 in the reference's checked build: equal within a relative epsilon."""
    m = _scale(x, y)
    return m == 0.0 or abs(x - y) / m <= EPSILON


def fne(x: float, y: float) -> bool:
    m = _scale(x, y)
    return m != 0.0 and abs(x - y) / m > EPSILON


def fgt(x: float, y: float) -> bool:
    m = _scale(x, y)
    return m != 0.0 and (x - y) / m > EPSILON


def fge(x: float, y: float) -> bool:
    m = _scale(x, y)
    return m == 0.0 or (x - y) / m > -EPSILON


def flt(x: float, y: float) -> bool:
    m = _scale(x, y)
    return m != 0.0 and (y - x) / m > EPSILON


def fle(x: float, y: float) -> bool:
    m = _scale(x, y)
    return m == 0.0 or (y - x) / m > -EPSILON


def float_to_int(x: float) -> int:
    """`to_int` on f64: truncates; past i64 (or ±inf) fails; NaN gives 0 (a Rust `as` cast)."""
    if x > 9223372036854775807.0 or x < -9223372036854775808.0:
        raise arithmetic(f"Integer overflow: to_int({format_float_rust(x)})")
    if x != x:
        return 0
    return max(I64_MIN, min(I64_MAX, int(x)))


def overflow(op: str, x: int, y: int) -> RhaiRuntimeError:
    """`Addition overflow: 9223372036854775807 + 1` and its siblings."""
    names = {"+": "Addition", "-": "Subtraction", "*": "Multiplication"}
    return arithmetic(f"{names[op]} overflow: {x} {op} {y}")


__all__ = [
    "EPSILON",
    "I64_MAX",
    "I64_MIN",
    "fdiv",
    "feq",
    "fge",
    "fgt",
    "fle",
    "float_to_int",
    "flt",
    "fne",
    "frem",
    "int_div",
    "int_neg",
    "int_pow",
    "int_rem",
    "overflow",
    "powf",
    "rust_max",
    "shift_left",
    "shift_right",
    "wrap_i64",
]
