"""Compiling calls: script functions, natives, module functions, and the calls the compiler makes itself.

A call of a script function of this script is a direct Python call; a call
with a variable as its first argument passes it by reference to a native
(which may change it: `Mutated`). The functions that must see the caller's
scope or must not be shadowed (`print`, `eval`, `Fn`, `is_def_var`, …) are
compiled inline, each by its entry of `SPECIAL_CALLS`; with another number of
arguments they are ordinary calls.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NamedTuple

from agentkernel.rhai.codegen.function import FunctionBase
from agentkernel.rhai.codegen.operands import EXPR, NONE, Operand, joined
from agentkernel.rhai.compiled import fn_py_name
from agentkernel.rhai.syntax import ast


class Calls(FunctionBase):
    """Function calls."""

    def x_Call(self, node: ast.Call) -> Operand:
        special = SPECIAL_CALLS.get(node.name) if node.namespace is None else None
        if special is not None:
            out = self.temp()  # taken whatever the number of arguments, so names stay as they were
            if special.fewest <= len(node.args) <= special.most:
                special.compile(self, node, out)
                return out
        args = [self.value_copy(a) for a in node.args]
        out = self.temp()
        if node.namespace is None and (node.name, len(args)) in self.functions:  # this script's
            py_name = fn_py_name(node.name, len(args))
            self.emit(f"{out} = {py_name}(rt, d + 1, None, {joined(args)})", node.pos)
            return out
        name = self.m.constant(node.name)
        if node.namespace is not None and node.namespace != "global":
            module = self.module_of(node.namespace, node.pos)
            namespace = self.m.constant(node.namespace)
            arg_list = f"[{joined(args)}]"
            self.emit(
                f"{out} = rt_module_call(rt, {module}, {namespace}, {name}, {arg_list}, d + 1)", node.pos
            )
            return out
        self._native_call(node, name, args, out)
        return out

    def _native_call(self, node: ast.Call, name: Operand, args: list[Operand], out: Operand) -> None:
        """A native's call; a variable first argument is passed by reference (the native may
        change it: its new value comes back as `Mutated` and is stored into the variable)."""
        first = node.args[0] if node.args else None
        if first is None or not isinstance(first, ast.Var) or not self.is_lvalue(first):
            self.emit(f"{out} = rt.call_native({name}, [{joined(args)}])", node.pos)
            return
        reference = self.expr(first)
        args_ref = f"[{joined([reference, *args[1:]])}]"
        self.emit(f"{out} = rt.call_native_ref({name}, {args_ref}, {self.is_const(first)})", node.pos)
        self.emit(f"if type({out}) is Mutated:")
        with self.indented():
            self.store(first, Operand(f"{out}.receiver", EXPR), node.pos)
            self.receiver_stored(first)
            self.emit(f"{out} = {out}.result")

    def is_def_var(self, arg: ast.Expr) -> str:
        if isinstance(arg, ast.Literal) and type(arg.value) is str:
            return "True" if self.lookup(arg.value) is not None else "False"
        value = self.expr(arg)
        return f"rt_is_def_var({value}, {self.m.constant(self.visible)})"


# -- the calls compiled inline ------------------------------------------------------------------------


def _print(c: Calls, node: ast.Call, out: Operand) -> None:
    value = c.expr(node.args[0]) if node.args else NONE
    c.emit(f"rt.print_value({value})", node.pos)
    c.emit(f"{out} = None")


def _debug(c: Calls, node: ast.Call, out: Operand) -> None:
    if node.args:
        c.emit(f"rt.debug_value({c.expr(node.args[0])}, {node.pos!r})", node.pos)
    else:
        c.emit(f"rt.debug_text('', {node.pos!r})", node.pos)
    c.emit(f"{out} = None")


def _type_of(c: Calls, node: ast.Call, out: Operand) -> None:
    c.emit(f"{out} = type_name({c.expr(node.args[0])})")


def _fn(c: Calls, node: ast.Call, out: Operand) -> None:
    c.emit(f"{out} = rt.make_fn_ptr({c.expr(node.args[0])})", node.args[0].pos)


def _expected(c: Calls, arg: ast.Expr, expected: str, *, copy: bool = False) -> Operand:
    """An argument that must be of one type (`FnPtr`, `str`, `int`), checked as the reference
    does: once evaluated, before the next argument, its error at the argument's start."""
    value = c.value_copy(arg) if copy else c.expr(arg)
    checked = c.temp()
    c.emit(f"{checked} = rt_expect({value}, {expected})", ast.start_pos(arg))
    return checked


