"""Code nested deeper than one Python function may hold, compiled as a function of its own.

CPython refuses more than 20 statically nested blocks (loops, `try`) in one
function and more than 100 levels of indentation in one file, while a Rhai
script may nest as deep as its parser allows (19 loops at the default
limits, far more with the limits off). So when the code being generated for
a function reaches `MAX_BLOCKS` blocks or `MAX_INDENT` levels, the compiler
puts the next block or expression in a new function of the module, at the
left margin, and calls it in place (issue 9):

* the variables of the enclosing scopes that the part names travel in a list
  (its "box"): read and written there, copied back when the call ends, even
  by an error (shared ones are Cells, passed as they are);
* `break`, `continue` and `return` aimed outside the part come back as a
  `Jump`, which the caller acts on;
* an error inside gets its position in the part's own handler, as in any
  compiled function.

Normal scripts never get here: it costs a call and a list, and only for
code nested ten loops or forty levels deep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkernel.rhai.codegen.module import Operand, VarInfo, Visible
from agentkernel.rhai.syntax import ast

if TYPE_CHECKING:
    from agentkernel.rhai.codegen.compiler import FunctionCompiler

MAX_BLOCKS = 12  # CPython's limit is 20; one construct adds at most 3 before the next check
MAX_INDENT = 40  # CPython's tokenizer stops at 100
FLAT_NODES = (ast.Literal, ast.Var, ast.This, ast.Closure)  # nothing nested in the code they make
BREAK, CONTINUE, RETURN = 0, 1, 2


class Jump:
    """A `break`, `continue` or `return` leaving a part compiled apart, for its caller to make."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: int, value: Any) -> None:
        self.kind = kind
        self.value = value


@dataclass
class Apart:
    """What a part compiled apart knows of the function it was taken from."""

    box: str
    jumps: set[int] = field(default_factory=set)  # the kinds of Jump the part may return
    outer_variables: int = 0  # variables alive around it, for `max_variables`

    def jump(self, kind: int, value: Operand) -> str:
        self.jumps.add(kind)
        return f"return Jump({kind}, {value})"


def referenced_names(node: Any) -> set[str]:
    """The plain variable names a node (or a tuple of statements) mentions, at any depth."""
    names: set[str] = set()
    pending: list[Any] = list(node) if isinstance(node, tuple) else [node]
    while pending:
        item = pending.pop()
        if isinstance(item, ast.Var):
            if item.namespace is None:
                names.add(item.name)
        else:
            pending.extend(ast.children(item))
    return names


def compile_apart(outer: FunctionCompiler, node: Any, part: Callable[[FunctionCompiler], Operand]) -> Operand:
    """Compile `part(inner)` (a block's statements or an expression, `node`) as a new function
    of the module; emit its call in `outer` and return the operand holding its value."""
    shared = [(name, info) for name in sorted(referenced_names(node)) if (info := outer.lookup(name))]
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


def _inner_compiler(outer: FunctionCompiler, shared: list[tuple[str, VarInfo]]) -> FunctionCompiler:
    inner = type(outer)(outer.m, outer.functions, outer.resolution, label=outer.label, top_level=False)
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


def _call(outer: FunctionCompiler, call_text: str, box: str, shared: list[tuple[str, VarInfo]]) -> Operand:
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


def _act_on_jumps(outer: FunctionCompiler, result: Operand, kinds: set[int]) -> None:
    """Make the `break`/`continue`/`return` the part asked for, or pass it further out."""
    if not kinds:
        return
    outer.emit(f"if type({result}) is Jump:")
    with outer.indented():
        for kind in sorted(kinds):
            outer.emit(f"if {result}.kind == {kind}: {_action(outer, kind, result)}")


def _action(outer: FunctionCompiler, kind: int, result: Operand) -> str:
    if kind == BREAK and outer.loops:
        return f"{outer.loops[-1].result} = {result}.value; break"
    if kind == CONTINUE and outer.loops:
        return "continue"
    if kind == RETURN and outer.apart is None:
        return f"return {result}.value"
    assert outer.apart is not None, "a jump out of a loop the parser found no loop for"
    outer.apart.jumps.add(kind)
    return f"return {result}"


__all__ = [
    "BREAK",
    "CONTINUE",
    "FLAT_NODES",
    "MAX_BLOCKS",
    "MAX_INDENT",
    "RETURN",
    "Apart",
    "Jump",
    "compile_apart",
    "referenced_names",
]
