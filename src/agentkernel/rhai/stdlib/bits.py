"""Integers as bit-fields (RHAI.md §11, §13; Rhai 1.25 `bit_field.rs`, `iter_basic.rs`):
get_bit, set_bit, get_bits, set_bits, bits() and to_hex/to_octal/to_binary.

Bit numbers run 0..63 from the least significant bit; a negative bit number
counts from bit 63. Setting bits returns `Mutated(new_int)`: an int is an
immutable receiver.
"""

from __future__ import annotations

from agentkernel.rhai.runtime.failures import bit_bounds
from agentkernel.rhai.runtime.numeric import I64_MAX, wrap_i64
from agentkernel.rhai.runtime.values import IterVal, RangeVal
from agentkernel.rhai.stdlib.registry import Library, Mutated
from agentkernel.rhai.stdlib.text import index_from_end, range_span

BIT_RANGE = "rhai::packages::iter_basic::BitRange"
_U64 = (1 << 64) - 1


def bit_index(bit: int) -> int:
    """A bit number, negative from the top; out of 0..63 is the reference's bounds error."""
    at = index_from_end(64, bit)
    if at is None:
        raise bit_bounds(bit)
    return at


def _width(start: int, bits: int) -> int:
    """How many bits from `start` a request for `bits` bits really covers."""
    return 64 - start if bits + start > 64 else bits


def get_bit(value: int, bit: int) -> bool:
    return (value >> bit_index(bit)) & 1 == 1


def set_bit(value: int, bit: int, on: bool) -> Mutated:
    mask = 1 << bit_index(bit)
    return Mutated(wrap_i64(value | mask if on else value & ~mask))


def get_bits(value: int, start: int, bits: int) -> int:
    if bits <= 0:
        return 0
    start = bit_index(start)
    bits = _width(start, bits)
    if start == 0 and bits == 64:
        return value
    return (value >> start) & ((1 << bits) - 1)


def _range_to_start_bits(r: RangeVal) -> tuple[int, int]:
    start = max(r.start, 0)
    if not r.inclusive:
        return start, max(r.end, start) - start
    end = max(r.end, start - 1)
    if end >= 64:
        raise bit_bounds(end)
    return start, end - start + 1


def get_bits_range(value: int, r: RangeVal) -> int:
    return get_bits(value, *_range_to_start_bits(r))


def set_bits(value: int, start: int, bits: int, new: int) -> Mutated:
    if bits <= 0:
        return Mutated(value)
    start = bit_index(start)
    bits = _width(start, bits)
    if start == 0 and bits == 64:
        return Mutated(new)
    mask = (1 << bits) - 1
    cleared = value & ~(mask << start)
    return Mutated(wrap_i64(cleared | ((new & mask) << start)))


def set_bits_range(value: int, r: RangeVal, new: int) -> Mutated:
    return set_bits(value, *_range_to_start_bits(r), new)


def bit_stream(value: int, start: int, count: int) -> IterVal:
    """The reference's `BitRange::new(value, from, len)`: `len` bits from bit `from`, LSB first."""
    start = bit_index(start)
    count = 0 if count < 0 else _width(start, count)
    shifted = value >> start
    return IterVal(BIT_RANGE, lambda: ((shifted >> i) & 1 == 1 for i in range(count)))


def bits(value: int) -> IterVal:
    return bit_stream(value, 0, I64_MAX)


def bits_from(value: int, start: int) -> IterVal:
    return bit_stream(value, start, I64_MAX)


def bits_range(value: int, r: RangeVal) -> IterVal:
    return bit_stream(value, *range_span(r))


def to_hex(value: int) -> str:
    return format(value & _U64, "x")


def to_octal(value: int) -> str:
    return format(value & _U64, "o")


def to_binary(value: int) -> str:
    return format(value & _U64, "b")


def register(lib: Library) -> None:
    lib.register("get_bit", (int, int), get_bit)
    lib.register("set_bit", (int, int, bool), set_bit, pure=False)
    lib.register("get_bits", (int, int, int), get_bits)
    lib.register("get_bits", (int, RangeVal), get_bits_range)
    lib.register("set_bits", (int, int, int, int), set_bits, pure=False)
    lib.register("set_bits", (int, RangeVal, int), set_bits_range, pure=False)
    lib.register("bits", (int,), bits)
    lib.register("bits", (int, int), bits_from)
    lib.register("bits", (int, int, int), bit_stream)
    lib.register("bits", (int, RangeVal), bits_range)
    lib.getter(int, "bits", bits)
    lib.register("to_hex", (int,), to_hex)
    lib.register("to_octal", (int,), to_octal)
    lib.register("to_binary", (int,), to_binary)


__all__ = ["BIT_RANGE", "bit_index", "register"]
