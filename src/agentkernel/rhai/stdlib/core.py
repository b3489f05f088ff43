"""Language-core natives (Rhai 1.25 `lang_core.rs`) that are plain functions:
`take` and the value tag. (`exit`, `parse_json`, `print`, … are the compiler's.)

Tags (values.py, "value tags"): every value keeps one, as the reference's does —
an i64, f64, string, char, array, map, BLOB, bool or `()` in a tagged type of its
own, a range, Fn or timestamp in a field of its own.
"""

from __future__ import annotations

from typing import Any

from agentkernel.rhai.runtime.failures import arithmetic
from agentkernel.rhai.runtime.values import TAGGED, tag_of, with_tag
from agentkernel.rhai.stdlib.registry import ANY, Library, Mutated

_TAG_MIN, _TAG_MAX = -(2**31), 2**31 - 1


def take(value: Any) -> Mutated:
    """`take(x)`: the value of `x`, leaving `()` in its place."""
    return Mutated(None, value)


def tag(value: Any) -> int:
    return tag_of(value)


def _check_tag(new: int) -> None:
    if new < _TAG_MIN:
        raise arithmetic(f"{new} is too small to fit into a tag (must be between {_TAG_MIN} and {_TAG_MAX})")
    if new > _TAG_MAX:
        raise arithmetic(f"{new} is too large to fit into a tag (must be between {_TAG_MIN} and {_TAG_MAX})")


def set_tag(value: Any, new: int) -> Mutated:
    _check_tag(new)
    return Mutated(with_tag(value, new))


def set_tag_property(value: Any, new: int) -> Any:
    _check_tag(new)
    return with_tag(value, new)


def register(lib: Library) -> None:
    lib.register("take", (ANY,), take, pure=False)
    lib.register("tag", (ANY,), tag)
    lib.getter(ANY, "tag", tag)
    lib.register("set_tag", (ANY, int), set_tag, pure=False)
    for tagged in TAGGED:  # a tagged value reaches no loose (ANY) overload: these see its tag
        lib.register("tag", (tagged,), tag)
        lib.register("set_tag", (tagged, int), set_tag, pure=False)
    lib.setter(ANY, "tag", int, set_tag_property)


__all__ = ["register"]
