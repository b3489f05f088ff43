"""schemas/plain.py: a value or schema it calls valid, jsonschema finds valid too (issue 31).

Its answers are one-sided, so these tests check the one side on many pairs:
every schema the kernel checks its own YAML, a tool's arguments and a visual
block with, against the shipped documents and hundreds of their mutations
(wrong types, missing and unknown keys, 1 for true, 1.0 for 1, NaN, …): where
`surely_valid` says True, jsonschema (the strict validator, the standard one
and the bounded one) finds no error. And it must say True for the shipped
documents, or the start-up gain is gone.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agentkernel.builtins import __file__ as builtins_init
from agentkernel.config.kernel_yaml import KERNEL_SCHEMA
from agentkernel.config.schema import _strict_class
from agentkernel.config.scripts import _SCHEMAS
from agentkernel.config.sections import SECTIONS
from agentkernel.config.templates import _TEMPLATE_SCHEMA
from agentkernel.schemas import plain
from agentkernel.schemas.bounds import bounded_errors, bounded_validator
from agentkernel.schemas.parameters import KEYWORDS
from agentkernel.schemas.plain import ACTING, MAX_STEPS, surely_a_schema, surely_valid
from agentkernel.tools.visual import BLOCK_SCHEMAS
from tests.conftest import REPO

BUILTINS = Path(builtins_init).parent
REPLACEMENTS: list[Any] = [None, True, False, 0, 1, 1.0, 1.5, -1, "", "x", [], [1], {}, {"zz": 1}, math.nan]


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _script_yamls() -> list[Path]:
    return sorted([*(REPO / "config" / "scripts").rglob("*.yaml"), *BUILTINS.rglob("*.yaml")])


def _own_pairs() -> list[tuple[str, dict[str, Any], Any]]:
    """(name, schema, document) of every shipped YAML, with the schema the kernel checks it with."""
    pairs = [("kernel.yaml", KERNEL_SCHEMA, _load(REPO / "config" / "kernel.yaml"))]
    for path in _script_yamls():
        document = _load(path)
        pairs.append((path.name, _SCHEMAS[document["kind"]], document))
    for path in sorted((REPO / "config" / "templates").glob("*.yaml")):
        pairs.append((path.name, _TEMPLATE_SCHEMA, _load(path)))
    kernel = _load(REPO / "config" / "kernel.yaml")
    for name, schema in SECTIONS.items():
        whole = {"type": "object", "properties": {name: schema}}
        pairs.append((f"section {name}", whole, {name: kernel.get(name) or {}}))
    return pairs


def _mutations(value: Any, most: int = 400) -> Iterator[Any]:
    """`value` with one part replaced, removed or added to, at every path (up to `most` variants)."""
    made = 0
    for path in _paths(value):
        for variant in _variants_at(value, path):
            yield variant
            made += 1
            if made >= most:
                return


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*at, index))


def _variants_at(value: Any, path: tuple[Any, ...]) -> Iterator[Any]:
    for replacement in REPLACEMENTS:
        yield _replaced(value, path, replacement)
    target = _at(value, path)
    if isinstance(target, dict):
        for key in list(target)[:5]:
            changed = copy.deepcopy(value)
            del _at(changed, path)[key]
            yield changed
        changed = copy.deepcopy(value)
        _at(changed, path)["unknown_key"] = 1
        yield changed
    if isinstance(target, list) and target:
        changed = copy.deepcopy(value)
        _at(changed, path).append(copy.deepcopy(target[0]))  # a duplicate item
        yield changed
    if isinstance(target, str):
        yield _replaced(value, path, target + "?")


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def _replaced(value: Any, path: tuple[Any, ...], replacement: Any) -> Any:
    if not path:
        return copy.deepcopy(replacement)
    changed = copy.deepcopy(value)
    _at(changed, path[:-1])[path[-1]] = copy.deepcopy(replacement)
    return changed


def _tool_parameters() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in _script_yamls():
        document = _load(path)
        if isinstance(document.get("parameters"), dict):
            found.append((path.name, document["parameters"]))
    return found


def _sample_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that fill every declared property with a value of its first type."""
    samples = {"string": "a b", "integer": 2, "number": 2.5, "boolean": True, "array": [], "object": {}}
    args: dict[str, Any] = {}
    for name, sub in schema.get("properties", {}).items():
        kind = sub.get("type")
        kind = kind[0] if isinstance(kind, list) else kind
        if "enum" in sub:
            args[name] = sub["enum"][0]
        elif kind in samples:
            args[name] = samples[kind]
    return args


