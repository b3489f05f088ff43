"""Calling a script's callback from a native, the way the reference does (RHAI.md §10).

Rhai 1.25 (`FnPtr::call_raw_with_extra_args`) tries several argument
layouts, because a callback may want the item as `this`, as a parameter,
and may or may not want the index:

* an anonymous function (a closure) is matched by arity: `args` with `this`
  bound, else `this` moved into the arguments (at `move_at`), else that
  plus the extras, else `args` plus extras with `this` bound;
* a named function (a `Fn("name")` or a name string) is called method-style
  with `this` first, and on "Function not found" (for that name) again with
  `this` moved into the arguments, then with the extras added. Its errors
  are wrapped `…\\nin call to function '<caller>'`.

`this` is bound by reference: what the callback leaves in it is written
back by the caller (`for_each(|| this *= 2)` changes the array).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentkernel.rhai.errors import ErrorKind, RhaiRuntimeError
from agentkernel.rhai.runtime.context import NO_THIS, NativeContext
from agentkernel.rhai.runtime.copying import clone
from agentkernel.rhai.runtime.failures import in_function_call, not_found_text
from agentkernel.rhai.runtime.values import TAGGED_CONTAINERS, FnPtr

_DIRECT, _MOVED, _MOVED_EXTRAS, _EXTRAS, _BY_NAME = range(5)
_CONTAINERS = frozenset({list, dict, bytearray, *TAGGED_CONTAINERS})


def is_identifier(name: str) -> bool:
    """A valid function name: ASCII letters, digits and `_`, whose first character
    that is not `_` is a letter (RHAI.md §1)."""
    core = name.lstrip("_")
    return (
        bool(core)
        and core[0].isascii()
        and core[0].isalpha()
        and all(c.isascii() and (c.isalnum() or c == "_") for c in core)
    )


def fn_from_name(name: str) -> FnPtr:
    """A callback given as a function-name string (`filter("is_odd")`)."""
    if not is_identifier(name):
        raise not_found_text(name)
    return FnPtr(name)


def _copy(value: Any) -> Any:
    return clone(value) if type(value) in _CONTAINERS else value


def _missing(err: RhaiRuntimeError, fn: FnPtr) -> bool:
    """Whether `err` says that `fn` itself was not found (so another layout is worth trying)."""
    prefix = "Function not found: "
    return err.kind == ErrorKind.FUNCTION_NOT_FOUND and err.message.startswith(prefix + fn.name)


class Callback:
    """A callback prepared for one native call: the argument layout is chosen once
    (from the argument counts), then the callback is called once per item."""

    __slots__ = ("caller", "ctx", "fn", "move_at", "plan", "this_after")

    def __init__(
        self,
        ctx: NativeContext,
        fn: FnPtr,
        caller: str,
        *,
        nargs: int,
        nextras: int,
        with_this: bool,
        move_at: int | None,
    ) -> None:
        self.ctx = ctx
        self.fn = fn
        self.caller = caller
        self.move_at = move_at
        self.this_after: Any = NO_THIS
        self.plan = self._choose(nargs, nextras, with_this) if fn.is_anonymous else _BY_NAME

    def _choose(self, n: int, e: int, with_this: bool) -> int:
        accepts = self.ctx.fn_ptr_accepts
        if accepts(self.fn, n):
            return _DIRECT
        if with_this and self.move_at is not None:
            if accepts(self.fn, n + 1):
                return _MOVED
            if accepts(self.fn, n + e + 1):
                return _MOVED_EXTRAS
        if accepts(self.fn, n + e):
            return _EXTRAS
        return _BY_NAME

    def __call__(self, args: Sequence[Any], extras: Sequence[Any] = (), this: Any = NO_THIS) -> Any:
        """Call with `args` (and `extras`, `this` where the layout wants them); the
        value `this` was left with is in `this_after` (NO_THIS when not bound)."""
        plan = self.plan
        if plan == _DIRECT:
            return self._call(list(args), this)
        if plan == _EXTRAS:
            return self._call([*args, *extras], this)
        if plan == _BY_NAME:
            return self._by_name(args, extras, this)
        moved = self._moved(args, this)
        return self._call(moved if plan == _MOVED else [*moved, *extras], NO_THIS)

    def _moved(self, args: Sequence[Any], this: Any) -> list[Any]:
        moved = list(args)
        moved.insert(self.move_at or 0, _copy(this))
        return moved

    def _call(self, args: list[Any], this: Any) -> Any:
        if this is NO_THIS:
            self.this_after = NO_THIS
            return self.ctx.call_back(self.fn, args)
        result = self.ctx.call_back(self.fn, args, this)
        self.this_after = self.ctx.last_this()
        return result

    def _by_name(self, args: Sequence[Any], extras: Sequence[Any], this: Any) -> Any:
        try:
            return self._layouts(args, extras, this)
        except RhaiRuntimeError as err:
            if not err.catchable:
                raise
            raise in_function_call(self.caller, err) from None

    def _layouts(self, args: Sequence[Any], extras: Sequence[Any], this: Any) -> Any:
        try:
            return self._call(list(args), this)
        except RhaiRuntimeError as err:
            if not _missing(err, self.fn):
                raise
        if self.move_at is not None and this is not NO_THIS:
            moved = self._moved(args, this)
            try:
                return self._call(moved, NO_THIS)
            except RhaiRuntimeError as err:
                if not _missing(err, self.fn):
                    raise
            return self._call([*moved, *extras], NO_THIS)
        return self._call([*args, *extras], this)


def call_plain(ctx: NativeContext, fn: FnPtr, args: Sequence[Any]) -> Any:
    """A comparer's call (`sort`, `dedup`): just the arguments, no `this`, no extras."""
    return ctx.call_back(fn, list(args))


__all__ = ["Callback", "call_plain", "fn_from_name", "is_identifier"]
