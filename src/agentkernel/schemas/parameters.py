"""A tool's `parameters`: a JSON Schema (Draft 2020-12) that describes an object.

The schema is what the LLM is shown and what every call is validated
against (S2.1, S2.5), so a mistake in it fails quietly for ever after: a
misspelt keyword (`requried`, `propertes`) is an unknown keyword, which JSON
Schema ignores, and a `required` name missing from `properties` is a field
the LLM is never told about. This module finds those at load time.

Which keywords exist and where subschemas sit is the 2020-12 metaschema's
(KEYWORDS, held equal to it by a test), so the walk knows every keyword the
validator knows. jsonschema checks a schema against the metaschema only when
schemas/plain.py cannot tell it is valid: a plain one loads without it.
Unknown keywords that are not near misses (`x-ui`, `order`) stay allowed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agentkernel.schemas.bounds import SchemaBounds, schema_problem
from agentkernel.schemas.plain import surely_a_schema
from agentkernel.schemas.refs import remote_refs_problem
from agentkernel.schemas.type_names import type_hint
from agentkernel.util.near_miss import close_match, did_you_mean
from agentkernel.util.yaml_source import KeyPath, dotted

_SCHEMA_KEYWORDS = [
    "items",
    "contains",
    "additionalProperties",
    "propertyNames",
    "if",
    "then",
    "else",
    "not",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
]
_VALUE_KEYWORDS = [
    "dependencies",
    "$recursiveAnchor",
    "$recursiveRef",
    "$id",
    "$schema",
    "$ref",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "$comment",
    "type",
    "const",
    "enum",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
    "format",
    "contentEncoding",
    "contentMediaType",
]
KEYWORDS: dict[str, str] = {
    **dict.fromkeys(("definitions", "$defs", "properties", "patternProperties", "dependentSchemas"), "map"),
    **dict.fromkeys(("prefixItems", "allOf", "anyOf", "oneOf"), "array"),
    **dict.fromkeys(_SCHEMA_KEYWORDS, "schema"),
    **dict.fromkeys(_VALUE_KEYWORDS, "value"),
}
"""Every 2020-12 keyword → `schema`, `array` (of schemas), `map` (name → schema) or `value`: as read off
the metaschema and its vocabularies (tests/schemas/test_parameters.py reads them and holds this equal),
written out so that loading a tool needs no jsonschema."""


@dataclass(frozen=True)
class SchemaProblem:
    """What is wrong and where, as a key path inside `parameters`."""

    path: KeyPath
    reason: str


def _children(schema: Mapping[str, Any], at: KeyPath) -> Iterator[tuple[object, KeyPath]]:
    """The subschemas of `schema`, each with its path; odd shapes are the metaschema's to report."""
    for keyword, value in schema.items():
        shape = KEYWORDS.get(keyword)
        if shape == "schema":
            yield value, (*at, keyword)
        elif shape == "array" and isinstance(value, list):
            yield from ((item, (*at, keyword, i)) for i, item in enumerate(value))
        elif shape == "map" and isinstance(value, Mapping):
            yield from ((item, (*at, keyword, name)) for name, item in value.items())


def _subschemas(schema: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], KeyPath]]:
    """Every schema object in `schema`, itself first, breadth first, each with its path."""
    todo: deque[tuple[object, KeyPath]] = deque([(schema, ())])
    while todo:
        node, at = todo.popleft()
        if isinstance(node, Mapping):
            yield node, at
            todo.extend(_children(node, at))


def _misspelt_keywords(schema: Mapping[str, Any]) -> SchemaProblem | None:
    """The first keyword, anywhere in the schema, that is a near miss of a 2020-12 keyword."""
    for node, at in _subschemas(schema):
        for key in node:
            match = close_match(str(key), set(KEYWORDS) - set(node)) if key not in KEYWORDS else None
            if match is not None:
                return SchemaProblem((*at, key), f"unknown keyword; did you mean {match!r}?")
    return None


def _too_costly(schema: Mapping[str, Any], bounds: SchemaBounds) -> SchemaProblem | None:
    """Too big or complex to validate calls against within `bounds`, or a pattern the kernel cannot run
    (schemas/bounds.py): checked before the metaschema, whose check recurses through it."""
    problem = schema_problem(dict(schema), bounds)
    if problem is None:
        return None
    reason = f"the schema {problem.reason}" if not problem.path else problem.reason
    return SchemaProblem(problem.path, reason)


def _not_a_schema(schema: Mapping[str, Any]) -> SchemaProblem | None:
    if surely_a_schema(schema, KEYWORDS):
        return None
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        at = tuple(exc.absolute_path)
        hint = type_hint(exc.instance) if at and at[-1] == "type" else ""
        return SchemaProblem(at, f"not a valid JSON Schema: {exc.message}{hint}")
    return None


def _remote_refs(schema: Mapping[str, Any]) -> SchemaProblem | None:
    """A `$ref` to another document: the kernel never fetches one (schemas/refs.py)."""
    problem = remote_refs_problem(schema)
    return SchemaProblem((), problem) if problem is not None else None


def _not_an_object(schema: Mapping[str, Any]) -> SchemaProblem | None:
    kind = schema.get("type")
    if kind == "object":
        return None
    if kind is None:
        return SchemaProblem((), "needs `type: object`: a tool's arguments are a JSON object")
    return SchemaProblem(("type",), f"must be 'object' (a tool's arguments are a JSON object), not {kind!r}")


def _required_not_declared(schema: Mapping[str, Any]) -> SchemaProblem | None:
    """A name in `required` that `properties` lacks, at the top and in every object that has both."""
    for node, at in _subschemas(schema):
        required, properties = node.get("required"), node.get("properties")
        if not isinstance(required, list) or (at and not isinstance(properties, Mapping)):
            continue
        declared = list(properties or {})
        for index, name in enumerate(required):
            if name not in declared:
                listed = ", ".join(map(str, declared)) or "none"
                hint = did_you_mean(name, declared)
                reason = f"{name!r} is not in properties (properties: {listed}){hint}"
                return SchemaProblem((*at, "required", index), reason)
    return None


def parameters_problem(schema: object, bounds: SchemaBounds | None = None) -> SchemaProblem | None:
    """The first thing wrong with a tool's `parameters` schema, or None when it is sound.

    `bounds` are the kernel's `limits.max_schema_*` (the defaults without one).
    """
    if not isinstance(schema, Mapping):
        return SchemaProblem((), f"must be a JSON Schema object, not {type(schema).__name__}")
    return (
        _misspelt_keywords(schema)
        or _too_costly(schema, bounds or SchemaBounds())
        or _not_a_schema(schema)
        or _remote_refs(schema)
        or _not_an_object(schema)
        or _required_not_declared(schema)
    )


def describe(problem: SchemaProblem) -> str:
    """`parameters.properties.q.requried: unknown keyword; …`"""
    return f"{dotted(('parameters', *problem.path))}: {problem.reason}"


__all__ = ["KEYWORDS", "SchemaProblem", "describe", "parameters_problem"]
