"""Compiling a part of a function apart, as a function of the module of its own (nesting.py says why).

The variables of the enclosing scopes that the part names travel in a list
(its box) and are copied back when the call ends, even by an error; a
`break`, `continue` or `return` aimed outside the part comes back as a
`Jump` for the caller to make.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from agentkernel.rhai.codegen.function import FunctionBase
from agentkernel.rhai.codegen.nesting import BREAK, CONTINUE, RETURN, Apart
from agentkernel.rhai.codegen.operands import Operand
from agentkernel.rhai.codegen.variables import VarInfo, Visible

C = TypeVar("C", bound=FunctionBase)


def compile_apart(outer: C, node: Any, part: Callable[[C], Operand]) -> Operand:
    """Compile `part(inner)` (a block's statements or an expression, `node`) as a new function
    of the module; emit its call in `outer` and return the operand holding its value."""
    shared = [(name, info) for name in sorted(outer.facts.names(node)) if (info := outer.lookup(name))]
    outer.counts_emitted += 1  # the part counts on its own (stepped.py: no copy of a body holding one)
    inner = _inner_compiler(outer, shared)
    assert inner.apart is not None
    box = inner.apart.box
    py_name = outer.m.fresh("h")
    context = [*inner.catch_vars, *(["dyn"] if inner.dynamic else [])]
    params = ", ".join(["rt", "d", "th", *([box] if shared else []), *context])
    outer.m.begin_function()
    inner.emit(f"def {py_name}({params}):")
    with inner.indented():
        inner.emit("try:")
        with inner.indented(blocks=1):
            value = part(inner)
            inner.emit(f"return {value}")
        inner.emit("except Exception as e:")
        with inner.indented():
            inner.emit("raise locate(e, e.__traceback__, LINES, NOPOS) from None")
    outer.m.end_function()
    outer.pending_ops = inner.pending_ops  # a loop head's count the part did not take
    result = _call(outer, f"{py_name}({params})", box, shared)
    _act_on_jumps(outer, result, inner.apart.jumps)
    return result


def _inner_compiler(outer: C, shared: list[tuple[str, VarInfo]]) -> C:
    inner = type(outer)(
        outer.m, outer.functions, outer.resolution, outer.facts, label=outer.label, top_level=False
    )
    box = outer.m.fresh("B")
    inner.apart = Apart(box, outer_variables=outer.live_variables())
    inner.dynamic = outer.dynamic
    inner.int_keys = outer.int_keys
    inner.catch_vars = list(outer.catch_vars)
    inner.pending_ops, outer.pending_ops = outer.pending_ops, 0
    inner.visible = Visible(None, "", -1, False, outer.visible)  # the rest is in the caller's frame
    for index, (name, info) in enumerate(shared):
        boxed = VarInfo(f"{box}[{index}]", info.const, info.cell, boxed=True)
        inner.scopes[0][name] = boxed
        inner.visible = Visible(name, box, index, info.cell, inner.visible, info.const)
        if info.load in outer.int_operands:
            inner.int_operands.add(boxed.load)
    inner.scopes.append({})
    return inner


def _call(outer: C, call_text: str, box: str, shared: list[tuple[str, VarInfo]]) -> Operand:
    """`r = h(…)`, the shared variables boxed before and copied back after."""
    result = outer.temp()
    call = f"{result} = {call_text}"
    if shared:
        outer.emit(f"{box} = [{', '.join(info.py for _, info in shared)}]")
    copies = [f"{info.py} = {box}[{index}]" for index, (_, info) in enumerate(shared) if not info.cell]
    if not copies:
        outer.emit(call)
        return result
    outer.emit("try:")
    with outer.indented(blocks=1):
        outer.emit(call)
    outer.emit("finally:")
    with outer.indented(blocks=1):
        outer.emit("; ".join(copies))
    return result


def _act_on_jumps(outer: C, result: Operand, kinds: set[int]) -> None:
    """Make the `break`/`continue`/`return` the part asked for, or pass it further out."""
    if not kinds:
        return
    outer.emit(f"if type({result}) is Jump:")
    with outer.indented():
        for kind in sorted(kinds):
            outer.emit(f"if {result}.kind == {kind}: {_action(outer, kind, result)}")


def _action(outer: C, kind: int, result: Operand) -> str:
    if kind == BREAK and outer.loops:
        return f"{outer.loops[-1].result} = {result}.value; break"
    if kind == CONTINUE and outer.loops:
        return "continue"
    if kind == RETURN and outer.apart is None:
        return f"return {result}.value"
    assert outer.apart is not None, "a jump out of a loop the parser found no loop for"
    outer.apart.jumps.add(kind)
    return f"return {result}"


__all__ = ["compile_apart"]