def _call(c: Calls, node: ast.Call, out: Operand) -> None:
    fn = _expected(c, node.args[0], "FnPtr")
    values = [c.value_copy(a) for a in node.args[1:]]
    c.emit(f"{out} = rt_call(rt, {fn}, [{joined(values)}], d + 1)", node.pos)


def _curry(c: Calls, node: ast.Call, out: Operand) -> None:
    fn = _expected(c, node.args[0], "FnPtr")
    values = [c.value_copy(a) for a in node.args[1:]]
    c.emit(f"{out} = rt_curry({fn}, [{joined(values)}])", node.pos)


def _eval(c: Calls, node: ast.Call, out: Operand) -> None:
    text = c.expr(node.args[0])
    c.emit(f"{out} = rt_eval(rt, {text}, {c.m.constant(c.visible)})", node.args[0].pos)


def _is_def_var(c: Calls, node: ast.Call, out: Operand) -> None:
    c.emit(f"{out} = {c.is_def_var(node.args[0])}", node.args[0].pos)


def _is_def_fn(c: Calls, node: ast.Call, out: Operand) -> None:
    """`is_def_fn(name, arity)`, or `is_def_fn(this_type, name, arity)`: a typed method."""
    *texts, last = node.args
    names = [_expected(c, arg, "str") for arg in texts]
    arity = _expected(c, last, "int")
    this_type = f", {names[0]}" if len(names) == 2 else ""
    c.emit(f"{out} = rt_is_def_fn(rt, {names[-1]}, {arity}{this_type})", node.pos)


def _is_shared(c: Calls, node: ast.Call, out: Operand) -> None:
    arg = node.args[0]
    info = c.lookup(arg.name) if isinstance(arg, ast.Var) else None
    c.emit(f"{out} = {info.py}.shared" if info is not None and info.cell else f"{out} = False")


def _exit(c: Calls, node: ast.Call, out: Operand) -> None:
    value = c.expr(node.args[0]) if node.args else NONE
    c.uncount()  # the reference ends here: the statements after, counted ahead, never run
    if c.top_level:
        c.emit("rt.ahead = 0")  # taken back with the rest (else the runtime takes it back: `run`)
    c.emit(f"raise ExitScript({value})")
    c.emit(f"{out} = None")


class SpecialCall(NamedTuple):
    """A call the compiler makes itself, when it has `fewest` to `most` arguments."""

    fewest: int
    most: int
    compile: Callable[[Calls, ast.Call, Operand], None]


_ANY = sys.maxsize

SPECIAL_CALLS: dict[str, SpecialCall] = {
    "print": SpecialCall(0, 1, _print),
    "debug": SpecialCall(0, 1, _debug),
    "type_of": SpecialCall(1, 1, _type_of),
    "Fn": SpecialCall(1, 1, _fn),
    "call": SpecialCall(1, _ANY, _call),
    "curry": SpecialCall(2, _ANY, _curry),  # with one argument an ordinary (missing) function
    "eval": SpecialCall(1, 1, _eval),
    "is_def_var": SpecialCall(1, 1, _is_def_var),
    "is_def_fn": SpecialCall(2, 3, _is_def_fn),
    "is_shared": SpecialCall(1, 1, _is_shared),
    "exit": SpecialCall(0, 1, _exit),
}

__all__ = ["SPECIAL_CALLS", "Calls", "SpecialCall"]
