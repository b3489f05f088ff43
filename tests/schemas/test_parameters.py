"""schemas/parameters.py: its keyword table is the 2020-12 metaschema's (issue 31 wrote it out)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema_specifications import REGISTRY

from agentkernel.schemas.parameters import KEYWORDS, describe, parameters_problem

_SUBSCHEMA = {"$dynamicRef": "#meta"}
_SCHEMA_ARRAY = {"$ref": "#/$defs/schemaArray"}


def _metaschema_shapes() -> dict[str, str]:
    """Every keyword of the metaschema and its vocabularies → how its value holds subschemas."""
    meta = Draft202012Validator.META_SCHEMA
    base = str(meta["$id"]).rsplit("/", 1)[0]
    vocabularies = [meta, *(REGISTRY[f"{base}/{part['$ref']}"].contents for part in meta["allOf"])]
    shapes: dict[str, str] = {}
    for vocabulary in vocabularies:
        for keyword, rule in vocabulary.get("properties", {}).items():
            if rule == _SUBSCHEMA:
                shapes[keyword] = "schema"
            elif rule == _SCHEMA_ARRAY:
                shapes[keyword] = "array"
            elif isinstance(rule, Mapping) and rule.get("additionalProperties") == _SUBSCHEMA:
                shapes[keyword] = "map"
            else:
                shapes[keyword] = "value"
    return shapes


def test_keywords_are_the_metaschemas() -> None:
    assert _metaschema_shapes() == KEYWORDS


def _problem(schema: Any) -> str | None:
    found = parameters_problem(schema)
    return describe(found) if found is not None else None


def test_a_schema_plain_or_not_gets_the_metaschemas_verdict() -> None:
    """A schema schemas/plain.py cannot vouch for is still checked by jsonschema, with its texts."""
    assert _problem({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}}) is None
    assert _problem({"type": "object", "properties": {"a": {"type": "strin"}}}) == (
        "parameters.properties.a.type: not a valid JSON Schema: 'strin' is not valid under any of the given"
        " schemas; did you mean 'string'?"
    )
    assert _problem({"type": "object", "properties": {"a": {"minLength": -1}}}) == (
        "parameters.properties.a.minLength: not a valid JSON Schema: -1 is less than the minimum of 0"
    )
