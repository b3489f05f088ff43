"""What a Rhai error about `()` means in a tool: which value was missing, and why.

In Rhai a map field that is not there reads as `()`, so `args.txt.len` with a
misspelt field fails one step later, as `Unknown property 'len' - a getter is
not registered for type '()'`, and `args.n * 2.0` without `n` as `Function
not found: * ((), f64)`. Those are the reference's exact texts, and our
interpreter keeps them (`agentkernel rhai run`, the conformance suite); the
adapter adds a hint at the tool/hook edge instead.

The hint finds the failing node in the syntax tree by the error's position
(each node records where the reference reports its errors, see
`rhai.ast`), takes the operand that was `()`, and when that operand is
`args.NAME` or `args["NAME"]` in the called function (`args` being one of
its parameters, never rebound) it says that the field is missing, listing
the ones the call did pass; for a tool's `run(args)` that field is an
argument. Otherwise it says that `()` is a missing value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from agentkernel.rhai.errors import NO_POS, RhaiRuntimeError
from agentkernel.rhai.syntax import ast
from agentkernel.types import JSONValue

UNIT = "()"
WHY = (
    "a missing value: a null, a map field that is not there, or the result of a function that returns nothing"
)
MAX_NAMES_SHOWN = 10

_PROPERTY = re.compile(
    r"^(?:Unknown|No writable) property '(?P<name>[^']+)' - a [gs]etter is not registered for type '\(\)'"
)
_INDEXER = re.compile(r"^Indexer unavailable: \(\) \[")
_NOT_FOUND = re.compile(r"^Function not found: (?P<name>\S+) \((?P<types>.*)\)$")
_CONDITION = re.compile(r"^Data type incorrect: \(\) \(expecting bool\)$")


@dataclass(frozen=True)
class EntryCall:
    """The call that failed: the script's functions, the one called, the values it was given."""

    functions: Sequence[ast.FnDef]
    name: str
    values: Sequence[JSONValue]


@dataclass(frozen=True)
class _Found:
    node: object
    function: ast.FnDef


def _walk(node: object) -> Iterator[object]:
    """`node` and every node below it, whatever its kind."""
    yield node
    for child in ast.children(node):
        yield from _walk(child)


def _find(call: EntryCall, pos: ast.Pos, kinds: tuple[type, ...], match: str | None) -> _Found | None:
    """The node of one of `kinds` at `pos` (named `match`, when given), with its function."""
    for function in call.functions:
        for node in _walk(function.body):
            named = match is None or _name_of(node) == match
            if isinstance(node, kinds) and getattr(node, "pos", None) == pos and named:
                return _Found(node, function)
    return None


def _name_of(node: object) -> str | None:
    for attr in ("name", "op"):
        value = getattr(node, attr, None)
        if isinstance(value, str):
            return value
    return None


def _rebinds(function: ast.FnDef, name: str) -> bool:
    """Whether anything in `function` may give `name` another value than the argument."""
    for node in _walk(function.body):
        if isinstance(node, ast.Let | ast.TryCatch | ast.For) and name in (
            getattr(node, "name", None),
            getattr(node, "var", None),
            getattr(node, "counter", None),
        ):
            return True
        if isinstance(node, ast.Closure) and name in node.params:
            return True
        if isinstance(node, ast.Assign) and isinstance(node.target, ast.Var) and node.target.name == name:
            return True
    return False


def _is_text(literal: ast.Literal) -> bool:
    """A string literal (not a char: `'x'` never names a map field)."""
    return type(literal.value) is str


@dataclass(frozen=True)
class _Field:
    """`args.NAME` read from parameter `index` of the called function."""

    text: str  # as written: args.txt, args?.txt, args["txt"]
    name: str
    param: str
    index: int


def _parameter_field(expr: object, found: _Found, call: EntryCall) -> _Field | None:
    """The field when `expr` is `PARAM.NAME` / `PARAM["NAME"]` in the called function."""
    function = found.function
    if function.name != call.name or len(function.params) != len(call.values):
        return None
    if isinstance(expr, ast.Property):
        target, name, index_form = expr.target, expr.name, False
    elif isinstance(expr, ast.Index) and isinstance(expr.index, ast.Literal) and _is_text(expr.index):
        target, name, index_form = expr.target, str(expr.index.value), True
    else:
        return None
    if not isinstance(target, ast.Var) or target.namespace is not None or target.name not in function.params:
        return None
    param = target.name
    if _rebinds(function, param):
        return None
    optional = "?" if expr.optional else ""
    text = f'{param}{optional}["{name}"]' if index_form else f"{param}{optional}.{name}"
    return _Field(text, name, param, function.params.index(param))


def _names(values: Mapping[str, JSONValue]) -> str:
    names = list(values)
    shown = ", ".join(names[:MAX_NAMES_SHOWN])
    return shown + (f", … ({len(names)} in all)" if len(names) > MAX_NAMES_SHOWN else "")


