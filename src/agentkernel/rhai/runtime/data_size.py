"""How much memory Rhai values take, for the per-call data limit.

The reference Rhai checks the size of a value transitively (an array's
strings and nested arrays count toward it) and counts a shared value each
time it is stored (`src/eval/data_check.rs`). We count the same way, in
bytes, close to what CPython takes: a string, array, map or BLOB by its own
size (`LIST`, `MAP`… per item), an element that is a number, bool or char
as `SCALAR` bytes more. A string stored
in three places counts three times; that is what printing the value or
sending it back as JSON would make of it.

`size_of(value)` measures one value. `LiveData` measures everything a
running evaluation holds: the locals of its frames (compiled code and the
natives it called), its global constants and its `eval` scope. One object
reached under two names counts once, a nested one by its place.
"""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable, Iterable

from agentkernel.rhai.runtime import pacing
from agentkernel.rhai.runtime.failures import ARRAY_TOO_LARGE, MAP_TOO_LARGE, STRING_TOO_LARGE
from agentkernel.rhai.runtime.values import FnPtr, TaggedBlob, TaggedDict, TaggedList, TaggedStr
from agentkernel.rhai.syntax.records import field, mutable_record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

    Holders = dict[type, Callable[[Any], Iterable[Any]]]  # annotations only

SCALAR = 16  # an element that is a number, bool, char or `()`: its object, shared or not
LIST, LIST_SLOT = 56, 8  # an empty list, and each slot (a pointer)
MAP, MAP_ENTRY = 64, 40  # an empty dict, and each entry: its share of the hash table (keys are shared)
STRING = 49  # an empty string; each character takes 1 byte, more when it is not ASCII
BLOB = 56
FN_PTR = 64  # a function pointer, beside its curried arguments and captured variables
_WIDE = 256  # strings at least this long are measured exactly (their characters may be 4 bytes)
_MUCH_TEXT = 1 << 20  # characters in one array or map past which its strings are measured exactly
_sizeof = sys.getsizeof
_COMPILED_PREFIX = "<rhai"  # the file name of compiled Rhai code (engine.py)


@mutable_record
class Tally:
    """Bytes of strings, of arrays and BLOBs, and of maps, and what was already counted."""

    strings: int = 0
    arrays: int = 0
    maps: int = 0
    seen: set[int] = field(default_factory=set)

    @property
    def total(self) -> int:
        return self.strings + self.arrays + self.maps

    def largest(self) -> str:
        """The reference's wording for the kind of data that takes the most room."""
        most = max(self.strings, self.arrays, self.maps)
        if most == self.strings:
            return STRING_TOO_LARGE
        return ARRAY_TOO_LARGE if most == self.arrays else MAP_TOO_LARGE


def _function_parts(fn: types.FunctionType) -> tuple[Any, ...]:
    """A compiled function may keep values as default arguments."""
    return fn.__defaults__ or ()


def _bound_parts(bound: functools.partial[Any]) -> tuple[Any, ...]:
    """A compiled closure is its function with the captured variables' cells bound first
    (abi.bind_closure)."""
    return (*bound.args, *bound.keywords.values())


