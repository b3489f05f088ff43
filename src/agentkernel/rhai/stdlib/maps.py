"""Object-map natives (RHAI.md §13 "Maps"; Rhai 1.25 `map_basic.rs`).

Maps are Python dicts changed in place and walked in sorted key order (the
reference's maps are BTreeMaps). Callbacks get `(key, value)`, or `(key)`
with `this` bound to the value; what they leave in `this` is written back.
`m + m2`, `m += m2` and `==` are operators (`ops.py`).
"""

from __future__ import annotations

from typing import Any

from agentkernel.rhai.errors import RhaiRuntimeError
from agentkernel.rhai.runtime.context import NO_THIS, NativeContext
from agentkernel.rhai.runtime.copying import clone
from agentkernel.rhai.runtime.values import FnPtr
from agentkernel.rhai.stdlib.arrays import own
from agentkernel.rhai.stdlib.callbacks import Callback
from agentkernel.rhai.stdlib.registry import ANY, Library

Map = dict[str, Any]


def length(m: Map) -> int:
    return len(m)


def is_empty(m: Map) -> bool:
    return not m


def contains(m: Map, key: str) -> bool:
    return key in m


def get(m: Map, key: str) -> Any:
    """`m.get(k)`: a copy of the value, `()` when missing."""
    return own(m.get(key))


def set_value(ctx: NativeContext, m: Map, key: str, value: Any) -> None:
    m[key] = own(value)
    ctx.check_map_size(m)
    ctx.account(value)


def clear(m: Map) -> None:
    m.clear()


def remove(m: Map, key: str) -> Any:
    return m.pop(key, None)


def mixin(ctx: NativeContext, m: Map, other: Map) -> None:
    """`mixin(m2)` (= `m += m2`): every property of `m2`, overwriting."""
    m.update(clone(other))
    ctx.check_map_size(m)
    ctx.account(other)


def fill_with(ctx: NativeContext, m: Map, other: Map) -> None:
    """`fill_with(m2)`: only the properties `m` lacks."""
    for key, value in other.items():
        if key not in m:
            m[key] = own(value)
            ctx.account(value)
    ctx.check_map_size(m)


def keys(m: Map) -> list[Any]:
    return sorted(m)


def values(m: Map) -> list[Any]:
    return [own(m[key]) for key in sorted(m)]


def _per_entry(ctx: NativeContext, fn: FnPtr, caller: str) -> Callback:
    return Callback(ctx, fn, caller, nargs=1, nextras=0, with_this=True, move_at=1)


def _call_entry(cb: Callback, m: Map, key: str) -> Any:
    result = cb((key,), (), m[key])
    if cb.this_after is not NO_THIS:
        m[key] = cb.this_after
    return result


def map_values(ctx: NativeContext, m: Map, fn: FnPtr) -> Map:
    """`m.map(|k, v| …)`: a new map of the results. (The reference names its errors 'filter'.)"""
    cb = _per_entry(ctx, fn, "filter")
    mapped: Map = {}
    for key in sorted(m):
        mapped[key] = own(_call_entry(cb, m, key))
    return mapped


def filter_entries(ctx: NativeContext, m: Map, fn: FnPtr) -> Map:
    cb = _per_entry(ctx, fn, "filter")
    kept: Map = {}
    for key in sorted(m):
        if _call_entry(cb, m, key) is True:
            kept[key] = own(m[key])
    return kept


def _split_entries(ctx: NativeContext, m: Map, fn: FnPtr, caller: str, keep_matches: bool) -> Map:
    """Walk the map once; returns the entries removed. After a failing callback the
    rest of the map is kept, and the failure is raised."""
    cb = _per_entry(ctx, fn, caller)
    removed: Map = {}
    failure: RhaiRuntimeError | None = None
    for key in sorted(m):
        if failure is not None:
            break
        try:
            matched = _call_entry(cb, m, key) is True
        except RhaiRuntimeError as err:
            failure = err
            break
        if matched != keep_matches:
            removed[key] = m.pop(key)
    if failure is not None:
        raise failure
    return removed


def drain(ctx: NativeContext, m: Map, fn: FnPtr) -> Map:
    return _split_entries(ctx, m, fn, "drain", keep_matches=False)


def retain(ctx: NativeContext, m: Map, fn: FnPtr) -> Map:
    return _split_entries(ctx, m, fn, "retain", keep_matches=True)


def register(lib: Library) -> None:
    lib.register("len", (dict,), length)
    lib.register("is_empty", (dict,), is_empty)
    lib.register("contains", (dict, str), contains)
    lib.register("get", (dict, str), get)
    lib.register("set", (dict, str, ANY), set_value, pure=False, needs_context=True)
    lib.register("clear", (dict,), clear, pure=False)
    lib.register("remove", (dict, str), remove, pure=False)
    lib.register("mixin", (dict, dict), mixin, pure=False, needs_context=True)
    lib.register("fill_with", (dict, dict), fill_with, pure=False, needs_context=True)
    lib.register("keys", (dict,), keys)
    lib.register("values", (dict,), values)
    lib.register("map", (dict, FnPtr), map_values, needs_context=True)
    lib.register("filter", (dict, FnPtr), filter_entries, needs_context=True)
    lib.register("drain", (dict, FnPtr), drain, pure=False, needs_context=True)
    lib.register("retain", (dict, FnPtr), retain, pure=False, needs_context=True)


__all__ = ["register"]
