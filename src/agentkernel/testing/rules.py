"""Rules for the scripted LLM: answer each request by what it asks, not only by its place in a script.

A scripted list of turns (`FakeLLMServer.add`) is exact but brittle: one
more LLM call and every later answer shifts. Rules match the request
instead. Each request is offered to the rules in order; the first whose
conditions hold and whose `times` are not used up answers it:

    rules:
      - error: 503            # the first two requests fail (the provider retries them)
        times: 2
      - contains: weather     # the last user message contains this text
        tool_call: {name: forecast, arguments: {city: Paris}}
        times: 1
      - last_role: tool       # the last message is a tool's result
        reply: "Sunny, 21 °C."
      - matches: "^sum (\\d+)"   # a regular expression searched in the last user message
        json: {answer: 42}
      - echo: true            # anything else: the last user message, as it is

A rule answers with exactly one of `reply` (text), `tool_call` (`{name,
arguments}`; `tool_calls` for several), `json` (a value, sent as its JSON
text: what `llm_json` parses), `error` (an HTTP status; `retry_after`
seconds, default 0, so the kernel's retries do not wait) or `echo`. No
condition means every request; `times: N` answers N requests, then the next
rule takes over (`times: 1` on each rule scripts a conversation in order).
A request no rule answers gets HTTP 500 naming its last user message, so a
test that strays fails loudly. Rules come from Python (`Rule`) or from a
YAML or JSON file (`load_rules`), the format above.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkernel.config.schema import StrictValidator, error_text, expect, first_error
from agentkernel.config.yaml_files import read_yaml_file
from agentkernel.errors import ConfigError
from agentkernel.testing.openai_server import FakeToolCall, HttpError, RecordedRequest, Reply, Turn
from agentkernel.util.yaml_source import NO_LINES, KeyPath, YamlLines, dotted

ROLES = ("user", "assistant", "tool", "system")
_CONDITIONS = ("contains", "matches", "last_role")
_ANSWERS = ("reply", "tool_call", "tool_calls", "json", "error", "echo")
_EXTRA = ("times", "retry_after", "message")
RULE_KEYS = (*_CONDITIONS, *_ANSWERS, *_EXTRA)


class RulesError(ValueError):
    """A rules file or rule that cannot be used: says which rule and which field."""


def message_text(message: Mapping[str, Any]) -> str:
    """A chat message's text: its `content` string, or the text parts of a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _messages(request: RecordedRequest) -> list[Mapping[str, Any]]:
    body = request.body
    messages = body.get("messages") if isinstance(body, Mapping) else None
    return [m for m in messages if isinstance(m, Mapping)] if isinstance(messages, list) else []


def last_user_message(request: RecordedRequest) -> str:
    """The text of the request's last `user` message ('' when it has none)."""
    users = [m for m in _messages(request) if m.get("role") == "user"]
    return message_text(users[-1]) if users else ""


def last_role(request: RecordedRequest) -> str | None:
    messages = _messages(request)
    return str(messages[-1].get("role")) if messages else None


@dataclass
class Rule:
    """One rule: conditions (all must hold), an answer, and how many requests it may answer."""

    answer: Turn | None = None  # None with `echo`: the last user message is the answer
    contains: str | None = None
    matches: str | None = None
    last_role: str | None = None
    times: int | None = None  # None: no limit
    echo: bool = False
    used: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if (self.answer is None) == (not self.echo):
            raise RulesError("a rule needs exactly one answer (an answer turn, or echo=True)")
        if self.matches is not None:
            _compiled(self.matches, "matches")
        if self.last_role is not None and self.last_role not in ROLES:
            raise RulesError(f"last_role: expected one of {', '.join(ROLES)}, got {self.last_role!r}")
        if self.times is not None and self.times < 1:
            raise RulesError(f"times: expected an integer >= 1, got {self.times!r}")

    # -- the usual answers --

    @classmethod
    def text(cls, text: str, **when: Any) -> Rule:
        """Answer with `text`."""
        return cls(Reply(text=text), **when)

    @classmethod
    def tool_call(cls, name: str, arguments: object = None, **when: Any) -> Rule:
        """Answer with a call of tool `name` with `arguments` (a value, or raw text sent as it is)."""
        return cls(Reply(tool_calls=(_fake_call(name, arguments),)), **when)

    @classmethod
    def json(cls, value: object, **when: Any) -> Rule:
        """Answer with `value` as JSON text (what a script's `llm_json` parses)."""
        return cls(Reply(text=json.dumps(value, ensure_ascii=False)), **when)

    @classmethod
    def error(cls, status: int, times: int | None = None, **when: Any) -> Rule:
        """Fail with HTTP `status` (`times` requests, or every one); no wait asked before a retry."""
        return cls(HttpError(status, retry_after="0"), times=times, **when)

    # -- matching --

    def applies(self, request: RecordedRequest) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        if self.last_role is not None and last_role(request) != self.last_role:
            return False
        asked = last_user_message(request)
        if self.contains is not None and self.contains not in asked:
            return False
        return self.matches is None or _compiled(self.matches, "matches").search(asked) is not None

    def turn(self, request: RecordedRequest) -> Turn:
        return Reply(text=last_user_message(request)) if self.answer is None else self.answer


def _fake_call(name: str, arguments: object) -> FakeToolCall:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)
    return FakeToolCall(name, raw)


