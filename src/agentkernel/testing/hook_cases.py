"""A hook's `tests:` block: an event, its inputs, and what the hook must decide, as cases.

    tests:
      - name: a banned word is answered       # optional; `case N` otherwise
        event: before_user_message            # required: which function the case calls
        message: "Where is the best casino?"  # its `msg`: the text (role user), or {role, content}
        earlier: false                        # optional: ctx.earlier (a stateless client's earlier message)
        user: alice                           # optional; `test-user` otherwise
        llm: ["an answer", {json: {ok: true}}]   # optional: the LLM's replies, in order (as a tool's)
        expect:
          reply: "I do not discuss that."     # before_user_message: reply, suppress, replace_message,
          notice: "🚫 moderation: casino"     #   inject, notice (null: none)
      - event: after_turn
        question: "Hello"                     # the text (role user), or {role, content}
        answer: "Hi there"                    # the text (role assistant), {role, content}, or null
        turn: {reason: job_done, tool_calls: 1}   # optional: ctx.turn's fields (the rest: 0, false)
        expect: {notice: "✅ 5 → 8"}           # after_turn: notice
      - event: after_loop
        reason: max_turns                     # optional; job_done otherwise
        expect: {result: null}                # any event: result (exact), success, error_contains
      - event: before_tool_call
        call: {tool: shell, args: {command: ls}}   # {tool, args?, id?, origin?, config?}; id call-1, llm
        expect: {deny: "denied by hook guard: no shell"}   # deny, ask, replace_args, notice
      - event: after_tool_call
        call: {tool: lookup, args: {}}
        result: "the key is sk-123"           # the content (success true), or {content, success?, ...}
        expect: {replace_result: {content: "the key is [redacted]", success: true}}   # and notice
      - event: before_llm_call
        request: {messages: [{role: user, content: "mail bob@example.com"}]}   # tools?, model? too
        expect: {replace_messages: ["mail [email]"]}   # the contents the LLM sees; deny, notice

Each case is one call of one function through the loop's hook pipeline
(`Kernel.run_hook_event`), so its verdict is read as a run reads it: a
field the pipeline ignores is a failed call. Inputs and expectations of
another event than the case's are problems, as is a case for an event the
hook's `events:` leaves out; `agentkernel check` reports them with the
file, the line, the field and the case, like a tool's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkernel.agent.hooks import CALL_ORIGINS, HookEvent, TurnFacts
from agentkernel.config import HOOK_EVENTS, HookSpec
from agentkernel.config.schema import StrictValidator, expect
from agentkernel.config.server import USER_ID
from agentkernel.testing.cases import (
    DEFAULT_USER,
    REPLY_SCHEMA,
    TESTS_FIELD,
    Block,
    name_problem,
    read_block,
    schema_problems,
    scripted_turns,
)
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.yaml_source import KeyPath

if TYPE_CHECKING:
    from agentkernel.testing.openai_server import Turn

# the loop's EndReason values (a test holds them equal), named here so `check` need not import the loop
REASONS = ("job_done", "terminated", "blocked", "budget_exhausted", "max_turns", "error")
ROLES = ("system", "user", "assistant")

INPUTS: dict[str, tuple[str, ...]] = {
    "before_user_message": ("message", "earlier"),
    "after_turn": ("question", "answer", "turn"),
    "after_loop": ("reason",),
    "before_tool_call": ("call",),
    "after_tool_call": ("call", "result"),
    "before_llm_call": ("request",),
}
REQUIRED_INPUTS: dict[str, tuple[str, ...]] = {
    "before_user_message": ("message",),
    "after_turn": ("question", "answer"),
    "after_loop": (),
    "before_tool_call": ("call",),
    "after_tool_call": ("call", "result"),
    "before_llm_call": ("request",),
}
_ANY_EVENT = ("success", "error_contains", "result")
VERDICTS: dict[str, tuple[str, ...]] = {
    "before_user_message": ("notice", "reply", "suppress", "replace_message", "inject"),
    "after_turn": ("notice",),
    "after_loop": (),
    "before_tool_call": ("notice", "deny", "ask", "replace_args"),
    "after_tool_call": ("notice", "replace_result"),
    "before_llm_call": ("notice", "deny", "replace_messages"),
}
DEFAULT_CALL_ID = "call-1"
LLM_ROLES = ("system", "user", "assistant", "tool")

_MAP_MESSAGE: dict[str, Any] = {
    "type": "object",
    "required": ["role", "content"],
    "additionalProperties": False,
    "properties": {"role": {"enum": list(ROLES)}, "content": {"type": "string"}},
}
_MESSAGE = expect(
    "a message: its text, or {role: system|user|assistant, content: TEXT}",
    anyOf=[{"type": "string"}, _MAP_MESSAGE],
)
_ANSWER = expect(
    "the answer: its text, {role: system|user|assistant, content: TEXT}, or null (no answer)",
    anyOf=[{"type": "string"}, _MAP_MESSAGE, {"type": "null"}],
)
_COUNT = expect("an integer >= 0", type="integer", minimum=0)
_TURN: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "reason": expect("an end reason: " + ", ".join(REASONS), enum=list(REASONS)),
        "tool_calls": _COUNT,
        "history_messages": _COUNT,
        "injected_messages": _COUNT,
        "replied_by_hook": expect("true or false", type="boolean"),
        "subagent": expect("true or false", type="boolean"),
    },
}
_CALL: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["tool"],
    "properties": {
        "tool": expect("a tool name", type="string", minLength=1),
        "args": expect("an object: the call's arguments", type="object"),
        "id": expect("a string: the call's id", type="string"),
        "origin": expect("where the call comes from: " + ", ".join(CALL_ORIGINS), enum=list(CALL_ORIGINS)),
        "config": expect("an object: the called tool's YAML fields", type="object"),
    },
}
_RESULT_OBJECT: dict[str, Any] = {
    "type": "object",
    "required": ["content"],
    "properties": {"content": {"type": "string"}, "success": {"type": "boolean"}},
}
_RESULT = expect(
    "a tool's result: its content, or {content: TEXT, success?: true|false, ...}",
    anyOf=[{"type": "string"}, _RESULT_OBJECT],
)
_LLM_MESSAGE: dict[str, Any] = {
    "type": "object",
    "required": ["role", "content"],
    "additionalProperties": False,
    "properties": {
        "role": {"enum": list(LLM_ROLES)},
        "content": {"type": ["string", "null"]},
        "tool_calls": {"type": "array"},
        "tool_call_id": {"type": "string"},
    },
}
_REQUEST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["messages"],
    "properties": {
        "messages": expect(
            "a list of {role: system|user|assistant|tool, content: TEXT or null, tool_calls?, tool_call_id?}",
            type="array",
            items=_LLM_MESSAGE,
        ),
        "tools": expect("a list of tool names", type="array", items={"type": "string"}),
        "model": expect("a string: the model's name", type="string"),
    },
}
_EXPECT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "success": expect("true or false", type="boolean"),
        "error_contains": expect("a string", type="string"),
        "result": {},
        "notice": expect("a string, or null (no notice)", type=["string", "null"]),
        "reply": expect("a string, or null (no reply)", type=["string", "null"]),
        "suppress": expect("true or false", type="boolean"),
        "replace_message": expect(
            "the message's text, {role, content}, or null (the message unchanged)",
            anyOf=[{"type": "string"}, _MAP_MESSAGE, {"type": "null"}],
        ),
        "inject": expect(
            "a list of {role: system|user|assistant, content: TEXT}", type="array", items=_MAP_MESSAGE
        ),
        "deny": expect("the reason, as the LLM gets it, or null (not denied)", type=["string", "null"]),
        "ask": expect("the question, or null (no approval asked)", type=["string", "null"]),
        "replace_args": expect("the arguments, or null (unchanged)", type=["object", "null"]),
        "replace_result": expect(
            "the result, its content, or null (unchanged)",
            anyOf=[{"type": "string"}, _RESULT_OBJECT, {"type": "null"}],
        ),
        "replace_messages": expect(
            "the messages' contents, in order, or null (unchanged)",
            type=["array", "null"],
            items={"type": ["string", "null"]},
        ),
    },
}
HOOK_CASE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["event", "expect"],
    "properties": {
        "name": expect("a non-empty string", type="string", minLength=1),
        "event": expect("one of " + ", ".join(HOOK_EVENTS), enum=list(HOOK_EVENTS)),
        "message": _MESSAGE,
        "earlier": expect("true or false", type="boolean"),
        "question": _MESSAGE,
        "answer": _ANSWER,
        "turn": _TURN,
        "reason": expect("an end reason: " + ", ".join(REASONS), enum=list(REASONS)),
        "call": _CALL,
        "result": _RESULT,
        "request": _REQUEST,
        "user": expect("a user id (1-128 of letters, digits, _ . @ -)", type="string", pattern=USER_ID),
        "llm": {"type": "array", "items": REPLY_SCHEMA},
        "expect": _EXPECT,
    },
}
_VALIDATOR = StrictValidator(HOOK_CASE_SCHEMA)


@dataclass(frozen=True)
class HookExpectation:
    """What the call must show: `success`, and each other field the case gave (`checks`), as given."""

    success: bool
    checks: Mapping[str, JSONValue] = field(default_factory=dict)


@dataclass(frozen=True)
class HookCase:
    """One case of one hook's `tests:` block, checked: the event's inputs and the expectation."""

    hook: str
    index: int  # 0-based, in the block
    name: str
    given: HookEvent
    user: str
    llm: tuple[JSONValue, ...]
    expect: HookExpectation
    yaml_path: Path
    line: int | None = None

    @property
    def subject(self) -> str:
        """The hook the case is of."""
        return self.hook

    @property
    def event(self) -> str:
        return self.given.event

    def llm_turns(self) -> list[Turn]:
        """The scripted server's answers, in order."""
        return scripted_turns(self.llm)