# -- the keyword lists are jsonschema's -------------------------------------------------------------------


def test_acting_keywords_are_jsonschemas() -> None:
    assert set(Draft202012Validator.VALIDATORS) == ACTING


# -- values ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "schema", "document"), _own_pairs(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_the_shipped_yaml_is_surely_valid(name: str, schema: dict[str, Any], document: Any) -> None:
    assert surely_valid(schema, document, strict=True), name


@pytest.mark.parametrize(
    ("name", "schema", "document"), _own_pairs(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_whatever_is_surely_valid_the_strict_validator_finds_valid(
    name: str, schema: dict[str, Any], document: Any
) -> None:
    real = _strict_class()(schema)
    said_valid = 0
    for variant in _mutations(document):
        if surely_valid(schema, variant, strict=True):
            said_valid += 1
            assert not list(real.iter_errors(variant)), (name, variant)
    assert said_valid > 0  # some mutations stay valid (an unknown key where any is allowed, another string…)


@pytest.mark.parametrize(
    ("name", "schema"), _tool_parameters(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_arguments_surely_valid_are_valid_for_the_bounded_validator(
    name: str, schema: dict[str, Any]
) -> None:
    args = _sample_arguments(schema)
    bounded = bounded_validator(schema, Draft202012Validator)
    assert surely_valid(schema, args) == (not bounded_errors(bounded, args, None, 10)), (name, args)
    for variant in _mutations(args):
        if surely_valid(schema, variant):
            assert not bounded_errors(bounded, variant, None, 10), (name, variant)
            assert not list(Draft202012Validator(schema).iter_errors(variant)), (name, variant)


@pytest.mark.parametrize("kind", sorted(BLOCK_SCHEMAS))
def test_visual_blocks_surely_valid_are_valid(kind: str) -> None:
    blocks: dict[str, dict[str, Any]] = {
        "text": {"type": "text", "text": "a"},
        "table": {"type": "table", "columns": [{"key": "a", "title": "A"}], "rows": [{"a": 1}]},
        "chart": {"type": "chart", "chart": "bar", "labels": ["a"], "series": [{"data": [1, None]}]},
        "file": {"type": "file", "name": "a.txt", "path": "a.txt"},
    }
    block = blocks[kind]
    assert surely_valid(BLOCK_SCHEMAS[kind], block)
    for variant in [block, *_mutations(block)]:
        if surely_valid(BLOCK_SCHEMAS[kind], variant):
            assert not list(Draft202012Validator(BLOCK_SCHEMAS[kind]).iter_errors(variant)), variant


@pytest.mark.parametrize(
    ("schema", "value", "strict"),
    [
        ({"enum": [1]}, True, False),  # true is not 1
        ({"const": False}, 0, False),
        ({"enum": ["a"]}, ["a"], False),
        ({"type": "integer"}, 1.0, True),  # the kernel's own YAML: 1.0 is no integer
        ({"type": "number"}, math.nan, True),
        ({"type": "number"}, True, False),
        ({"type": "object", "required": ["a"]}, {}, False),
        ({"type": "object", "additionalProperties": False, "properties": {"a": {}}}, {"b": 1}, False),
        ({"properties": {"a": {"type": "string"}}}, {"a": 1}, False),
        ({"items": {"type": "string"}}, ["a", 1], False),
        ({"uniqueItems": True}, ["a", "a"], False),
        ({"maxLength": 2}, "abc", False),
        ({"minimum": 1}, 0, False),
        ({"exclusiveMaximum": 1}, 1, False),
        ({"maxProperties": 0}, {"a": 1}, False),
        ({"allOf": [{"type": "string"}, {"minLength": 5}]}, "abc", False),
        ({"propertyNames": {"maxLength": 1}}, {"ab": 1}, False),
        ({"pattern": "^a"}, "b", True),
        # the usual shape of a tool's parameters, tested as one plan
        (
            {"type": "object", "properties": {"n": {"type": "integer", "description": "d"}}},
            {"n": True},
            False,
        ),
        ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 1.5}, False),
        ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 1.0}, True),
        ({"type": "object", "properties": {"t": {"type": "string"}}, "required": ["t"]}, {}, False),
        ({"type": "object", "properties": {"t": {"type": "string"}}, "required": ["t"]}, {"t": None}, False),
        ({"type": "object", "properties": {"t": {"type": "string"}}}, ["t"], False),
        ({"type": "object", "properties": {"x": {"type": "number"}}}, {"x": math.nan}, True),
    ],
)
def test_invalid_values_are_never_surely_valid(schema: dict[str, Any], value: Any, strict: bool) -> None:
    assert list(_validator(schema, strict).iter_errors(value))  # jsonschema: invalid
    assert not surely_valid(schema, value, strict=strict)


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"},
        {"oneOf": [{"type": "string"}]},
        {"anyOf": [{"type": "string"}]},
        {"not": {"type": "number"}},
        {"if": {"type": "string"}, "then": {"minLength": 1}},
        {"pattern": "^a"},  # a tool's arguments match with `regex`: left to the bounded validator
        {"prefixItems": [{"type": "string"}]},
        {"multipleOf": 2},
        {"unevaluatedProperties": False},
    ],
)
def test_what_it_does_not_know_it_leaves_to_jsonschema(schema: dict[str, Any]) -> None:
    assert not surely_valid(schema, "a")


