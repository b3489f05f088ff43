"""Rhai's standard library as native Python functions (RHAI.md §13).

    lib = default_library()
    lib.call(ctx, "sub_string", ["hello", 1, 3])      # -> "ell"

One module per area registers its natives into a `Library` (a table keyed
by name and parameter types). Operators live in `rhai/ops.py`; `print`,
`debug`, `type_of`, `Fn`, `call`, `curry`, `eval`, `parse_json`, `exit` and
the `is_def_*`/`is_shared` functions are the compiler's.
"""

from __future__ import annotations

from functools import lru_cache

from agentkernel.rhai.stdlib import (
    arrays,
    bits,
    blobs,
    chars,
    conversions,
    core,
    fn_ptrs,
    higher_order,
    json_text,
    maps,
    numbers,
    ranges,
    strings,
    timestamps,
)
from agentkernel.rhai.stdlib.registry import ANY, EXCLUSIVE, INCLUSIVE, Library, Mutated, NativeFn

_AREAS = (
    core,
    conversions,
    numbers,
    bits,
    chars,
    strings,
    arrays,
    higher_order,
    blobs,
    maps,
    json_text,
    ranges,
    timestamps,
    fn_ptrs,
)


def build_library() -> Library:
    """A fresh library with every standard native (for callers that add their own)."""
    lib = Library()
    for area in _AREAS:
        area.register(lib)
    return lib


@lru_cache(maxsize=1)
def _standard() -> Library:
    return build_library()


def default_library() -> Library:
    """The standard library: built once, handed out as a copy (cheap: the tables are
    copied, not rebuilt), so a caller may register its own functions into it."""
    return _standard().copy()


__all__ = [
    "ANY",
    "EXCLUSIVE",
    "INCLUSIVE",
    "Library",
    "Mutated",
    "NativeFn",
    "build_library",
    "default_library",
]
