"""A `for` over a string's own letters run in a copy of its body that takes no test it need not.

`for c in word { if !ends.contains(c) { open = true } }`, in a loop that counts
in a local (control.py `counted_locally`) and walks the letters themselves
(`walks_characters`): each letter tests again what the loop's entry knows
already — that the string is one, what the loop flags hold (loop_flags.py),
that the inlined natives are the standard ones — and, after each block's count,
the room left to the checkpoint.

When the string's letters, each fewer operations than `most_ops` (a bound from
the body's nodes, whichever way an iteration goes), all fit in the room left,
and the flags hold, the letters are walked in a copy of the body compiled
assuming all that (`Assumptions`): the fast paths need no test, so the
copy has no general path, and it counts each block as the body does (the same
additions, at the same places: a failure leaves the same count) but tests no
room, since none can run out. Otherwise the loop runs as before. A body whose
copy would still count in the runtime or call a script (a general path left, an
operator's library call: `_quiet`) has no copy.
"""

from __future__ import annotations

import re

from agentkernel.rhai.codegen.function import FunctionBase, LoopTarget
from agentkernel.rhai.codegen.loop_flags import Assumptions
from agentkernel.rhai.codegen.operands import Operand
from agentkernel.rhai.codegen.variables import VarInfo
from agentkernel.rhai.syntax import ast

_RUNTIME_USE = re.compile(r"\brt(\.\w+|_\w+)?")
# what a copy may use of the runtime: its settings and data accounting, which count no operation
# and call no script (`rt` itself handed to a function, an operator's library call, counts)
_QUIET_USES = frozenset(
    {
        ".natives_inline", ".variable_limit", ".map_limit", ".data_limit", ".sizes_checked",
        ".string_limit", ".functions_named_push", ".charge_data", ".built", ".compound", ".account",
        ".copy", ".interpolate", ".throw", "_too_many_variables",
    }
)  # fmt: skip
# what a copy's body may not hold: nested loops (an iteration's operations are bounded by its
# statements, each counted once) and closures (they count apart)
_NOT_COPIED = (ast.While, ast.Loop, ast.DoLoop, ast.For, ast.Closure)


def _quiet(text: str) -> bool:
    """Whether a copy's Python text counts nothing in the runtime and calls no script."""
    return all(use.group(1) in _QUIET_USES for use in _RUNTIME_USE.finditer(text))


def most_ops(body: ast.Block) -> int | None:
    """More than one iteration of `body` can count: a block counts its statements' nodes, a chain
    step counts 2, an `else if` its condition's nodes when reached, a compound assignment up to 2
    natives (`compound_calls`), a block at least 1; so 3 a node, 3 more a statement and 2 a
    block bound it, whichever way the iteration goes. None when the body holds a loop or a
    closure."""
    nodes = statements = blocks = 0
    pending: list[ast.Node] = [body]
    while pending:
        node = pending.pop()
        if isinstance(node, _NOT_COPIED):
            return None
        nodes += 1
        if isinstance(node, ast.Block):
            blocks += 1
            statements += len(node.stmts)
        pending.extend(ast.children(node))
    return 3 * nodes + 3 * statements + 2 * blocks + 4


class LetterWalks(FunctionBase):
    """`for` loops over a string's letters, run in a copy when they fit."""

    def letter_copy(self, node: ast.For, loop: LoopTarget, var: VarInfo, iterable: Operand) -> bool:
        """Emit `if <the letters fit and the flags hold>:` and the copy's loop, then `else:`, and
        say True (the caller emits the loop as usual into the `else`); or emit nothing and say
        False."""
        counter, flag = self.counter, self.raw_chars.get(var.load.text)
        bound = most_ops(node.body)
        if counter is None or flag is None or bound is None or self.assuming is not None:
            return False
        mark = self.m.mark()
        entry = self.m.placeholder(self.ind)
        assumed = Assumptions()
        with self.indented():
            self.emit(f"for {var.load} in {iterable}:", ast.start_pos(node.iterable))
            with self.indented(blocks=1):
                self.pending_ops = 0
                self.raw_chars[var.load.text], self.assuming = "True", assumed
                try:
                    self.loop_body(node.body, loop)
                finally:
                    self.raw_chars[var.load.text], self.assuming = flag, None
        if not self.m.only_lines_since(mark) or not _quiet(self.m.text_since(mark)):
            self.m.rollback(mark)
            return False
        room = f"len({iterable}) * {bound} <= {counter}_room - {counter}"
        tests = [f"({flag} := type({iterable}) is str)", *assumed.tests, room]
        self.m.fill(entry, f"if {' and '.join(tests)}:")
        self.emit("else:")
        return True


__all__ = ["LetterWalks", "most_ops"]
