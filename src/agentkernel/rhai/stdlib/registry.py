"""The table of native functions: registered by name and parameter types, resolved
by the argument values' exact types (RHAI.md §13, §15).

A parameter type is a Python class matched with `type(v) is T` (so a bool is
not an i64 and a Char is not a string), `ANY` (any value), or one of the two
range kinds `EXCLUSIVE` / `INCLUSIVE` (`RangeVal` stands for both). Exact
signatures are found with one dict lookup; signatures with `ANY` are tried
after, fewest wildcards first, as the reference prefers a typed overload.

A native is called with the receiver (for a method call) as its first
argument. One that changes an immutable receiver (a string, char or int)
returns `Mutated(new_receiver, result)` for the runtime to store back; one
that changes a list, map or BLOB does so in place. Either way it is
registered `pure=False`, which the runtime refuses on constants.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from agentkernel.rhai.errors import RhaiRuntimeError
from agentkernel.rhai.runtime import failures
from agentkernel.rhai.runtime.context import NativeContext
from agentkernel.rhai.runtime.internal_errors import log_internal_error
from agentkernel.rhai.runtime.values import TAGGED, IterVal, RangeVal
from agentkernel.rhai.stdlib import indexing
from agentkernel.rhai.syntax.records import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any, Final

    # annotations only
    ParamType = Any  # a class, ANY, EXCLUSIVE, INCLUSIVE or RangeVal (= both range kinds)
    Getter = Callable[[Any], Any]
    Setter = Callable[[Any, Any], Any]


class _Any:
    """The wildcard parameter type."""

    def __repr__(self) -> str:
        return "ANY"


class EXCLUSIVE:
    """Parameter type: an exclusive range `a..b` only."""


class INCLUSIVE:
    """Parameter type: an inclusive range `a..=b` only."""


ANY: Final[Any] = _Any()


class Mutated:
    """A native's answer when it changed an immutable receiver: the runtime stores
    `receiver` back where the receiver came from, and the call's value is `result`."""

    __slots__ = ("receiver", "result")

    def __init__(self, receiver: Any, result: Any = None) -> None:
        self.receiver = receiver
        self.result = result

    def __repr__(self) -> str:
        return f"Mutated({self.receiver!r}, {self.result!r})"


@record
class NativeFn:
    """One registered overload."""

    name: str
    params: tuple[ParamType, ...]
    impl: Callable[..., Any]
    pure: bool = True
    needs_context: bool = False
    # it counts what it builds toward the data limit itself (`NativeContext.charge`), for less than
    # the walk of its result the runtime makes after any other native's call
    charged: bool = False

    def accepts(self, kinds: Sequence[Any]) -> bool:
        return all(p is ANY or p is k for p, k in zip(self.params, kinds, strict=True))


_TAGGED_KINDS = frozenset(TAGGED)


def kind_of(value: Any) -> Any:
    """The type a parameter is matched against: the class, or a range's kind."""
    kind = type(value)
    if kind is RangeVal:
        return INCLUSIVE if value.inclusive else EXCLUSIVE
    return kind


def _expand(params: Sequence[ParamType]) -> list[tuple[ParamType, ...]]:
    """`RangeVal` in a signature stands for both range kinds."""
    out: list[tuple[ParamType, ...]] = [()]
    for p in params:
        options = (EXCLUSIVE, INCLUSIVE) if p is RangeVal else (p,)
        out = [(*prefix, o) for prefix in out for o in options]
    return out


