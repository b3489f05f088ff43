"""Ranges (RHAI.md §4, §8): `range(a, b[, step])`, float ranges, and the range
properties `start`, `end`, `is_inclusive`, `is_exclusive`, `is_empty`, `contains`.

`range(a, b)` is the same value as `a..b`. With a step it is an iterator
value that walks like the reference's `StepRange`: it stops at `b`, goes
down with a negative step, is empty when the step points away from `b`,
and a zero step is the error "step value cannot be zero".
"""

from __future__ import annotations

from collections.abc import Iterator

from agentkernel.rhai.runtime.failures import arithmetic, in_function_call
from agentkernel.rhai.runtime.numeric import I64_MAX, I64_MIN
from agentkernel.rhai.runtime.values import IterVal, RangeVal
from agentkernel.rhai.stdlib.registry import EXCLUSIVE, Library

STEP_RANGE_INT = "rhai::packages::iter_basic::StepRange<i64>"
STEP_RANGE_FLOAT = "rhai::packages::iter_basic::StepRange<f64>"


def make_range(start: int, end: int) -> RangeVal:
    return RangeVal(start, end)


def _direction(start: float, end: float, step: float, integers: bool) -> int:
    """+1, -1, or 0 for "yields nothing"; a step that does not move fails."""
    following = start + step
    if integers and not I64_MIN <= following <= I64_MAX:
        return 0
    if following == start:
        raise in_function_call("range", arithmetic("step value cannot be zero"))
    if start < end and following > start:
        return 1
    if start > end and following < start:
        return -1
    return 0


def _walk(start: float, end: float, step: float, direction: int, integers: bool) -> Iterator[float]:
    """The reference's StepRange::next: a value is only yielded if the next one can be computed."""
    while direction:
        value = start
        start = start + step
        if integers and not I64_MIN <= start <= I64_MAX:
            return
        if (direction > 0 and start >= end) or (direction < 0 and start <= end):
            direction = 0
        yield value


def step_range(start: int, end: int, step: int) -> IterVal:
    direction = _direction(start, end, step, True)
    last_safe = (direction > 0 and end - 1 + step <= I64_MAX) or (direction < 0 and end + 1 + step >= I64_MIN)
    if last_safe:
        return IterVal(STEP_RANGE_INT, lambda: iter(range(start, end, step)))
    return IterVal(STEP_RANGE_INT, lambda: _walk(start, end, step, direction, True))


def step_range_of(r: RangeVal, step: int) -> IterVal:
    return step_range(r.start, r.end, step)


def float_step_range(start: float, end: float, step: float) -> IterVal:
    direction = _direction(start, end, step, False)
    return IterVal(STEP_RANGE_FLOAT, lambda: _walk(start, end, step, direction, False))


def start_of(r: RangeVal) -> int:
    return r.start


def end_of(r: RangeVal) -> int:
    return r.end


def is_inclusive(r: RangeVal) -> bool:
    return r.inclusive


def is_exclusive(r: RangeVal) -> bool:
    return not r.inclusive


def is_empty(r: RangeVal) -> bool:
    return not (r.start <= r.end if r.inclusive else r.start < r.end)


def contains(r: RangeVal, value: int) -> bool:
    return r.start <= value <= r.end if r.inclusive else r.start <= value < r.end


def register(lib: Library) -> None:
    lib.register("range", (int, int), make_range)
    lib.register("range", (int, int, int), step_range)
    lib.register("range", (EXCLUSIVE, int), step_range_of)
    lib.register("range", (float, float, float), float_step_range)
    properties = {
        "start": start_of,
        "end": end_of,
        "is_inclusive": is_inclusive,
        "is_exclusive": is_exclusive,
        "is_empty": is_empty,
    }
    for name, fn in properties.items():
        lib.register(name, (RangeVal,), fn)
        lib.getter(RangeVal, name, fn)
    lib.register("contains", (RangeVal, int), contains, pure=False)  # the reference did not mark it pure


__all__ = ["STEP_RANGE_FLOAT", "STEP_RANGE_INT", "register"]
