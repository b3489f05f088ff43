"""Telling, without jsonschema, that a value or a schema is valid, when both are plain.

Most documents the kernel checks are valid and most schemas are plain:
`type`, `properties`, `required`, `enum`, `items` and a few bounds. Proving
those valid here lets a command that reads a project and runs one tool leave
jsonschema (and `referencing`, its specifications, `attrs`) unimported. The
answers are one-sided: True means jsonschema (Draft 2020-12, no format
checker) finds no error, for certain; False means "ask jsonschema", which
then gives the verdict and the error texts as ever. So a keyword this module
does not know in full (`$ref`, `pattern`, `oneOf`, `not`, …) makes it answer
False, never guess.

`strict` is the kernel's own YAML's type checker (config/schema.py): an
integer is never a float, and NaN is no number; its validator matches
`pattern` with Python's `re` as jsonschema does, so only there is a pattern
matched here (a tool's arguments match with `regex`, under a deadline:
schemas/bounds.py). The walk gives up (False)
past MAX_STEPS subschema applications, so a large value is left to the
bounded validator (schemas/bounds.py) and its deadline.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

MAX_STEPS = 10_000
"""Subschema applications one check may take before it leaves the verdict to jsonschema."""

# the keywords jsonschema's Draft 2020-12 validator acts on (its VALIDATORS; tests/schemas hold it equal);
# any other key is an annotation it ignores
ACTING = frozenset(
    {
        "$dynamicRef",
        "$ref",
        "additionalProperties",
        "allOf",
        "anyOf",
        "const",
        "contains",
        "dependentRequired",
        "dependentSchemas",
        "enum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "if",
        "items",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "multipleOf",
        "not",
        "oneOf",
        "pattern",
        "patternProperties",
        "prefixItems",
        "properties",
        "propertyNames",
        "required",
        "type",
        "unevaluatedItems",
        "unevaluatedProperties",
        "uniqueItems",
    }
)


class _Unsure(Exception):
    """The walk met what it cannot decide: the answer is False."""


def _is_number(value: object, strict: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not (strict and isinstance(value, float) and math.isnan(value))


def _is_type(value: object, name: object, strict: bool) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "number":
        return _is_number(value, strict)
    if name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (not strict and isinstance(value, float) and value.is_integer())
    raise _Unsure


def _same(a: object, b: object) -> bool:
    """Equal as `enum` and `const` compare (1 and 1.0 alike, true and 1 not); False when unsure."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return False


