"""Size checks for natives that grow strings, arrays, BLOBs and maps (RHAI.md §14).

`reserve_*` refuses a size before anything is allocated (so `pad(1e15, 0)`
fails fast instead of exhausting memory), against the limit on one value
and, for what is new, against the limit on all the data of the evaluation;
the context's `check_*` methods check what was built. Past `HARD_MAX_SIZE`
a size is refused even when the engine has no limit.
"""

from __future__ import annotations

from agentkernel.rhai.runtime.context import NativeContext
from agentkernel.rhai.runtime.data_size import LIST_SLOT, SCALAR, STRING
from agentkernel.rhai.runtime.failures import ARRAY_TOO_LARGE, MAP_TOO_LARGE, STRING_TOO_LARGE, too_large
from agentkernel.rhai.runtime.ops import HARD_MAX_SIZE
from agentkernel.rhai.runtime.values import FnPtr

_SIZED = frozenset({str, list, dict, bytearray, FnPtr})


def reserve_string(ctx: NativeContext, length: int) -> None:
    """A new string of `length` characters is about to be built."""
    limit = ctx.limits.max_string_size
    if length > HARD_MAX_SIZE or (limit and length > limit):
        raise too_large(STRING_TOO_LARGE)
    ctx.reserve_data(STRING + length, STRING_TOO_LARGE)


def reserve_array(ctx: NativeContext, length: int, what: str = ARRAY_TOO_LARGE) -> None:
    """An array or BLOB is about to reach `length` elements."""
    limit = ctx.limits.max_array_size
    if length > HARD_MAX_SIZE or (limit and length > limit):
        raise too_large(what)


def reserve_map(ctx: NativeContext, length: int) -> None:
    """A map is about to reach `length` properties."""
    limit = ctx.limits.max_map_size
    if length > HARD_MAX_SIZE or (limit and length > limit):
        raise too_large(MAP_TOO_LARGE)


def reserve_copies(ctx: NativeContext, item: object, count: int) -> None:
    """`count` copies of `item` are about to be stored (`pad`): each counts toward the data limit."""
    if count > 0:
        size = ctx.data_size(item) if type(item) in _SIZED else SCALAR
        what = STRING_TOO_LARGE if type(item) is str else ARRAY_TOO_LARGE
        ctx.reserve_data((size + LIST_SLOT) * count, what)


__all__ = ["HARD_MAX_SIZE", "reserve_array", "reserve_copies", "reserve_map", "reserve_string"]
