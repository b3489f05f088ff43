"""Which variables a loop leaves of the type they had when it began — so that a type tested
once, at the loop's entry, holds at every iteration (codegen/loop_flags.py).

A map or an array stays one through reads, stores at a key, an index or a
property (`m[k] = v`, `a[i] += 1`, `m.x = 1`: in place), and anything done to
what it holds; a string stays one through reads and `+=` (which appends or
fails). A method called on a variable may give it a new value (a `Mutated`
receiver, stored back): the compiler tests its flags again there
(codegen/loop_flags.py), so that does not count. What may change a variable's
type is assigning it whole, a function given it first (it may take it by
reference and put anything there), and a declaration of the same name in the
loop (whose variable is then another). A closure's capture makes the variable a
Cell, which the compiler never flags; `eval` and `f!()` (the caller's scope
changed by text) leave nothing stable.

A variable the loop only reads items of (`words[i % 6]`: never named otherwise,
so never assigned into, called a method of, or given to a function) keeps its
items too, and their types.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.records import record


@record
class StableTypes:
    """The variable names a loop leaves a map or an array (`containers`), or a string (`texts`),
    when they were one at its entry; `fixed_texts`: of the strings, those it never appends to
    nor calls a method of (their length stays too); `only_indexed`: of the containers, those it
    only reads items of (what they hold stays too)."""

    containers: frozenset[str]
    texts: frozenset[str]
    fixed_texts: frozenset[str]
    only_indexed: frozenset[str] = frozenset()

    def without(self, names: frozenset[str]) -> StableTypes:
        """The same, but for `names` (a `for`'s own variables, which each iteration sets)."""
        return StableTypes(
            self.containers - names, self.texts - names, self.fixed_texts - names, self.only_indexed - names
        )


NOTHING_STABLE = StableTypes(frozenset(), frozenset(), frozenset())
# the standard methods that leave a string no longer (a script's own, called instead, gives
# its new receiver back as a `Mutated`, where the flags are tested again)
_NOT_GROWING = frozenset(
    {
        "contains", "starts_with", "ends_with", "index_of", "len", "is_empty", "sub_string",
        "to_upper", "to_lower", "trim", "split", "chars", "get", "to_string", "type_of",
    }
)  # fmt: skip


def stable_types(nodes: Iterable[ast.Node]) -> StableTypes:
    """What `nodes` (a loop's head and body, every iteration runs) leave of each type."""
    seen: set[str] = set()
    declared: set[str] = set()
    not_container: set[str] = set()
    not_text: set[str] = set()
    appended: set[str] = set()  # `s += x`, or a method that may grow `s` (`s.append(x)`)
    indexed: set[str] = set()  # the target of an index (`a[i]`)
    named: set[str] = set()  # anywhere else: alone, a chain's root assigned into or called
    pending = list(nodes)
    while pending:
        node = pending.pop()
        kind = type(node)
        if kind is ast.Var:
            if node.namespace is None:  # type: ignore[union-attr]
                seen.add(node.name)  # type: ignore[union-attr]
                named.add(node.name)  # type: ignore[union-attr]
        elif kind is ast.Index and _plain_var(node.target):  # type: ignore[union-attr]
            seen.add(node.target.name)  # type: ignore[union-attr]
            indexed.add(node.target.name)  # type: ignore[union-attr]
            pending.append(node.index)  # type: ignore[union-attr]
            continue
        elif kind is ast.Call:
            if node.capture or node.name == "eval":  # type: ignore[union-attr]
                return NOTHING_STABLE
            _first_by_reference(node.args, not_container, not_text)  # type: ignore[union-attr]
        elif kind is ast.MethodCall:
            if isinstance(node.target, ast.Var) and node.name not in _NOT_GROWING:  # type: ignore[union-attr]
                appended.add(node.target.name)  # type: ignore[union-attr]
            named.add(_root(node.target) or "")  # type: ignore[union-attr]
        elif kind is ast.Assign:
            _assigned(node, not_container, not_text, appended)  # type: ignore[arg-type]
            named.add(_root(node.target) or "")  # type: ignore[union-attr]
        elif kind is ast.Let:
            declared.add(node.name)  # type: ignore[union-attr]
        elif kind is ast.For:
            declared.update(n for n in (node.var, node.counter) if n)  # type: ignore[union-attr]
        elif kind is ast.TryCatch and node.var:  # type: ignore[union-attr]
            declared.add(node.var)  # type: ignore[union-attr]
        elif kind is ast.Closure:
            declared.update(node.params)  # type: ignore[union-attr]
        pending.extend(ast.children(node))
    kept = seen - declared
    texts, containers = kept - not_text, kept - not_container
    fixed, only_indexed = texts - appended, containers & indexed - named
    return StableTypes(frozenset(containers), frozenset(texts), frozenset(fixed), frozenset(only_indexed))


def only_contains_argument(body: ast.Block, name: str) -> bool:
    """Whether the loop variable `name` is named in `body` only as the one argument of a
    `contains` (`vowels.contains(c)`): a string's character there is the same as a
    one-character string, so the loop may walk the string's own characters."""
    allowed: set[int] = set()
    named = False
    pending: list[ast.Node] = [body]
    while pending:
        node = pending.pop()
        kind = type(node)
        if kind is ast.MethodCall and node.name == "contains" and len(node.args) == 1:  # type: ignore[union-attr]
            argument = node.args[0]  # type: ignore[union-attr]
            if isinstance(argument, ast.Var) and argument.namespace is None and argument.name == name:
                allowed.add(id(argument))
        elif kind is ast.Var and node.name == name:  # type: ignore[union-attr]
            if id(node) not in allowed:
                return False
            named = True
        elif name in _declared_by(node):  # another variable of that name: kept simple, not walked
            return False
        pending.extend(ast.children(node))
    return named


def _declared_by(node: ast.Node) -> tuple[str | None, ...]:
    """The variable names a node declares (a `let`, a loop's, a closure's, a `catch`'s)."""
    kind = type(node)
    if kind is ast.Let:
        return (node.name,)  # type: ignore[union-attr]
    if kind is ast.For:
        return (node.var, node.counter)  # type: ignore[union-attr]
    if kind is ast.Closure:
        return tuple(node.params)  # type: ignore[union-attr]
    if kind is ast.TryCatch:
        return (node.var,)  # type: ignore[union-attr]
    return ()


def _plain_var(node: ast.Expr) -> bool:
    return isinstance(node, ast.Var) and node.namespace is None


def _root(target: ast.Expr) -> str | None:
    """The variable a chain (`a`, `a[i].b`) starts from, if a plain one."""
    while isinstance(target, ast.Index | ast.Property):
        target = target.target
    return target.name if isinstance(target, ast.Var) and target.namespace is None else None


def _first_by_reference(args: tuple[ast.Expr, ...], not_container: set[str], not_text: set[str]) -> None:
    """`f(x, …)`: a native may take its first argument by reference and change it."""
    if args and isinstance(args[0], ast.Var) and args[0].namespace is None:
        not_container.add(args[0].name)
        not_text.add(args[0].name)


def _assigned(node: ast.Assign, not_container: set[str], not_text: set[str], appended: set[str]) -> None:
    root = _root(node.target)
    if root is None:
        return
    if isinstance(node.target, ast.Var):  # the whole variable: only a string's `+=` keeps its type
        not_container.add(root)
        appended.add(root)
        if node.op != "+":
            not_text.add(root)
    else:  # into what it holds: a map or an array changes in place
        not_text.add(root)


__all__ = ["NOTHING_STABLE", "StableTypes", "only_contains_argument", "stable_types"]
