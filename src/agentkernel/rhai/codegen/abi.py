"""The ABI of generated code: everything a compiled Rhai script may name, in one place.

The compiler (`compiler.py` and its parts) writes Python that names nothing
but what is listed here, and the engine runs it with `GLOBALS` as its module
globals (no builtins): this module is the contract between the code
generator and the runtime.

* `GLOBALS`: the names generated code may read as globals, built from
  `_builtins()` (a few Python types and functions for type tests and the like),
  `_runtime_types()` (classes it constructs or tests for), `_helpers()` (the
  functions below and the failures it raises) and `_operators()`
  (`op_add`… from `ops.BINARY`);
* `PER_SCRIPT`: the tables the engine adds per compiled script (`K`
  constants, `LINES` and `NOPOS` for error positions);
* `RUNTIME_MEMBERS`: the attributes of `rt` (a `runtime.Runtime`) it reads,
  writes or calls;
* `VALUE_ATTRIBUTES`: the attributes it uses on other values (a Cell's `v`,
  a `Mutated`'s `receiver`, a `Jump`'s `kind`, …).

`tests/rhai/test_abi.py` compiles a corpus of scripts and checks every name
the generated code uses against these lists, and that each listed member
exists: a new name in the code generator must be added here, on purpose.
Names the module defines itself (`main`, `f_<name>_<arity>`, closures `c<N>`,
parts compiled apart `h<N>`) and its locals are not part of the ABI.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial

from agentkernel.rhai.codegen.operator_names import BINARY_NAMES
from agentkernel.rhai.errors import RhaiRuntimeError
from agentkernel.rhai.runtime import failures, ops
from agentkernel.rhai.runtime.context import NO_THIS
from agentkernel.rhai.runtime.eval_frames import read_scope, write_scope
from agentkernel.rhai.runtime.library_ops import counted
from agentkernel.rhai.runtime.modules import HELPERS as MODULE_HELPERS
from agentkernel.rhai.runtime.printing import to_string
from agentkernel.rhai.runtime.runtime import CHAR_OF, NOT_PURE, Cell, ExitScript, Runtime, locate, wrap_call
from agentkernel.rhai.runtime.values import (
    TAGGED,
    TAGGED_CONTAINERS,
    Char,
    FnPtr,
    TaggedStr,
    TaggedUnit,
    plain,
    type_name,
)
from agentkernel.rhai.stdlib import Mutated

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # only its interface: compiled code runs without the code generator
    from typing import Any

    from agentkernel.rhai.codegen.variables import Visible


class Jump:
    """A `break`, `continue` or `return` leaving a part compiled apart, for its caller to make
    (codegen/nesting.py: its kinds, `BREAK`, `CONTINUE`, `RETURN`)."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: int, value: Any) -> None:
        self.kind = kind
        self.value = value


PER_SCRIPT = frozenset({"K", "LINES", "NOPOS"})

RUNTIME_MEMBERS = frozenset(
    {
        # counting and limits
        "operations", "checkpoint", "reached_checkpoint", "settle", "enter", "max_depth", "depth_hint",
        "window", "settle_window", "ahead", "natives_inline",
        "variable_limit", "map_limit", "data_limit", "sizes_checked", "string_limit", "charge_data",
        # building, copying and storing values
        "copy", "built", "pushed", "compound", "interpolate", "count_to_string", "functions_named_push",
        "functions_named_append", "append_text", "account_slot", "account",
        # natives, properties, indexing, iteration
        "call_native", "call_native_ref", "pure_method", "pure_method0", "pure_method2", "changing_method",
        "get_prop", "set_prop", "index_get", "index_set",
        "iterate", "iterate_new",
        # functions, `this`, errors, output, eval
        "make_fn_ptr", "this_value", "throw", "catch_value", "global_consts",
        "print_value", "debug_value", "debug_text", "eval_scope", "eval_lets",
    }
)  # fmt: skip

