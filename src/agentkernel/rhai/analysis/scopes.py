"""One scope analysis of a script function, before code generation: captures and int facts.

The compiler must know, when it first meets a declaration, two things that
depend on the rest of the function (RHAI.md §10):

* whether some closure captures it: closures capture by reference, so a
  captured variable lives in a shared Cell from its declaration on;
* whether it always holds an i64: then compiled code skips its type checks
  (see `int_types.py` for what counts as an int expression).

One walk of a script function (or the top level) and the closures in it,
with the compiler's scoping rules, records both and gives a `Scopes`:

* `captured`: the declarations (keyed by `decl_key`) that some closure uses
  while they belong to an enclosing function;
* `closure_captures[id(closure)]`: for each closure, the captured
  declarations it needs, in a stable order (nested closures' needs included,
  so they can be passed through);
* `int_keys`: the declarations, of the function and of each closure in it,
  proven to hold an i64. A captured declaration never is one (it is a Cell),
  nor one changed in place (a method call on it, a by-reference native call
  with it first, an index or property assignment into it).
"""

from __future__ import annotations

from typing import Any

from agentkernel.rhai.analysis.int_types import (
    UNKNOWN,
    DeclKey,
    IntFacts,
    int_declarations,
    map_declarations,
    non_negative_declarations,
    text_declarations,
)
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.records import field, mutable_record


def decl_key(node: object, name: str) -> DeclKey:
    """Declarations are identified by the node that declares them and the name."""
    return (id(node), name)


@mutable_record
class _Level:
    """One function (script fn, closure or the top level) being walked."""

    scopes: list[dict[str, DeclKey]] = field(default_factory=lambda: [{}])
    needs: dict[DeclKey, None] = field(default_factory=dict)


@mutable_record
class Scopes:
    captured: set[DeclKey] = field(default_factory=set)
    closure_captures: dict[int, tuple[DeclKey, ...]] = field(default_factory=dict)
    int_keys: frozenset[DeclKey] = frozenset()
    non_negative_keys: frozenset[DeclKey] = frozenset()  # of int_keys, those never below 0
    text_keys: frozenset[DeclKey] = frozenset()  # the declarations always holding a plain string
    map_keys: frozenset[DeclKey] = frozenset()  # the declarations always holding an object map


