"""Array natives that call back into the script (RHAI.md §10; Rhai 1.25 `array_basic.rs`):
map, filter, reduce, reduce_rev, some, all, find, find_map, index_of(fn),
for_each, drain(fn), retain(fn), zip, dedup(fn), sort(fn)/sort_by, order_by.

Item callbacks get `(item)` or `(item, index)`, or `this` bound to the item
(`filter(|| this > 1)`); `for_each` binds `this` to the item and passes the
index. What a callback leaves in `this` is written back into the array.
A callback may be a function-name string for the natives the reference
accepts one for (map, filter, some, all, reduce, reduce_rev, dedup, sort,
drain, retain, index_of).

A result is built in a local list, never in a comprehension, so that while
the callbacks run, what is built so far counts toward the data limit (the
limit counts the locals of the frames on the stack, data_size.py).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cmp_to_key
from typing import Any

from agentkernel.rhai.errors import ErrorKind, RhaiRuntimeError
from agentkernel.rhai.runtime.context import NO_THIS, NativeContext
from agentkernel.rhai.runtime.values import FnPtr, type_name
from agentkernel.rhai.stdlib import arrays
from agentkernel.rhai.stdlib.callbacks import Callback, call_plain, fn_from_name, is_identifier
from agentkernel.rhai.stdlib.registry import ANY, Library
from agentkernel.rhai.stdlib.text import offset_len

own = arrays.own
_CONTAINERS = arrays.CONTAINERS


def _per_item(ctx: NativeContext, fn: FnPtr, caller: str, *, move: bool = True) -> Callback:
    """A callback taking the item (as `this` or first argument) and maybe its index."""
    return Callback(ctx, fn, caller, nargs=0, nextras=1, with_this=True, move_at=0 if move else None)


def _call_item(cb: Callback, a: list[Any], i: int) -> Any:
    """Call `cb` for `a[i]` and write back what it left in `this`."""
    result = cb((), (i,), a[i])
    if cb.this_after is not NO_THIS and i < len(a):
        a[i] = cb.this_after
    return result


def _items(a: list[Any], start: int = 0) -> range:
    return range(start, len(a))


def map_array(ctx: NativeContext, a: list[Any], fn: FnPtr) -> list[Any]:
    mapped: list[Any] = []
    reader = ctx.reading_callback(fn)
    if reader is not None:  # it cannot change the items: no copies, no write-back
        for value in reader(a, set(map(type, a))):
            mapped.append(own(value))
        return mapped
    cb = _per_item(ctx, fn, "map")
    for i in _items(a):
        if i < len(a):
            mapped.append(own(_call_item(cb, a, i)))
    return mapped


def filter_array(ctx: NativeContext, a: list[Any], fn: FnPtr) -> list[Any]:
    """`a.filter(fn)`: counts what it built toward the data limit itself (when the items are
    neither copied nor containers, from the types of `a`'s, known already)."""
    kept: list[Any] = []
    reader = ctx.reading_callback(fn)
    if reader is not None:  # it cannot change the items: no copies, no write-back
        kinds = set(map(type, a))
        if _CONTAINERS.isdisjoint(kinds):  # nor are any to copy as they are kept
            kept = [item for item, verdict in zip(a, reader(a, kinds), strict=False) if verdict is True]
            size = ctx.flat_size(kept, kinds)
            if size is None:
                ctx.account(kept)
            else:
                ctx.charge(size)
            return kept
        for item, verdict in zip(a, reader(a, kinds), strict=False):
            if verdict is True:
                kept.append(own(item))
        ctx.account(kept)
        return kept
    cb = _per_item(ctx, fn, "filter")
    for i in _items(a):
        if i < len(a) and _call_item(cb, a, i) is True:
            kept.append(own(a[i]))
    ctx.account(kept)
    return kept


def some(ctx: NativeContext, a: list[Any], fn: FnPtr) -> bool:
    cb = _per_item(ctx, fn, "some")
    return any(_call_item(cb, a, i) is True for i in _items(a) if i < len(a))


def all_of(ctx: NativeContext, a: list[Any], fn: FnPtr) -> bool:
    cb = _per_item(ctx, fn, "all")
    return all(_call_item(cb, a, i) is True for i in _items(a) if i < len(a))


def index_of_fn_from(ctx: NativeContext, a: list[Any], fn: FnPtr, start: int) -> int:
    if not a:
        return -1
    cb = _per_item(ctx, fn, "index_of")
    begin, _ = offset_len(len(a), start, 0)
    for i in _items(a, begin):
        if i < len(a) and _call_item(cb, a, i) is True:
            return i
    return -1


def index_of_fn(ctx: NativeContext, a: list[Any], fn: FnPtr) -> int:
    return index_of_fn_from(ctx, a, fn, 0)


def index_of_name_from(ctx: NativeContext, a: list[Any], name: str, start: int) -> int:
    """`index_of("name")`: the function of that name as a predicate, or, when there is
    none, the string itself as the value to look for."""
    if not a:
        return -1
    if is_identifier(name):
        try:
            return index_of_fn_from(ctx, a, FnPtr(name), start)
        except RhaiRuntimeError as err:
            if not _names_missing(err, name):
                raise
    return arrays.index_of_from_counted(ctx, a, name, start)


def _names_missing(err: RhaiRuntimeError, name: str) -> bool:
    inner = err.inner if err.kind == ErrorKind.IN_FUNCTION_CALL and err.inner is not None else err
    return inner.kind == ErrorKind.FUNCTION_NOT_FOUND and inner.message.startswith(
        f"Function not found: {name}"
    )


def index_of_name(ctx: NativeContext, a: list[Any], name: str) -> int:
    return index_of_name_from(ctx, a, name, 0)


def find_from(ctx: NativeContext, a: list[Any], fn: FnPtr, start: int) -> Any:
    at = index_of_fn_from(ctx, a, fn, start)
    return None if at < 0 else own(a[at])


def find(ctx: NativeContext, a: list[Any], fn: FnPtr) -> Any:
    return find_from(ctx, a, fn, 0)


def find_map_from(ctx: NativeContext, a: list[Any], fn: FnPtr, start: int) -> Any:
    """The first callback result that is not `()`."""
    if not a:
        return None
    cb = _per_item(ctx, fn, "find_map")
    begin, _ = offset_len(len(a), start, 0)
    for i in _items(a, begin):
        if i < len(a):
            value = _call_item(cb, a, i)
            if value is not None:
                return value
    return None


def find_map(ctx: NativeContext, a: list[Any], fn: FnPtr) -> Any:
    return find_map_from(ctx, a, fn, 0)


def for_each(ctx: NativeContext, a: list[Any], fn: FnPtr) -> None:
    """`for_each(|i| …)`: `this` is the item, the parameter its index."""
    cb = _per_item(ctx, fn, "for_each", move=False)
    for i in _items(a):
        if i < len(a):
            _call_item(cb, a, i)


def reduce_with(ctx: NativeContext, a: list[Any], fn: FnPtr, initial: Any) -> Any:
    """`reduce(|acc, item| …, init)`: the accumulator first (RHAI.md §10)."""
    cb = Callback(ctx, fn, "reduce", nargs=1, nextras=1, with_this=True, move_at=1)
    acc = initial
    for i in _items(a):
        if i < len(a):
            acc = _accumulate(cb, a, i, acc)
    return acc


def reduce(ctx: NativeContext, a: list[Any], fn: FnPtr) -> Any:
    """Without an initial value the accumulator starts as `()`."""
    return reduce_with(ctx, a, fn, None)


def reduce_rev_with(ctx: NativeContext, a: list[Any], fn: FnPtr, initial: Any) -> Any:
    cb = Callback(ctx, fn, "reduce_rev", nargs=1, nextras=1, with_this=True, move_at=1)
    acc = initial
    for i in reversed(range(len(a))):
        if i < len(a):
            acc = _accumulate(cb, a, i, acc)
    return acc


def reduce_rev(ctx: NativeContext, a: list[Any], fn: FnPtr) -> Any:
    return reduce_rev_with(ctx, a, fn, None)


def _accumulate(cb: Callback, a: list[Any], i: int, acc: Any) -> Any:
    result = cb((acc,), (i,), a[i])
    if cb.this_after is not NO_THIS and i < len(a):
        a[i] = cb.this_after
    return result


def zip_with(ctx: NativeContext, a: list[Any], b: list[Any], fn: FnPtr) -> list[Any]:
    """`a.zip(b, |x, y| …)` (or `|x, y, i|`), as long as the shorter array."""
    cb = Callback(ctx, fn, "zip", nargs=2, nextras=1, with_this=False, move_at=None)
    pairs = list(zip(a, b, strict=False))
    zipped: list[Any] = []
    for i, (x, y) in enumerate(pairs):
        zipped.append(own(cb((own(x), own(y)), (i,))))
    return zipped


def _drain_where(ctx: NativeContext, a: list[Any], fn: FnPtr, caller: str, keep_matches: bool) -> list[Any]:
    """Walk `a` once; matching items are removed (drain) or kept (retain); returns the removed."""
    cb = _per_item(ctx, fn, caller)
    removed: list[Any] = []
    index, at = 0, 0
    while at < len(a):
        result = cb((), (index,), a[at])
        if cb.this_after is not NO_THIS:
            a[at] = cb.this_after
        if (result is True) != keep_matches:
            removed.append(a.pop(at))
        else:
            at += 1
        index += 1
    return removed


def drain_fn(ctx: NativeContext, a: list[Any], fn: FnPtr) -> list[Any]:
    return _drain_where(ctx, a, fn, "drain", keep_matches=False)


def retain_fn(ctx: NativeContext, a: list[Any], fn: FnPtr) -> list[Any]:
    return _drain_where(ctx, a, fn, "retain", keep_matches=True)


def _true_or_false(ctx: NativeContext, fn: FnPtr, args: list[Any]) -> bool:
    """A comparer's verdict; any failure (other than a limit) counts as false."""
    try:
        return call_plain(ctx, fn, args) is True
    except RhaiRuntimeError as err:
        if not err.catchable:
            raise
        return False


def dedup_fn(ctx: NativeContext, a: list[Any], fn: FnPtr) -> None:
    """`dedup(|prev, cur| …)`: drop each element the comparer says equals the one kept before it."""
    kept: list[Any] = []
    for item in a:
        if not kept or not _true_or_false(ctx, fn, [own(kept[-1]), own(item)]):
            kept.append(item)
    a[:] = kept


def _comparer(ctx: NativeContext, fn: FnPtr) -> Callable[[Any, Any], int]:
    """`sort(|a, b| …)`: an int (<0, 0, >0) or a bool (true = a first); anything else,
    or a failure, falls back to ordering by type (equal for the same type)."""

    def compare(x: Any, y: Any) -> int:
        try:
            verdict = call_plain(ctx, fn, [own(x), own(y)])
        except RhaiRuntimeError as err:
            if not err.catchable:
                raise
            verdict = None
        if type(verdict) is int:
            return (verdict > 0) - (verdict < 0)
        if type(verdict) is bool:
            return -1 if verdict else 1
        tx, ty = type_name(x), type_name(y)
        return (tx > ty) - (tx < ty)

    return compare


def sort_fn(ctx: NativeContext, a: list[Any], fn: FnPtr) -> None:
    if len(a) > 1:
        a.sort(key=cmp_to_key(_comparer(ctx, fn)))


def order_by(ctx: NativeContext, a: list[Any], fn: FnPtr) -> list[Any]:
    copy = [own(v) for v in a]
    sort_fn(ctx, copy, fn)
    return copy


def _by_name(impl: Callable[..., Any]) -> Callable[..., Any]:
    """The same native taking a function-name string instead of a pointer."""

    def named(ctx: NativeContext, a: list[Any], name: str, *rest: Any) -> Any:
        return impl(ctx, a, fn_from_name(name), *rest)

    named.__name__ = f"{impl.__name__}_by_name"
    return named


_PURE = {"map": map_array, "filter": filter_array, "some": some, "all": all_of}
_NAMED_PURITY = {"map": False, "filter": False, "some": True, "all": True}


def register(lib: Library) -> None:
    for name, impl in _PURE.items():
        charged = impl is filter_array
        lib.register(name, (list, FnPtr), impl, needs_context=True, charged=charged)
        named = _by_name(impl)
        lib.register(name, (list, str), named, pure=_NAMED_PURITY[name], needs_context=True, charged=charged)
    _register_searches(lib)
    _register_folds(lib)
    _register_changes(lib)


def _register_searches(lib: Library) -> None:
    lib.register("index_of", (list, FnPtr), index_of_fn, needs_context=True)
    lib.register("index_of", (list, FnPtr, int), index_of_fn_from, needs_context=True)
    lib.register("index_of", (list, str), index_of_name, needs_context=True)
    lib.register("index_of", (list, str, int), index_of_name_from, needs_context=True)
    lib.register("find", (list, FnPtr), find, needs_context=True)
    lib.register("find", (list, FnPtr, int), find_from, needs_context=True)
    lib.register("find_map", (list, FnPtr), find_map, needs_context=True)
    lib.register("find_map", (list, FnPtr, int), find_map_from, needs_context=True)


def _register_folds(lib: Library) -> None:
    for name, bare, seeded in (("reduce", reduce, reduce_with), ("reduce_rev", reduce_rev, reduce_rev_with)):
        lib.register(name, (list, FnPtr), bare, needs_context=True)
        lib.register(name, (list, FnPtr, ANY), seeded, needs_context=True)
        lib.register(name, (list, str), _by_name(bare), needs_context=True)
        lib.register(name, (list, str, ANY), _by_name(seeded), needs_context=True)
    lib.register("zip", (list, list, FnPtr), zip_with, needs_context=True)


def _register_changes(lib: Library) -> None:
    changes = {
        "for_each": for_each,
        "drain": drain_fn,
        "retain": retain_fn,
        "dedup": dedup_fn,
        "sort": sort_fn,
    }
    for name, impl in changes.items():
        lib.register(name, (list, FnPtr), impl, pure=False, needs_context=True)
        if name != "for_each":
            lib.register(name, (list, str), _by_name(impl), pure=False, needs_context=True)
    lib.register("sort_by", (list, FnPtr), sort_fn, pure=False, needs_context=True)
    lib.register("order_by", (list, FnPtr), order_by, pure=False, needs_context=True)
    lib.register("order", (list, FnPtr), order_by, pure=False, needs_context=True)


__all__ = ["register"]
