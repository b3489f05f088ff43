"""Array natives without callbacks (RHAI.md §13 "Arrays"; Rhai 1.25 `array_basic.rs`).

Arrays are Python lists changed in place. Arrays are values: an element
stored from an argument, or handed out from the array, is a copy when it
is itself a container. Positions follow the reference's rules: a negative
position counts from the end, and most out-of-range positions are clamped
rather than errors. Callback natives (`map`, `filter`, `sort(fn)`, …) are in
`higher_order.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cmp_to_key
from typing import Any

from agentkernel.rhai.errors import RhaiRuntimeError
from agentkernel.rhai.runtime import ops
from agentkernel.rhai.runtime.context import NativeContext
from agentkernel.rhai.runtime.copying import clone
from agentkernel.rhai.runtime.failures import not_found_text, raw_type_name
from agentkernel.rhai.runtime.numeric import I64_MAX
from agentkernel.rhai.runtime.pacing import CHUNK, paced, poll
from agentkernel.rhai.runtime.values import TAGGED, TAGGED_CONTAINERS, Char, RangeVal, has_tagged, plain
from agentkernel.rhai.stdlib.limits import HARD_MAX_SIZE, reserve_array, reserve_copies
from agentkernel.rhai.stdlib.registry import ANY, Library
from agentkernel.rhai.stdlib.text import exclusive_bounds, inclusive_bounds, index_from_end, offset_len

_CONTAINERS = frozenset({list, dict, bytearray, *TAGGED_CONTAINERS})
CONTAINERS = _CONTAINERS  # the values `own` copies
_SORTABLE = frozenset({int, Char, str, bool})


def own(value: Any) -> Any:
    """A copy of a container (arrays, maps and BLOBs are values); anything else as is."""
    return clone(value) if type(value) in _CONTAINERS else value


def bounds_of(r: RangeVal) -> tuple[int, int]:
    """A range argument as (start, length)."""
    return inclusive_bounds(r.start, r.end) if r.inclusive else exclusive_bounds(r.start, r.end)


# -- reading ------------------------------------------------------------------------------------------


def length(a: list[Any]) -> int:
    return len(a)


def is_empty(a: list[Any]) -> bool:
    return not a


def get(a: list[Any], index: int) -> Any:
    """`a.get(i)`: a copy of the element, `()` past the end (a too-negative index means 0)."""
    if not a:
        return None
    at, _ = offset_len(len(a), index, 0)
    return own(a[at]) if at < len(a) else None


def contains(a: list[Any], value: Any) -> bool:
    return ops.contains(a, value)


def index_of(a: list[Any], value: Any) -> int:
    return index_of_from(a, value, 0)


def index_of_from(a: list[Any], value: Any, start: int) -> int:
    if not a:
        return -1
    begin, _ = offset_len(len(a), start, 0)
    for i in range(begin, len(a)):
        if not i % CHUNK:
            poll()
        if ops.element_equals(a[i], value):
            return i
    return -1


def count_comparisons(ctx: NativeContext, a: list[Any], start: int = 0) -> None:
    """The reference compares items with `==` called as a native's call of another (counted
    on a copy of its state, `count_apart`): 1 when there is an item to compare."""
    if a and offset_len(len(a), start, 0)[0] < len(a):
        ctx.count_apart(1)


def contains_counted(ctx: NativeContext, a: list[Any], value: Any) -> bool:
    count_comparisons(ctx, a)
    return contains(a, value)


def index_of_counted(ctx: NativeContext, a: list[Any], value: Any) -> int:
    count_comparisons(ctx, a)
    return index_of_from(a, value, 0)


def index_of_from_counted(ctx: NativeContext, a: list[Any], value: Any, start: int) -> int:
    count_comparisons(ctx, a, start)
    return index_of_from(a, value, start)


def extract(a: list[Any], start: int, count: int) -> list[Any]:
    if not a or count <= 0:
        return []
    begin, count = offset_len(len(a), start, count)
    return [own(v) for v in a[begin : begin + count]]


def extract_from(a: list[Any], start: int) -> list[Any]:
    return extract(a, start, I64_MAX)


def extract_range(a: list[Any], r: RangeVal) -> list[Any]:
    return extract(a, *bounds_of(r))


# -- growing ------------------------------------------------------------------------------------------------


def push(ctx: NativeContext, a: list[Any], item: Any) -> None:
    if len(a) >= HARD_MAX_SIZE:
        reserve_array(ctx, len(a) + 1)
    a.append(item if type(item) not in _CONTAINERS else clone(item))
    ctx.check_array_size(a)
    ctx.account(item)


def append(ctx: NativeContext, a: list[Any], more: list[Any]) -> None:
    if more:
        reserve_array(ctx, len(a) + len(more))
        a.extend(clone(more))
        ctx.check_array_size(a)
        ctx.account(more)


def insert(ctx: NativeContext, a: list[Any], index: int, item: Any) -> None:
    at, _ = offset_len(len(a), index, 0)
    a.insert(at, own(item))
    ctx.check_array_size(a)
    ctx.account(item)


def pad(ctx: NativeContext, a: list[Any], target: int, item: Any) -> None:
    """`pad(n, x)`: append copies of `x` until the array has `n` elements."""
    if target <= len(a):
        return
    reserve_array(ctx, target)
    reserve_copies(ctx, item, target - len(a))
    missing = target - len(a)
    if type(item) in _CONTAINERS:
        a.extend(own(item) for _ in range(missing))
    else:  # an immutable value: one list of references to it, built at C speed
        a.extend([item] * missing)
    ctx.check_array_size(a)


def set_item(ctx: NativeContext, a: list[Any], index: int, value: Any) -> None:
    """`a.set(i, v)`: out of range does nothing."""
    if not a:
        return
    at, _ = offset_len(len(a), index, 0)
    if at < len(a):
        a[at] = own(value)
        ctx.account(value)


def splice(ctx: NativeContext, a: list[Any], start: int, count: int, replacement: list[Any]) -> None:
    if not a:
        a[:] = clone(replacement)
    else:
        begin, count = offset_len(len(a), start, count)
        a[begin : begin + count] = clone(replacement)
    ctx.check_array_size(a)
    ctx.account(replacement)


def splice_range(ctx: NativeContext, a: list[Any], r: RangeVal, replacement: list[Any]) -> None:
    splice(ctx, a, *bounds_of(r), replacement)


# -- shrinking ----------------------------------------------------------------------------------------------


def pop(a: list[Any]) -> Any:
    return a.pop() if a else None


def shift(a: list[Any]) -> Any:
    return a.pop(0) if a else None


def remove(a: list[Any], index: int) -> Any:
    at = index_from_end(len(a), index)
    return None if at is None else a.pop(at)


def clear(a: list[Any]) -> None:
    a.clear()


def truncate(a: list[Any], count: int) -> None:
    del a[max(count, 0) :]


def chop(a: list[Any], count: int) -> None:
    """`chop(n)`: keep only the last `n` elements."""
    if count <= 0:
        a.clear()
    elif count < len(a):
        del a[: len(a) - count]


def split_at(a: list[Any], index: int) -> list[Any]:
    """`a.split(i)`: keeps `[0, i)` and returns the rest."""
    begin, _ = offset_len(len(a), index, I64_MAX)
    rest = a[begin:]
    del a[begin:]
    return rest


def drain(a: list[Any], start: int, count: int) -> list[Any]:
    if not a or count <= 0:
        return []
    begin, count = offset_len(len(a), start, count)
    drained = a[begin : begin + count]
    del a[begin : begin + count]
    return drained


def drain_range(a: list[Any], r: RangeVal) -> list[Any]:
    return drain(a, *bounds_of(r))


def retain(a: list[Any], start: int, count: int) -> list[Any]:
    """`retain(start, len)`: keeps that slice, returns everything else."""
    if not a or count <= 0:
        return []
    begin, count = offset_len(len(a), start, count)
    if count == 0:
        return []
    removed = a[:begin] + a[begin + count :]
    a[:] = a[begin : begin + count]
    return removed


def retain_range(a: list[Any], r: RangeVal) -> list[Any]:
    return retain(a, *bounds_of(r))


# -- ordering -----------------------------------------------------------------------------------------------


def reverse(a: list[Any]) -> None:
    a.reverse()


def dedup(a: list[Any]) -> None:
    """`dedup()`: drop an element `==` to the one kept before it (a failing `==` means unequal)."""
    kept: list[Any] = []
    for item in paced(a):
        if not kept or not _equal_or_false(kept[-1], item):
            kept.append(item)
    a[:] = kept


def _equal_or_false(x: Any, y: Any) -> bool:
    try:
        return ops.eq(x, y)
    except RhaiRuntimeError as err:
        if not err.catchable:
            raise
        return False


def _float_order() -> Callable[[float, float], int]:
    """Rust's `partial_cmp(..).unwrap_or(Equal)` (NaN is equal to everything), looking at
    the clock every `CHUNK` comparisons: a big sort is long work in one native."""
    compared = 0

    def compare(x: float, y: float) -> int:
        nonlocal compared
        compared += 1
        if not compared % CHUNK:
            poll()
        return -1 if x < y else 1 if x > y else 0

    return compare


def _check_sortable(a: list[Any]) -> type | None:
    """The one element type of `a` if the built-in sort can order it; else the reference's error."""
    first = a[0]
    kind = type(first)
    for item in a:
        if type(item) is not kind or (kind is RangeVal and item.inclusive is not first.inclusive):
            if has_tagged(a):  # a tag does not make another type: sort as the plain values
                return _check_sortable([plain(v) for v in a])
            raise not_found_text("elements of different types cannot be sorted")
    if kind in _SORTABLE or kind is float or first is None:
        return kind
    if kind in TAGGED:
        return _check_sortable([plain(v) for v in a])
    raise not_found_text(f"elements of {raw_type_name(first)} cannot be sorted")