def _compiled(pattern: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise RulesError(f"{where}: not a valid regular expression {pattern!r}: {exc}") from exc


class RuleBook:
    """The rules as a `FakeLLMServer` responder: `server.respond_with(RuleBook(rules))`."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = list(rules)
        self._lock = threading.Lock()  # the server answers requests on several threads

    def __call__(self, request: RecordedRequest) -> Turn:
        with self._lock:
            for rule in self.rules:
                if rule.applies(request):
                    rule.used += 1
                    return rule.turn(request)
        asked = last_user_message(request)
        return HttpError(500, f"scripted LLM: no rule answers this request (last user message: {asked!r})")


# -- from a file ----------------------------------------------------------------------------

_CALL = expect(
    "{name: TOOL, arguments: {...}}",
    type="object",
    additionalProperties=False,
    required=["name"],
    properties={"name": {"type": "string"}, "arguments": {}},
)
_STRING = expect("a string", type="string")
_FIELDS: dict[str, Any] = {
    "contains": _STRING,
    "matches": _STRING,
    "last_role": expect("one of " + ", ".join(ROLES), enum=list(ROLES)),
    "reply": _STRING,
    "tool_call": _CALL,
    "tool_calls": expect("a list", type="array", items=_CALL),
    "json": {},
    "error": expect("an HTTP status 400-599", type="integer", minimum=400, maximum=599),
    "echo": expect("true", const=True),
    "times": expect("an integer >= 1", type="integer", minimum=1),
    "retry_after": expect("a number of seconds >= 0", type="number", minimum=0),
    "message": _STRING,
}
RULE_SCHEMA: dict[str, Any] = expect(
    "a rule (a mapping)", type="object", additionalProperties=False, properties=_FIELDS
)
"""One rule of a rules file; that it has exactly one answer and a valid `matches`, `_rule_problem` says."""
_RULES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["rules"],
    "properties": {
        "rules": expect(
            "a non-empty list of rules (or `rules:` holding one)", type="array", minItems=1, items=RULE_SCHEMA
        )
    },
}
_RULES_VALIDATOR = StrictValidator(_RULES_SCHEMA)


def _rule_problem(data: Mapping[str, Any]) -> tuple[str, KeyPath] | None:
    """What the schema cannot say of a rule it let through: the reason and the key path at fault."""
    given = [key for key in _ANSWERS if key in data]
    if len(given) != 1:
        shown = ", ".join(given) if given else "none"
        return f"expected exactly one answer of {', '.join(_ANSWERS)}; got {shown}", ()
    pattern = data.get("matches")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            return f"not a valid regular expression {pattern!r}: {exc}", ("matches",)
    return None


def _rule_of(data: Mapping[str, Any]) -> Rule:
    """The rule of a mapping checked by the schema and `_rule_problem`."""
    conditions = {key: data[key] for key in _CONDITIONS if key in data}
    return Rule(_answer_of(data), times=data.get("times"), echo="echo" in data, **conditions)


def _answer_of(data: Mapping[str, Any]) -> Turn | None:
    if "reply" in data:
        return Reply(text=data["reply"])
    if "json" in data:
        return Reply(text=json.dumps(data["json"], ensure_ascii=False))
    if "error" in data:
        wait = data.get("retry_after", 0)
        return HttpError(data["error"], data.get("message", "scripted error"), retry_after=str(wait))
    if "echo" in data:
        return None
    calls = [data["tool_call"]] if "tool_call" in data else data["tool_calls"]
    return Reply(tool_calls=tuple(_fake_call(call["name"], call.get("arguments")) for call in calls))


def _at(source: str, lines: YamlLines, path: KeyPath, reason: str) -> RulesError:
    """`source:line: reason`, at the line of `path` (a key path of the file)."""
    return RulesError(str(ConfigError(source, reason, lines.of(*path))))


def rule_from_data(data: object, where: str = "rule") -> Rule:
    """One rule from its mapping (the file format); RulesError naming the field at fault."""
    schema = {"type": "object", "properties": {where: RULE_SCHEMA}}  # errors read `where.field: …`
    error = first_error(StrictValidator(schema), {where: data})
    if error is not None:
        raise RulesError(error_text(error, schema, {where: data})[0])
    assert isinstance(data, Mapping)  # the schema said so
    problem = _rule_problem(data)
    if problem is not None:
        reason, path = problem
        raise RulesError(f"{dotted((where, *path))}: {reason}")
    return _rule_of(data)


def rules_from_data(data: object, source: str = "rules", lines: YamlLines = NO_LINES) -> list[Rule]:
    """Rules from a parsed file: `{rules: [...]}` or the list itself; RulesError at `source:line: field`.

    `lines` are the file's key lines (yaml_source.py), so an error names
    the line of the field at fault, as kernel.yaml's do.
    """
    document: Mapping[str, Any] = data if isinstance(data, Mapping) else {"rules": data}  # `rules[0]…` too
    outer = 0 if document is data else 1  # the steps of an error's key path that are not in the file
    error = first_error(_RULES_VALIDATOR, document)
    if error is not None:
        text, path = error_text(error, _RULES_SCHEMA, document)
        raise _at(source, lines, path[outer:], text)
    rules: list[Rule] = []
    for index, rule in enumerate(document["rules"]):
        problem = _rule_problem(rule)
        if problem is not None:
            reason, path = problem
            where = ("rules", index, *path)
            raise _at(source, lines, where[outer:], f"{dotted(where)}: {reason}")
        rules.append(_rule_of(rule))
    return rules


def load_rules(path: Path | str) -> list[Rule]:
    """The rules of a YAML or JSON file (JSON is YAML too); RulesError naming the file, line and field."""
    try:
        data, lines = read_yaml_file(Path(path))
    except ConfigError as exc:
        raise RulesError(str(exc)) from exc
    return rules_from_data(data, str(path), lines)


__all__ = [
    "RULE_KEYS",
    "RULE_SCHEMA",
    "Rule",
    "RuleBook",
    "RulesError",
    "last_user_message",
    "load_rules",
    "message_text",
    "rule_from_data",
    "rules_from_data",
]
