"""The helpers' event loop (llm/blocking.py) and one provider shared by several loops (S9.2, S21.3).

Scripts' `llm()` calls run on a loop of their own while the agent loop uses
the server's: the concurrency limit and the HTTP clients must hold across both.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from agentkernel.llm import ChatMessage, CompletionRequest, LimitedProvider, OpenAICompatProvider
from agentkernel.llm.blocking import LoopThread
from agentkernel.llm.structured import (
    AnswerInvalid,
    SchemaInvalid,
    StructuredOutputInvalid,
    check_output_schema,
    parse_valid,
    structured_answer,
)
from agentkernel.types import JSONValue
from tests.fakes import FakeLLMServer, RecordedRequest, Reply

HELLO = CompletionRequest((ChatMessage.user("hi"),))


def slowly(request: RecordedRequest) -> Reply:
    return Reply(text="ok", delay=0.05)


def test_an_int_limit_holds_across_event_loops_and_threads(llm_server: FakeLLMServer) -> None:
    llm_server.respond_with(slowly)
    inner = OpenAICompatProvider(llm_server.base_url, "m", max_retries=0)
    limited = LimitedProvider(inner, 2)
    helpers = LoopThread("test-helpers")

    async def three() -> None:
        await asyncio.gather(*(limited.complete(HELLO) for _ in range(3)))

    with ThreadPoolExecutor(4) as pool:
        answers = [pool.submit(helpers.run, lambda: limited.complete(HELLO), 10) for _ in range(4)]
        loops = [pool.submit(asyncio.run, three()) for _ in range(2)]
        assert all(a.result().text == "ok" for a in answers)
        for done in loops:
            done.result()
    assert llm_server.max_in_flight == 2 and len(llm_server.requests) == 10
    assert len(inner._clients) >= 1
    asyncio.run(inner.aclose())  # the helpers' loop's client closed on that loop, the dead loops' dropped
    assert inner._clients == {}


def test_a_wait_past_its_timeout_cancels_the_request() -> None:
    helpers = LoopThread("test-timeout")
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError, match=r"no answer within 0\.05 s"):
        helpers.run(forever, 0.05)
    assert cancelled.wait(5)
    with pytest.raises(TimeoutError, match="no time left"):
        helpers.run(forever, 0)


# -- llm/structured.py: what llm_json and run_subagent's output_schema share (S9.3, S17) ----------------

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