def sort(a: list[Any]) -> None:
    """`sort()`: ints, floats, strings, chars or bools, all of one type."""
    if len(a) > 1:
        _sort_builtin(a, descending=False)


def sort_desc(a: list[Any]) -> None:
    if len(a) > 1:
        _sort_builtin(a, descending=True)


def _sort_builtin(a: list[Any], *, descending: bool) -> None:
    kind = _check_sortable(a)
    if kind is float:
        a.sort(key=cmp_to_key(_float_order()), reverse=descending)
    elif kind is not type(None):
        a.sort(reverse=descending)


def order(a: list[Any]) -> list[Any]:
    """`order()`: a sorted copy."""
    copy = [own(v) for v in a]
    sort(copy)
    return copy


def order_desc(a: list[Any]) -> list[Any]:
    copy = [own(v) for v in a]
    sort_desc(copy)
    return copy


def register(lib: Library) -> None:
    _register_reading(lib)
    _register_changing(lib)


def _register_reading(lib: Library) -> None:
    lib.register("len", (list,), length)
    lib.register("is_empty", (list,), is_empty)
    lib.getter(list, "len", length)
    lib.getter(list, "is_empty", is_empty)
    lib.register("get", (list, int), get, pure=False)
    lib.register("contains", (list, ANY), contains_counted, needs_context=True)
    lib.register("index_of", (list, ANY), index_of_counted, needs_context=True)
    lib.register("index_of", (list, ANY, int), index_of_from_counted, needs_context=True)
    lib.register("extract", (list, int, int), extract, pure=False)
    lib.register("extract", (list, int), extract_from, pure=False)
    lib.register("extract", (list, RangeVal), extract_range, pure=False)
    lib.register("order", (list,), order, pure=False)
    lib.register("order_desc", (list,), order_desc, pure=False)


