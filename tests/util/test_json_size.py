"""json_size.py: the length of a value's JSON text, known without building more of it than a limit."""

from __future__ import annotations

import json

import pytest

from agentkernel.util.json_size import json_length, json_prefix, json_within
from agentkernel.util.short_text import json_preview

VALUES = [
    None,
    True,
    False,
    0,
    -17,
    1.5,
    1e300,
    "",
    'quote " backslash \\ newline \n bell \x07 é \ud800',
    [],
    {},
    [1, [2, {"a": None, "b": [True, "x"]}]],
    {"key\n": [1, 2, "x"], "é": {}, "": ""},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_length_is_exactly_that_of_json_dumps(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert json_length(value, 10**9) == len(text)
    assert json_length(value, len(text)) == len(text)
    assert json_length(value, len(text) - 1) is None
    assert json_within(value, len(text)) == text and json_within(value, len(text) - 1) is None


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_prefix_is_the_start_of_the_text(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False)
    for limit in range(len(text) + 2):
        assert json_prefix(value, limit) == (text[:limit], len(text) > limit)


def test_a_value_that_repeats_a_big_part_is_stopped_at_the_limit() -> None:
    """A thousand references to one 8 MB string: 8 GB of JSON, measured for the cost of the limit."""
    many = ["x" * (8 << 20)] * 1000
    assert json_length(many, 2_000_000) is None
    text, cut = json_prefix(many, 50_000)
    assert cut and len(text) == 50_000 and text.startswith('["xxx')
    assert json_preview({"a": many}) == '{"a": ["' + "x" * 69 + "..."


def test_deep_values_do_not_break_the_measure() -> None:
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    assert json_length(deep, 10**6) == 10_002
    assert json_within(deep, 10**6) is None  # deeper than the encoder goes: no text rather than an error
