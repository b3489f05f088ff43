"""`@record`: frozen, slotted value classes for the syntax tree, cheap to define.

`@dataclass(frozen=True, slots=True)` compiles five or six generated
functions per class, one `exec` each, when the module is imported: for the
node classes of the tree, a large part of the interpreter's import time,
paid by every `agentkernel rhai run` (docs/benchmarks.md). A record
compiles its `__init__`, `__eq__` and `__hash__` in one `exec` and shares
`__repr__`, `__setattr__` and `__delattr__` among all records.

Semantics are a dataclass's with `frozen=True, slots=True`: positional or
keyword construction in annotation order, defaults (immutable values only),
equality and hashing by class and fields, `__match_args__`, and
`dataclasses.FrozenInstanceError` on assignment. `record_fields(node)` lists
the field names, in order. Type checkers see it as a dataclass transform.
"""

from __future__ import annotations

import inspect
from dataclasses import FrozenInstanceError
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")

_FIELDS = "__record_fields__"


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in getattr(self, _FIELDS))
    return f"{type(self).__qualname__}({shown})"


def _frozen_setattr(self: Any, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _methods_source(names: list[str], defaults: dict[str, object]) -> str:
    """`__init__`, `__eq__` and `__hash__` of one record class, as Python source."""
    params = ", ".join(f"{n}=__default_{n}" if n in defaults else n for n in names)
    sets = "".join(f"    __set(self, {n!r}, {n})\n" for n in names) or "    pass\n"
    mine = "".join(f"self.{n}, " for n in names)
    theirs = "".join(f"other.{n}, " for n in names)
    return (
        f"def __init__(self, {params}):\n{sets}"
        "def __eq__(self, other):\n"
        "    if other.__class__ is not self.__class__:\n"
        "        return NotImplemented\n"
        f"    return ({mine}) == ({theirs})\n"
        "def __hash__(self):\n"
        f"    return hash((self.__class__, {mine}))\n"
    )


@dataclass_transform(frozen_default=True)
def record(cls: type[T]) -> type[T]:
    """Rebuild `cls` as a frozen record with `__slots__` for its annotated fields."""
    names = [n for n in inspect.get_annotations(cls) if not n.startswith("__")]
    body = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__", *names)}
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    namespace: dict[str, Any] = {"__set": object.__setattr__}
    namespace.update({f"__default_{n}": value for n, value in defaults.items()})
    exec(_methods_source(names, defaults), namespace)  # our own generated text, no input in it
    body.update(
        __slots__=tuple(names),
        __match_args__=tuple(names),
        __init__=namespace["__init__"],
        __eq__=namespace["__eq__"],
        __hash__=namespace["__hash__"],
        __repr__=_repr,
        __setattr__=_frozen_setattr,
        __delattr__=_frozen_delattr,
        **{_FIELDS: tuple(names)},
    )
    built: type[T] = type(cls.__name__, cls.__bases__, body)
    built.__qualname__ = cls.__qualname__
    return built


def record_fields(node: object) -> tuple[str, ...]:
    """The field names of a record instance, in order; () for anything else."""
    return class_fields(type(node))


def class_fields(kind: type) -> tuple[str, ...]:
    """The field names of a record class, in order; () for any other class."""
    fields: tuple[str, ...] = getattr(kind, _FIELDS, ())
    return fields


__all__ = ["class_fields", "record", "record_fields"]