def _register_changing(lib: Library) -> None:
    lib.register("push", (list, ANY), push, pure=False, needs_context=True)
    lib.register("append", (list, list), append, pure=False, needs_context=True)
    lib.register("insert", (list, int, ANY), insert, pure=False, needs_context=True)
    lib.register("pad", (list, int, ANY), pad, pure=False, needs_context=True)
    lib.register("set", (list, int, ANY), set_item, pure=False, needs_context=True)
    lib.register("splice", (list, int, int, list), splice, pure=False, needs_context=True)
    lib.register("splice", (list, RangeVal, list), splice_range, pure=False, needs_context=True)
    for name, fn in (("pop", pop), ("shift", shift), ("clear", clear), ("reverse", reverse)):
        lib.register(name, (list,), fn, pure=False)
    for name, fn in (("dedup", dedup), ("sort", sort), ("sort_desc", sort_desc)):
        lib.register(name, (list,), fn, pure=False)
    lib.register("remove", (list, int), remove, pure=False)
    lib.register("truncate", (list, int), truncate, pure=False)
    lib.register("chop", (list, int), chop, pure=False)
    lib.register("split", (list, int), split_at, pure=False)
    lib.register("drain", (list, int, int), drain, pure=False)
    lib.register("drain", (list, RangeVal), drain_range, pure=False)
    lib.register("retain", (list, int, int), retain, pure=False)
    lib.register("retain", (list, RangeVal), retain_range, pure=False)


__all__ = ["CONTAINERS", "bounds_of", "own", "register"]
