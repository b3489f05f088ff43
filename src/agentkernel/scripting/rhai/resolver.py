"""Which variables closures capture (RHAI.md §10), found before code generation.

Closures capture by reference, so a captured variable must live in a shared
Cell from its declaration on; the compiler needs to know that when it first
meets the declaration, before it sees the closure. This pass walks the tree
with the same scoping rules as the compiler and records:

* `captured`: the declarations (keyed by `decl_key`) that some closure uses
  while they belong to an enclosing function;
* `closure_captures[id(closure)]`: for each closure, the captured
  declarations it needs, in a stable order (nested closures' needs included,
  so they can be passed through).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentkernel.scripting.rhai import ast

DeclKey = tuple[int, str]


def decl_key(node: object, name: str) -> DeclKey:
    """Declarations are identified by the node that declares them and the name."""
    return (id(node), name)


@dataclass
class _Level:
    """One function (script fn, closure or the top level) being walked."""

    closure: ast.Closure | None
    scopes: list[dict[str, DeclKey]] = field(default_factory=lambda: [{}])
    needs: dict[DeclKey, None] = field(default_factory=dict)


@dataclass
class Resolution:
    captured: set[DeclKey] = field(default_factory=set)
    closure_captures: dict[int, tuple[DeclKey, ...]] = field(default_factory=dict)


class Resolver:
    """Walks one function body (or the top level) and its nested closures."""

    def __init__(self) -> None:
        self.result = Resolution()
        self.levels: list[_Level] = []

    def function(self, params: tuple[str, ...], body: ast.Block, owner: object) -> Resolution:
        self.levels.append(_Level(closure=None))
        for name in params:
            self._declare(name, owner)
        self._block_contents(body.stmts)
        self.levels.pop()
        return self.result

    # -- scopes ---------------------------------------------------------------

    def _declare(self, name: str, node: object) -> None:
        self.levels[-1].scopes[-1][name] = decl_key(node, name)

    def _push(self) -> None:
        self.levels[-1].scopes.append({})

    def _pop(self) -> None:
        self.levels[-1].scopes.pop()

    def _reference(self, name: str) -> None:
        for depth in range(len(self.levels) - 1, -1, -1):
            for scope in reversed(self.levels[depth].scopes):
                if name in scope:
                    key = scope[name]
                    if depth < len(self.levels) - 1:
                        self.result.captured.add(key)
                        for inner in self.levels[depth + 1 :]:
                            inner.needs[key] = None
                    return
        # unresolved: a global, a function name used as a pointer, or an error at run time

    # -- walking ---------------------------------------------------------------

    def _block_contents(self, stmts: tuple[ast.Stmt, ...]) -> None:
        for stmt in stmts:
            self._stmt(stmt)

    def _stmt(self, stmt: ast.Stmt) -> None:
        if isinstance(stmt, ast.Let):
            if stmt.value is not None:
                self._expr(stmt.value)
            self._declare(stmt.name, stmt)
        elif isinstance(stmt, ast.TryCatch):
            self._scoped_block(stmt.body)
            self._push()
            if stmt.var is not None:
                self._declare(stmt.var, stmt)
            self._block_contents(stmt.handler.stmts)
            self._pop()
        else:
            self._children(stmt)

    def _scoped_block(self, block: ast.Block) -> None:
        self._push()
        self._block_contents(block.stmts)
        self._pop()

    def _expr(self, node: Any) -> None:
        if isinstance(node, ast.Var):
            if node.namespace is None:
                self._reference(node.name)
        elif isinstance(node, ast.Block):
            self._scoped_block(node)
        elif isinstance(node, ast.For):
            self._expr(node.iterable)
            self._push()
            self._declare(node.var, node)
            if node.counter is not None:
                self._declare(node.counter, node)
            self._block_contents(node.body.stmts)
            self._pop()
        elif isinstance(node, ast.Closure):
            self._closure(node)
        else:
            self._children(node)

    def _closure(self, node: ast.Closure) -> None:
        level = _Level(closure=node)
        self.levels.append(level)
        for name in node.params:
            self._declare(name, node)
        self._block_contents(node.body.stmts)
        self.levels.pop()
        self.result.closure_captures[id(node)] = tuple(level.needs)

    def _children(self, node: Any) -> None:
        for child in ast.children(node):
            if isinstance(child, ast.Block):
                self._scoped_block(child)
            elif isinstance(child, ast.Let | ast.TryCatch | ast.Assign | ast.ExprStmt | ast.Import):
                self._stmt(child)
            else:
                self._expr(child)


def resolve(params: tuple[str, ...], body: ast.Block, owner: object) -> Resolution:
    """Capture analysis of one script function (or the top level, with no params)."""
    return Resolver().function(params, body, owner)


__all__ = ["DeclKey", "Resolution", "decl_key", "resolve"]
