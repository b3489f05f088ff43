"""`@record`: slotted value classes for the interpreter, cheap to define.

`@dataclass` compiles five or six generated functions per class, one `exec`
each, when the module is imported, and `import dataclasses` itself imports
`inspect`, `ast`, `dis` and `tokenize`: together a large part of the
interpreter's import time, paid by every `agentkernel rhai run`
(docs/benchmarks.md). A record's `__init__` is a template compiled once per
shape (number of fields, which have a default factory, frozen or not) and
renamed for each class (`CodeType.replace`: microseconds, where an `exec`
takes a tenth of a millisecond); `__eq__` and `__hash__` compare the fields
through one `operator.attrgetter`; `__repr__`, `__setattr__`, `__delattr__`
and `__reduce__` are shared by all records.

Semantics are a dataclass's with `slots=True`: positional or keyword
construction in annotation order, defaults and `field(default_factory=…)`,
equality by class and fields, `__match_args__`, `__repr__`, pickling and
copying. `@record` is `frozen=True` (hashing by the compared fields,
`dataclasses.FrozenInstanceError` on assignment); `@mutable_record` is the
plain `@dataclass` (assignable, unhashable). `field(compare=False)` leaves
a field out of equality and hashing, `field(repr=False)` out of the repr.
`record_fields(node)` lists the field names, in order. Only the class's own
annotations are fields (no inheritance of fields); `ClassVar`s are not
fields. Type checkers see both decorators as dataclass transforms.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from types import CodeType, FunctionType

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any, TypeVar, dataclass_transform

    T = TypeVar("T")  # annotations only
else:

    def dataclass_transform(**_: object) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """`typing.dataclass_transform` at run time, where it only marks the decorator for
        type checkers: the identity, without importing `typing`."""
        return lambda decorator: decorator


_FIELDS = "__record_fields__"
_SHOWN = "__record_repr__"


class _Missing:
    """The marker of a field given no default (and of an argument not passed, for a factory)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


class _Field:
    """What `field()` returns: read, then removed, by the decorator."""

    __slots__ = ("compare", "default", "factory", "repr")

    def __init__(self, default: Any, factory: Callable[[], Any] | None, compare: bool, repr: bool) -> None:
        self.default = default
        self.factory = factory
        self.compare = compare
        self.repr = repr


def field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] | None = None,
    compare: bool = True,
    repr: bool = True,
) -> Any:
    """A field's options, as `dataclasses.field`: its default or default factory, and whether
    equality and hashing (`compare`) and the repr (`repr`) include it."""
    if default is not _MISSING and default_factory is not None:
        raise ValueError("field() takes a default or a default_factory, not both")
    return _Field(default, default_factory, compare, repr)


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in getattr(self, _SHOWN))
    return f"{type(self).__qualname__}({shown})"


def _frozen_setattr(self: Any, name: str, value: object) -> None:
    from dataclasses import FrozenInstanceError  # here: only a forbidden assignment pays its import

    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    from dataclasses import FrozenInstanceError  # here: only a forbidden deletion pays its import

    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _reduce(self: Any) -> tuple[type, tuple[Any, ...]]:
    """Pickle and copy a record by calling its class with its fields (frozen ones cannot be set)."""
    return type(self), tuple(getattr(self, name) for name in getattr(self, _FIELDS))


_TEMPLATES: dict[tuple[int, bool, tuple[int, ...]], CodeType] = {}


def _template(count: int, frozen: bool, factories: tuple[int, ...]) -> CodeType:
    """`__init__` for fields `_0`, `_1`, … of this shape, compiled once and renamed per class."""
    key = (count, frozen, factories)
    code = _TEMPLATES.get(key)
    if code is None:
        lines = []
        for i in range(count):
            value = f"__factories[{i}]() if _{i} is __missing else _{i}" if i in factories else f"_{i}"
            lines.append(f"    __set(self, '_{i}', {value})\n" if frozen else f"    self._{i} = {value}\n")
        params = "".join(f", _{i}" for i in range(count))
        namespace: dict[str, Any] = {}
        exec(f"def __init__(self{params}):\n{''.join(lines) or '    pass'}\n", namespace)  # our own text
        code = _TEMPLATES[key] = namespace["__init__"].__code__
    return code


