"""What validating against a JSON Schema can cost, counted from the schema alone, before any validation.

A schema reaches a validator from where the kernel trusts nothing: a
script's `llm_json` or `run_subagent` output schema, an outside MCP
server's input schema, a tool YAML's `parameters`. jsonschema applies each
subschema to the value in turn, and an `anyOf` tries every branch and keeps
every branch's errors: sixteen nested pairs of `anyOf` branches reached
through `$ref`s make 2^16 applications against one number. So a schema is
measured as the validator would walk it, every `$ref` followed (as
`referencing` resolves it for jsonschema), and refused when it passes
`SchemaBounds`: its JSON length, the subschemas it holds expanded, and how
deep they nest. A `$ref` loop is followed once: one that goes round without
stepping into the value (`{"anyOf": [{"$ref": "#"}]}`) would never end and
is refused; one that steps in ends with the value, under the deadline of
the validation (schemas/bounds.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from agentkernel.schemas.refs import local_refs, remote_refs
from agentkernel.util.json_size import json_length
from agentkernel.util.yaml_source import KeyPath, dotted

# keywords whose value is a subschema, a list of them, or a map name → subschema; `into` says whether the
# subschema applies to a part of the value (an item, a property) rather than to the value itself
_IN_PLACE = {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies"}
_INTO = {
    "items",
    "prefixItems",
    "additionalItems",
    "contains",
    "unevaluatedItems",
    "properties",
    "patternProperties",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
}
_MAPS = {"properties", "patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"}
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_DEFINITIONS = ("$defs", "definitions")


@dataclass(frozen=True)
class SchemaBounds:
    """How big a schema from outside may be (kernel.yaml `limits.max_schema_*`)."""

    max_nodes: int = 2000
    max_depth: int = 32
    max_chars: int = 65536


@dataclass(frozen=True)
class CostProblem:
    """Why a schema is refused, and where in it (a key path; empty for the whole schema)."""

    path: KeyPath
    reason: str


def _children(node: dict[str, Any], with_definitions: bool) -> Iterator[tuple[Any, bool, KeyPath]]:
    """The subschemas written in `node`: each, whether it applies into the value, and its key path."""
    for keyword, value in node.items():
        if keyword not in _IN_PLACE and keyword not in _INTO and keyword not in _MAPS:
            continue
        if keyword in _DEFINITIONS and not with_definitions:
            continue
        into = keyword in _INTO
        if keyword in _MAPS:
            if isinstance(value, dict):
                yield from ((item, into, (keyword, name)) for name, item in value.items())
        elif isinstance(value, list):
            yield from ((item, into, (keyword, index)) for index, item in enumerate(value))
        else:
            yield value, into, (keyword,)


def _enum_size(node: dict[str, Any]) -> int:
    enum = node.get("enum")
    return len(enum) if isinstance(enum, list) else 0


def written_subschemas(schema: Any) -> Iterator[tuple[dict[str, Any], KeyPath, int]]:
    """Every subschema object written in `schema`, `$defs` included, `$ref`s not followed: each with its
    key path and its depth (the schema itself is 1)."""
    todo: list[tuple[Any, KeyPath, int]] = [(schema, (), 1)]
    while todo:
        node, path, depth = todo.pop()
        if isinstance(node, dict):
            yield node, path, depth
            todo.extend((child, (*path, *at), depth + 1) for child, _, at in _children(node, True))


def _written_depth_problem(schema: Any, bounds: SchemaBounds) -> CostProblem | None:
    """Subschemas written nested past `max_depth` anywhere, `$defs` included (a metaschema check recurses
    through them all)."""
    for _, path, depth in written_subschemas(schema):
        if depth > bounds.max_depth:
            return CostProblem(path, _depth_reason(bounds))
    return None


def _depth_reason(bounds: SchemaBounds) -> str:
    return (
        f"subschemas nest more than {bounds.max_depth} deep, counting each $ref followed "
        f"(limits.max_schema_depth: {bounds.max_depth} in kernel.yaml)"
    )


@dataclass
class _Step:
    """One subschema on the walk: where it is written, the resolver that resolves its `$ref`s, and
    whether the step into it went into the value."""

    node: Any
    path: KeyPath
    resolver: Any  # a referencing Resolver (not exported by the library)
    into: bool
    depth: int


def _mentions_refs(schema: Any) -> bool:
    """Whether any object in `schema` holds a `$ref`, `$dynamicRef` or `$recursiveRef` string."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(isinstance(node.get(keyword), str) for keyword in _REFS):
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