class _Analysis:
    """Walks one function body and its nested closures (through `ast.children`)."""

    def __init__(self) -> None:
        self.scopes = Scopes()
        self.facts = IntFacts()
        self.levels: list[_Level] = []

    def function(self, params: tuple[str, ...], body: ast.Block, owner: object) -> Scopes:
        self.levels.append(_Level())
        for name in params:
            self._declare(name, owner, UNKNOWN)
        self._statements(body.stmts)
        self.levels.pop()
        self.facts.excluded |= self.scopes.captured  # a Cell is never a plain int
        self.scopes.int_keys = int_declarations(self.facts)
        self.scopes.non_negative_keys = non_negative_declarations(self.facts, self.scopes.int_keys)
        self.scopes.text_keys = text_declarations(self.facts)
        self.scopes.map_keys = map_declarations(self.facts)
        return self.scopes

    # -- scopes ---------------------------------------------------------------

    def _declare(self, name: str, node: object, value: Any) -> None:
        key = decl_key(node, name)
        self.levels[-1].scopes[-1][name] = key
        self.facts.assigned.setdefault(key, []).append(value)

    def _push(self) -> None:
        self.levels[-1].scopes.append({})

    def _pop(self) -> None:
        self.levels[-1].scopes.pop()

    def _lookup(self, name: str) -> DeclKey | None:
        """The declaration `name` means here; one of an enclosing function's is captured."""
        for depth in range(len(self.levels) - 1, -1, -1):
            for scope in reversed(self.levels[depth].scopes):
                if name in scope:
                    key = scope[name]
                    if depth < len(self.levels) - 1:
                        self.scopes.captured.add(key)
                        for inner in self.levels[depth + 1 :]:
                            inner.needs[key] = None
                    return key
        return None  # a global, a function name used as a pointer, or an error at run time

    def _root_key(self, node: Any) -> DeclKey | None:
        """The declaration of the variable a chain (`a.b[0].c()`) starts from, if any."""
        while isinstance(node, ast.Property | ast.Index | ast.MethodCall):
            node = node.target
        if isinstance(node, ast.Var) and node.namespace is None:
            return self._lookup(node.name)
        return None

    # -- walking ---------------------------------------------------------------

    def _statements(self, stmts: tuple[ast.Stmt, ...]) -> None:
        for stmt in stmts:
            self._node(stmt)

    def _scoped(self, stmts: tuple[ast.Stmt, ...]) -> None:
        self._push()
        self._statements(stmts)
        self._pop()

    def _node(self, node: Any) -> None:
        handler = _HANDLERS.get(type(node))
        if handler is not None:
            handler(self, node)
        else:
            self._children(node)

    def _children(self, node: Any) -> None:
        for child in ast.children(node):
            self._node(child)

    def _var(self, node: ast.Var) -> None:
        if node.namespace is None:
            key = self._lookup(node.name)
            if key is not None:
                self.facts.bound[id(node)] = key

    def _block(self, node: ast.Block) -> None:
        self._scoped(node.stmts)

    def _let(self, node: ast.Let) -> None:
        if node.value is not None:
            self._node(node.value)
        self._declare(node.name, node, node.value if node.value is not None else UNKNOWN)

    def _export(self, node: ast.Export) -> None:
        """An exported variable is held in a Cell: the importer reads its value as the
        module's top level leaves it, whatever way that ends (runtime/modules.py)."""
        if node.decl is not None:
            self._let(node.decl)
        key = self._lookup(node.name)
        if key is not None:
            self.scopes.captured.add(key)

    def _assign(self, node: ast.Assign) -> None:
        self._children(node)
        root = node.target
        while isinstance(root, ast.Property | ast.Index):
            root = root.target
        key = self._root_key(root)
        if key is None:
            return
        if root is node.target:
            value: Any = node.value
            if node.op is not None:
                value = ast.Binary(node.op.rstrip("="), node.target, node.value, node.pos)
            self.facts.assigned.setdefault(key, []).append(value)
        else:  # `a[i] = v`, `a.b = v`: changed in place
            self.facts.changed.add(key)

    def _method_call(self, node: ast.MethodCall) -> None:
        self._children(node)
        self._exclude(node.target)

    def _call(self, node: ast.Call) -> None:
        self._children(node)
        if node.args:
            self._exclude(node.args[0])

    def _exclude(self, node: Any) -> None:
        key = self._root_key(node)
        if key is not None:
            self.facts.excluded.add(key)

    def _for(self, node: ast.For) -> None:
        self._node(node.iterable)
        self._push()
        ranged = isinstance(node.iterable, ast.Binary) and node.iterable.op in ("..", "..=")
        self._declare(node.var, node, ("range", node.iterable) if ranged else UNKNOWN)
        if node.counter is not None:
            self._declare(node.counter, node, ast.Literal(0, node.pos))
        self._statements(node.body.stmts)
        self._pop()

    def _try_catch(self, node: ast.TryCatch) -> None:
        self._scoped(node.body.stmts)
        self._push()
        if node.var is not None:
            self._declare(node.var, node, UNKNOWN)
        self._statements(node.handler.stmts)
        self._pop()

    def _closure(self, node: ast.Closure) -> None:
        level = _Level()
        self.levels.append(level)
        for name in node.params:
            self._declare(name, node, UNKNOWN)
        self._statements(node.body.stmts)
        self.levels.pop()
        self.scopes.closure_captures[id(node)] = tuple(level.needs)


_HANDLERS: dict[type, Any] = {
    ast.Var: _Analysis._var,
    ast.Block: _Analysis._block,
    ast.Let: _Analysis._let,
    ast.Export: _Analysis._export,
    ast.Assign: _Analysis._assign,
    ast.MethodCall: _Analysis._method_call,
    ast.Call: _Analysis._call,
    ast.For: _Analysis._for,
    ast.TryCatch: _Analysis._try_catch,
    ast.Closure: _Analysis._closure,
}


def analyse(params: tuple[str, ...], body: ast.Block, owner: object) -> Scopes:
    """The scope analysis of one script function (or the top level, with no params)."""
    return _Analysis().function(params, body, owner)


__all__ = ["DeclKey", "Scopes", "analyse", "decl_key"]
