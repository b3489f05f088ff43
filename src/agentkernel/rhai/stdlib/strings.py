"""String natives (RHAI.md §13 "Strings"; Rhai 1.25 `string_more.rs`, `iter_basic.rs`).

Strings are immutable Python values, so the natives that change their
receiver (`trim`, `pad`, `crop`, `s.set(i, c)`, …) return
`Mutated(new_string, result)`; they are registered `pure=False`. A native
whose result may be much bigger than its arguments (`replace`, `split`,
`to_chars`) checks the size of what it will build first.
"""

from __future__ import annotations

from typing import Any

from agentkernel.rhai.runtime.context import NativeContext
from agentkernel.rhai.runtime.data_size import LIST_SLOT, STRING, cut_size
from agentkernel.rhai.runtime.failures import ARRAY_TOO_LARGE
from agentkernel.rhai.runtime.numeric import I64_MAX
from agentkernel.rhai.runtime.ops import utf8_lossy
from agentkernel.rhai.runtime.printing import to_string
from agentkernel.rhai.runtime.values import Char, IterVal, RangeVal
from agentkernel.rhai.stdlib import text
from agentkernel.rhai.stdlib.limits import reserve_array, reserve_string
from agentkernel.rhai.stdlib.registry import ANY, Library, Mutated

CHARS_STREAM = "rhai::packages::iter_basic::CharsStream"
_TEXT = (str, Char)


def _changed(new: str, result: Any = None) -> Mutated:
    return Mutated(new, result)


# -- reading -------------------------------------------------------------------------------------


def length(s: str) -> int:
    return len(s)


def is_empty(s: str) -> bool:
    return not s


def byte_count(s: str) -> int:
    return len(s.encode())


def get(s: str, index: int) -> Char | None:
    """`s.get(i)`: the character, `()` when out of range; negative counts from the end."""
    at = text.index_from_end(len(s), index)
    return None if at is None else Char(s[at])


def index_of(s: str, find: str) -> int:
    return -1 if not s else s.find(find)


def index_of_from(s: str, find: str, start: int) -> int:
    """`index_of(find, start)`: a negative start counts from the end; past the end gives -1."""
    if not s:
        return -1
    count = len(s)
    if start < 0:
        start = 0 if -start > count else count + start
    elif start >= count:
        return -1
    return s.find(find, start)


def contains(s: str, find: str) -> bool:
    return find in s


def starts_with(s: str, find: str) -> bool:
    return s.startswith(find)


def ends_with(s: str, find: str) -> bool:
    return s.endswith(find)


def sub_string(s: str, start: int, count: int) -> str:
    """`sub_string(start, len)`: the second argument is a length."""
    return text.select(s, start, count) or ""


def sub_string_from(s: str, start: int) -> str:
    return text.select(s, start, I64_MAX) or ""


def sub_string_range(s: str, r: RangeVal) -> str:
    bounds = text.inclusive_bounds if r.inclusive else text.exclusive_bounds
    return sub_string(s, *bounds(r.start, r.end))


def to_upper(s: str) -> str:
    return s.upper()


def to_lower(s: str) -> str:
    return s.lower()


def max_string(a: str, b: str) -> str:
    return a if a >= b else b


def min_string(a: str, b: str) -> str:
    return a if a <= b else b


def to_chars(ctx: NativeContext, s: str) -> list[Any]:
    _reserve_pieces(ctx, len(s), len(s))
    return [Char(c) for c in s]


def to_blob(s: str) -> bytearray:
    return bytearray(s.encode())


# -- splitting ---------------------------------------------------------------------------------------


def _reserve_pieces(ctx: NativeContext, pieces: int, chars: int) -> None:
    """An array of `pieces` strings holding `chars` characters in all is about to be built."""
    reserve_array(ctx, pieces)
    ctx.reserve_data(pieces * (LIST_SLOT + STRING) + chars, ARRAY_TOO_LARGE)


def _reserve_split(ctx: NativeContext, s: str, sep: str, segments: int = I64_MAX) -> None:
    found = len(s) + 1 if not sep else s.count(sep)
    _reserve_pieces(ctx, min(found + 1, max(segments, 1)), len(s))