def message_of(value: JSONValue, role: str) -> JSONObject | None:
    """A case's message as the hook receives it: a text is a message of `role`; null stays null."""
    if value is None:
        return None
    if isinstance(value, str):
        return {"role": role, "content": value}
    assert isinstance(value, dict)  # the schema said so
    return {"role": value["role"], "content": value["content"]}


def call_of(value: Mapping[str, Any] | None) -> JSONObject | None:
    """A case's `call` as a hook receives it: `{id, tool, args, origin, config}`, defaults filled in."""
    if value is None:
        return None
    return {
        "id": value.get("id", DEFAULT_CALL_ID),
        "tool": value["tool"],
        "args": value.get("args", {}),
        "origin": value.get("origin", "llm"),
        "config": value.get("config", {"name": value["tool"]}),
    }


def result_of(value: JSONValue) -> JSONObject | None:
    """A case's `result` as a hook receives it: a text is a successful result's content."""
    if value is None:
        return None
    if isinstance(value, str):
        return {"content": value, "success": True, "error": None, "visual": None, "warnings": []}
    assert isinstance(value, dict)  # the schema said so
    return {"success": True, "error": None, "visual": None, "warnings": [], **value}


def request_of(value: Mapping[str, Any] | None) -> JSONObject | None:
    """A case's `request` as a hook receives it: `{messages, tools, model}` (no tools, model `test-model`)."""
    if value is None:
        return None
    return {
        "messages": [dict(m) for m in value["messages"]],
        "tools": list(value.get("tools", [])),
        "model": value.get("model", "test-model"),
    }


