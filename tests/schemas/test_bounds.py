"""schemas/bounds.py: validation that ends by its deadline, keeps few errors, and never runs Python's `re`.

Freezes of a whole server (another user's /healthz) are measured in
tests/server/test_schema_freezes.py; these are the module's own promises.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import pytest
from jsonschema import Draft202012Validator, exceptions

from agentkernel.schemas.bounds import (
    MAX_MESSAGE_CHARS,
    SchemaBounds,
    ValidationStopped,
    bounded_errors,
    bounded_validator,
    schema_problem,
)
from tests.schemas.conftest import nested_any_of


def errors(schema: Any, instance: Any, secs: float | None = None) -> list[str]:
    deadline = None if secs is None else time.monotonic() + secs
    return [e.message for e in bounded_errors(bounded_validator(schema), instance, deadline, 20)]


def test_a_backtracking_pattern_stops_at_the_deadline() -> None:
    with pytest.raises(ValidationStopped, match=r"the pattern '\^\(a\|a\)\*\$' was still matching"):
        errors({"type": "string", "pattern": "^(a|a)*$"}, "a" * 40 + "!", secs=0.2)
    with pytest.raises(ValidationStopped, match="was still matching"):
        errors({"propertyNames": {"pattern": "^(a|a)*$"}}, {"a" * 40 + "!": 1}, secs=0.2)


def test_a_schema_under_the_bound_still_ends_at_the_deadline() -> None:
    """Two branches a level, recursing into the value: 2^40 applications for a value 40 deep."""
    node = {"anyOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "array", "items": {"$ref": "#"}}]}
    assert schema_problem(node, SchemaBounds()) is None
    value: Any = 5
    for _ in range(40):
        value = [value]
    with pytest.raises(ValidationStopped, match="validating was still going on when the time ran out"):
        errors(node, value, secs=0.3)


def test_a_value_nested_past_the_stack_is_stopped_not_crashed() -> None:
    value: Any = 5
    for _ in range(20_000):  # past any stack Python is given
        value = [value]
    with pytest.raises(ValidationStopped, match="nests too deep"):
        errors({"items": {"$ref": "#"}}, value)


def test_failed_branches_keep_one_error_each_so_memory_stays_small() -> None:
    """jsonschema keeps every error of every branch: 11.7 MB here, 6 GB at 20 levels (docs/benchmarks.md)."""
    validator = bounded_validator(nested_any_of(11))  # past the default bound: built without the check
    tracemalloc.start()
    try:
        found = bounded_errors(validator, 5, None, 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert exceptions.best_match(found) is not None
    assert peak < 2 << 20, f"{peak:,} bytes"


def test_any_of_and_one_of_keep_their_meaning() -> None:
    either = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert errors(either, 1) == [] and errors(either, "a") == []
    assert errors(either, 1.5) == ["1.5 is not valid under any of the given schemas"]
    only = {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}
    assert errors(only, -1) == [] and errors(only, 0.5) == []
    assert errors(only, 1) == ["1 is valid under more than one of the given schemas (oneOf[0] and oneOf[1])"]
    assert errors(only, "a") == ["'a' is not valid under any of the given schemas"]


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"anyOf": [{"properties": {"a": {"type": "string"}}}, {"type": "string"}]}, {"a": 1}),
        (
            {"oneOf": [{"type": "object", "required": ["a"]}, {"items": {"type": "string"}, "minItems": 2}]},
            [1],
        ),
        ({"properties": {"n": {"anyOf": [{"type": "integer"}, {"enum": ["many"]}]}}}, {"n": "few"}),
    ],
)
def test_the_error_picked_to_explain_is_the_one_jsonschema_picks(schema: Any, value: Any) -> None:
    ours = exceptions.best_match(bounded_errors(bounded_validator(schema), value, None, 20))
    theirs = exceptions.best_match(Draft202012Validator(schema).iter_errors(value))
    assert ours is not None and theirs is not None and ours.message == theirs.message


def test_unique_items_compares_as_json_schema_does() -> None:
    unique = {"uniqueItems": True}
    assert (
        errors(unique, [1, True]) == []
        and errors(unique, ["1", 1]) == []
        and errors(unique, [[1], [2]]) == []
    )
    for repeated in ([1, 1.0], [{"a": 1, "b": [2]}, {"b": [2], "a": 1}], [None, None], [[1, {"x": 0}]] * 2):
        assert errors(unique, repeated) != [], repeated
    assert errors(unique, [{"n": i} for i in range(100_000)]) == []  # one pass, not item against item


def test_formats_are_annotations_no_regex_format_is_compiled() -> None:
    assert errors({"format": "regex"}, "(a+)+(") == []
    assert errors({"format": "email"}, "not an email") == []


def test_long_messages_are_cut() -> None:
    (message,) = errors({"enum": ["x" * 10_000]}, "y" * 1_000_000)
    assert len(message) <= MAX_MESSAGE_CHARS


def test_patterns_keep_their_meaning_with_the_regex_module() -> None:
    prices = {"patternProperties": {"^price_": {"type": "number"}}, "additionalProperties": False}
    assert errors(prices, {"price_rub": 5}) == []
    assert errors(prices, {"price_rub": "5"}) == ["'5' is not of type 'number'"]
    assert errors(prices, {"size": 1}) == ["Additional properties are not allowed ('size' was unexpected)"]


def test_a_bounded_validator_validates_only_under_a_deadline() -> None:
    with pytest.raises(RuntimeError, match="only inside bounded_errors"):
        list(bounded_validator({"type": "string"}).iter_errors(5))
