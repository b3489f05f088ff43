"""The S24 verdicts field by field: the well-formed rest holds, each malformed field is one problem."""

from __future__ import annotations

import pytest

from agentkernel.agent.tool_verdicts import (
    parse_after_tool_call,
    parse_before_llm_call,
    parse_before_tool_call,
)
from agentkernel.types import JSONObject, JSONValue

MESSAGES: list[JSONObject] = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
    {"role": "tool", "content": "done", "tool_call_id": "c1"},
]


def test_before_tool_call_fields() -> None:
    verdict = parse_before_tool_call({"deny": "", "replace_args": {"a": 1}, "ask": "ok?", "notice": "n"})
    assert (verdict.deny, verdict.replace_args, verdict.ask, verdict.notice) == ("", {"a": 1}, "ok?", "n")
    assert verdict.problems == ()
    assert parse_before_tool_call(None) == parse_before_tool_call({})


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("deny", 'expected an object or nothing, got "deny"'),
        ({"replace_args": [1]}, "replace_args: expected an object (the tool's arguments), got [1]"),
        ({"deny": 5}, "deny: expected a string, got 5"),
        ({"ask": True}, "ask: expected a string, got true"),
        ({"reply": "x"}, "unknown field 'reply' (expected one of ask, deny, notice, replace_args)"),
    ],
)
def test_before_tool_call_problems(value: JSONValue, problem: str) -> None:
    assert parse_before_tool_call(value).problems == (problem,)


def test_after_tool_call_shapes() -> None:
    assert parse_after_tool_call("seen").notice == "seen"
    replaced: JSONObject = {"content": "x", "success": False, "visual": [{"type": "text", "text": "t"}]}
    verdict = parse_after_tool_call({"replace_result": replaced})
    assert verdict.replace_result == replaced and verdict.problems == ()
    bad = parse_after_tool_call({"replace_result": {"content": 1}, "notice": "kept"})
    assert bad.replace_result is None and bad.notice == "kept"
    assert bad.problems == ("replace_result.content: expected a string, got 1",)


def test_before_llm_call_contents() -> None:
    items: list[JSONValue] = [
        {"role": "user", "content": "HI"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},  # repeated as it is: fine
        {"role": "tool", "content": "DONE"},
    ]
    verdict = parse_before_llm_call({"replace_messages": items, "deny": "no"}, MESSAGES)
    assert verdict.contents == ("HI", None, "DONE") and verdict.deny == "no" and verdict.problems == ()


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([], "replace_messages: expected 3 messages (one for each of the request's, in order), got 0"),
        ([{"role": "user", "content": "a"}] * 3, "replace_messages[1].role: expected 'assistant'"),
        (
            [{"role": "user", "content": None}, *MESSAGES[1:]],
            "replace_messages[0].content: expected a string",
        ),
        (
            [MESSAGES[0], {**MESSAGES[1], "tool_calls": []}, MESSAGES[2]],
            "replace_messages[1].tool_calls: differs",
        ),
        ([MESSAGES[0], MESSAGES[1], "done"], 'replace_messages[2]: expected {role, content}, got "done"'),
    ],
)
def test_before_llm_call_refuses_a_changed_shape(items: JSONValue, problem: str) -> None:
    verdict = parse_before_llm_call({"replace_messages": items, "notice": "n"}, MESSAGES)
    assert verdict.contents is None and verdict.notice == "n"
    (found,) = verdict.problems
    assert found.startswith(problem)
