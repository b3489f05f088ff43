"""llm/structured.py: what llm_json and run_subagent's output_schema share (S9.3, S17)."""

from __future__ import annotations

import pytest

from agentkernel.llm import ChatMessage
from agentkernel.llm.structured import (
    AnswerInvalid,
    SchemaInvalid,
    StructuredOutputInvalid,
    check_output_schema,
    parse_valid,
    structured_answer,
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