VALUE_ATTRIBUTES = frozenset(
    {
        "v",  # Cell, ThisBox: the value
        "shared",  # Cell: captured by a closure (`is_shared`)
        "const",  # ThisBox: `this` is a constant
        "receiver",  # Mutated: the changed receiver to store back
        "result",  # Mutated: the call's result
        "kind",  # Jump
        "value",  # Jump
        "catchable",  # RhaiRuntimeError
        "__traceback__",  # an exception being located
        "rhai_arity",  # a closure's function: its Rhai arity
        "rhai_reads_only",  # a closure's function: it cannot change its argument (Facts.reads_only)
        "rhai_batch",  # a reading closure's function: its copies over many items (batches.py)
        "rhai_idle",  # `main` of a script of functions only: it does nothing (script_module.py)
        "append",  # list (`push` inline)
        "get",  # dict (property and index reads inline)
        "start",  # range: where a `for` over one starts counting (windows.py)
        # str: the standard string methods compiled inline (inline_methods.py)
        "upper",
        "lower",
        "strip",
        "startswith",
        "endswith",
        "find",
        "add",  # set: `rt.eval_lets`, the names an `eval`'s text declared
    }
)


# -- helpers the generated code calls by name -------------------------------------------------


def rt_global_const(rt: Runtime, name: str) -> Any:
    if name in rt.global_consts:
        return rt.global_consts[name]
    raise failures.variable_not_found(f"global::{name}")


def rt_dyn_get(scope: dict[str, Any], name: str) -> Any:
    if name in scope:
        return scope[name]
    raise failures.variable_not_found(name)


def rt_call(rt: Runtime, fn: FnPtr, args: list[Any], depth: int) -> Any:
    """`call(fn, args…)`: `fn` was checked to be a pointer where it stands (`rt_expect`)."""
    return rt.call_fn_ptr(fn, args, NO_THIS, depth)


def rt_curry(fn: FnPtr, args: list[Any]) -> FnPtr:
    return FnPtr(fn.name, (*fn.curried, *args), fn.target)


def rt_expect(value: Any, expected: type) -> Any:
    """An argument `call`, `curry` or `is_def_fn` must have of one type, else the reference's
    `Data type incorrect: <actual> (expecting Fn | string | i64)` where the argument stands."""
    if type(value) is not expected:
        raise failures.mismatch(_EXPECTED_NAMES[expected], type_name(value))
    return value


_EXPECTED_NAMES: dict[type, str] = {FnPtr: "Fn", str: "string", int: "i64"}


def rt_method(rt: Runtime, name: str, receiver: Any, args: list[Any], const: bool, depth: int) -> Any:
    """`x.name(args)`, including the pointer methods `call` and `curry` (on another receiver,
    `call` wants a pointer as its first argument and `curry` fails, as in the reference)."""
    if name == "call":
        if type(receiver) is FnPtr:
            return rt.call_fn_ptr(receiver, args, NO_THIS, depth)
        if not args:
            raise failures.mismatch("Fn", type_name(receiver))
        fn = rt_expect(args[0], FnPtr)  # the compiler checked it at the argument (chains.py)
        result = rt.call_fn_ptr(fn, args[1:], receiver, depth)
        after = rt.last_this()
        return Mutated(after, result) if after is not receiver else result
    if name == "curry":
        return rt_curry(rt_expect(receiver, FnPtr), args)
    return rt.method(name, receiver, args, const, depth)


def rt_is_def_fn(rt: Runtime, name: str, arity: int, this_type: str | None = None) -> bool:
    """`is_def_fn(name, n)` (a string and an int: checked where they stand, `rt_expect`).
    `is_def_fn(type, name, n)` asks for a typed method; the type is the stored one ("i64",
    not "int"), as in the reference."""
    if this_type is not None:
        return (name, arity, this_type) in rt.methods
    return (name, arity) in rt.functions


def rt_is_def_var(name: Any, visible: Visible | None) -> bool:
    if type(name) is not str:
        raise failures.mismatch("string", type_name(name))
    return visible is not None and name in visible.names()


def rt_eval(rt: Runtime, text: Any, visible: Visible | None) -> Any:
    """`eval(text)`: the variables in sight go in, and those the text assigned come back
    into the caller's frames, even when it failed half-way (RHAI.md §3; eval_frames.py)."""
    frame = sys._getframe(1)
    scope, consts = read_scope(frame, visible)
    before = dict(scope)
    rt.eval_declared = frozenset()
    try:
        return rt.eval_text(text, scope, consts)
    finally:
        declared, rt.eval_declared = rt.eval_declared, frozenset()
        changed = {
            name: value for name, value in scope.items() if value is not before[name] or name in declared
        }
        if changed:
            write_scope(frame, visible, changed, declared)


