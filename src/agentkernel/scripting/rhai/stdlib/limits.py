"""Size checks for natives that grow strings, arrays, BLOBs and maps (RHAI.md §14).

`reserve_*` refuses a size before anything is allocated (so `pad(1e15, 0)`
fails fast instead of exhausting memory); the context's `check_*` methods
check what was built. Past `HARD_MAX_SIZE` a size is refused even when the
engine has no limit.
"""

from __future__ import annotations

from agentkernel.scripting.rhai.context import NativeContext
from agentkernel.scripting.rhai.failures import ARRAY_TOO_LARGE, MAP_TOO_LARGE, STRING_TOO_LARGE, too_large
from agentkernel.scripting.rhai.ops import HARD_MAX_SIZE


def reserve_string(ctx: NativeContext, length: int) -> None:
    """A string is about to reach `length` characters."""
    limit = ctx.limits.max_string_size
    if length > HARD_MAX_SIZE or (limit and length > limit):
        raise too_large(STRING_TOO_LARGE)


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


__all__ = ["HARD_MAX_SIZE", "reserve_array", "reserve_map", "reserve_string"]
