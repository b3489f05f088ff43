"""Function-pointer natives (Rhai 1.25 `fn_basic.rs`): `name` and `is_anonymous`,
as methods and as properties. (`Fn`, `call` and `curry` are the compiler's.)"""

from __future__ import annotations

from agentkernel.rhai.runtime.values import FnPtr
from agentkernel.rhai.stdlib.registry import Library


def name(fn: FnPtr) -> str:
    return fn.name


def is_anonymous(fn: FnPtr) -> bool:
    return fn.is_anonymous


def register(lib: Library) -> None:
    for prop, impl in (("name", name), ("is_anonymous", is_anonymous)):
        lib.register(prop, (FnPtr,), impl)
        lib.getter(FnPtr, prop, impl)


__all__ = ["register"]
