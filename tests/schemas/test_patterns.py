"""schemas/patterns.py: a schema's patterns are measured before the `regex` module compiles them."""

from __future__ import annotations

import pytest

from agentkernel.schemas.cost import CostProblem
from agentkernel.schemas.patterns import MAX_PATTERN_WIDTH, patterns_problem, unrolled_width

MOST = 1_000_000


@pytest.mark.parametrize(
    ("pattern", "width"),
    [
        ("^\\d{4}-\\d{2}$", 9),  # ^, \d × 4, -, \d × 2, $
        ("a{1,1000}", 1),  # a variable repeat counts its least
        ("(?:a{10}){10}", 100),
        ("(a|bc){3}", 3 * (1 + 1 + 3)),  # a group, its branch, the alternatives
        ("[a-z]+", 1),
    ],
)
def test_the_width_unrolls_counted_repeats(pattern: str, width: int) -> None:
    assert unrolled_width(pattern, MOST) == width


def test_nested_counted_repeats_are_refused_before_they_are_compiled() -> None:
    """`regex` would unroll four billion items in C, holding the GIL; Python's parse unrolls nothing."""
    problem = patterns_problem({"properties": {"q": {"pattern": "(?:a{65535}){65535}"}}})
    assert problem is not None and problem.path == ("properties", "q", "pattern")
    assert problem.reason.startswith("the pattern '(?:a{65535}){65535}' is too big once compiled")
    assert f"at most {MAX_PATTERN_WIDTH:,} items" in problem.reason


def test_the_width_is_counted_over_the_whole_schema_just_under_passes() -> None:
    half = "(?:a{100}){250}"  # 25,000
    assert patterns_problem({"pattern": half, "propertyNames": {"pattern": half}}) is None
    over = {"pattern": half, "propertyNames": {"pattern": half + "b"}}
    assert patterns_problem(over) is not None


def test_patterns_the_kernel_cannot_run_are_refused_naming_where() -> None:
    problem = patterns_problem({"patternProperties": {"(?<": {}}})
    assert problem is not None and problem.path == ("patternProperties", "(?<")
    assert problem.reason.startswith("the pattern '(?<' is not a regular expression the kernel runs")
    problem = patterns_problem({"pattern": "(" * 20_000 + ")" * 20_000})  # past any stack Python is given
    assert problem is not None and problem.reason.endswith("nests its groups too deep")


def test_unevaluated_properties_beside_pattern_properties_is_refused() -> None:
    both = {"patternProperties": {"^a": {}}, "unevaluatedProperties": False}
    assert patterns_problem(both) == CostProblem(
        (), "unevaluatedProperties together with patternProperties is not supported"
    )
