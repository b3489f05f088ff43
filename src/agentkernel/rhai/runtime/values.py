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

from agentkernel.rhai.syntax.literals import Char
from agentkernel.rhai.syntax.records import field, record, replace

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1


@record
class RangeVal:
    """`start..end` (exclusive) or `start..=end` (inclusive), ints only."""

    start: int
    end: int
    inclusive: bool = False
    #: the value's tag (value tags, below): not part of its value
    tag: int = field(default=0, compare=False, repr=False)

    def as_range(self) -> range:
        return range(self.start, self.end + 1 if self.inclusive else self.end)


@record
class FnPtr:
    """A function pointer: a name, curried leading arguments and, for closures
    and script functions, the compiled callable the runtime invokes."""

    name: str
    curried: tuple[Any, ...] = ()
    target: Callable[..., Any] | None = field(default=None, compare=False)
    #: the value's tag (value tags, below): not part of its value
    tag: int = field(default=0, compare=False, repr=False)

    @property
    def is_anonymous(self) -> bool:
        return self.name.startswith("anon$")


@record
class Timestamp:
    """A moment from `timestamp()`, on the monotonic clock, in seconds."""

    seconds: float
    #: the value's tag (value tags, below): not part of its value
    tag: int = field(default=0, compare=False, repr=False)

    @classmethod
    def now(cls) -> Timestamp:
        return cls(time.monotonic())


class IterVal:
    """What `chars()`, `bits()` and a stepped `range(a, b, step)` return: an iterator
    value that only `for` can walk. `type_of` says "range" (the reference maps its
    iterator types so); it prints as its Rust type path. Each `for` starts afresh,
    as the reference's loop walks a copy. Equal only to itself."""

    __slots__ = ("rust_name", "source")

    def __init__(self, rust_name: str, source: Callable[[], Iterator[Any]]) -> None:
        self.rust_name = rust_name
        self.source = source

    def __repr__(self) -> str:
        return f"IterVal(rust_name={self.rust_name!r}, source={self.source!r})"

    def __iter__(self) -> Iterator[Any]:
        return self.source()


# -- value tags ---------------------------------------------------------------------------
#
# The reference keeps a 32-bit tag in every value (`set_tag`, `tag`, `x.tag = n`): copies
# keep it (`let y = x`, arguments, array elements), a change in place keeps it (`a.push(x)`,
# `m.k = v`), operations make untagged values (`a + b`, `!b`). Here only a tagged value
# pays: `set_tag` makes an instance of a tagged type holding the tag — a subclass of an
# i64, f64, string, char, array, map or BLOB, and for a bool or `()` (which Python cannot
# subclass) a small box. Untagged values stay the plain Python values every fast path tests with
# `type(x) is int`; a tagged value fails those tests, and the slow paths treat it as its
# plain value where they fail to match (`plain`), so whatever it meets computes as the
# reference does, and the result is untagged. A tagged array's or map's plain value is a
# copy: a slow path that changes it writes the change back (`restore`) so the tagged
# container itself changes, as the reference's does. A range, Fn or timestamp (frozen
# values of ours) holds its tag in a field instead: `set_tag` makes a copy with the tag.


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


class TaggedList(list):  # type: ignore[type-arg]
    """An array with a tag."""

    tag: int


class TaggedDict(dict):  # type: ignore[type-arg]
    """A map with a tag."""

    tag: int


class TaggedBlob(bytearray):
    """A BLOB with a tag."""

    tag: int


class TaggedBool:
    """A bool with a tag: a box, as Python's bool has no subclasses. `bool(x)` is its value;
    it equals its value and the other box of that value (an array's `==` compares items so)."""

    __slots__ = ("tag", "value")

    #: whether a box (this or a TaggedUnit) was ever made in this process (until then
    #: `host_value` has nothing to do)
    made = False

    def __init__(self, value: Any) -> None:
        self.value = bool(value)
        self.tag = 0
        TaggedBool.made = True

    def __bool__(self) -> bool:
        return self.value

    def __eq__(self, other: object) -> bool:
        return other is self.value or (type(other) is TaggedBool and other.value is self.value)

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"TaggedBool({self.value}, tag={self.tag})"


