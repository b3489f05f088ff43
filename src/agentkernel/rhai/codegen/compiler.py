"""Rhai AST → Python source → one code object per script (RHAI-DESIGN.md "Why compile").

Each Rhai script function becomes a Python function `f_<name>_<arity>(rt, d, th, *params)`,
the top level becomes `main(rt, d, th)`, and closures become functions whose
first parameters are their captured Cells, bound when the closure is made (so
each `let` in a loop body gives each closure its own variable, as in Rhai).
All of them are functions of the module, none nested in another, and code
nested deeper than one Python function may hold is compiled apart
(`nesting.py`): whatever a script's shape, the generated code stays within
CPython's limits, and compile time grows linearly with the script.

`FunctionCompiler` is made of parts, one module each for what they compile:
statements.py, assignments.py, control.py, expressions.py, chains.py and
calls.py, on what function.py holds for all of them; `expr` hands each node
to its part (`x_<Node>`). The facts each part asks about the tree below a
node were found before, in one walk (analysis/facts.py).

Expressions are compiled to three-address code: every operation that can fail
sits on its own generated line, and `LINES` maps that line to the Rhai
(line, position). When an error passes through a compiled function, the
handler looks up the line in the traceback and positions the error — the happy
path pays nothing for positions.

The sandbox is by construction: Rhai names become `v<N>_<name>` locals, string
constants go through the `K` table, and the module's globals are an explicit
table with no builtins (see `abi.py`: all that generated code may name).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentkernel.rhai.codegen.apart import compile_apart
from agentkernel.rhai.codegen.assignments import Assignments
from agentkernel.rhai.codegen.batches import KINDS, BatchCopy, NotBatchable, batchable, spoils_copy
from agentkernel.rhai.codegen.calls import Calls
from agentkernel.rhai.codegen.chains import Chains
from agentkernel.rhai.codegen.control import ControlFlow
from agentkernel.rhai.codegen.expressions import Expressions
from agentkernel.rhai.codegen.letter_walks import LetterWalks
from agentkernel.rhai.codegen.module import anon_for
from agentkernel.rhai.codegen.nesting import FLAT_NODES
from agentkernel.rhai.codegen.operands import Operand
from agentkernel.rhai.codegen.statements import Statements
from agentkernel.rhai.codegen.stepped import SteppedLoops
from agentkernel.rhai.codegen.variables import VarInfo
from agentkernel.rhai.runtime.failures import closure_call
from agentkernel.rhai.syntax import ast


class FunctionCompiler(
    Statements, Assignments, ControlFlow, SteppedLoops, LetterWalks, Expressions, Chains, Calls
):
    """Generates one Python function: a script fn, a closure or the top level."""

    def expr(self, node: Any) -> Operand:
        self.m.clock.tick()
        if self.too_deep() and not isinstance(node, FLAT_NODES):
            return compile_apart(self, node, lambda inner: inner.expr(node))
        method = getattr(self, "x_" + type(node).__name__)
        result: Operand = method(node)
        return result

    def function(
        self,
        py_name: str,
        params: tuple[str, ...],
        body: ast.Block,
        owner: object,
        leading: tuple[str, ...] = (),
        wrap: str | None = None,
    ) -> None:
        """Emit `def py_name(leading…, rt, d, th, params…):` with the error handler around the body.

        `leading` are a closure's captured Cells, bound when the closure is made.
        """
        self.int_keys = self.resolution.int_keys
        infos = [self.declare(p, owner, False) for p in params]
        plain = [i.py for i in infos]
        self.m.begin_function()
        self.emit(f"def {py_name}({', '.join([*leading, 'rt', 'd', 'th', *plain])}):")
        hinted = self.calls_natives(body)
        with self.indented():
            self.emit("if d > rt.max_depth: rt.enter(d)")
            if hinted:
                self.emit("rt.depth_hint = d")
            if self.dynamic:
                self.emit("dyn = rt.eval_scope")
            self.emit("try:")
            with self.indented(blocks=2):  # CPython counts try/finally and try/except
                for info in infos:
                    if info.cell:
                        self.emit(f"{info.py} = Cell({info.py})")
                self.main_top = self.top_level and not self.export_lets
                value = self.block_body(body.stmts, want_value=True)
                if self.export_lets:  # `eval`'s text: its variables' last values go back to the caller
                    for name, info in self.scopes[0].items():
                        self.emit(f"dyn[{self.m.constant(name)}] = {info.load}")
                self.emit(f"return {value}")
            self.error_handler(wrap)
            if hinted:
                self.emit("finally:")
                with self.indented():
                    self.emit("rt.depth_hint = d - 1  # natives calling back from the caller nest one level")
        self.m.end_function()

    def error_handler(self, wrap: str | None) -> None:
        """`except`: the error gets the position of the line it passed (`LINES`), and the
        call's frame as the reference words it (`wrap`: "in call to function 'f'")."""
        self.emit("except Exception as e:")
        with self.indented():
            located = "locate(e, e.__traceback__, LINES, NOPOS)"
            if wrap is None:
                self.emit(f"raise {located} from None")
            else:
                self.emit(f"raise wrap_call({located}, {self.m.constant(wrap)}) from None")

    def calls_natives(self, body: ast.Block) -> bool:
        """Whether `body` may call a native (which reads `rt.depth_hint` to call back into
        the script at the right depth); calls of script functions pass their depth."""
        return self.dynamic or self.apart is not None or self.facts.calls_natives(body)

    def x_Closure(self, node: ast.Closure) -> Operand:
        """A closure is a function of the module whose first parameters are the Cells it
        captures (RHAI.md §10), bound to them when the closure is made."""
        py_name = self.m.fresh("c")
        inner = FunctionCompiler(
            self.m, self.functions, self.resolution, self.facts, label="closure", top_level=False
        )
        cells: list[str] = []
        for name, info in self._captured(node):
            cells.append(info.py)
            inner.bind(name, VarInfo(self.m.fresh("v") + "_" + name, info.const, True))
        leading = tuple(info.py for info in inner.scopes[0].values())
        wrap = closure_call(anon_for(node), self.m.source)
        inner.function(py_name, node.params, node.body, node, leading=leading, wrap=wrap)
        arity = len(node.params)
        out = self.temp()
        for cell in cells:
            self.emit(f"{cell}.shared = True")
        if cells:  # the reference's block of `Share` and `curry(closure, captured…)`: 3 and 1 each
            self.count(3 + len(cells), node.pos)
        target = f"bind_closure({py_name}, {arity}, {', '.join(cells)})" if cells else py_name
        if not cells:
            self.m.emit_module_level(f"{py_name}.rhai_arity = {arity}")
            if arity == 1 and self.facts.reads_only(node):
                self.m.emit_module_level(f"{py_name}.rhai_reads_only = True")
                if batchable(node):
                    self._batch_copies(py_name, node)
        self.emit(f"{out} = FnPtr({self.m.constant(anon_for(node))}, (), {target})")
        return out

    def _batch_copies(self, py_name: str, node: ast.Closure) -> None:
        """The closure's copies over many items, one per kind of item (batches.py)."""
        copies = []
        for kind in KINDS:
            mark = self.m.mark()
            copy = FunctionCompiler(
                self.m, self.functions, self.resolution, self.facts, label="closure", top_level=False
            )
            try:
                operations = copy.batch_function(f"{py_name}_{kind}", node, kind)
            except NotBatchable:
                self.m.rollback(mark)
                continue
            copies.append(f"{kind}: ({py_name}_{kind}, {operations})")
        if copies:
            self.m.emit_module_level(f"{py_name}.rhai_batch = {{{', '.join(copies)}}}")

    def batch_function(self, py_name: str, node: ast.Closure, kind: str) -> int:
        """Emit `def py_name(rt, d, th, items):`, the closure's body run over each item, known of
        `kind`, counting nothing; returns what the body counts a call. Raises NotBatchable."""
        self.int_keys = self.resolution.int_keys
        info = self.declare(node.params[0], node, False)
        if info.cell:
            raise NotBatchable
        (self.int_operands if kind == "int" else self.text_operands).add(info.load)
        self.known_kinds[info.py] = kind
        self.m.begin_function()
        self.emit(f"def {py_name}(rt, d, th, b_items):")
        with self.indented():
            self.emit("if d > rt.max_depth: rt.enter(d)")
            self.emit("b_out = []; b_keep = b_out.append")
            self.emit(f"for {info.py} in b_items:")
            with self.indented(blocks=1):
                self.batch = BatchCopy(kind, self.ind)
                value = self.block_body(node.body.stmts, want_value=True)
                self.emit(f"b_keep({value})")
            self.emit("return b_out")
        text = self.m.function_text()
        self.m.end_function()
        if self.batch.operations is None or spoils_copy(text):
            raise NotBatchable
        return self.batch.operations

    def _captured(self, node: ast.Closure) -> Iterator[tuple[str, VarInfo]]:
        """The shared variables in sight that the closure (or one nested in it) uses."""
        seen: set[str] = set()
        for _, name in self.resolution.closure_captures.get(id(node), ()):
            info = self.lookup(name)
            if info is not None and info.cell and name not in seen:
                seen.add(name)
                yield name, info


__all__ = ["FunctionCompiler"]
