"""llm/structured.py: what llm_json and run_subagent's output_schema share (S9.3, S17)."""

from __future__ import annotations

import time

import pytest

from agentkernel.llm import ChatMessage
from agentkernel.llm.structured import (
    AnswerInvalid,
    SchemaInvalid,
    StructuredOutputInvalid,
    ValidationStopped,
    check_output_schema,
    parse_valid,
    structured_answer,
    validation_problem,
)
from agentkernel.types import JSONValue

SCHEMA: dict[str, JSONValue] = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def test_check_output_schema_refuses_non_objects_and_invalid_schemas() -> None:
    assert check_output_schema(SCHEMA) is SCHEMA
    with pytest.raises(SchemaInvalid, match="must be a JSON Schema object, got true"):
        check_output_schema(True)
    with pytest.raises(SchemaInvalid, match=r"-1 is less than the minimum of 0 \(at minLength\)"):
        check_output_schema({"type": "string", "minLength": -1})
    draft4: dict[str, JSONValue] = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "required": [],
    }
    with pytest.raises(
        SchemaInvalid, match="should be non-empty"
    ):  # the draft `$schema` names is the one used
        check_output_schema(draft4)


def test_an_output_schema_with_a_python_type_name_suggests_json_schema_s() -> None:
    with pytest.raises(SchemaInvalid, match=r"\(at properties/n/type\); did you mean 'number'\?$"):
        check_output_schema({"type": "object", "properties": {"n": {"type": "float"}}})


def test_parse_valid_takes_off_a_fence_and_names_the_problem() -> None:
    assert parse_valid('```json\n{"n": 1}\n```', SCHEMA) == {"n": 1}
    assert parse_valid(' {"n": 2} \n', SCHEMA) == {"n": 2}
    with pytest.raises(AnswerInvalid, match=r"'n' is a required property \(at \$\)"):
        parse_valid("{}", SCHEMA)
    with pytest.raises(AnswerInvalid, match="the answer was empty"):
        parse_valid(None, SCHEMA)
    with pytest.raises(AnswerInvalid, match="the answer is not JSON"):
        parse_valid("n = 1", SCHEMA)


def test_structured_answer_feeds_each_problem_into_the_next_ask() -> None:
    answers = iter(['{"n": "one"}', '{"n": 1}'])
    seen: list[list[ChatMessage]] = []

    def ask(conversation: object) -> str:
        assert isinstance(conversation, list)
        seen.append(list(conversation))
        return next(answers)

    assert structured_answer(ask, [ChatMessage.user("n?")], SCHEMA) == {"n": 1}
    assert [m.role for m in seen[1]] == ["user", "assistant", "user"]
    assert "'one' is not of type 'integer' (at $.n)" in (seen[1][-1].content or "")

    with pytest.raises(StructuredOutputInvalid) as failed:
        structured_answer(lambda conversation: "{}", [ChatMessage.user("n?")], SCHEMA, attempts=2)
    assert failed.value.attempts == 2
    assert str(failed.value) == (
        "structured output did not validate after 2 attempts: 'n' is a required property (at $)"
    )


# -- patterns: matched with a deadline, never by Python's backtracking `re` (schemas/bounds.py) ----

EVIL = "^(a|aa)+$"  # exponential backtracking on "aaaa…!"


def test_a_pattern_that_backtracks_forever_stops_at_the_deadline() -> None:
    schema: dict[str, JSONValue] = {"type": "string", "pattern": EVIL}
    with pytest.raises(ValidationStopped, match=r"the pattern '\^\(a\|aa\)\+\$' was still matching"):
        validation_problem("a" * 60 + "!", schema, time.monotonic() + 0.2)
    keys: dict[str, JSONValue] = {
        "type": "object",
        "patternProperties": {EVIL: {}},
        "additionalProperties": False,
    }
    with pytest.raises(ValidationStopped):
        validation_problem({"a" * 60 + "!": 1}, keys, time.monotonic() + 0.2)


def test_patterns_keep_their_meaning() -> None:
    date: dict[str, JSONValue] = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
    assert validation_problem("2026-12-01", date) is None
    assert (
        validation_problem("1 декабря", date) == r"'1 декабря' does not match '^\\d{4}-\\d{2}-\\d{2}$' (at $)"
    )
    prices: dict[str, JSONValue] = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "patternProperties": {"^price_": {"type": "number"}},
        "additionalProperties": False,
    }
    assert validation_problem({"name": "x", "price_rub": 5}, prices) is None
    assert validation_problem({"price_rub": "5"}, prices) == "'5' is not of type 'number' (at $.price_rub)"
    assert validation_problem({"name": "x", "size": 1, "colour": 2}, prices) == (
        "Additional properties are not allowed ('colour', 'size' were unexpected) (at $)"
    )
    typed: dict[str, JSONValue] = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert validation_problem({"n": "x"}, typed) == "'x' is not of type 'integer' (at $.n)"


def test_a_schema_whose_patterns_cannot_be_bounded_is_refused() -> None:
    schema: dict[str, JSONValue] = {
        "type": "object",
        "patternProperties": {"^a": {}},
        "unevaluatedProperties": False,
    }
    with pytest.raises(SchemaInvalid, match="unevaluatedProperties together with patternProperties"):
        check_output_schema(schema)