def test_a_large_value_is_left_to_the_bounded_validator() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    assert surely_valid(schema, ["a"] * 10)
    assert not surely_valid(schema, ["a"] * (MAX_STEPS + 1))


def _validator(schema: dict[str, Any], strict: bool) -> Any:
    return _strict_class()(schema) if strict else Draft202012Validator(schema)


# -- schemas --------------------------------------------------------------------------------------------


def _metaschema_valid(schema: Any) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return False
    return True


@pytest.mark.parametrize(
    ("name", "schema"), _tool_parameters(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_schemas_surely_valid_pass_the_metaschema(name: str, schema: dict[str, Any]) -> None:
    assert surely_a_schema(schema, KEYWORDS), name  # the shipped tools load without jsonschema
    said_valid = 0
    for variant in _mutations(schema, most=600):
        if surely_a_schema(variant, KEYWORDS):
            said_valid += 1
            assert _metaschema_valid(variant), (name, variant)
    assert said_valid > 0


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "strin"},
        {"type": ["string", "string"]},
        {"type": []},
        {"required": ["a", "a"]},
        {"required": "a"},
        {"minLength": -1},
        {"minLength": 1.5},
        {"maxItems": True},
        {"properties": {"a": 1}},
        {"properties": []},
        {"allOf": []},
        {"items": "string"},
        {"enum": "a"},
        {"multipleOf": 0},
        {"uniqueItems": 1},
        {"description": 5},
        {"examples": {}},
        {"deprecated": "no"},
        {"pattern": "("},
        {"$ref": 5},
        {"$id": 5},
    ],
)
def test_invalid_schemas_are_never_surely_schemas(schema: dict[str, Any]) -> None:
    assert not _metaschema_valid(schema)
    assert not surely_a_schema(schema, KEYWORDS)


def test_a_tools_usual_parameters_are_checked_by_one_plan_made_once() -> None:
    schema = {
        "type": "object",
        "description": "what the tool takes",
        "properties": {"text": {"type": "string", "title": "Text"}, "n": {"type": "integer"}},
        "required": ["text"],
    }
    assert surely_valid(schema, {"text": "a"}) and surely_valid(schema, {"text": "a", "n": 2, "other": []})
    assert not surely_valid(schema, {"text": "a", "n": "2"})
    plan = plain._plan(schema, False)
    assert plan is not None and plain._plan(schema, False) is plan  # made once, for this schema object
    for unusual in (
        {**schema, "additionalProperties": False},  # each of these: the walk, as before
        {**schema, "properties": {"text": {"type": "string", "minLength": 1}}},
        {**schema, "properties": {"text": {"type": ["string", "null"]}}},
        {**schema, "required": "text"},
    ):
        assert plain._plan(unusual, False) is None
