"""Math natives (RHAI.md §13 "Math"; Rhai 1.25 `math_basic.rs`, `arithmetic.rs`, `logic.rs`).

Float functions take f64 only (`sqrt(4)` is "Function not found: sqrt (i64)")
and follow Rust: NaN or ±inf instead of Python's ValueError/OverflowError;
`round` rounds half away from zero; `asinh`/`acosh`/`atanh` use Rust's own
formulas so the last digit matches.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from agentkernel.rhai.runtime.failures import arithmetic
from agentkernel.rhai.runtime.numeric import INF, NAN, fdiv, int_neg
from agentkernel.rhai.stdlib.registry import Library

FloatFn = Callable[[float], float]


def _keep_zero_sign(result: float, x: float) -> float:
    """A whole-number result of zero keeps the argument's sign, as Rust's `floor` & co. do."""
    return math.copysign(0.0, x) if result == 0 else result


def floor(x: float) -> float:
    return x if not math.isfinite(x) else _keep_zero_sign(float(math.floor(x)), x)


def ceiling(x: float) -> float:
    return x if not math.isfinite(x) else _keep_zero_sign(float(math.ceil(x)), x)


def trunc(x: float) -> float:
    return x if not math.isfinite(x) else _keep_zero_sign(float(math.trunc(x)), x)


def round_half_away(x: float) -> float:
    """Rust's `round`: halves go away from zero (`2.5` -> 3, `-1.5` -> -2)."""
    if not math.isfinite(x):
        return x
    whole = float(math.trunc(x))
    if abs(x - whole) >= 0.5:
        whole += math.copysign(1.0, x)
    return _keep_zero_sign(whole, x)


def fraction(x: float) -> float:
    return x - trunc(x)


def sqrt(x: float) -> float:
    return NAN if x < 0 else math.sqrt(x)


def exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return INF


def ln(x: float) -> float:
    if x == 0:
        return -INF
    return NAN if x < 0 else math.log(x)


def log10(x: float) -> float:
    if x == 0:
        return -INF
    return NAN if x < 0 else math.log10(x)


def log_base(x: float, base: float) -> float:
    """Rust's `x.log(base)`: `ln(x) / ln(base)`."""
    return fdiv(ln(x), ln(base))


def ln_1p(x: float) -> float:
    if x == -1:
        return -INF
    return NAN if x < -1 else math.log1p(x)


def asinh(x: float) -> float:
    ax = abs(x)
    ix = fdiv(1.0, ax)
    return math.copysign(ln_1p(ax + fdiv(ax, math.hypot(1.0, ix) + ix)), x)


def acosh(x: float) -> float:
    if not x >= 1.0:
        return NAN
    return ln(x + math.sqrt(x - 1.0) * math.sqrt(x + 1.0))


def atanh(x: float) -> float:
    return 0.5 * ln_1p(fdiv(2.0 * x, 1.0 - x))


def _nan_on_domain_error(fn: FloatFn) -> FloatFn:
    """A libm function whose domain errors are NaN (sin(inf), asin(2)) and overflows ±inf."""

    def safe(x: float) -> float:
        try:
            return fn(x)
        except ValueError:
            return NAN
        except OverflowError:
            return math.copysign(INF, x) if fn is math.sinh else INF

    safe.__name__ = fn.__name__
    return safe


def atan2(x: float, y: float) -> float:
    return math.atan2(x, y)


def hypot(x: float, y: float) -> float:
    return math.hypot(x, y)


def to_degrees(x: float) -> float:
    return x * (180.0 / math.pi)


def to_radians(x: float) -> float:
    return x * (math.pi / 180.0)


def float_abs(x: float) -> float:
    return math.fabs(x)


def float_sign(x: float) -> int:
    if x == 0:
        return 0
    if x != x:
        raise arithmetic("Sign of NaN is undefined")
    return 1 if x > 0 else -1


def int_abs(x: int) -> int:
    """`abs` on i64: `abs(MIN)` fails with "Negation overflow"."""
    return int_neg(x) if x < 0 else x


def int_sign(x: int) -> int:
    return (x > 0) - (x < 0)


def max_number(x: float, y: float) -> float:
    """`max(a, b)` when a float is involved: the int side becomes a float."""
    x, y = float(x), float(y)
    return x if x >= y else y


def min_number(x: float, y: float) -> float:
    x, y = float(x), float(y)
    return x if x <= y else y


def max_int(x: int, y: int) -> int:
    return x if x >= y else y


def min_int(x: int, y: int) -> int:
    return x if x <= y else y


def pi() -> float:
    return math.pi


def e() -> float:
    return math.e


def _float_predicates() -> dict[str, Callable[[float], bool]]:
    return {
        "is_nan": math.isnan,
        "is_finite": math.isfinite,
        "is_infinite": math.isinf,
        "is_zero": lambda x: x == 0.0,
    }


def _int_predicates() -> dict[str, Callable[[int], bool]]:
    return {"is_odd": lambda x: x % 2 != 0, "is_even": lambda x: x % 2 == 0, "is_zero": lambda x: x == 0}


_FLOAT_FUNCTIONS: dict[str, FloatFn] = {
    "floor": floor,
    "ceiling": ceiling,
    "round": round_half_away,
    "int": trunc,
    "fraction": fraction,
    "sqrt": sqrt,
    "exp": exp,
    "ln": ln,
    "log": log10,
    "sin": _nan_on_domain_error(math.sin),
    "cos": _nan_on_domain_error(math.cos),
    "tan": _nan_on_domain_error(math.tan),
    "asin": _nan_on_domain_error(math.asin),
    "acos": _nan_on_domain_error(math.acos),
    "atan": math.atan,
    "sinh": _nan_on_domain_error(math.sinh),
    "cosh": _nan_on_domain_error(math.cosh),
    "tanh": math.tanh,
    "asinh": asinh,
    "acosh": acosh,
    "atanh": atanh,
    "to_degrees": to_degrees,
    "to_radians": to_radians,
    "abs": float_abs,
}
_FLOAT_GETTERS = ("floor", "ceiling", "round", "int", "fraction")


def register(lib: Library) -> None:
    for name, fn in _FLOAT_FUNCTIONS.items():
        lib.register(name, (float,), fn)
    for name in _FLOAT_GETTERS:
        lib.getter(float, name, _FLOAT_FUNCTIONS[name])
    for name, test in _float_predicates().items():
        lib.register(name, (float,), test)
        lib.getter(float, name, test)
    for name, check in _int_predicates().items():
        lib.register(name, (int,), check)
        lib.getter(int, name, check)
    lib.register("log", (float, float), log_base)
    lib.register("atan", (float, float), atan2)
    lib.register("hypot", (float, float), hypot)
    lib.register("sign", (float,), float_sign)
    lib.register("abs", (int,), int_abs)
    lib.register("sign", (int,), int_sign)
    lib.register("max", (int, int), max_int)
    lib.register("min", (int, int), min_int)
    for pair in ((float, float), (int, float), (float, int)):
        lib.register("max", pair, max_number)
        lib.register("min", pair, min_number)
    lib.register("PI", (), pi)
    lib.register("E", (), e)


__all__ = ["register"]