class _Walk:
    """One check of a value against a schema, counting its steps."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.steps = 0

    def valid(self, schema: object, value: object) -> None:
        """Return when `value` surely satisfies `schema`; raise _Unsure otherwise."""
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _Unsure
        if schema is True:
            return
        if not isinstance(schema, dict):
            raise _Unsure
        for keyword, rule in schema.items():
            if keyword in ACTING:
                self._keyword(keyword, rule, schema, value)
            elif (
                isinstance(keyword, str) and keyword.startswith("$") and keyword not in ("$comment", "$defs")
            ):
                raise _Unsure  # $schema, $id, $anchor…: another dialect or a target of references

    def _keyword(self, keyword: str, rule: Any, schema: dict[str, Any], value: object) -> None:
        check = _KEYWORDS.get(keyword)
        if check is None:
            raise _Unsure
        if not check(self, rule, schema, value):
            raise _Unsure

    # -- the keywords, each True when it surely holds ---------------------------------------------

    def type_(self, rule: Any, _: dict[str, Any], value: object) -> bool:
        names = rule if isinstance(rule, list) else [rule]
        return any(_is_type(value, name, self.strict) for name in names)

    def properties(self, rule: Any, _: dict[str, Any], value: object) -> bool:
        if not isinstance(value, dict):
            return True
        if not isinstance(rule, dict):
            return False
        for name, sub in rule.items():
            if name in value:
                self.valid(sub, value[name])
        return True

    def additional(self, rule: Any, schema: dict[str, Any], value: object) -> bool:
        if not isinstance(value, dict):
            return True
        if "patternProperties" in schema:
            return False
        named = schema.get("properties", {})
        if not isinstance(named, dict):
            return False
        extra = [key for key in value if key not in named]
        if rule is False:
            return not extra
        for key in extra:
            self.valid(rule, value[key])
        return True

    def required(self, rule: Any, _: dict[str, Any], value: object) -> bool:
        if not isinstance(value, dict):
            return True
        return isinstance(rule, list) and all(isinstance(n, str) and n in value for n in rule)

    def items(self, rule: Any, schema: dict[str, Any], value: object) -> bool:
        if not isinstance(value, list):
            return True
        if "prefixItems" in schema:
            return False
        for item in value:
            self.valid(rule, item)
        return True

    def enum(self, rule: Any, _: dict[str, Any], value: object) -> bool:
        return isinstance(rule, list) and any(_same(value, option) for option in rule)

    def const(self, rule: Any, _: dict[str, Any], value: object) -> bool:
        return _same(value, rule)

    def all_of(self, rule: Any, _: dict[str, Any], value: object) -> bool:
        if not isinstance(rule, list) or not rule:
            return False
        for branch in rule:
            self.valid(branch, value)
        return True

    def pattern(self, rule: Any, _: dict[str, Any], value: object) -> bool:
        if not isinstance(value, str):
            return True
        if not self.strict or not isinstance(rule, str):
            return False
        try:
            return re.search(rule, value) is not None
        except re.error:
            return False

    def property_names(self, rule: Any, _: dict[str, Any], value: object) -> bool:
        if isinstance(value, dict):
            for name in value:
                self.valid(rule, name)
        return True

    def format_(self, rule: Any, _: dict[str, Any], value: object) -> bool:
        return True  # an annotation: the kernel's validators run no format checker

    def bound(self, rule: Any, schema: dict[str, Any], value: object, keyword: str) -> bool:
        if not _is_number(rule, strict=False):
            return False
        if keyword in ("minLength", "maxLength"):
            size: Any = len(value) if isinstance(value, str) else None
        elif keyword in ("minItems", "maxItems"):
            size = len(value) if isinstance(value, list) else None
        elif keyword in ("minProperties", "maxProperties"):
            size = len(value) if isinstance(value, dict) else None
        elif _is_number(value, self.strict):
            size = value  # compared as jsonschema compares (NaN fails every comparison: unsure)
        else:
            size = None
        if size is None:
            return True  # the keyword applies to another type
        return bool(_BOUNDS[keyword](size, rule))

    def unique(self, rule: Any, _: dict[str, Any], value: object) -> bool:
        if rule is False or not isinstance(value, list):
            return rule is False or rule is True
        return rule is True and all(isinstance(v, str) for v in value) and len(set(value)) == len(value)


def _bound(keyword: str) -> Any:
    return lambda walk, rule, schema, value: walk.bound(rule, schema, value, keyword)


_BOUNDS = {
    "minLength": lambda size, rule: size >= rule,
    "maxLength": lambda size, rule: size <= rule,
    "minItems": lambda size, rule: size >= rule,
    "maxItems": lambda size, rule: size <= rule,
    "minProperties": lambda size, rule: size >= rule,
    "maxProperties": lambda size, rule: size <= rule,
    "minimum": lambda size, rule: size >= rule,
    "maximum": lambda size, rule: size <= rule,
    "exclusiveMinimum": lambda size, rule: size > rule,
    "exclusiveMaximum": lambda size, rule: size < rule,
}

_KEYWORDS: dict[str, Any] = {
    "type": _Walk.type_,
    "properties": _Walk.properties,
    "additionalProperties": _Walk.additional,
    "required": _Walk.required,
    "items": _Walk.items,
    "enum": _Walk.enum,
    "const": _Walk.const,
    "allOf": _Walk.all_of,
    "format": _Walk.format_,
    "pattern": _Walk.pattern,
    "propertyNames": _Walk.property_names,
    "uniqueItems": _Walk.unique,
    **{keyword: _bound(keyword) for keyword in _BOUNDS},
}


# keys jsonschema ignores that tool YAML commonly writes beside `type`
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "deprecated"})
_TYPED = frozenset({"type"}) | _ANNOTATIONS
_OBJECT_KEYS = frozenset({"properties", "required"}) | _TYPED
_PLAN_CACHE = 512  # schemas whose plans are kept (tools' parameters: a project has tens)
Plan = Callable[[object], bool]
_plans: dict[tuple[int, bool], tuple[object, Plan | None]] = {}


def _plan(schema: object, strict: bool) -> Plan | None:
    """The schema as one test, made once, when it is the usual shape of a tool's parameters —
    an object of named properties of simple types, some required — else None (the walk)."""
    key = (id(schema), strict)
    known = _plans.get(key)
    if known is not None and known[0] is schema:
        return known[1]
    plan = _object_plan(schema, strict)
    if len(_plans) >= _PLAN_CACHE:
        _plans.clear()
    _plans[key] = (schema, plan)  # the schema held: its id is not reused while it is here
    return plan


def _object_plan(schema: object, strict: bool) -> Plan | None:
    if not (isinstance(schema, dict) and schema.get("type") == "object" and schema.keys() <= _OBJECT_KEYS):
        return None
    properties, required = schema.get("properties", {}), schema.get("required", [])
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    typed: list[tuple[str, str]] = []
    for name, sub in properties.items():
        kind = sub.get("type") if isinstance(sub, dict) and sub.keys() <= _TYPED else None
        if not (isinstance(kind, str) and kind in _SIMPLE_TYPES):
            return None
        typed.append((name, kind))

    def valid(value: object) -> bool:
        if not isinstance(value, dict):
            return False
        for name in required:
            if name not in value:
                return False
        for name, kind in typed:  # noqa: SIM110 - a loop: no generator made at every call
            if name in value and not _is_type(value[name], kind, strict):
                return False
        return True

    return valid


def surely_valid(schema: object, value: object, *, strict: bool = False) -> bool:
    """True only when jsonschema (Draft 2020-12, no format checker) finds `value` valid against `schema`;
    False when it may not, or when this module cannot tell."""
    plan = _plan(schema, strict)
    if plan is not None:
        return plan(value)
    try:
        _Walk(strict).valid(schema, value)
    except (_Unsure, RecursionError):
        return False
    return True


# -- schemas: what the 2020-12 metaschema allows ----------------------------------------------------------

_SIMPLE_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})


def _count(value: object) -> bool:
    """A nonNegativeInteger of the metaschema (a float such as 1.0 is left to jsonschema)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _types(value: object) -> bool:
    if isinstance(value, str):
        return value in _SIMPLE_TYPES
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, str) and v in _SIMPLE_TYPES for v in value)
        and len(set(value)) == len(value)
    )