class Library:
    """Native functions, property getters and setters, by name and types."""

    def __init__(self) -> None:
        self._exact: dict[tuple[Any, ...], NativeFn] = {}
        self._loose: dict[tuple[str, int], list[NativeFn]] = {}
        self._arities: set[tuple[str, int]] = set()
        self._getters: dict[tuple[Any, str], Getter] = {}
        self._setters: dict[tuple[Any, str, Any], Setter] = {}
        self._variadic: dict[str, NativeFn] = {}
        self._resolved: dict[tuple[Any, ...], NativeFn | None] = {}
        # (name, type of each argument) → the function of a pure native that needs no context,
        # for the runtime's fast path of method calls (filled by it, emptied by `register`)
        self.pure_calls: dict[tuple[Any, ...], Callable[..., Any]] = {}
        # the same for the natives that change a string receiver (`trim`): they return Mutated
        self.changing_calls: dict[tuple[Any, ...], Callable[..., Any]] = {}
        # whether compiled code's inline natives are this library's (`inlines_standard`): asked
        # once, forgotten by `register` and `getter`
        self.inline_standard: bool | None = None

    def copy(self) -> Library:
        """An independent copy, to extend without touching this library."""
        twin = Library()
        twin._exact = dict(self._exact)
        twin._loose = {key: list(overloads) for key, overloads in self._loose.items()}
        twin._arities = set(self._arities)
        twin._getters = dict(self._getters)
        twin._setters = dict(self._setters)
        twin._variadic = dict(self._variadic)
        return twin

    # -- building ------------------------------------------------------------------------------

    def register(
        self,
        name: str,
        params: Sequence[ParamType],
        impl: Callable[..., Any],
        *,
        pure: bool = True,
        needs_context: bool = False,
        charged: bool = False,
    ) -> None:
        """Add an overload; a later registration of the same signature replaces the earlier."""
        self._resolved.clear()
        self.pure_calls.clear()
        self.changing_calls.clear()
        self.inline_standard = None
        for signature in _expand(params):
            native = NativeFn(name, signature, impl, pure, needs_context, charged)
            self._arities.add((name, len(signature)))
            if ANY in signature:
                overloads = self._loose.setdefault((name, len(signature)), [])
                overloads[:] = [o for o in overloads if o.params != signature]
                overloads.append(native)
                overloads.sort(key=lambda o: sum(p is ANY for p in o.params))
            else:
                self._exact[(name, *signature)] = native

    def register_python(
        self,
        name: str,
        impl: Callable[..., Any],
        params: Sequence[ParamType] | None = None,
        *,
        pure: bool = True,
        needs_context: bool = False,
    ) -> None:
        """A host function: with `params`, an overload like any other; without, it takes
        any number of arguments of any type (and loses to every typed overload)."""
        if params is not None:
            self.register(name, params, impl, pure=pure, needs_context=needs_context)
        else:
            self._resolved.clear()
            self.inline_standard = None
            self._variadic[name] = NativeFn(name, (), impl, pure, needs_context)

    def getter(self, kind: ParamType, prop: str, impl: Getter) -> None:
        """`obj.prop` for a non-map `obj` of this type (`ANY` for every type)."""
        self.inline_standard = None
        for (signature,) in _expand([kind]):
            self._getters[(signature, prop)] = impl

    def setter(self, kind: ParamType, prop: str, value_kind: ParamType, impl: Setter) -> None:
        """`obj.prop = v`; `impl(obj, v)` returns the object to store back."""
        for signature, value_signature in _expand([kind, value_kind]):
            self._setters[(signature, prop, value_signature)] = impl

    # -- resolving and calling -------------------------------------------------------------------------

    def resolve(self, name: str, args: Sequence[Any]) -> NativeFn | None:
        """The overload of `name` for these argument values, or None."""
        n = len(args)
        if n == 1:
            key: tuple[Any, ...] = (name, kind_of(args[0]))
        elif n == 2:
            key = (name, kind_of(args[0]), kind_of(args[1]))
        else:
            key = (name, *[kind_of(a) for a in args])
        native = self._exact.get(key)
        if native is not None:
            return native
        try:
            return self._resolved[key]
        except KeyError:
            pass
        found = self._resolve_loose(name, key[1:])
        self._resolved[key] = found
        return found

    def _resolve_loose(self, name: str, kinds: tuple[Any, ...]) -> NativeFn | None:
        """An overload with wildcards, fewest first; else a variadic host function.

        None for tagged values (values.py, "value tags") unless registered for
        them exactly: the runtime calls again with the plain values.
        """
        if not _TAGGED_KINDS.isdisjoint(kinds):
            return None
        for overload in self._loose.get((name, len(kinds)), ()):
            if overload.accepts(kinds):
                return overload
        return self._variadic.get(name)

    def has_function(self, name: str, arity: int) -> bool:
        """Whether some overload of `name` takes `arity` arguments."""
        return (name, arity) in self._arities or name in self._variadic

    def invoke(self, ctx: NativeContext, native: NativeFn, args: Sequence[Any]) -> Any:
        """Run a resolved native; a Python failure inside becomes a Rhai error.

        The script sees a catchable `Runtime error: internal error in 'name'`,
        never Python's words; the Python exception goes to the log."""
        try:
            if native.needs_context:
                return native.impl(ctx, *args)
            return native.impl(*args)
        except RhaiRuntimeError:
            raise
        except RecursionError:
            raise failures.stack_overflow() from None
        except MemoryError:
            raise failures.too_large(failures.ARRAY_TOO_LARGE) from None
        except Exception as exc:  # a native's (or a registered function's) bug is a catchable Rhai error
            log_internal_error(f"Rhai native {native.name} failed", exc)
            raise failures.runtime(f"internal error in '{native.name}'") from None

    def call(self, ctx: NativeContext, name: str, args: Sequence[Any]) -> Any:
        """Resolve and run `name(args)`: `Function not found: name (types…)` when nothing matches."""
        native = self.resolve(name, args)
        if native is None:
            raise failures.function_not_found(name, args)
        return self.invoke(ctx, native, args)

    # -- properties, indexing, iteration -------------------------------------------------------------------

    def get_property(self, ctx: NativeContext, obj: Any, name: str) -> Any:
        """`obj.name` for a non-map: a registered getter, else the reference's ErrorDotExpr."""
        getter = self._getters.get((kind_of(obj), name)) or self._getters.get((ANY, name))
        if getter is None:
            raise failures.no_getter(obj, name)
        return getter(obj)

    def getter_of(self, kind: Any, name: str) -> Getter | None:
        """The getter `obj.name` reaches on a value of type `kind`, if any."""
        return self._getters.get((kind, name)) or self._getters.get((ANY, name))

    def set_property(self, ctx: NativeContext, obj: Any, name: str, value: Any) -> Any:
        """`obj.name = value` for a non-map; returns the object to store back."""
        kinds = (kind_of(obj), kind_of(value))
        setter = (
            self._setters.get((kinds[0], name, kinds[1]))
            or self._setters.get((ANY, name, kinds[1]))
            or self._setters.get((kinds[0], name, ANY))
            or self._setters.get((ANY, name, ANY))
        )
        if setter is None:
            raise failures.no_setter(obj, name, value)
        return setter(obj, value)

    def index_get(self, ctx: NativeContext, obj: Any, index: Any) -> Any:
        """`obj[index]`: the element itself (not a copy), so chained updates write through."""
        return indexing.index_get(obj, index)

    def index_set(self, ctx: NativeContext, obj: Any, index: Any, value: Any) -> Any:
        """`obj[index] = value`; returns the container to store back (strings and ints are new)."""
        return indexing.index_set(ctx, obj, index, value)

    def iterate(self, value: Any) -> Iterable[Any] | None:
        """What `for` walks for values the runtime does not know: iterator values."""
        return value if type(value) is IterVal else None

    def function_names(self) -> set[str]:
        """Every registered function name (for introspection and tests)."""
        return {name for name, _ in self._arities} | set(self._variadic)


__all__ = [
    "ANY",
    "EXCLUSIVE",
    "INCLUSIVE",
    "Library",
    "Mutated",
    "NativeFn",
    "kind_of",
]
