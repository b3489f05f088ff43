"""A quick yes for the plain `parameters` schemas most tools have, before jsonschema runs.

Most tool YAMLs declare an object of typed properties, some required, and
nothing else. For such a schema `plain_check` gives a function that says
whether a value certainly passes: an object, every required property there,
no property the schema forbids, each declared property of its declared
type. Its yes is jsonschema's; on its no (or for any other schema, which
gets None) the kernel validates as before (schemas/bounds.py), which finds
the errors and words them. Checking a plain schema this way costs a few
dictionary lookups where jsonschema's walk costs tens of microseconds a call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

PlainCheck = Callable[[Any], bool]

#: Keywords that say nothing about which values pass (2020-12 annotations).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated"})
_OBJECT_KEYWORDS = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}
_PROPERTY_KEYWORDS = _ANNOTATIONS | {"type"}


def _is_string(value: Any) -> bool:
    return isinstance(value, str)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:  # 1.0 is an integer to JSON Schema too: jsonschema decides that one
    return isinstance(value, int) and not isinstance(value, bool)


def _is_boolean(value: Any) -> bool:
    return isinstance(value, bool)


def _is_object(value: Any) -> bool:
    return isinstance(value, dict)


def _is_array(value: Any) -> bool:
    return isinstance(value, list)


def _is_null(value: Any) -> bool:
    return value is None


def _anything(value: Any) -> bool:
    return True


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": _is_string,
    "number": _is_number,
    "integer": _is_integer,
    "boolean": _is_boolean,
    "object": _is_object,
    "array": _is_array,
    "null": _is_null,
}


def plain_check(schema: Any) -> PlainCheck | None:
    """A function that is True only for values `schema` certainly accepts, for a plain object
    schema; None for every other schema."""
    if (
        not isinstance(schema, Mapping)
        or schema.get("type") != "object"
        or not schema.keys() <= _OBJECT_KEYWORDS
    ):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    others_allowed = schema.get("additionalProperties", True)
    if (
        not isinstance(properties, Mapping)
        or not isinstance(required, list)
        or not isinstance(others_allowed, bool)
    ):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    checks: dict[str, Callable[[Any], bool]] = {}
    for name, declared in properties.items():
        check = _property_check(declared)
        if check is None:
            return None
        checks[name] = check
    needed = tuple(required)

    def passes(value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        for name in needed:
            if name not in value:
                return False
        for name, item in value.items():
            check = checks.get(name)
            if check is None:
                if not others_allowed:
                    return False
            elif not check(item):
                return False
        return True

    return passes


def _property_check(declared: Any) -> Callable[[Any], bool] | None:
    """The type test of one property's schema: a `type` name and annotations, or nothing at all."""
    if declared is True or (isinstance(declared, Mapping) and not declared):
        return _anything
    if not isinstance(declared, Mapping) or not declared.keys() <= _PROPERTY_KEYWORDS:
        return None
    if "type" not in declared:
        return _anything
    kind = declared["type"]
    return _TYPES.get(kind) if isinstance(kind, str) else None


__all__ = ["PlainCheck", "plain_check"]