class Walker:
    """Counts values, looking through `holders` (variable cells, `this` boxes, closures)."""

    def __init__(self, holders: Holders) -> None:
        self.holders: Holders = {
            **holders,
            FnPtr: lambda ptr: (*ptr.curried, ptr.target),
            TaggedStr: lambda text: (),  # a tagged string: counted in `_walk`, as rare as tags
            TaggedList: lambda array: array,  # a tagged array or map: counted in `_walk` too
            TaggedDict: lambda table: table.values(),
            TaggedBlob: lambda blob: (),  # a tagged BLOB: counted in `_walk`
            types.FunctionType: _function_parts,
            functools.partial: _bound_parts,
        }
        self._walked = frozenset({list, dict, bytearray, *self.holders})

    def size_of(self, value: Any) -> int:
        """The bytes `value` takes, nested values and every stored string included."""
        kind = type(value)
        if kind is str:
            return string_size(value)
        if kind is dict and len(value) <= _SMALL:  # the common small record, without the walk
            total = MAP + (MAP_ENTRY + SCALAR) * len(value)
            for item in value.values():
                if type(item) is str:
                    total += string_size(item)
                elif type(item) in self._walked:
                    break
            else:
                return total
        if kind not in self._walked:
            return 0
        strings, arrays, maps = self._walk([value], set())
        return strings + arrays + maps

    def flat_size(self, items: list[Any], kinds: set[type]) -> int | None:
        """What `size_of(items)` finds of an array whose items' types are among `kinds` (known
        already), without its first pass over them; None when some kind is walked into (a
        container, a tagged value, a function pointer)."""
        if not kinds.isdisjoint(self._walked):
            return None
        size = LIST + (LIST_SLOT + SCALAR) * len(items)
        if str not in kinds:
            return size
        if len(items) > _SMALL and len(kinds) == 1:
            return size + _strings_only(items)
        return size + _string_bytes(items)

    def add_roots(self, roots: Iterable[Any], tally: Tally) -> None:
        """Count `roots`, each object once however many roots name it."""
        pending = []
        seen = tally.seen
        walked = self._walked
        for root in roots:
            kind = type(root)
            if kind is str:
                if id(root) not in seen:
                    seen.add(id(root))
                    tally.strings += string_size(root)
            elif kind in walked and id(root) not in seen:
                seen.add(id(root))
                pending.append(root)
        strings, arrays, maps = self._walk(pending, seen)
        tally.strings += strings
        tally.arrays += arrays
        tally.maps += maps

    def _walk(self, stack: list[Any], seen: set[int]) -> tuple[int, int, int]:
        """Bytes of strings, arrays and maps under the values on `stack` (emptied).

        Iterative, so no nesting is too deep for it; a container met again (an
        alias, or a closure that captured itself) is not counted again.
        """
        strings = arrays = maps = 0
        walked = self._walked
        while stack:
            value = stack.pop()
            kind = type(value)
            if kind is list:
                arrays += LIST + (LIST_SLOT + SCALAR) * len(value)
                items: Any = value
            elif kind is dict:
                maps += MAP + (MAP_ENTRY + SCALAR) * len(value)
                items = value.values()
            elif kind is bytearray:
                arrays += BLOB + len(value)
                continue
            else:
                if kind is FnPtr:
                    arrays += FN_PTR
                elif kind is TaggedStr:
                    strings += string_size(value)
                elif kind is TaggedList:
                    arrays += LIST + (LIST_SLOT + SCALAR) * len(value)
                elif kind is TaggedDict:
                    maps += MAP + (MAP_ENTRY + SCALAR) * len(value)
                elif kind is TaggedBlob:
                    arrays += BLOB + len(value)
                items = self.holders[kind](value)
            if len(items) > _SMALL:
                pacing.poll_size(len(items))
                kinds = set(map(type, items))
                if kinds.isdisjoint(walked):
                    if str in kinds:
                        strings += _strings_only(items) if len(kinds) == 1 else _string_bytes(items)
                    continue
            for item in items:
                kind = type(item)
                if kind is str:
                    strings += string_size(item)
                elif kind in walked and id(item) not in seen:
                    seen.add(id(item))
                    stack.append(item)
        return strings, arrays, maps


_SMALL = 16  # up to this many items, one pass in Python beats a first pass in C


def cut_size(count: int, text: str) -> int | None:
    """At least what `size_of` finds of an array of `count` (> `_SMALL`) strings cut out of `text`
    (no character in two), without a walk: their characters are at most the text's. None when
    it cannot say (few pieces, each measured alone; or much text, measured exactly)."""
    if count <= _SMALL or len(text) >= _MUCH_TEXT:
        return None
    return LIST + (LIST_SLOT + SCALAR + STRING) * count + len(text)


def string_size(text: str) -> int:
    """The bytes of one string: exact for long ones, which may hold wide characters."""
    return STRING + len(text) if len(text) < _WIDE else _sizeof(text)


def _strings_only(items: Any) -> int:
    """The bytes of many strings: by their lengths, exactly when there is much text."""
    chars = sum(map(len, items))
    return STRING * len(items) + chars if chars < _MUCH_TEXT else sum(map(_sizeof, items))


def _string_bytes(items: Iterable[Any]) -> int:
    return sum(string_size(item) for item in items if type(item) is str)


class LiveData:
    """What an evaluation holds right now, found from the frames of its thread."""

    def __init__(self, walker: Walker) -> None:
        self.walker = walker

    def measure(self, entry: types.FrameType, extra_roots: Iterable[Any]) -> Tally | None:
        """Count the locals of every frame above `entry` (the caller's frame that started
        the evaluation), outermost first, plus `extra_roots`. None when `entry` is not on
        this thread's stack (nothing is measured then).

        Compiled Rhai frames hold Rhai values. Other frames (natives, the runtime)
        hold the same values under other names, and Python lists, tuples and dicts
        that only carry values around (argument lists, a result being built); those
        are looked through rather than counted as Rhai arrays or maps.
        """
        frames = []
        frame: types.FrameType | None = sys._getframe(1)
        while frame is not entry:
            if frame is None:
                return None
            frames.append(frame)
            frame = frame.f_back
        tally = Tally()
        add = self.walker.add_roots
        for frame in reversed(frames):
            values = list(frame.f_locals.values())
            if frame.f_code.co_filename.startswith(_COMPILED_PREFIX):
                add(values, tally)
            else:
                add(_looked_through(values, tally.seen), tally)
        add(extra_roots, tally)
        return tally


_CARRIERS = (list, tuple, dict)


def _looked_through(values: list[Any], seen: set[int]) -> Iterable[Any]:
    """Locals of a Python frame: a list, tuple or dict not yet counted is a carrier."""
    for value in values:
        if type(value) in _CARRIERS and id(value) not in seen:
            seen.add(id(value))
            yield from value.values() if type(value) is dict else value
        else:
            yield value


__all__ = ["FN_PTR", "SCALAR", "LiveData", "Tally", "Walker", "cut_size"]
