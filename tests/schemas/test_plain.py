"""The quick yes for plain parameter schemas (schemas/plain.py): never a yes jsonschema would not give."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agentkernel.schemas.plain import plain_check

TYPES = ["string", "number", "integer", "boolean", "object", "array", "null"]
NAMES = ["a", "b", "text", "n"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(NAMES), inner, max_size=3),
    max_leaves=6,
)
property_schemas = st.one_of(
    st.builds(lambda kind: {"type": kind, "description": "d"}, st.sampled_from(TYPES)),
    st.just({}),
    st.just(True),
    st.just(False),
    st.builds(lambda kind: {"type": kind, "minLength": 1}, st.sampled_from(TYPES)),
    st.just({"type": ["string", "null"]}),
)
object_schemas = st.builds(
    lambda props, required, extra: {
        "type": "object",
        "properties": props,
        "required": required,
        **({} if extra is None else {"additionalProperties": extra}),
    },
    st.dictionaries(st.sampled_from(NAMES), property_schemas, max_size=3),
    st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
    st.sampled_from([None, True, False]),
)


@settings(max_examples=400, deadline=None)
@given(object_schemas, st.dictionaries(st.sampled_from(NAMES), json_values, max_size=4) | json_values)
def test_a_quick_yes_is_jsonschemas_yes(schema: dict[str, Any], value: Any) -> None:
    check = plain_check(schema)
    if check is not None and check(value):
        assert Draft202012Validator(schema).is_valid(value), (schema, value)


def test_the_usual_tool_schema_is_checked_quickly() -> None:
    schema = {
        "type": "object",
        "description": "args",
        "properties": {"text": {"type": "string", "description": "the text"}, "n": {"type": "integer"}},
        "required": ["text"],
    }
    check = plain_check(schema)
    assert check is not None
    assert check({"text": "hi"}) and check({"text": "hi", "n": 3, "other": [1]})
    assert not check({"n": 3})  # required missing: jsonschema words the error
    assert not check({"text": 1}) and not check({"text": "x", "n": True}) and not check(["text"])
    assert not check({"text": "x", "n": 1.0})  # an integer to JSON Schema too: jsonschema decides


def test_closed_objects_refuse_what_they_do_not_declare() -> None:
    check = plain_check({"type": "object", "properties": {"a": {}}, "additionalProperties": False})
    assert check is not None
    assert check({"a": [1, {"x": None}]}) and not check({"a": 1, "b": 2})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}},
        {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"a": False}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "minProperties": 1},
        {"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"},
        {"type": ["object", "null"]},
        {"properties": {"a": {"type": "string"}}},
        {"type": "object", "required": "a"},
        True,
    ],
)
def test_other_schemas_get_no_quick_check(schema: Any) -> None:
    assert plain_check(schema) is None