def split_whitespace(ctx: NativeContext, s: str) -> list[Any]:
    """`s.split()`: counts its pieces toward the data limit itself, without walking them."""
    pieces = text.split_whitespace(s) if s else [s]
    ctx.check_array_size(pieces)
    size = cut_size(len(pieces), s)
    if size is None:
        ctx.account(pieces)
    else:
        ctx.charge(size)
    return pieces


def split_on(ctx: NativeContext, s: str, sep: str) -> list[Any]:
    if not s or (sep and sep not in s):
        return [s]
    _reserve_split(ctx, s, sep)
    return text.split(s, str(sep))  # a new list: no copy of it


def split_on_n(ctx: NativeContext, s: str, sep: str, segments: int) -> list[Any]:
    if segments <= 1 or not s or (sep and sep not in s):
        return [s]
    _reserve_split(ctx, s, sep, segments)
    return text.split(s, str(sep), segments)


def split_rev(ctx: NativeContext, s: str, sep: str) -> list[Any]:
    if not s or (sep and sep not in s):
        return [s]
    _reserve_split(ctx, s, sep)
    return text.rsplit(s, str(sep))


def split_rev_n(ctx: NativeContext, s: str, sep: str, segments: int) -> list[Any]:
    if segments <= 1 or not s or (sep and sep not in s):
        return [s]
    _reserve_split(ctx, s, sep, segments)
    return text.rsplit(s, str(sep), segments)


def split_at(s: str, index: int) -> list[Any]:
    """`s.split(i)`: the text before character `i` and the rest (negative counts from the end)."""
    count = len(s)
    if index <= 0:
        cut = 0 if -index > count else count + index
    else:
        cut = min(index, count)
    return [s[:cut], s[cut:]]


# -- iterating -----------------------------------------------------------------------------------------


def chars_stream(s: str, start: int, count: int) -> IterVal:
    """The reference's `CharsStream::new(string, from, len)`."""
    if count <= 0:
        picked = ""
    elif start >= 0:
        picked = s[start : start + count]
    else:
        offset = max(len(s) + start, 0)
        picked = s[offset : offset + count]
    return IterVal(CHARS_STREAM, lambda: (Char(c) for c in picked))


def chars(s: str) -> IterVal:
    return chars_stream(s, 0, I64_MAX)


def chars_from(s: str, start: int) -> IterVal:
    return chars_stream(s, start, I64_MAX)


def chars_range(s: str, r: RangeVal) -> IterVal:
    return chars_stream(s, *text.range_span(r))


# -- changing the receiver -------------------------------------------------------------------------------


def trim(s: str) -> Mutated:
    return _changed(text.trim(s))


def make_upper(s: str) -> Mutated:
    return _changed(s.upper())


def make_lower(s: str) -> Mutated:
    return _changed(s.lower())


def clear(s: str) -> Mutated:
    return _changed("")


def truncate(s: str, count: int) -> Mutated:
    return _changed(s[: max(count, 0)])


def remove(s: str, find: str) -> Mutated:
    return _changed(s.replace(find, "") if find else s)


def replace(ctx: NativeContext, s: str, find: str, sub: str) -> Mutated:
    if not s:
        return _changed(s)
    find, sub = str(find), str(sub)
    if len(sub) > len(find):
        found = s.count(find) if find else len(s) + 1
        reserve_string(ctx, len(s) + found * (len(sub) - len(find)))
    new = s.replace(find, sub)
    ctx.check_string_size(new)
    return _changed(new)


def crop(s: str, start: int, count: int) -> Mutated:
    if not s:
        return _changed(s)
    return _changed(text.select(s, start, count) or "")


def crop_from(s: str, start: int) -> Mutated:
    return crop(s, start, I64_MAX)


def crop_range(s: str, r: RangeVal) -> Mutated:
    bounds = text.inclusive_bounds if r.inclusive else text.exclusive_bounds
    return crop(s, *bounds(r.start, r.end))


def pad(ctx: NativeContext, s: str, target: int, padding: str) -> Mutated:
    """`pad(len, str|char)`: append copies of `padding` until the string has `len` characters.
    (The reference loops forever on an empty padding string; here nothing happens.)"""
    if target <= 0:
        return _changed(s)
    reserve_string(ctx, target)
    missing = target - len(s)
    if missing <= 0 or not padding:
        return _changed(s)
    whole, part = divmod(missing, len(padding))
    new = s + padding * whole + padding[:part]
    ctx.check_string_size(new)
    return _changed(new)


