"""A test double of the interpreter seam (`NativeContext`) and helpers for calling
operators and natives directly with Python values.

`FakeContext`: a function pointer's `target` is a plain Python callable; one
whose first parameter is named `this` gets a `ThisCell` holding the bound
`this`. Named pointers resolve to `FakeContext.functions` (stand-ins for
script functions) or to the library's natives.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from agentkernel.rhai.errors import RhaiRuntimeError
from agentkernel.rhai.runtime import ops
from agentkernel.rhai.runtime.context import NO_THIS
from agentkernel.rhai.runtime.failures import function_not_found, too_large, unbound_this
from agentkernel.rhai.runtime.printing import to_string
from agentkernel.rhai.runtime.runtime import data_size_of, flat_size_of
from agentkernel.rhai.runtime.values import FnPtr, RangeVal, type_name
from agentkernel.rhai.stdlib import Mutated, default_library

LIB = default_library()
S = "&str | ImmutableString | String"  # how a string type shows in "Function not found"

# -- the test double -------------------------------------------------------------------------------


@dataclass
class Limits:
    max_string_size: int = 0
    max_array_size: int = 0
    max_map_size: int = 0


class ThisCell:
    """What a `this`-taking fake closure gets: read and replace `this`."""

    def __init__(self, value: Any) -> None:
        self.value = value


class FakeContext:
    """A test double of the interpreter (`NativeContext`)."""

    def __init__(self, *, functions: dict[str, Callable[..., Any]] | None = None, **limits: int) -> None:
        self.limits = Limits(**limits)
        self.functions = functions or {}
        self.output: list[str] = []
        self._this: Any = NO_THIS
        self.calls = 0
        self.accounted: list[Any] = []  # what natives counted toward the data limit
        self.reserved: list[tuple[int, str]] = []
        self.charged: list[int] = []  # what natives registered `charged` counted of what they built
        self.slept: list[float] = []

    def _target(self, fn: FnPtr) -> Callable[..., Any] | None:
        return fn.target or self.functions.get(fn.name)

    @staticmethod
    def _shape(target: Callable[..., Any]) -> tuple[bool, int]:
        params = list(inspect.signature(target).parameters)
        wants_this = bool(params) and params[0] == "this"
        return wants_this, len(params) - wants_this

    def fn_ptr_accepts(self, fn: FnPtr, arg_count: int) -> bool:
        total = len(fn.curried) + arg_count
        target = self._target(fn)
        if target is None:
            return LIB.has_function(fn.name, total)
        return self._shape(target)[1] == total

    def call_fn_ptr(self, fn: FnPtr, args: Sequence[Any], this: Any = NO_THIS) -> Any:
        self.calls += 1
        full = [*fn.curried, *args]
        target = self._target(fn)
        if target is None:
            result = LIB.call(self, fn.name, full if this is NO_THIS else [this, *full])
            self._this = this
            return result.result if type(result) is Mutated else result
        wants_this, arity = self._shape(target)
        if arity != len(full):
            raise function_not_found(fn.name, full)
        if not wants_this:
            self._this = this
            return target(*full)
        if this is NO_THIS:
            raise unbound_this()
        cell = ThisCell(this)
        result = target(cell, *full)
        self._this = cell.value
        return result

    def count_apart(self, operations: int) -> None:
        pass

    def call_back(self, fn: FnPtr, args: Sequence[Any], this: Any = NO_THIS) -> Any:
        return self.call_fn_ptr(fn, args, this)

    def last_this(self) -> Any:
        return self._this

    def reading_callback(self, fn: Any) -> None:
        return None  # the fake's callbacks go through call_fn_ptr, with their copies

    def check_string_size(self, value: str) -> None:
        if self.limits.max_string_size and len(value) > self.limits.max_string_size:
            raise too_large("Length of string")

    def check_array_size(self, value: list[Any] | bytearray) -> None:
        if self.limits.max_array_size and len(value) > self.limits.max_array_size:
            raise too_large("Size of array/BLOB")

    def check_map_size(self, value: dict[str, Any]) -> None:
        if self.limits.max_map_size and len(value) > self.limits.max_map_size:
            raise too_large("Size of object map")

    def account(self, value: Any) -> Any:
        self.accounted.append(value)
        return value

    def reserve_data(self, size: int, what: str) -> None:
        self.reserved.append((size, what))

    def charge(self, size: int) -> None:
        self.charged.append(size)

    @staticmethod
    def data_size(value: Any) -> int:
        return data_size_of(value)

    @staticmethod
    def flat_size(items: list[Any], kinds: set[type]) -> int | None:
        return flat_size_of(items, kinds)

    def write_stdout(self, text: str) -> None:
        self.output.append(text)

    def sleep(self, seconds: float) -> None:
        """Noted, not slept: the natives' part is deciding what to ask for."""
        self.slept.append(seconds)


_anon_ids = itertools.count(1)


def closure(fn: Callable[..., Any]) -> FnPtr:
    """An anonymous function, as `|x| …` makes one."""
    return FnPtr(f"anon${next(_anon_ids):016x}", target=fn)


def show(value: Any) -> str:
    """`<type_of>: <to_string>`, as the conformance cases record results."""
    return f"{type_name(value)}: {to_string(value)}"


def call(name: str, *args: Any, ctx: FakeContext | None = None) -> Any:
    """`name(args…)`; a Mutated answer gives its result (the receiver is a temporary)."""
    result = LIB.call(ctx or FakeContext(), name, list(args))
    return result.result if type(result) is Mutated else result


def method(name: str, receiver: Any, *args: Any, ctx: FakeContext | None = None) -> tuple[Any, Any]:
    """`receiver.name(args…)` on a variable: (the variable afterwards, the call's value)."""
    result = LIB.call(ctx or FakeContext(), name, [receiver, *args])
    if type(result) is Mutated:
        return result.receiver, result.result
    return receiver, result


def error(fn: Callable[[], Any]) -> str:
    """The message of the Rhai error `fn` raises."""
    with pytest.raises(RhaiRuntimeError) as info:
        fn()
    return info.value.message


def op(symbol: str, a: Any, b: Any) -> str:
    """`a symbol b` shown as a result, or `ERR <message>`."""
    try:
        return show(ops.binary(symbol, a, b))
    except RhaiRuntimeError as err:
        return "ERR " + err.message


def r(a: int, b: int) -> RangeVal:
    return RangeVal(a, b)


def ir(a: int, b: int) -> RangeVal:
    return RangeVal(a, b, True)
