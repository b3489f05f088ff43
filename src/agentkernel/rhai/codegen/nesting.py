"""Code nested deeper than one Python function may hold, compiled as a function of its own.

CPython refuses more than 20 statically nested blocks (loops, `try`) in one
function and more than 100 levels of indentation in one file, while a Rhai
script may nest as deep as its parser allows (19 loops at the default
limits, far more with the limits off). So when the code being generated for
a function reaches `MAX_BLOCKS` blocks or `MAX_INDENT` levels, the compiler
puts the next block or expression in a new function of the module, at the
left margin, and calls it in place (apart.py):

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

from agentkernel.rhai.codegen.operands import Operand
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.records import field, mutable_record

MAX_BLOCKS = 12  # CPython's limit is 20; one construct adds at most 3 before the next check
MAX_INDENT = 40  # CPython's tokenizer stops at 100
FLAT_NODES = (ast.Literal, ast.Var, ast.This, ast.Closure)  # nothing nested in the code they make
BREAK, CONTINUE, RETURN = 0, 1, 2


@mutable_record
class Apart:
    """What a part compiled apart knows of the function it was taken from."""

    box: str
    jumps: set[int] = field(default_factory=set)  # the kinds of Jump the part may return
    outer_variables: int = 0  # variables alive around it, for `max_variables`

    def jump(self, kind: int, value: Operand) -> str:
        self.jumps.add(kind)
        return f"return Jump({kind}, {value})"


__all__ = ["BREAK", "CONTINUE", "FLAT_NODES", "MAX_BLOCKS", "MAX_INDENT", "RETURN", "Apart"]
