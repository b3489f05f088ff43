"""Which local variables always hold an i64 — so compiled code can skip its type checks.

A speed pass, proven conservatively: a variable counts as an int only when
every value ever assigned to it is an int expression (int literals, other
such variables, integer arithmetic on them — which raises rather than leave
the i64 range — and `for` over an int range), and when nothing can change it
behind the compiler's back: no method call on it, no by-reference native call
with it first, no index/property assignment into it, no capture by a
closure. Anything else (parameters, catch variables, eval'd scopes) is left
to the normal checked path. Facts are found by a fixed point, so a variable
built from other int variables qualifies too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentkernel.scripting.rhai import ast
from agentkernel.scripting.rhai.resolver import DeclKey, decl_key

INT_RESULT_OPS = frozenset({"+", "-", "*", "/", "%", "**", "<<", ">>", "&", "|", "^"})
_UNKNOWN = object()  # an assignment whose value can never be proven int


@dataclass
class _Facts:
    assigned: dict[DeclKey, list[Any]] = field(default_factory=dict)
    excluded: set[DeclKey] = field(default_factory=set)
    scopes: list[dict[str, DeclKey]] = field(default_factory=lambda: [{}])
    in_closure: int = 0


class _Walker:
    """Records, per declaration, every value assigned to it, with lexical scoping."""

    def __init__(self) -> None:
        self.facts = _Facts()

    def resolve(self, name: str) -> DeclKey | None:
        for scope in reversed(self.facts.scopes):
            if name in scope:
                return scope[name]
        return None

    def declare(self, name: str, node: object, value: Any) -> None:
        key = decl_key(node, name)
        self.facts.scopes[-1][name] = key
        self.facts.assigned.setdefault(key, []).append(value)
        if self.facts.in_closure:
            self.facts.excluded.add(key)

    def assign(self, target: Any, value: Any) -> None:
        root = target
        while isinstance(root, ast.Property | ast.Index):
            root = root.target
        if isinstance(root, ast.Var) and root.namespace is None:
            key = self.resolve(root.name)
            if key is None:
                return
            if root is target:
                self.facts.assigned.setdefault(key, []).append(value)
            else:
                self.facts.excluded.add(key)

    def exclude_var(self, node: Any) -> None:
        while isinstance(node, ast.Property | ast.Index | ast.MethodCall):
            node = node.target
        if isinstance(node, ast.Var) and node.namespace is None:
            key = self.resolve(node.name)
            if key is not None:
                self.facts.excluded.add(key)

    # -- walking ---------------------------------------------------------------

    def block(self, stmts: Any) -> None:
        self.facts.scopes.append({})
        for stmt in stmts:
            self.node(stmt)
        self.facts.scopes.pop()

    def node(self, node: Any) -> None:
        handler = getattr(self, "n_" + type(node).__name__, None)
        if handler is not None:
            handler(node)
        else:
            self.children(node)

    def children(self, node: Any) -> None:
        for child in ast.children(node):
            self.node(child)  # a Block: n_Block, its own scope

    def n_Block(self, node: ast.Block) -> None:
        self.block(node.stmts)

    def n_Let(self, node: ast.Let) -> None:
        if node.value is not None:
            self.node(node.value)
        self.declare(node.name, node, node.value if node.value is not None else _UNKNOWN)

    def n_Assign(self, node: ast.Assign) -> None:
        self.node(node.value)
        self.node(node.target)
        value: Any = node.value
        if node.op is not None:
            value = ast.Binary(node.op.rstrip("="), node.target, node.value, node.pos)
        self.assign(node.target, value)

    def n_MethodCall(self, node: ast.MethodCall) -> None:
        self.children(node)
        self.exclude_var(node.target)

    def n_Call(self, node: ast.Call) -> None:
        self.children(node)
        if node.args:
            self.exclude_var(node.args[0])

    def n_For(self, node: ast.For) -> None:
        self.node(node.iterable)
        self.facts.scopes.append({})
        ranged = isinstance(node.iterable, ast.Binary) and node.iterable.op in ("..", "..=")
        self.declare(node.var, node, ("range", node.iterable) if ranged else _UNKNOWN)
        if node.counter is not None:
            self.declare(node.counter, node, ast.Literal(0, node.pos))
        for stmt in node.body.stmts:
            self.node(stmt)
        self.facts.scopes.pop()

    def n_TryCatch(self, node: ast.TryCatch) -> None:
        self.block(node.body.stmts)
        self.facts.scopes.append({})
        if node.var is not None:
            self.declare(node.var, node, _UNKNOWN)
        for stmt in node.handler.stmts:
            self.node(stmt)
        self.facts.scopes.pop()

    def n_Closure(self, node: ast.Closure) -> None:
        # anything a closure touches is shared (a Cell): never treated as a plain int
        self.facts.in_closure += 1
        self.facts.scopes.append({})
        for param in node.params:
            self.declare(param, node, _UNKNOWN)
        for stmt in node.body.stmts:
            self.node(stmt)
        self.facts.scopes.pop()
        self.facts.in_closure -= 1

    def n_Var(self, node: ast.Var) -> None:
        if self.facts.in_closure and node.namespace is None:
            key = self.resolve(node.name)
            if key is not None:
                self.facts.excluded.add(key)


def _int_dependencies(value: Any, bound: dict[int, DeclKey]) -> set[DeclKey] | None:
    """The declarations `value` is an int through, or None when it is not an int expression
    (an int literal, a variable, integer arithmetic on them, a `for` over an int range)."""
    if value is _UNKNOWN:
        return None
    found: set[DeclKey] = set()
    pending = [value[1].left, value[1].right] if isinstance(value, tuple) and value[0] == "range" else [value]
    while pending:
        expr = pending.pop()
        if isinstance(expr, ast.Literal):
            if type(expr.value) is not int:
                return None
        elif isinstance(expr, ast.Var):
            key = bound.get(id(expr))
            if key is None:
                return None
            found.add(key)
        elif isinstance(expr, ast.Unary) and expr.op in ("-", "+"):
            pending.append(expr.operand)
        elif isinstance(expr, ast.Binary) and expr.op in INT_RESULT_OPS:
            pending += (expr.left, expr.right)
        else:
            return None
    return found


class _VarBinder(_Walker):
    """A second walk that remembers which declaration each Var reads."""

    def __init__(self) -> None:
        super().__init__()
        self.bound: dict[int, DeclKey] = {}

    def n_Var(self, node: ast.Var) -> None:
        super().n_Var(node)
        if node.namespace is None:
            key = self.resolve(node.name)
            if key is not None:
                self.bound[id(node)] = key


def int_locals(params: tuple[str, ...], body: ast.Block, owner: object) -> frozenset[DeclKey]:
    """The declarations of this function (not its closures) that always hold an i64."""
    walker = _VarBinder()
    for name in params:
        walker.declare(name, owner, _UNKNOWN)
    for stmt in body.stmts:
        walker.node(stmt)
    facts = walker.facts
    # A declaration is an int when all its values are int expressions of int declarations:
    # "not an int" spreads from each failing declaration to those built from it, once each,
    # so the pass is linear however long the chains of variables (issue 9).
    dependents: dict[DeclKey, list[DeclKey]] = {}
    failing: list[DeclKey] = []
    ints: set[DeclKey] = set()
    for key, values in facts.assigned.items():
        needs: set[DeclKey] = set()
        for value in values:
            found = _int_dependencies(value, walker.bound)
            if found is None:
                needs = set()
                failing.append(key)
                break
            needs |= found
        else:
            if key in facts.excluded:
                failing.append(key)
                continue
            ints.add(key)
            for need in needs:
                dependents.setdefault(need, []).append(key)
            failing += [need for need in needs if need not in facts.assigned]
    while failing:
        for dependent in dependents.get(failing.pop(), ()):
            if dependent in ints:
                ints.discard(dependent)
                failing.append(dependent)
    return frozenset(ints)


__all__ = ["int_locals"]
