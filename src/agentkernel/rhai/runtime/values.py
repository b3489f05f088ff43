"""Rhai values as native Python values, their tags and type names (RHAI.md §2).

| Rhai      | Python                       |
|-----------|------------------------------|
| `()`      | None                         |
| bool      | bool                         |
| i64       | int (kept in i64 range)      |
| f64       | float                        |
| char      | Char (a str subclass)        |
| string    | str                          |
| array     | list                         |
| map       | dict[str, value]             |
| range     | RangeVal                     |
| Fn        | FnPtr                        |
| timestamp | Timestamp                    |
| blob      | bytearray                    |

Always test types with `type(v) is X`: bool is an int and Char is a str in
Python, but not in Rhai. How values print is printing.py; how they are
copied, copying.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentkernel.rhai.syntax.literals import Char

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class RangeVal:
    """`start..end` (exclusive) or `start..=end` (inclusive), ints only."""

    start: int
    end: int
    inclusive: bool = False

    def as_range(self) -> range:
        return range(self.start, self.end + 1 if self.inclusive else self.end)


@dataclass(frozen=True, slots=True)
class FnPtr:
    """A function pointer: a name, curried leading arguments and, for closures
    and script functions, the compiled callable the runtime invokes."""

    name: str
    curried: tuple[Any, ...] = ()
    target: Callable[..., Any] | None = field(default=None, compare=False)

    @property
    def is_anonymous(self) -> bool:
        return self.name.startswith("anon$")


@dataclass(frozen=True, slots=True)
class Timestamp:
    """A moment from `timestamp()`, on the monotonic clock, in seconds."""

    seconds: float

    @classmethod
    def now(cls) -> Timestamp:
        return cls(time.monotonic())


@dataclass(frozen=True, slots=True, eq=False)
class IterVal:
    """What `chars()`, `bits()` and a stepped `range(a, b, step)` return: an iterator
    value that only `for` can walk. `type_of` says "range" (the reference maps its
    iterator types so); it prints as its Rust type path. Each `for` starts afresh,
    as the reference's loop walks a copy."""

    rust_name: str
    source: Callable[[], Iterator[Any]]

    def __iter__(self) -> Iterator[Any]:
        return self.source()


# -- value tags ---------------------------------------------------------------------------
#
# The reference keeps a 32-bit tag in every value (`set_tag`, `tag`, `x.tag = n`): copies
# keep it (`let y = x`, arguments, array elements), operations make untagged values. Here
# only a tagged value pays: `set_tag` makes an instance of a subclass of its type holding
# the tag (an i64, f64, string or char; other types keep no tag). Untagged values stay the
# plain Python values every fast path tests with `type(x) is int`; a tagged value fails
# those tests, and the slow paths treat it as its plain value where they fail to match
# (`plain`), so whatever it meets computes as the reference does, and the result is untagged.


class TaggedInt(int):
    """An i64 with a tag."""

    tag: int


class TaggedFloat(float):
    """An f64 with a tag."""

    tag: int


class TaggedStr(str):
    """A string with a tag."""

    tag: int


class TaggedChar(Char):
    """A char with a tag."""

    tag: int


#: each tagged type and its plain type
TAGGED: dict[type, type] = {TaggedInt: int, TaggedFloat: float, TaggedStr: str, TaggedChar: Char}
_TAGGABLE: dict[type, type] = {plain: tagged for tagged, plain in TAGGED.items()}


def plain(value: Any) -> Any:
    """A tagged value as its plain value (an untagged one as it is)."""
    base = TAGGED.get(type(value))
    return value if base is None else base(value)


def has_tagged(values: Any) -> bool:
    """Whether any of `values` carries a tag (the slow paths then retry with plain values)."""
    return any(type(v) in TAGGED for v in values)


def tag_of(value: Any) -> int:
    return value.tag if type(value) in TAGGED else 0


def with_tag(value: Any, tag: int) -> Any:
    """`value` with `tag` (0: untagged); a type that keeps no tag is returned as it is."""
    base = TAGGED.get(type(value), type(value))
    tagged_type = _TAGGABLE.get(base)
    if tagged_type is None:
        return value
    if tag == 0:
        return base(value)
    tagged = tagged_type(value)
    tagged.tag = tag
    return tagged


_TYPE_NAMES: dict[type, str] = {
    type(None): "()",
    bool: "bool",
    int: "i64",
    float: "f64",
    Char: "char",
    str: "string",
    list: "array",
    dict: "map",
    FnPtr: "Fn",
    Timestamp: "timestamp",
    bytearray: "blob",
    TaggedInt: "i64",
    TaggedFloat: "f64",
    TaggedStr: "string",
    TaggedChar: "char",
}


def type_name(value: Any) -> str:
    """`type_of(value)`: "i64", "string", "range=", "()", …"""
    kind = type(value)
    if kind is RangeVal:
        return "range=" if value.inclusive else "range"
    if kind is IterVal:
        return "range"
    return _TYPE_NAMES.get(kind, kind.__name__)


def signature_type_name(value: Any) -> str:
    """A type as `Function not found: f (…)` lists it: strings read `&str | ImmutableString | String`."""
    if type(value) is str or type(value) is TaggedStr:
        return "&str | ImmutableString | String"
    return type_name(value)


__all__ = [
    "I64_MAX",
    "I64_MIN",
    "TAGGED",
    "Char",
    "FnPtr",
    "IterVal",
    "RangeVal",
    "TaggedChar",
    "TaggedFloat",
    "TaggedInt",
    "TaggedStr",
    "Timestamp",
    "has_tagged",
    "plain",
    "signature_type_name",
    "tag_of",
    "type_name",
    "with_tag",
]
