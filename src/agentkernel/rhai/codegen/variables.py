"""The variables in sight of generated code: a Rhai variable's Python home (`VarInfo`), and the
chain of those a call site can see (`Visible`), which `eval` and `is_def_var` read at run time."""

from __future__ import annotations

from collections.abc import Iterator

from agentkernel.rhai.codegen.operands import BOXED, LOCAL, Operand
from agentkernel.rhai.syntax.records import mutable_record


@mutable_record
class VarInfo:
    py: str
    const: bool
    cell: bool
    boxed: bool = False  # held in a part's box (nesting.py), not in a local of its own

    @property
    def load(self) -> Operand:
        return Operand(f"{self.py}.v" if self.cell else self.py, BOXED if self.boxed else LOCAL)


class Visible:
    """One variable in sight at a point of the generated code, linked to those before it.

    `eval` and `is_def_var` need the variables a call site can see. Each
    declaration adds one link to the chain and each call site keeps the head
    as a constant, so a script with many variables and many `eval` calls
    compiles in linear time; the values are read at run time from
    the frame (see `abi.rt_scope`). A link with no `name` marks a frame
    boundary: what follows lives in the calling function's frame (code
    compiled apart, see `nesting.py`). `index` >= 0 reads slot `index` of the
    list in local `local` instead of the local itself. `const`: `eval` may
    not assign it.
    """

    __slots__ = ("cell", "const", "index", "local", "name", "parent")

    def __init__(
        self,
        name: str | None,
        local: str,
        index: int,
        cell: bool,
        parent: Visible | None,
        const: bool = False,
    ) -> None:
        self.name = name
        self.local = local
        self.index = index
        self.cell = cell
        self.parent = parent
        self.const = const

    @staticmethod
    def of(name: str, local: str, cell: bool, parent: Visible | None, const: bool = False) -> Visible:
        return Visible(name, local, -1, cell, parent, const)

    def names(self) -> Iterator[str]:
        """The names in sight, innermost first (a shadowed one more than once)."""
        link: Visible | None = self
        while link is not None:
            if link.name is not None:
                yield link.name
            link = link.parent


__all__ = ["VarInfo", "Visible"]
