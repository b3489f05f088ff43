"""What the standard library may ask of the running interpreter.

Native functions receive a `NativeContext` when they need one (callbacks,
size limits, output); the compiler's runtime implements it. Natives never
see anything else of the interpreter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentkernel.rhai.runtime.values import FnPtr

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any, Protocol
else:  # a plain base at run time: `SizeLimits` and `NativeContext` are structural only
    # (nothing subclasses them or checks `isinstance` against them), and `typing.Protocol`
    # would import `typing`
    Protocol = object

NO_THIS: Any = object()  # "no `this` binding" for call_fn_ptr


class SizeLimits(Protocol):
    """The data-size limits in force (0 = unlimited), for natives that must refuse
    a size *before* allocating it (`pad(1e9, …)`, `blob(1e12)`)."""

    @property
    def max_string_size(self) -> int: ...

    @property
    def max_array_size(self) -> int: ...

    @property
    def max_map_size(self) -> int: ...


class NativeContext(Protocol):
    """The interpreter, as seen by native functions."""

    @property
    def limits(self) -> SizeLimits:
        """The engine's data-size limits (an attribute is fine)."""
        ...

    def call_fn_ptr(self, fn: FnPtr, args: Sequence[Any], this: Any = NO_THIS) -> Any:
        """Call a function pointer (closure, script or native function) with `args`
        (after its curried ones). `this`, when given, is bound for the call and
        the callee may change it; read it back with `last_this()`. Raises
        RhaiRuntimeError (e.g. ErrorFunctionNotFound when no function of that
        name takes that many arguments)."""
        ...

    def call_back(self, fn: FnPtr, args: Sequence[Any], this: Any = NO_THIS) -> Any:
        """`call_fn_ptr` for a callback of a native (`map`, `sort`…): its operations count
        toward the limit while it runs, and not after (as in the reference)."""
        ...

    def count_apart(self, operations: int) -> None:
        """Count `operations` as the reference does those of a native's call of another native
        (on a copy of its state): toward the limit, not after."""
        ...

    def fn_ptr_accepts(self, fn: FnPtr, arg_count: int) -> bool:
        """Whether calling `fn` with `arg_count` arguments (after curried ones)
        would find a function: lets `map`/`filter` pass `(item, index)` or `(item)`."""
        ...

    def last_this(self) -> Any:
        """The value of `this` after the last `call_fn_ptr` that bound one."""
        ...

    def reading_callback(self, fn: FnPtr) -> Callable[[Sequence[Any], set[type]], list[Any]] | None:
        """`fn` as a function of items giving its result for each, when it is a closure of
        one parameter that only reads it (no copy of the item needed, no argument layouts to
        try); else None. Each call is counted as `call_back` counts it. It is given the items
        and the set of their types."""
        ...

    def check_string_size(self, value: str) -> None:
        """Raise the uncatchable `Length of string too large` past max_string_size."""
        ...

    def check_array_size(self, value: list[Any] | bytearray) -> None:
        """Raise the uncatchable `Size of array/BLOB too large` past max_array_size."""
        ...

    def check_map_size(self, value: dict[str, Any]) -> None:
        """Raise the uncatchable `Size of object map too large` past max_map_size."""
        ...

    def account(self, value: Any) -> Any:
        """Count `value`, just built or stored into a container, toward the evaluation's
        data limit (data_size.py); returns it. Past the limit: `ErrorDataTooLarge`."""
        ...

    def charge(self, size: int) -> None:
        """Count `size` bytes a native just built toward the data limit: a native registered
        `charged` does so itself, at least what `data_size` finds of what it built (its result
        is not walked then)."""
        ...

    def reserve_data(self, size: int, what: str) -> None:
        """`size` bytes of `what` (failures.STRING_TOO_LARGE…) are about to be built:
        refuse them before building when they would pass the data limit."""
        ...

    def flat_size(self, items: list[Any], kinds: set[type]) -> int | None:
        """`data_size(items)` for an array whose items' types are among `kinds`, known already,
        without a first pass over them; None when some kind is a container (then `account` it)."""
        ...

    def data_size(self, value: Any) -> int:
        """The bytes `value` counts for toward the data limit, nested values included."""
        ...

    def sleep(self, seconds: float) -> None:
        """`sleep`: the host may cut it short at its own deadline (and then stop the script)."""
        ...

    def write_stdout(self, text: str) -> None:
        """`print`: one line to the script's output (the runtime adds the newline)."""
        ...


__all__ = ["NO_THIS", "NativeContext", "SizeLimits"]