class TaggedUnit:
    """`()` with a tag: a box, as Python's None has no subclasses. It equals `()` and the
    other boxes; the host gets None (`host_value`)."""

    __slots__ = ("tag",)

    def __init__(self, value: Any = None) -> None:
        self.tag = 0
        TaggedBool.made = True  # a box was made: `host_value` has work to do

    def __eq__(self, other: object) -> bool:
        return other is None or type(other) is TaggedUnit

    def __hash__(self) -> int:
        return hash(None)

    def __repr__(self) -> str:
        return f"TaggedUnit(tag={self.tag})"


_UNIT = type(None)

#: each tagged type and its plain type
TAGGED: dict[type, type] = {
    TaggedInt: int,
    TaggedFloat: float,
    TaggedStr: str,
    TaggedChar: Char,
    TaggedList: list,
    TaggedDict: dict,
    TaggedBlob: bytearray,
    TaggedBool: bool,
    TaggedUnit: _UNIT,
}
#: the tagged containers: copied where a plain one is (copying.py), changed in place
TAGGED_CONTAINERS: frozenset[type] = frozenset({TaggedList, TaggedDict, TaggedBlob})
_TAGGABLE: dict[type, type] = {plain: tagged for tagged, plain in TAGGED.items()}
#: the types that hold their tag in a field of their own (0: untagged): immutable values of
#: ours, so a tagged copy is still of their type and every test of their type still holds
_TAG_FIELD: frozenset[type] = frozenset({RangeVal, FnPtr, Timestamp})


def plain(value: Any) -> Any:
    """A tagged value as its plain value (an untagged one as it is)."""
    base = TAGGED.get(type(value))
    if base is None:
        return value
    return None if base is _UNIT else base(value)


def restore(tagged: Any, changed: Any) -> Any:
    """A tagged array or map given what a slow path made of its plain copy: when that is
    the copy changed in place, the change goes into `tagged` (which keeps its tag and
    identity) and `tagged` is returned; anything else is returned as it is."""
    if type(tagged) is TaggedList and type(changed) is list:
        tagged[:] = changed
        return tagged
    if type(tagged) is TaggedBlob and type(changed) is bytearray:
        tagged[:] = changed
        return tagged
    if type(tagged) is TaggedDict and type(changed) is dict:
        tagged.clear()
        tagged.update(changed)
        return tagged
    return changed


def host_value(value: Any) -> Any:
    """A script's value as the host gets it: a tagged bool or `()`, wherever it is in arrays
    and maps, a Python bool or None (the other tagged values are subclasses of the host's
    types)."""
    if not TaggedBool.made:
        return value
    kind = type(value)
    if kind is TaggedBool:
        return value.value
    if kind is TaggedUnit:
        return None
    if kind is list or kind is TaggedList:
        return [host_value(v) for v in value]
    if kind is dict or kind is TaggedDict:
        return {k: host_value(v) for k, v in value.items()}
    return value


def has_tagged(values: Any) -> bool:
    """Whether any of `values` carries a tag (the slow paths then retry with plain values)."""
    return any(type(v) in TAGGED for v in values)


def tag_of(value: Any) -> int:
    kind = type(value)
    return value.tag if kind in TAGGED or kind in _TAG_FIELD else 0


def with_tag(value: Any, tag: int) -> Any:
    """`value` with `tag` (0: untagged); a type that keeps no tag is returned as it is."""
    if type(value) in _TAG_FIELD:  # an immutable value of our own: a copy with the tag
        return replace(value, tag=tag)
    base = TAGGED.get(type(value), type(value))
    tagged_type = _TAGGABLE.get(base)
    if tagged_type is None:
        return value
    if tag == 0:
        return plain(value)
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
    TaggedList: "array",
    TaggedDict: "map",
    TaggedBlob: "blob",
    TaggedBool: "bool",
    TaggedUnit: "()",
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
    "TAGGED_CONTAINERS",
    "Char",
    "FnPtr",
    "IterVal",
    "RangeVal",
    "TaggedBlob",
    "TaggedBool",
    "TaggedChar",
    "TaggedDict",
    "TaggedFloat",
    "TaggedInt",
    "TaggedList",
    "TaggedStr",
    "TaggedUnit",
    "Timestamp",
    "has_tagged",
    "host_value",
    "plain",
    "restore",
    "signature_type_name",
    "tag_of",
    "type_name",
    "with_tag",
]