def _event_problems(data: Mapping[str, Any], events: tuple[str, ...] | None) -> list[tuple[str, KeyPath]]:
    """Inputs and expectations that are not the case's event's, and inputs it lacks."""
    event = data["event"]
    found: list[tuple[str, KeyPath]] = []
    if events is not None and event not in events:
        listed = ", ".join(events)
        found.append((f"the hook's `events:` leaves {event} out (events: {listed})", ("event",)))
    ours = INPUTS[event]
    for key in dict.fromkeys(k for inputs in INPUTS.values() for k in inputs):  # `call` is two events'
        if key in data and key not in ours:
            found.append((f"not an input of {event} (its inputs: {', '.join(ours) or 'none'})", (key,)))
    for key in REQUIRED_INPUTS[event]:
        if key not in data:
            found.append((f"{event} needs `{key}:`", ("event",)))
    allowed = (*_ANY_EVENT, *VERDICTS[event])
    for key in data["expect"]:
        if key not in allowed:
            found.append((f"not a verdict of {event} (expect: {', '.join(allowed)})", ("expect", key)))
    return found


def _problems_for(spec: HookSpec) -> Callable[[object, str, Mapping[str, int]], list[tuple[str, KeyPath]]]:
    """The check of one case of `spec`'s block: the schema's, then the event's and the name's."""

    def problems(data: object, name: str, seen: Mapping[str, int]) -> list[tuple[str, KeyPath]]:
        found = schema_problems(data, _VALIDATOR, HOOK_CASE_SCHEMA)
        if found:
            return found
        assert isinstance(data, Mapping)
        return _event_problems(data, spec.events) + name_problem(name, seen)

    return problems


def _given(data: Mapping[str, Any]) -> HookEvent:
    turn = data.get("turn")
    return HookEvent(
        event=data["event"],
        message=message_of(data.get("message"), "user"),
        earlier=data.get("earlier", False),
        question=message_of(data.get("question"), "user"),
        answer=message_of(data.get("answer"), "assistant"),
        turn=TurnFacts(**{"reason": "job_done", **turn}) if turn is not None else None,
        reason=data.get("reason", "job_done"),
        call=call_of(data.get("call")),
        result=result_of(data.get("result")),
        request=request_of(data.get("request")),
    )


def _case(spec: HookSpec, index: int, name: str, data: Mapping[str, Any]) -> HookCase:
    wanted: Mapping[str, Any] = data["expect"]
    checks = {key: value for key, value in wanted.items() if key != "success"}
    return HookCase(
        hook=spec.name,
        index=index,
        name=name,
        given=_given(data),
        user=data.get("user", DEFAULT_USER),
        llm=tuple(data.get("llm", ())),
        expect=HookExpectation(wanted.get("success", "error_contains" not in wanted), checks),
        yaml_path=spec.yaml_path,
        line=spec.lines.of(TESTS_FIELD, index),
    )


def read_hook_cases(spec: HookSpec) -> Block[HookCase]:
    """The cases of a hook's `tests:` (none when it has no block), and every problem in it."""
    return read_block(spec, _problems_for(spec), _case)


__all__ = [
    "HOOK_CASE_SCHEMA",
    "INPUTS",
    "VERDICTS",
    "HookCase",
    "HookExpectation",
    "call_of",
    "message_of",
    "read_hook_cases",
    "request_of",
    "result_of",
]