def _init(cls: type, specs: dict[str, _Field], frozen: bool) -> FunctionType:
    """The `__init__` of `cls`: the template of its shape, with its field names and defaults."""
    names = list(specs)
    factories = tuple(i for i, name in enumerate(names) if specs[name].factory is not None)
    defaults: list[Any] = []
    for name, spec in specs.items():
        if spec.factory is not None or spec.default is not _MISSING:
            defaults.append(spec.default)  # a factory's field: _MISSING, which calls the factory
        elif defaults:
            raise TypeError(
                f"{cls.__qualname__}: field {name!r} without a default follows one with a default"
            )
    rename = {f"_{i}": name for i, name in enumerate(names)}
    template = _template(len(names), frozen, factories)
    code = template.replace(
        co_varnames=("self", *names),
        co_names=tuple(rename.get(n, n) for n in template.co_names),
        co_consts=tuple(rename.get(c, c) if type(c) is str else c for c in template.co_consts),
        co_qualname=f"{cls.__qualname__}.__init__",
    )
    scope = {
        "__set": object.__setattr__,
        "__missing": _MISSING,
        "__factories": {i: specs[names[i]].factory for i in factories},
    }
    init = FunctionType(code, scope, "__init__", tuple(defaults))
    init.__qualname__ = code.co_qualname
    return init


def _fields_getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving the tuple of `names`' values of an instance (one C call for several)."""
    if len(names) > 1:
        getter: Callable[[Any], tuple[Any, ...]] = attrgetter(*names)
        return getter
    if names:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    return lambda instance: ()


def _equality(names: list[str]) -> tuple[Callable[[Any, Any], Any], Callable[[Any], int]]:
    """`__eq__` and `__hash__` by class and the values of `names`, as a dataclass's."""
    values = _fields_getter(names)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return values(self) == values(other)

    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __eq__, __hash__


def _specs(cls: type) -> dict[str, _Field]:
    """The fields of `cls`, in order: its own annotations, but dunders and `ClassVar`s."""
    # as `inspect.get_annotations(cls)` gives them (strings, under `from __future__ import
    # annotations`), without importing `inspect`
    annotations: dict[str, Any] = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    specs: dict[str, _Field] = {}
    for name, kind in annotations.items():
        if name.startswith("__") or str(kind).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, _MISSING)
        specs[name] = value if isinstance(value, _Field) else _Field(value, None, True, True)
    return specs


def _build(cls: type[T], frozen: bool) -> type[T]:
    """Rebuild `cls` as a record with `__slots__` for its own annotated fields."""
    specs = _specs(cls)
    names = tuple(specs)
    body = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__", *names)}
    eq, hash_ = _equality([name for name, spec in specs.items() if spec.compare])
    body.update(
        __slots__=names,
        __match_args__=names,
        __init__=_init(cls, specs, frozen),
        __eq__=eq,
        __hash__=hash_ if frozen else None,
        __repr__=_repr,
        __reduce__=_reduce,
        **{_FIELDS: names, _SHOWN: tuple(name for name, spec in specs.items() if spec.repr)},
    )
    if frozen:
        body.update(__setattr__=_frozen_setattr, __delattr__=_frozen_delattr)
    metaclass: type = type(cls)  # `type`, or the class's own metaclass
    built: type[T] = metaclass(cls.__name__, cls.__bases__, body)
    built.__qualname__ = cls.__qualname__
    return built


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[T]) -> type[T]:
    """`cls` as a frozen record: hashable, its fields never assigned after `__init__`."""
    return _build(cls, frozen=True)


@dataclass_transform(field_specifiers=(field,))
def mutable_record(cls: type[T]) -> type[T]:
    """`cls` as a mutable record: its fields assignable, its instances unhashable (as `@dataclass`)."""
    return _build(cls, frozen=False)


def replace(instance: T, **changes: Any) -> T:
    """A copy of the record `instance` with `changes` to its fields (`dataclasses.replace`)."""
    values = {name: getattr(instance, name) for name in record_fields(instance)}
    unknown = changes.keys() - values.keys()
    if unknown:
        raise TypeError(f"{type(instance).__qualname__} has no field {sorted(unknown)[0]!r}")
    values.update(changes)
    return type(instance)(**values)


def record_fields(node: object) -> tuple[str, ...]:
    """The field names of a record instance, in order; () for anything else."""
    return class_fields(type(node))


def class_fields(kind: type) -> tuple[str, ...]:
    """The field names of a record class, in order; () for any other class."""
    fields: tuple[str, ...] = getattr(kind, _FIELDS, ())
    return fields


__all__ = ["class_fields", "field", "mutable_record", "record", "record_fields", "replace"]
