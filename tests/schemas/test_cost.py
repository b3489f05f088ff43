"""schemas/cost.py: a schema's size and complexity, measured before anything is validated against it."""

from __future__ import annotations

from typing import Any

import pytest

from agentkernel.schemas.cost import CostProblem, SchemaBounds, cost_problem, describe_cost
from tests.schemas.conftest import nested_any_of

SMALL = SchemaBounds(max_nodes=10, max_depth=4, max_chars=200)


def with_properties(count: int) -> dict[str, Any]:
    """A schema of 1 + `count` subschemas."""
    return {"properties": {f"p{i}": {} for i in range(count)}}


def test_subschemas_just_under_the_bound_pass_and_just_over_are_refused_naming_the_setting() -> None:
    assert cost_problem(with_properties(9), SMALL) is None  # 10 in all
    problem = cost_problem(with_properties(10), SMALL)
    assert problem == CostProblem(
        (),
        "is too complex to validate: with its $refs expanded it holds more than 10 subschemas and enum "
        "values (limits.max_schema_nodes: 10 in kernel.yaml)",
    )


def test_each_ref_counts_what_it_points_to_again() -> None:
    four: dict[str, Any] = {"anyOf": [{}, {}, {}]}  # 4 subschemas
    twice = {"$defs": {"four": four}, "allOf": [{"$ref": "#/$defs/four"}, {"$ref": "#/$defs/four"}]}
    assert cost_problem(twice, SchemaBounds(max_nodes=11)) is None  # 1 + 2 × (1 + 4)
    assert cost_problem(twice, SchemaBounds(max_nodes=10)) is not None
    assert cost_problem({"enum": list(range(9))}, SMALL) is None
    assert cost_problem({"enum": list(range(10))}, SMALL) is not None  # an enum value counts as one


def test_nesting_just_under_the_bound_passes_and_just_over_is_refused_where_it_passes() -> None:
    def deep(levels: int) -> dict[str, Any]:
        schema: dict[str, Any] = {}
        for _ in range(levels - 1):
            schema = {"items": schema}
        return schema

    assert cost_problem(deep(4), SMALL) is None
    problem = cost_problem(deep(5), SMALL)
    assert problem is not None and problem.path == ("items", "items", "items", "items")
    assert describe_cost(problem) == (
        "at items.items.items.items: subschemas nest more than 4 deep, counting each $ref followed "
        "(limits.max_schema_depth: 4 in kernel.yaml)"
    )
    unused: dict[str, Any] = {"$defs": {"a": {"$defs": {"b": {"$defs": {"c": {"$defs": {"d": {}}}}}}}}}
    assert cost_problem(unused, SMALL) is not None  # a metaschema check recurses through $defs too


def test_the_issues_sixteen_nested_any_of_pairs_are_refused_by_either_bound() -> None:
    schema = nested_any_of(16)
    problem = cost_problem(schema, SchemaBounds())
    assert problem is not None and "limits.max_schema_depth: 32" in problem.reason
    assert problem.path == ("$defs", "l15", "anyOf", 1)  # each level is an anyOf and a $ref
    problem = cost_problem(schema, SchemaBounds(max_depth=1000))
    assert problem is not None and "limits.max_schema_nodes: 2,000" in problem.reason
    assert cost_problem(nested_any_of(9), SchemaBounds()) is None  # 2^10 - 1 subschemas and 9 $refs


def test_a_long_schema_is_refused_before_it_is_walked() -> None:
    assert cost_problem({"description": "x" * 150}, SMALL) is None
    problem = cost_problem({"description": "x" * 200}, SMALL)
    assert problem is not None and problem.reason == (
        "is longer than 200 characters of JSON (limits.max_schema_chars: 200 in kernel.yaml)"
    )


def test_a_ref_loop_in_place_never_ends_and_is_refused_one_through_the_value_is_fine() -> None:
    problem = cost_problem({"anyOf": [{"type": "string"}, {"$ref": "#"}]}, SMALL)
    assert problem == CostProblem(
        ("anyOf", 1, "$ref"),
        "$ref '#' leads back to a schema it is part of without going into the value: validating would "
        "never end",
    )
    tree = {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}
    assert cost_problem(tree, SMALL) is None
    dynamic = {"$dynamicAnchor": "node", "properties": {"kids": {"items": {"$dynamicRef": "#node"}}}}
    assert cost_problem(dynamic, SMALL) is None


def test_a_ref_to_nowhere_is_refused_one_to_another_document_is_left_to_schema_refs() -> None:
    assert cost_problem({"$ref": "#/$defs/missing"}, SMALL) == CostProblem(
        ("$ref",), "$ref '#/$defs/missing' does not point to a part of the schema"
    )
    assert cost_problem({"$ref": "http://169.254.169.254/x"}, SMALL) is None
    assert cost_problem({"$ref": "https://json-schema.org/draft/2020-12/schema"}, SchemaBounds()) is None


@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{}, {}], "definitions": {"a": {}}},
        {"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveAnchor": True, "items": {}},
        True,
    ],
)
def test_other_drafts_are_measured_with_their_own_keywords(schema: Any) -> None:
    assert cost_problem(schema, SMALL) is None


def test_draft_3_is_refused() -> None:
    problem = cost_problem({"$schema": "http://json-schema.org/draft-03/schema#"}, SMALL)
    assert problem is not None and problem.path == ("$schema",) and "draft-03" in problem.reason