def rt_dyn_set(rt: Runtime, scope: dict[str, Any], name: str, value: Any) -> None:
    """Assign a variable only `eval` knows: defined by an earlier `eval`, or the caller's."""
    if name not in scope:
        raise failures.variable_not_found(name)
    if name in rt.eval_consts:
        raise failures.constant_assigned(name)
    scope[name] = value


def bind_closure(function: Callable[..., Any], arity: int, *cells: Cell) -> Callable[..., Any]:
    """A closure's function with its captured Cells bound as its first arguments."""
    bound = partial(function, *cells)
    bound.rhai_arity = arity  # type: ignore[attr-defined]
    return bound


def switch_eq(value: Any, pattern: Any) -> bool:
    """Switch cases match by type and value: `switch 4.0 { 4 => … }` does not match."""
    if type(value) is type(pattern):
        return ops.equals(value, pattern)
    return type(value) in TAGGED and switch_eq(plain(value), pattern)


def switch_in_range(value: Any, start: int, end: int, inclusive: bool) -> bool:
    kind = type(value)
    if kind is not int and kind is not float:
        return kind in TAGGED and switch_in_range(plain(value), start, end, inclusive)
    return bool(start <= value <= end if inclusive else start <= value < end)


def all_texts(items: list[Any]) -> bool:
    """Whether every item of `items` is a string (a counted loop's flag, codegen/loop_flags.py)."""
    return all(type(item) is str for item in items)


def _builtins() -> dict[str, Any]:
    """The Python builtins generated code uses: type tests, sizes, loops, the error handler."""
    return {
        "__builtins__": {},
        "Exception": Exception,
        "IndexError": IndexError,
        "type": type,
        "str": str,
        "int": int,
        "list": list,
        "dict": dict,
        "len": len,
        "enumerate": enumerate,
        "map": map,
        "all_texts": all_texts,
        "CONTAINERS": frozenset({list, dict, bytearray, *TAGGED_CONTAINERS}),
        "SIZED": frozenset({str, list, dict, bytearray, TaggedStr}),
        "TEXT": frozenset({str, Char}),
    }


def _runtime_types() -> dict[str, Any]:
    """Classes generated code builds or tests for."""
    return {
        "Cell": Cell,
        "ExitScript": ExitScript,
        "FnPtr": FnPtr,
        "Char": Char,
        "CHAR_OF": CHAR_OF,
        "NOT_PURE": NOT_PURE,
        "Jump": Jump,
        "Mutated": Mutated,
        "RhaiRuntimeError": RhaiRuntimeError,
        "TaggedUnit": TaggedUnit,
    }


def _helpers() -> dict[str, Callable[..., Any]]:
    return {
        "bind_closure": bind_closure,
        "rt_eval": rt_eval,
        "to_string": to_string,
        "type_name": type_name,
        "locate": locate,
        "wrap_call": wrap_call,
        "cond": Runtime.condition,
        "op_unary": ops.unary,
        "compound_calls": ops.compound_calls,
        "rt_var_not_found": failures.variable_not_found,
        "rt_global_const": rt_global_const,
        "rt_too_many_variables": failures.too_many_variables,
        "rt_dyn_get": rt_dyn_get,
        "rt_dyn_set": rt_dyn_set,
        "rt_call": rt_call,
        "rt_curry": rt_curry,
        "rt_expect": rt_expect,
        "rt_method": rt_method,
        "rt_is_def_fn": rt_is_def_fn,
        "rt_is_def_var": rt_is_def_var,
        "switch_eq": switch_eq,
        "switch_in_range": switch_in_range,
        **MODULE_HELPERS,
    }


def _operators() -> dict[str, Callable[..., Any]]:
    """`op_add`, `op_eq`, …: the binary operators' slow paths, by the names codegen gives them,
    each counting the reference's library function where it has no built-in (`rt` passed)."""
    return {py_name: counted(symbol) for symbol, py_name in BINARY_NAMES.items()}


GLOBALS: dict[str, Any] = {**_builtins(), **_runtime_types(), **_helpers(), **_operators()}

__all__ = ["GLOBALS", "PER_SCRIPT", "RUNTIME_MEMBERS", "VALUE_ATTRIBUTES", "bind_closure"]