def _strings(value: object) -> bool:
    return (
        isinstance(value, list) and all(isinstance(v, str) for v in value) and len(set(value)) == len(value)
    )


def _finite(value: object) -> bool:
    return _is_number(value, strict=False) and math.isfinite(value)  # type: ignore[arg-type]


# a keyword → the check of its value, for the keywords whose value is no subschema
_VALUES: dict[str, Any] = {
    "type": _types,
    "enum": lambda v: isinstance(v, list),
    "const": lambda v: True,
    "required": _strings,
    "multipleOf": lambda v: _finite(v) and v > 0,
    **{k: _finite for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")},
    **{
        k: _count
        for k in (
            "minLength",
            "maxLength",
            "minItems",
            "maxItems",
            "minProperties",
            "maxProperties",
            "minContains",
            "maxContains",
        )
    },
    "uniqueItems": lambda v: isinstance(v, bool),
    **{k: lambda v: isinstance(v, str) for k in ("title", "description", "format", "$comment")},
    **{k: lambda v: isinstance(v, str) for k in ("contentEncoding", "contentMediaType")},
    **{k: lambda v: isinstance(v, bool) for k in ("deprecated", "readOnly", "writeOnly")},
    "default": lambda v: True,
    "examples": lambda v: isinstance(v, list),
}
_NOT_WALKED = frozenset({"$defs", "patternProperties"})
"""Maps of subschemas whose check is left to jsonschema (the walk answers False on them)."""


def surely_a_schema(schema: object, keywords: Mapping[str, str]) -> bool:
    """True only when jsonschema's 2020-12 metaschema check (`check_schema`) passes `schema`; False when
    it may not, or when this module cannot tell.

    `keywords` are the 2020-12 keywords and the shape of each one's value (schemas/parameters.py
    KEYWORDS): a key that is none of them is an unknown keyword, which the metaschema allows.
    """
    todo: list[object] = [schema]
    steps = 0
    while todo:
        node = todo.pop()
        steps += 1
        if steps > MAX_STEPS:
            return False
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            return False
        for keyword, value in node.items():
            if keyword not in keywords:
                continue
            shape = "value" if keyword in _NOT_WALKED else keywords[keyword]
            if shape == "schema":
                todo.append(value)
            elif shape == "array":
                if not isinstance(value, list) or not value:
                    return False
                todo.extend(value)
            elif shape == "map":
                if not isinstance(value, dict):
                    return False
                todo.extend(value.values())
            else:
                check = _VALUES.get(keyword)
                if check is None or not check(value):
                    return False
    return True


__all__ = ["ACTING", "MAX_STEPS", "surely_a_schema", "surely_valid"]