def append(ctx: NativeContext, s: str, item: Any) -> Mutated:
    """`s.append(x)`: `to_string(x)` added to the end (a BLOB as UTF-8 text)."""
    tail = utf8_lossy(item) if type(item) is bytearray else to_string(item)
    reserve_string(ctx, len(s) + len(tail))
    new = s + tail
    ctx.check_string_size(new)
    return _changed(new)


def pop(s: str) -> Mutated:
    """`s.pop()`: removes and returns the last character (`()` when empty)."""
    if not s:
        return Mutated(s, None)
    return Mutated(s[:-1], Char(s[-1]))


def pop_n(s: str, count: int) -> Mutated:
    """`s.pop(n)`: removes and returns the last `n` characters as a string."""
    if not s or count <= 0:
        return Mutated(s, "")
    if count < len(s):
        return Mutated(s[:-count], s[-count:])
    return Mutated("", s)


def set_char(s: str, index: int, ch: Char) -> Mutated:
    """`s.set(i, c)`: replaces one character; out of range does nothing."""
    at = text.index_from_end(len(s), index)
    if at is None:
        return _changed(s)
    return _changed(s[:at] + ch + s[at + 1 :])


def register(lib: Library) -> None:
    """Every string native of the reference."""
    _register_reading(lib)
    _register_splitting(lib)
    _register_changing(lib)


def _register_reading(lib: Library) -> None:
    for name, impl in (("len", length), ("is_empty", is_empty), ("bytes", byte_count)):
        lib.register(name, (str,), impl)
    lib.register("get", (str, int), get)
    for find in _TEXT:
        lib.register("index_of", (str, find), index_of)
        lib.register("index_of", (str, find, int), index_of_from)
        lib.register("contains", (str, find), contains)
        lib.register("starts_with", (str, find), starts_with)
        lib.register("ends_with", (str, find), ends_with)
    lib.register("sub_string", (str, int, int), sub_string)
    lib.register("sub_string", (str, int), sub_string_from)
    lib.register("sub_string", (str, RangeVal), sub_string_range)
    lib.register("to_upper", (str,), to_upper)
    lib.register("to_lower", (str,), to_lower)
    lib.register("max", (str, str), max_string)
    lib.register("min", (str, str), min_string)
    lib.register("to_chars", (str,), to_chars, needs_context=True)
    lib.register("to_blob", (str,), to_blob)
    lib.register("chars", (str,), chars)
    lib.register("chars", (str, int), chars_from)
    lib.register("chars", (str, int, int), chars_stream)
    lib.register("chars", (str, RangeVal), chars_range)


def _register_splitting(lib: Library) -> None:
    lib.register("split", (str,), split_whitespace, needs_context=True, charged=True)
    lib.register("split", (str, int), split_at)
    for sep in _TEXT:
        lib.register("split", (str, sep), split_on, needs_context=True)
        lib.register("split", (str, sep, int), split_on_n, needs_context=True)
        lib.register("split_rev", (str, sep), split_rev, needs_context=True)
        lib.register("split_rev", (str, sep, int), split_rev_n, needs_context=True)


def _register_changing(lib: Library) -> None:
    for name, impl in (
        ("trim", trim),
        ("make_upper", make_upper),
        ("make_lower", make_lower),
        ("clear", clear),
    ):
        lib.register(name, (str,), impl, pure=False)
    lib.register("truncate", (str, int), truncate, pure=False)
    lib.register("crop", (str, int, int), crop, pure=False)
    lib.register("crop", (str, int), crop_from, pure=False)
    lib.register("crop", (str, RangeVal), crop_range, pure=False)
    lib.register("pop", (str,), pop, pure=False)
    lib.register("pop", (str, int), pop_n, pure=False)
    lib.register("set", (str, int, Char), set_char, pure=False)
    lib.register("append", (str, ANY), append, pure=False, needs_context=True)
    for find in _TEXT:
        lib.register("remove", (str, find), remove, pure=False)
        lib.register("pad", (str, int, find), pad, pure=False, needs_context=True)
        for sub in _TEXT:
            lib.register("replace", (str, find, sub), replace, pure=False, needs_context=True)
    lib.getter(str, "len", length)
    lib.getter(str, "is_empty", is_empty)
    lib.getter(str, "bytes", byte_count)
    lib.getter(str, "chars", chars)


__all__ = ["CHARS_STREAM", "register"]