def _missing_argument(expr: object, found: _Found | None, call: EntryCall) -> str | None:
    """`args.txt: the argument 'txt' is missing (args has: text)` when `expr` is such a field."""
    field = _parameter_field(expr, found, call) if found is not None else None
    if field is None:
        return None
    given = call.values[field.index]
    if not isinstance(given, dict):
        return None
    what = "argument" if call.name == "run" and field.index == 0 else "field"
    if field.name in given:
        return f"{field.text}: the {what} {field.name!r} is null" if given[field.name] is None else None
    has = f"{field.param} has: {_names(given)}" if given else f"{field.param} is empty"
    return f"{field.text}: the {what} {field.name!r} is missing ({has})"


def _unit(role: str, expr: object | None, found: _Found | None, call: EntryCall, *, say_role: bool) -> str:
    """The hint for one `()` value: the missing argument it came from, else what `()` means."""
    argument = _missing_argument(expr, found, call)
    if argument is None:
        return f"{role} is (): {WHY}"
    return f"{role} is (); {argument}" if say_role else argument


def _property_hint(error: RhaiRuntimeError, call: EntryCall, name: str | None) -> str:
    """`x.name` (or `x[i]` when `name` is None) where `x` was `()`."""
    kinds: tuple[type, ...] = (ast.Property,) if name is not None else (ast.Index,)
    role = f"the value before .{name}" if name is not None else "the indexed value"
    found = _find(call, error.pos or NO_POS, kinds, name)
    target = getattr(found.node, "target", None) if found is not None else None
    return _unit(role, target, found, call, say_role=False)


def _operands(node: object) -> list[object] | None:
    """A failing node's values in the order "Function not found" lists their types."""
    if isinstance(node, ast.Binary):
        return [node.left, node.right]
    if isinstance(node, ast.Unary):
        return [node.operand]
    if isinstance(node, ast.Assign):
        return [node.target, node.value]
    if isinstance(node, ast.MethodCall):
        return [node.target, *node.args]
    if isinstance(node, ast.Call):
        return list(node.args)
    return None


def _role(node: object, name: str, index: int, count: int) -> str:
    if isinstance(node, ast.MethodCall):
        return f"the value .{name}() is called on" if index == 0 else f"argument {index} of .{name}()"
    if isinstance(node, ast.Call) or (node is None and name.isidentifier()):
        return f"argument {index + 1} of {name}()"
    op = f"{name}=" if isinstance(node, ast.Assign) else name
    if count == 2:
        return f"the {'left' if index == 0 else 'right'} operand of {op}"
    return f"the operand of {op}"


def _not_found_hint(error: RhaiRuntimeError, call: EntryCall, name: str, types: list[str]) -> str | None:
    """`Function not found: * (f64, ())`: say which operand or argument was `()`."""
    units = [i for i, t in enumerate(types) if t == UNIT]
    if not units:
        return None
    kinds = (ast.Binary, ast.Unary, ast.Assign, ast.MethodCall, ast.Call)
    found = _find(call, error.pos or NO_POS, kinds, name)
    operands = _operands(found.node) if found is not None else None
    if found is None or operands is None or len(operands) != len(types):
        found, operands = None, None
    node = found.node if found is not None else None
    if len(units) == 1:
        index = units[0]
        expr = operands[index] if operands is not None else None
        return _unit(_role(node, name, index, len(types)), expr, found, call, say_role=True)
    what = "arguments" if isinstance(node, ast.Call | ast.MethodCall) or name.isidentifier() else "operands"
    arguments = [_missing_argument(operands[i], found, call) for i in units] if operands else []
    known = "; ".join(a for a in arguments if a is not None)
    how_many = "both" if len(units) == len(types) == 2 else str(len(units))
    return f"{how_many} {what} of {name} are (): " + (known or WHY)


def _conditions(node: object) -> list[object]:
    if isinstance(node, ast.If | ast.While | ast.DoLoop):
        return [node.cond]
    if isinstance(node, ast.SwitchCase) and node.condition is not None:
        return [node.condition]
    if isinstance(node, ast.And | ast.Or):
        return [node.left, node.right]
    return []


def _condition_hint(error: RhaiRuntimeError, call: EntryCall) -> str:
    """`if args.flag { … }` without `flag`: a condition that was `()`."""
    for function in call.functions:
        for node in _walk(function.body):
            for cond in _conditions(node):
                if ast.expr_pos(cond) == error.pos:  # type: ignore[arg-type]
                    return _unit("the condition", cond, _Found(cond, function), call, say_role=True)
    return f"the condition is (): {WHY}"


def hint_for(error: RhaiRuntimeError, call: EntryCall) -> str | None:
    """The hint for a run-time error whose cause is a `()` value; None for any other error."""
    message = error.message
    prop = _PROPERTY.match(message)
    if prop is not None:
        return _property_hint(error, call, prop["name"])
    if _INDEXER.match(message):
        return _property_hint(error, call, None)
    not_found = _NOT_FOUND.match(message)
    if not_found is not None:
        types = not_found["types"].split(", ") if not_found["types"] else []
        return _not_found_hint(error, call, not_found["name"], types)
    if _CONDITION.match(message):
        return _condition_hint(error, call)
    return None


__all__ = ["EntryCall", "hint_for"]
