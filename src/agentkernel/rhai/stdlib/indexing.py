"""`x[i]` and `x[i] = v` (RHAI.md §6, §11; Rhai 1.25 `get_indexed_mut`, `Target`).

* array, BLOB: an int, negative from the end; out of range is ErrorArrayBounds;
* map: a string key; missing gives `()`, assigning inserts;
* string: an int gives a char (negative from the end), a range a substring;
  `s[i] = c` needs a char and builds a new string;
* int: a bit (`x[i]` is a bool) or a range of bits (`x[a..b]` an int).

Anything else is "Indexer unavailable: <type> [<index type>]". `index_get`
returns an element itself, not a copy, so that `a[0].push(1)` writes through.
"""

from __future__ import annotations

from agentkernel.rhai.runtime.context import NativeContext
from agentkernel.rhai.runtime.copying import clone
from agentkernel.rhai.runtime.failures import (
    array_bounds,
    assigned_mismatch,
    bit_bounds,
    mismatch,
    no_indexer,
    raw_type_name,
    string_bounds,
)
from agentkernel.rhai.runtime.numeric import I64_MAX, wrap_i64
from agentkernel.rhai.runtime.printing import to_string
from agentkernel.rhai.runtime.values import TAGGED_CONTAINERS, Char, RangeVal
from agentkernel.rhai.stdlib.text import index_from_end

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

_CONTAINERS = frozenset({list, dict, bytearray, *TAGGED_CONTAINERS})


def _position(length: int, index: Any) -> int:
    """An array or BLOB position: an int, negative from the end, within bounds."""
    if type(index) is not int:
        raise mismatch("i64", raw_type_name(index))
    at = index_from_end(length, index)
    if at is None:
        raise array_bounds(length, index)
    return at


def index_get(obj: Any, index: Any) -> Any:
    kind = type(obj)
    if kind is list:
        return obj[_position(len(obj), index)]
    if kind is dict:
        if type(index) is not str:
            raise mismatch("string", raw_type_name(index))
        return obj.get(index)
    if kind is str:
        return _string_get(obj, index)
    if kind is int:
        return _bits_get(obj, index)
    if kind is bytearray:
        return obj[_position(len(obj), index)]
    raise no_indexer(obj, index)


def index_set(ctx: NativeContext, obj: Any, index: Any, value: Any) -> Any:
    """Returns the container to store back: the same list, map or BLOB, or a new string or int."""
    kind = type(obj)
    if kind is list:
        obj[_position(len(obj), index)] = clone(value) if type(value) in _CONTAINERS else value
        return obj
    if kind is dict:
        if type(index) is not str:
            raise mismatch("string", raw_type_name(index))
        obj[index] = clone(value) if type(value) in _CONTAINERS else value
        ctx.check_map_size(obj)
        return obj
    if kind is str:
        new = _string_set(obj, index, value)
        ctx.check_string_size(new)
        return new
    if kind is int:
        return _bits_set(obj, index, value)
    if kind is bytearray:
        at = _position(len(obj), index)
        if type(value) is not int:
            raise assigned_mismatch("INT", raw_type_name(value))
        obj[at] = value & 0xFF
        return obj
    raise no_indexer(obj, index, value)


# -- strings -----------------------------------------------------------------------------------------


def _char_position(s: str, index: int) -> int:
    """Where `s[index]` is; a negative index counts from the end."""
    at = index_from_end(len(s), index)
    if at is None:
        raise string_bounds(len(s), index)
    return at


def _slice_bounds(s: str, r: RangeVal) -> tuple[int, int]:
    """The characters `s[a..b]` / `s[a..=b]` cover, as (start, end) with end exclusive."""
    count = len(s)
    start = r.start if r.start >= 0 else _char_position(s, r.start)
    end = r.end if r.end >= 0 else (index_from_end(count, r.end) or 0)
    if r.inclusive:
        if start == 0 and end >= count - 1:
            return 0, count
        return start, (end + 1 if end > start else start)  # `s[2..=2]` is "" in the reference
    return start, max(end, start)


def _string_get(s: str, index: Any) -> Any:
    kind = type(index)
    if kind is int:
        return Char(s[_char_position(s, index)])
    if kind is RangeVal:
        if not s:
            return s
        start, end = _slice_bounds(s, index)
        return s[start:end]
    raise mismatch("i64", raw_type_name(index))


def _string_set(s: str, index: Any, value: Any) -> str:
    kind = type(index)
    if kind is int:
        at = _char_position(s, index)
        if type(value) is not Char:
            raise assigned_mismatch("char", raw_type_name(value))
        if index < 0:
            at = -index  # the reference writes at |index| from the start (its quirk)
            if at >= len(s):
                return s
        return s[:at] + value + s[at + 1 :]
    if kind is RangeVal:
        return _string_splice(s, index, to_string(value))
    raise mismatch("i64", raw_type_name(index))


def _string_splice(s: str, r: RangeVal, text: str) -> str:
    """`s[a..b] = v`: the range's characters replaced by `to_string(v)`."""
    if not s:
        return text
    start, _ = _slice_bounds(s, r)
    count = len(s)
    end = r.end if r.end >= 0 else (index_from_end(count, r.end) or 0)
    after = min(end, count) if not r.inclusive else min(end, count - 1) + 1
    return s[:start] + text + s[after:]


# -- bit-fields ---------------------------------------------------------------------------------------


def _bit(index: Any) -> int:
    if type(index) is not int:
        raise mismatch("i64", raw_type_name(index))
    at = index_from_end(64, index)
    if at is None:
        raise bit_bounds(index)
    return at


def _bit_span(r: RangeVal) -> tuple[int, int]:
    """A bit range as (shift, mask), both as the reference computes them."""
    if r.inclusive:
        end = 63 if r.end == I64_MAX else r.end
        start = _bit_in_field(r.start)
        end = _bit_in_field(end)
        if end < start:
            return 0, 0
        width = end - start + 1
    else:
        end = 64 if r.end == I64_MAX else r.end
        start = _bit_in_field(r.start)
        if not 0 <= end <= 64:
            raise bit_bounds(end)
        if end <= start:
            return 0, 0
        width = end - start
    if width == 64:
        return 0, -1
    return start, wrap_i64(((1 << width) - 1) << start)


def _bit_in_field(index: int) -> int:
    if not 0 <= index < 64:
        raise bit_bounds(index)
    return index


def _bits_get(value: int, index: Any) -> Any:
    if type(index) is RangeVal:
        shift, mask = _bit_span(index)
        return (value & mask) >> shift
    return (value >> _bit(index)) & 1 == 1


def _bits_set(value: int, index: Any, new: Any) -> int:
    if type(index) is RangeVal:
        shift, mask = _bit_span(index)
        if type(new) is not int:
            raise assigned_mismatch("integer", raw_type_name(new))
        return wrap_i64((value & ~mask) | ((new << shift) & mask))
    bit = _bit(index)
    if type(new) is not bool:
        raise assigned_mismatch("bool", raw_type_name(new))
    return wrap_i64(value | (1 << bit) if new else value & ~(1 << bit))


__all__ = ["index_get", "index_set"]
