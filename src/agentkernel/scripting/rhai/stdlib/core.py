"""Language-core natives (Rhai 1.25 `lang_core.rs`) that are plain functions:
`take` and the value tag. (`exit`, `parse_json`, `print`, … are the compiler's.)

Tags: our values carry no tag, so `tag(x)` is always 0 and `set_tag` only
checks its argument. This differs from the reference once a tag is set.
"""

from __future__ import annotations

from typing import Any

from agentkernel.scripting.rhai.failures import arithmetic
from agentkernel.scripting.rhai.stdlib.registry import ANY, Library, Mutated

_TAG_MIN, _TAG_MAX = -(2**31), 2**31 - 1


def take(value: Any) -> Mutated:
    """`take(x)`: the value of `x`, leaving `()` in its place."""
    return Mutated(None, value)


def tag(value: Any) -> int:
    return 0


def _check_tag(new: int) -> None:
    if new < _TAG_MIN:
        raise arithmetic(f"{new} is too small to fit into a tag (must be between {_TAG_MIN} and {_TAG_MAX})")
    if new > _TAG_MAX:
        raise arithmetic(f"{new} is too large to fit into a tag (must be between {_TAG_MIN} and {_TAG_MAX})")


def set_tag(value: Any, new: int) -> Mutated:
    _check_tag(new)
    return Mutated(value)


def set_tag_property(value: Any, new: int) -> Any:
    _check_tag(new)
    return value


def register(lib: Library) -> None:
    lib.register("take", (ANY,), take, pure=False)
    lib.register("tag", (ANY,), tag)
    lib.getter(ANY, "tag", tag)
    lib.register("set_tag", (ANY, int), set_tag, pure=False)
    lib.setter(ANY, "tag", int, set_tag_property)


__all__ = ["register"]