class _Expansion:
    """The walk of a schema as a validator applies it: subschemas in place and into the value, `$ref`s
    followed, each loop once.

    `specification` None: the schema holds no reference, so the walk needs no
    resolver (and `referencing` is not imported).
    """

    def __init__(self, schema: Any, bounds: SchemaBounds, specification: Any) -> None:
        self.bounds = bounds
        self.specification = specification
        self.remote = set(remote_refs(schema)) if specification is not None else set()
        self.nodes = 0
        self.on_path: dict[int, int] = {}  # id of a subschema on the current path → its place in `into`
        self.into: list[bool] = []
        self.root = self._resolver(schema) if specification is not None else None

    def _resolver(self, schema: Any) -> Any:
        from jsonschema_specifications import REGISTRY as SPECIFICATIONS

        resource = self.specification.create_resource(schema)
        uri = resource.id() or ""
        return SPECIFICATIONS.combine(local_refs()).with_resource(uri, resource).crawl().resolver(uri)

    def problem(self, schema: Any) -> CostProblem | None:
        todo: list[_Step | None] = [_Step(schema, (), self.root, False, 1)]
        while todo:
            step = todo.pop()
            if step is None:  # every subschema below the last one entered is done
                del self.on_path[next(reversed(self.on_path))]
                self.into.pop()
                continue
            found = self._enter(step, todo)
            if found is not None:
                return found
        return None

    def _enter(self, step: _Step, todo: list[_Step | None]) -> CostProblem | None:
        node = step.node
        self.nodes += 1 + (_enum_size(node) if isinstance(node, dict) else 0)
        if self.nodes > self.bounds.max_nodes:
            return CostProblem((), self._size_reason())
        if step.depth > self.bounds.max_depth:
            return CostProblem(step.path, _depth_reason(self.bounds))
        if not isinstance(node, dict):
            return None
        self.on_path[id(node)] = len(self.into)
        self.into.append(step.into)
        todo.append(None)
        for child, into, at in _children(node, False):
            resolver = (
                step.resolver.in_subresource(self.specification.create_resource(child))
                if step.resolver is not None
                else None
            )
            todo.append(_Step(child, (*step.path, *at), resolver, into, step.depth + 1))
        for keyword in _REFS:
            ref = node.get(keyword)
            if isinstance(ref, str):
                found = self._follow(keyword, ref, step, todo)
                if found is not None:
                    return found
        return None

    def _follow(self, keyword: str, ref: str, step: _Step, todo: list[_Step | None]) -> CostProblem | None:
        """Push the subschema `ref` names (once per loop); a loop not stepping into the value is refused."""
        from referencing.exceptions import Unresolvable
        from referencing.jsonschema import lookup_recursive_ref

        path = (*step.path, keyword)
        try:
            resolved = (
                lookup_recursive_ref(step.resolver)
                if keyword == "$recursiveRef"
                else step.resolver.lookup(ref)
            )
        except Unresolvable:
            if ref in self.remote:  # refused apart, naming it (schemas/refs.py); never fetched
                return None
            return CostProblem(path, f"$ref {ref!r} does not point to a part of the schema")
        place = self.on_path.get(id(resolved.contents))
        if place is None:
            written = _pointer_path(ref) or path
            todo.append(_Step(resolved.contents, written, resolved.resolver, False, step.depth + 1))
            return None
        if any(self.into[place + 1 :]):
            self.nodes += 1  # a loop through the value: it ends with the value
            return None
        return CostProblem(
            path,
            f"$ref {ref!r} leads back to a schema it is part of without going into the value: "
            "validating would never end",
        )

    def _size_reason(self) -> str:
        most = self.bounds.max_nodes
        return (
            f"is too complex to validate: with its $refs expanded it holds more than {most:,} subschemas "
            f"and enum values (limits.max_schema_nodes: {most:,} in kernel.yaml)"
        )


def _pointer_path(ref: str) -> KeyPath | None:
    """Where `#/$defs/a~1b/0` points, as a key path; None for any other reference."""
    if not ref.startswith("#/"):
        return None
    tokens = (unquote(token).replace("~1", "/").replace("~0", "~") for token in ref[2:].split("/"))
    return tuple(int(token) if token.isdigit() else token for token in tokens)


def cost_problem(schema: Any, bounds: SchemaBounds) -> CostProblem | None:
    """Why `schema` costs more to validate against than `bounds` allow, or None.

    Its JSON length, then how deep its subschemas are written, then the walk
    with every `$ref` followed: how many subschemas and `enum` values it
    holds, how deep they nest, and `$ref` loops that never end. A `$ref`
    that does not resolve inside the schema is refused too (one to another
    document is left to schemas/refs.py, which names it).
    """
    if json_length(schema, bounds.max_chars) is None:
        return CostProblem(
            (),
            f"is longer than {bounds.max_chars:,} characters of JSON "
            f"(limits.max_schema_chars: {bounds.max_chars:,} in kernel.yaml)",
        )
    found = _written_depth_problem(schema, bounds)
    if found is not None or not isinstance(schema, dict | bool):
        return found
    dialect = schema.get("$schema") if isinstance(schema, dict) else None
    if not isinstance(dialect, str) and not _mentions_refs(schema):
        return _Expansion(schema, bounds, None).problem(schema)  # 2020-12, nothing to resolve
    from referencing.jsonschema import DRAFT3, DRAFT202012, specification_with

    specification = specification_with(dialect if isinstance(dialect, str) else "", default=DRAFT202012)
    if specification is DRAFT3:
        return CostProblem(("$schema",), "draft-03 schemas are not supported (draft 2020-12 is the default)")
    return _Expansion(schema, bounds, specification).problem(schema)


def describe_cost(problem: CostProblem) -> str:
    """`at $defs.a.anyOf[0]: …`, or the reason alone for the whole schema."""
    return f"at {dotted(problem.path)}: {problem.reason}" if problem.path else problem.reason


__all__ = ["CostProblem", "SchemaBounds", "cost_problem", "describe_cost", "written_subschemas"]
