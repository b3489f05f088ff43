"""BLOB natives (Rhai 1.25 `blob_basic.rs`): byte arrays as Python bytearrays, changed
in place. A byte argument keeps its low 8 bits (`blob(3, 0x1ff)` is `[ffffff]`);
`parse_*`/`write_*` read and write little- or big-endian ints and floats in
place, never growing the BLOB."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from agentkernel.rhai.runtime.context import NativeContext
from agentkernel.rhai.runtime.failures import BLOB_TOO_LARGE
from agentkernel.rhai.runtime.numeric import I64_MAX, wrap_i64
from agentkernel.rhai.runtime.ops import utf8_lossy
from agentkernel.rhai.runtime.values import Char, RangeVal
from agentkernel.rhai.stdlib.arrays import bounds_of
from agentkernel.rhai.stdlib.limits import reserve_array
from agentkernel.rhai.stdlib.registry import Library
from agentkernel.rhai.stdlib.text import index_from_end, offset_len

Blob = bytearray
_NOT_ASCII = bytes(range(0x80, 0x100))


def new_blob() -> Blob:
    return Blob()


def blob_of(ctx: NativeContext, count: int, value: int = 0) -> Blob:
    """`blob(n[, byte])`, size-checked before anything is allocated."""
    if count <= 0:
        return Blob()
    reserve_array(ctx, count)
    return Blob([value & 0xFF]) * count


def to_array(b: Blob) -> list[Any]:
    return list(b)


def as_string(b: Blob) -> str:
    return utf8_lossy(b)


def length(b: Blob) -> int:
    return len(b)


def is_empty(b: Blob) -> bool:
    return not b


def contains(b: Blob, value: int) -> bool:
    return (value & 0xFF) in b


def get(b: Blob, index: int) -> int:
    """`b.get(i)`: the byte, 0 when out of range."""
    if not b:
        return 0
    at, _ = offset_len(len(b), index, 0)
    return b[at] if at < len(b) else 0


def set_byte(b: Blob, index: int, value: int) -> None:
    if not b:
        return
    at, _ = offset_len(len(b), index, 0)
    if at < len(b):
        b[at] = value & 0xFF


def push(ctx: NativeContext, b: Blob, value: int) -> None:
    b.append(value & 0xFF)
    ctx.check_array_size(b)


def append(ctx: NativeContext, b: Blob, more: Any) -> None:
    """`append(blob|string|char|byte)`: strings and chars as UTF-8."""
    data = more if type(more) is Blob else str(more).encode()
    reserve_array(ctx, len(b) + len(data))
    b.extend(data)
    ctx.check_array_size(b)


def insert(ctx: NativeContext, b: Blob, index: int, value: int) -> None:
    at, _ = offset_len(len(b), index, 0)
    b.insert(at, value & 0xFF)
    ctx.check_array_size(b)


def pad(ctx: NativeContext, b: Blob, target: int, value: int) -> None:
    if target <= 0:
        return
    reserve_array(ctx, target, BLOB_TOO_LARGE)
    if target > len(b):
        b.extend(Blob([value & 0xFF]) * (target - len(b)))


def pop(b: Blob) -> int:
    return b.pop() if b else 0


def shift(b: Blob) -> int:
    return b.pop(0) if b else 0


def remove(b: Blob, index: int) -> int:
    at = index_from_end(len(b), index)
    return 0 if at is None else b.pop(at)


def clear(b: Blob) -> None:
    b.clear()


def truncate(b: Blob, count: int) -> None:
    del b[max(count, 0) :]


def chop(b: Blob, count: int) -> None:
    if count <= 0:
        b.clear()
    elif count < len(b):
        del b[: len(b) - count]


def reverse(b: Blob) -> None:
    b.reverse()


def splice(b: Blob, start: int, count: int, replacement: Blob) -> None:
    if not b:
        b[:] = replacement
        return
    begin, count = offset_len(len(b), start, count)
    if count == 0:
        b.extend(replacement)
    else:
        b[begin : begin + count] = replacement


def splice_range(b: Blob, r: RangeVal, replacement: Blob) -> None:
    splice(b, *bounds_of(r), replacement)


def extract(b: Blob, start: int, count: int) -> Blob:
    if not b or count <= 0:
        return Blob()
    begin, count = offset_len(len(b), start, count)
    return b[begin : begin + count]


def extract_from(b: Blob, start: int) -> Blob:
    return extract(b, start, I64_MAX)


def extract_range(b: Blob, r: RangeVal) -> Blob:
    return extract(b, *bounds_of(r))


def split_at(b: Blob, index: int) -> Blob:
    begin, _ = offset_len(len(b), index, I64_MAX)
    rest = b[begin:]
    del b[begin:]
    return rest


def drain(b: Blob, start: int, count: int) -> Blob:
    if not b or count <= 0:
        return Blob()
    begin, count = offset_len(len(b), start, count)
    drained = b[begin : begin + count]
    del b[begin : begin + count]
    return drained


def drain_range(b: Blob, r: RangeVal) -> Blob:
    return drain(b, *bounds_of(r))


def retain(b: Blob, start: int, count: int) -> Blob:
    """`retain(start, len)`: keeps that slice, returns the rest (an empty slice takes everything)."""
    if not b or count <= 0:
        return Blob()
    begin, count = offset_len(len(b), start, count)
    removed = b[:begin] + b[begin + count :]
    b[:] = b[begin : begin + count]
    return removed


def retain_range(b: Blob, r: RangeVal) -> Blob:
    return retain(b, *bounds_of(r))


# -- binary numbers and text in place -------------------------------------------------------------


def _window(b: Blob, start: int, count: int, width: int) -> tuple[int, int] | None:
    """Where a value of `width` bytes is read or written: at most `count` bytes from `start`."""
    if not b or count <= 0:
        return None
    begin, count = offset_len(len(b), start, count)
    return None if count == 0 else (begin, min(count, width))


def _parse_int(b: Blob, start: int, count: int, little: bool) -> int:
    window = _window(b, start, count, 8)
    if window is None:
        return 0
    begin, size = window
    raw = bytes(b[begin : begin + size]).ljust(8, b"\0")
    return int.from_bytes(raw, "little" if little else "big", signed=True)


def _parse_float(b: Blob, start: int, count: int, little: bool) -> float:
    window = _window(b, start, count, 8)
    if window is None:
        return 0.0
    begin, size = window
    raw = bytes(b[begin : begin + size]).ljust(8, b"\0")
    return float(struct.unpack("<d" if little else ">d", raw)[0])


def _write(b: Blob, start: int, count: int, data: bytes) -> None:
    window = _window(b, start, count, len(data))
    if window is not None:
        begin, size = window
        b[begin : begin + size] = data[:size]


def _encode(value: Any, little: bool) -> bytes:
    if type(value) is float:
        return struct.pack("<d" if little else ">d", value)
    return wrap_i64(value).to_bytes(8, "little" if little else "big", signed=True)


def _write_text(b: Blob, start: int, count: int, s: str, ascii_only: bool) -> None:
    if count <= 0 or not b or not s:
        return
    data = s.encode()
    window = _window(b, start, count, len(data))
    if window is None:
        return
    begin, size = window
    if ascii_only:
        data = data.translate(None, _NOT_ASCII)
        size = min(size, len(data))
    b[begin : begin + size] = data[:size]


def _register_codecs(lib: Library) -> None:
    for suffix, little in (("le", True), ("be", False)):
        lib.register(
            f"parse_{suffix}_int", (Blob, int, int), lambda b, s, n, _l=little: _parse_int(b, s, n, _l)
        )
        lib.register(
            f"parse_{suffix}_int", (Blob, RangeVal), lambda b, r, _l=little: _parse_int(b, *bounds_of(r), _l)
        )
        lib.register(
            f"parse_{suffix}_float", (Blob, int, int), lambda b, s, n, _l=little: _parse_float(b, s, n, _l)
        )
        lib.register(
            f"parse_{suffix}_float",
            (Blob, RangeVal),
            lambda b, r, _l=little: _parse_float(b, *bounds_of(r), _l),
        )
        for value_type in (int, float):
            lib.register(
                f"write_{suffix}",
                (Blob, int, int, value_type),
                lambda b, s, n, v, _l=little: _write(b, s, n, _encode(v, _l)),
                pure=False,
            )
            lib.register(
                f"write_{suffix}",
                (Blob, RangeVal, value_type),
                lambda b, r, v, _l=little: _write(b, *bounds_of(r), _encode(v, _l)),
                pure=False,
            )
    for name, ascii_only in (("write_utf8", False), ("write_ascii", True)):
        lib.register(
            name,
            (Blob, int, int, str),
            lambda b, s, n, t, _a=ascii_only: _write_text(b, s, n, t, _a),
            pure=False,
        )
        lib.register(
            name,
            (Blob, RangeVal, str),
            lambda b, r, t, _a=ascii_only: _write_text(b, *bounds_of(r), t, _a),
            pure=False,
        )


def register(lib: Library) -> None:
    lib.register("blob", (), new_blob)
    lib.register("blob", (int,), blob_of, needs_context=True)
    lib.register("blob", (int, int), blob_of, needs_context=True)
    for name, fn in (
        ("to_array", to_array),
        ("as_string", as_string),
        ("len", length),
        ("is_empty", is_empty),
    ):
        lib.register(name, (Blob,), fn)
    lib.getter(Blob, "len", length)
    lib.getter(Blob, "is_empty", is_empty)
    lib.register("contains", (Blob, int), contains)
    lib.register("get", (Blob, int), get)
    lib.register("set", (Blob, int, int), set_byte, pure=False)
    lib.register("push", (Blob, int), push, pure=False, needs_context=True)
    for more in (int, Blob, str, Char):
        lib.register(
            "append", (Blob, more), append if more is not int else push, pure=False, needs_context=True
        )
    lib.register("insert", (Blob, int, int), insert, pure=False, needs_context=True)
    lib.register("pad", (Blob, int, int), pad, pure=False, needs_context=True)
    changers: dict[str, Callable[[Blob], Any]] = {
        "pop": pop,
        "shift": shift,
        "clear": clear,
        "reverse": reverse,
    }
    for name, changer in changers.items():
        lib.register(name, (Blob,), changer, pure=False)
    cutters: dict[str, Callable[[Blob, int], Any]] = {
        "remove": remove,
        "truncate": truncate,
        "chop": chop,
        "split": split_at,
    }
    for name, cutter in cutters.items():
        lib.register(name, (Blob, int), cutter, pure=False)
    lib.register("splice", (Blob, int, int, Blob), splice, pure=False)
    lib.register("splice", (Blob, RangeVal, Blob), splice_range, pure=False)
    lib.register("extract", (Blob, int, int), extract, pure=False)
    lib.register("extract", (Blob, int), extract_from, pure=False)
    lib.register("extract", (Blob, RangeVal), extract_range, pure=False)
    lib.register("drain", (Blob, int, int), drain, pure=False)
    lib.register("drain", (Blob, RangeVal), drain_range, pure=False)
    lib.register("retain", (Blob, int, int), retain, pure=False)
    lib.register("retain", (Blob, RangeVal), retain_range, pure=False)
    _register_codecs(lib)


__all__ = ["register"]
