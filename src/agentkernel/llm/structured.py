"""Answers that must be JSON valid against a schema: check, parse, validate, ask again (S9.3, S17).

`llm_json` and a sub-agent's `output_schema` share this: the schema is
checked before any inference (`check_output_schema`), each answer is parsed
and validated (`parse_valid`), and `structured_answer` asks up to
`ATTEMPTS` times in all, feeding the validation error of one answer into the
next request, then raises `StructuredOutputInvalid` with the last error.
How a question is asked (one completion, or a whole agent run) is the
caller's: `structured_answer` takes it as a function of the conversation.

jsonschema is imported inside the functions: a kernel that never asks for
structured output never loads it at start-up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from agentkernel.errors import AgentKernelError
from agentkernel.llm.base import ChatMessage
from agentkernel.schemas.bounds import (
    SchemaBounds,
    ValidationStopped,
    bounded_errors,
    bounded_validator,
    schema_problem,
)
from agentkernel.schemas.cost import describe_cost
from agentkernel.schemas.type_names import type_hint
from agentkernel.types import JSONValue
from agentkernel.util.short_text import clip, shown_value

ATTEMPTS = 3
"""Answers asked for in all, the first included (S9.3)."""

_SHOWN_ANSWER = 300
_ERRORS_WEIGHED = 20
"""Errors of one answer looked at to pick the one the model is told about (the first ones found)."""
_FENCED = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(.*)\n```\Z", re.DOTALL)


class SchemaInvalid(AgentKernelError):
    """The output schema itself is not valid JSON Schema; the text says where and why."""


class AnswerInvalid(AgentKernelError):
    """One answer is not JSON, or does not validate; the text is what the model is told next."""


class StructuredOutputInvalid(AgentKernelError):
    """No answer validated in `attempts` attempts; `last_error` is why the last one failed."""

    def __init__(self, attempts: int, last_error: str) -> None:
        self.attempts = attempts
        self.last_error = last_error
        super().__init__(f"structured output did not validate after {attempts} attempts: {last_error}")


def check_output_schema(schema: JSONValue, bounds: SchemaBounds | None = None) -> dict[str, Any]:
    """`schema` as a JSON Schema object, checked against its metaschema (draft 2020-12 unless `$schema` says).

    SchemaInvalid for anything but an object, for one bigger or more complex
    than `bounds` allow (kernel.yaml `limits.max_schema_*`; schemas/cost.py),
    and for an object that is not valid JSON Schema (`{"type": "strnig"}`),
    naming the keyword at fault.
    """
    if not isinstance(schema, dict):
        raise SchemaInvalid(f"must be a JSON Schema object, got {shown_value(schema)}")
    costly = schema_problem(schema, bounds or SchemaBounds())
    if costly is not None:
        raise SchemaInvalid(describe_cost(costly))
    from jsonschema import exceptions, validators

    try:
        validators.validator_for(schema, default=validators.Draft202012Validator).check_schema(schema)
    except exceptions.SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path)
        at = f" (at {where})" if where else ""
        hint = type_hint(exc.instance) if exc.absolute_path and exc.absolute_path[-1] == "type" else ""
        raise SchemaInvalid(f"is not a valid JSON Schema: {exc.message}{at}{hint}") from None
    from agentkernel.schemas.refs import remote_refs_problem  # the JSON Schema specifications: on first use

    problem = remote_refs_problem(schema)
    if problem is not None:
        raise SchemaInvalid(f"cannot be used: {problem}")
    return schema


def parse_valid(text: str | None, schema: dict[str, Any], deadline: float | None = None) -> JSONValue:
    """The answer `text` parsed as JSON and valid against `schema`; AnswerInvalid saying why not.

    A Markdown code fence around the JSON (```json … ```), which models add
    unasked, is taken off first. Validation ends by `deadline`
    (time.monotonic()) at most: ValidationStopped past it.
    """
    if text is None or not text.strip():
        raise AnswerInvalid("the answer was empty, not JSON")
    body = text.strip()
    fenced = _FENCED.match(body)
    if fenced is not None:
        body = fenced.group(1).strip()
    try:
        value: JSONValue = json.loads(body)
    except ValueError as exc:
        raise AnswerInvalid(f"the answer is not JSON ({exc}): {clip(body, _SHOWN_ANSWER)}") from None
    problem = validation_problem(value, schema, deadline)
    if problem is not None:
        raise AnswerInvalid(problem)
    return value


def validation_problem(value: JSONValue, schema: dict[str, Any], deadline: float | None = None) -> str | None:
    """Why `value` does not validate against `schema` (the most relevant error, with its path), or None.

    Validation is bounded (schemas/bounds.py): a hostile schema cannot hold
    the kernel past `deadline`, nor fill its memory with errors.
    """
    from jsonschema import exceptions

    errors = bounded_errors(bounded_validator(schema), value, deadline, _ERRORS_WEIGHED)
    error = exceptions.best_match(errors)
    if error is None:
        return None
    return f"{error.message} (at {error.json_path})"


def schema_instruction(schema: dict[str, Any]) -> str:
    """What the model is told about the answer, for servers that do not enforce `response_format`."""
    shown = json.dumps(schema, ensure_ascii=False)
    return f"Answer with only a JSON value, no other text, that validates against this JSON Schema: {shown}"


def correction_request(problem: str) -> str:
    """What the model is asked after an answer that failed with `problem` (llm_json and sub-agents alike)."""
    return (
        f"That answer did not validate against the JSON Schema: {problem}. "
        "Answer again with only the corrected JSON."
    )


def correction(answer: str | None, problem: str) -> list[ChatMessage]:
    """The turn that feeds one failed answer's problem into the next attempt."""
    return [ChatMessage.assistant(answer or ""), ChatMessage.user(correction_request(problem))]


def structured_answer(
    ask: Callable[[Sequence[ChatMessage]], str | None],
    messages: Sequence[ChatMessage],
    schema: dict[str, Any],
    attempts: int = ATTEMPTS,
    deadline: float | None = None,
) -> JSONValue:
    """Ask with `ask(conversation) -> answer text` until an answer validates; the parsed value.

    Up to `attempts` answers in all; each invalid one and its problem are
    appended to the conversation for the next. StructuredOutputInvalid
    with the last problem when none validates; whatever `ask` raises
    (no budget left, the time is up, the server failed) ends it at once.
    """
    conversation = list(messages)
    problem = "no attempt was made"
    for _ in range(attempts):
        answer = ask(conversation)
        try:
            return parse_valid(answer, schema, deadline)
        except AnswerInvalid as exc:
            problem = str(exc)
            conversation += correction(answer, problem)
    raise StructuredOutputInvalid(attempts, problem)


__all__ = [
    "ATTEMPTS",
    "AnswerInvalid",
    "SchemaInvalid",
    "StructuredOutputInvalid",
    "ValidationStopped",
    "check_output_schema",
    "correction",
    "correction_request",
    "parse_valid",
    "schema_instruction",
    "structured_answer",
    "validation_problem",
]
