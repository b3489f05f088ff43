"""The Python module being generated: one text per function, its constants, its line → position table.

This module knows Python source text, not Rhai syntax; the compiler
(compiler.py and its parts) walks the tree and writes here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from agentkernel.rhai.codegen.operands import CONSTANT, LITERAL, Operand
from agentkernel.rhai.errors import Pos
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.compile_clock import CompileClock
from agentkernel.rhai.syntax.records import field, mutable_record


@mutable_record
class Chunk:
    """One Python function's lines, kept apart while it is generated.

    Every function (script fn, closure, top level, a part compiled apart)
    is a function of the module itself, never nested in another: CPython
    takes time quadratic in their number to compile nested functions, and
    nesting would add up their indentation.
    """

    lines: list[str] = field(default_factory=list)
    positions: dict[int, Pos] = field(default_factory=dict)  # index in `lines` -> Rhai position
    operator_lines: set[int] = field(default_factory=set)


class Placeholder(NamedTuple):
    """A line emitted to be filled in later (`Module.placeholder`), found by its token."""

    chunk: Chunk
    line: int  # its index in the chunk's lines
    token: str


@mutable_record
class Module:
    """The Python source being generated, its line → position table and constants."""

    clock: CompileClock = field(default_factory=CompileClock)
    function_names: frozenset[str] = frozenset()  # the script's functions, usable as pointers
    source: str | None = None  # the script's source name (a module's path): its errors name it
    constants: list[Any] = field(default_factory=list)
    _constant_index: dict[tuple[type, Any], int] = field(default_factory=dict)
    _open: list[Chunk] = field(default_factory=lambda: [Chunk()])
    _done: list[Chunk] = field(default_factory=list)
    counter: int = 0

    def emit(self, indent: int, text: str, pos: Pos | None = None, *, operator: bool = False) -> None:
        chunk = self._open[-1]
        if pos is not None:
            chunk.positions[len(chunk.lines)] = pos
        if operator:
            chunk.operator_lines.add(len(chunk.lines))
        chunk.lines.append("    " * indent + text)

    def last_line(self) -> tuple[Chunk, int]:
        """The line emitted last, to add to once what follows is compiled (`extend_line`)."""
        chunk = self._open[-1]
        return chunk, len(chunk.lines) - 1

    @staticmethod
    def extend_line(line: tuple[Chunk, int], text: str) -> None:
        """Add `text` to the end of a line emitted before (`last_line`): no line moves."""
        chunk, index = line
        chunk.lines[index] += text

    def placeholder(self, indent: int) -> Placeholder:
        """A line to fill in once what follows is compiled (`fill`): `pass` until then."""
        token = self.fresh("x")
        self.emit(indent, f"pass  # {token}")
        chunk = self._open[-1]
        return Placeholder(chunk, len(chunk.lines) - 1, token)

    @staticmethod
    def fill(placeholder: Placeholder, text: str) -> None:
        """Put `text` in place of a placeholder, at its indentation; nothing if the placeholder
        is gone (what it stood in was emitted again after a `rollback`)."""
        chunk, line, token = placeholder
        if line < len(chunk.lines) and chunk.lines[line].endswith(f"pass  # {token}"):
            old = chunk.lines[line]
            chunk.lines[line] = old[: len(old) - len(old.lstrip())] + text

    def mark(self) -> tuple[int, int]:
        """Where the text is now, to go back to (`rollback`)."""
        return len(self._done), len(self._open[-1].lines)

    def rollback(self, mark: tuple[int, int]) -> None:
        """Forget what was emitted since `mark`, in the function being written (and the
        functions written apart from it since)."""
        done, lines = mark
        del self._done[done:]
        chunk = self._open[-1]
        del chunk.lines[lines:]
        chunk.positions = {i: pos for i, pos in chunk.positions.items() if i < lines}
        chunk.operator_lines = {i for i in chunk.operator_lines if i < lines}

    def function_text(self) -> str:
        """The lines of the function being written so far."""
        return "\n".join(self._open[-1].lines)

    def text_since(self, mark: tuple[int, int]) -> str:
        """The lines emitted into the function being written since `mark`."""
        return "\n".join(self._open[-1].lines[mark[1] :])

    def only_lines_since(self, mark: tuple[int, int]) -> bool:
        """Whether no function was written apart since `mark` (only lines of this one)."""
        return len(self._done) == mark[0]

    def emit_module_level(self, text: str) -> None:
        """A statement of the module itself, run once the functions are defined."""
        self._open[0].lines.append(text)

    def begin_function(self) -> None:
        """Emit into a new function of the module until `end_function`."""
        self._open.append(Chunk())

    def end_function(self) -> None:
        self._done.append(self._open.pop())

    def constant_object(self, value: Any) -> Operand:
        """A constant that is not hashable (an array or map switch pattern): never shared."""
        self.constants.append(value)
        return Operand(f"K[{len(self.constants) - 1}]", CONSTANT)

    def constant(self, value: Any) -> Operand:
        key = (type(value), value)
        index = self._constant_index.get(key)
        if index is None:
            index = self._constant_index[key] = len(self.constants)
            self.constants.append(value)
        return Operand(f"K[{index}]", CONSTANT)

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def finish(self) -> tuple[list[str], dict[int, Pos], set[int]]:
        """The module's source, one text per function (the module's own statements last),
        and its 1-based line → position table and operator lines, counted across them."""
        texts: list[str] = []
        positions: dict[int, Pos] = {}
        operator_lines: set[int] = set()
        first = 1
        for chunk in [*self._done, *self._open]:
            positions.update((first + index, pos) for index, pos in chunk.positions.items())
            operator_lines.update(first + index for index in chunk.operator_lines)
            texts.append("".join(line + "\n" for line in chunk.lines))
            first += len(chunk.lines)
        return texts, positions, operator_lines


def literal_operand(module: Module, value: Any) -> Operand:
    kind = type(value)
    if value is None or kind is bool:
        return Operand(repr(value), LITERAL)
    if kind is int:
        return Operand(repr(value) if value >= 0 else f"({value!r})", LITERAL)
    if kind is float and value == value and value not in (float("inf"), float("-inf")):
        return Operand(repr(value) if value >= 0 else f"({value!r})", LITERAL)
    return module.constant(value)


def anon_for(node: ast.Closure) -> str:
    """A closure's name, `anon$<16 hex digits>` like the reference's, from where it stands."""
    import hashlib  # here: OpenSSL's library is loaded only by a script with a closure

    key = f"{node.pos}:{node.params}"
    return "anon$" + hashlib.sha256(key.encode()).hexdigest()[:16]


__all__ = ["Chunk", "Module", "anon_for", "literal_operand"]
