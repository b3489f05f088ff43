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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkernel.testing.openai_server import FakeToolCall, HttpError, RecordedRequest, Reply, Turn

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


def _answer_of(data: Mapping[str, Any], where: str) -> Turn | None:
    given = [key for key in _ANSWERS if key in data]
    if len(given) != 1:
        shown = ", ".join(given) if given else "none"
        raise RulesError(f"{where}: expected exactly one answer of {', '.join(_ANSWERS)}; got {shown}")
    (key,) = given
    value = data[key]
    if key == "reply":
        return Reply(text=_typed(value, str, f"{where}.reply", "a string"))
    if key == "json":
        return Reply(text=json.dumps(value, ensure_ascii=False))
    if key == "error":
        return _error_answer(data, where)
    if key == "echo":
        if value is not True:
            raise RulesError(f"{where}.echo: expected true, got {value!r}")
        return None
    calls = [value] if key == "tool_call" else _typed(value, list, f"{where}.tool_calls", "a list")
    return Reply(tool_calls=tuple(_call_of(call, f"{where}.{key}") for call in calls))


def _error_answer(data: Mapping[str, Any], where: str) -> HttpError:
    status = data["error"]
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
        raise RulesError(f"{where}.error: expected an HTTP status 400-599, got {status!r}")
    wait = data.get("retry_after", 0)
    if not isinstance(wait, int | float) or isinstance(wait, bool) or wait < 0:
        raise RulesError(f"{where}.retry_after: expected a number of seconds >= 0, got {wait!r}")
    message = _typed(data.get("message", "scripted error"), str, f"{where}.message", "a string")
    return HttpError(status, message, retry_after=str(wait))


def _call_of(call: object, where: str) -> FakeToolCall:
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
        raise RulesError(f"{where}: expected {{name: TOOL, arguments: {{...}}}}, got {call!r}")
    unknown = set(call) - {"name", "arguments"}
    if unknown:
        raise RulesError(f"{where}: unknown keys {sorted(unknown)} (allowed: name, arguments)")
    return _fake_call(call["name"], call.get("arguments"))


def _typed(value: Any, kind: type, where: str, text: str) -> Any:
    if not isinstance(value, kind):
        raise RulesError(f"{where}: expected {text}, got {value!r}")
    return value


def rule_from_data(data: object, where: str = "rule") -> Rule:
    """One rule from its mapping (the file format); RulesError naming the field at fault."""
    if not isinstance(data, Mapping):
        raise RulesError(f"{where}: expected a mapping, got {data!r}")
    unknown = [key for key in data if key not in RULE_KEYS]
    if unknown:
        raise RulesError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(RULE_KEYS)})")
    answer = _answer_of(data, where)
    conditions = {key: data[key] for key in _CONDITIONS if key in data}
    for key, value in conditions.items():
        _typed(value, str, f"{where}.{key}", "a string")
    times = data.get("times")
    if times is not None and (not isinstance(times, int) or isinstance(times, bool)):
        raise RulesError(f"{where}.times: expected an integer >= 1, got {times!r}")
    try:
        return Rule(answer, times=times, echo=answer is None, **conditions)
    except RulesError as exc:
        raise RulesError(f"{where}.{exc}") from exc


def rules_from_data(data: object, source: str = "rules") -> list[Rule]:
    """Rules from a parsed file: `{rules: [...]}` or the list itself."""
    rules = data.get("rules") if isinstance(data, Mapping) and set(data) == {"rules"} else data
    if not isinstance(rules, Sequence) or isinstance(rules, str) or not rules:
        raise RulesError(f"{source}: expected a non-empty list of rules (or `rules:` holding one)")
    return [rule_from_data(rule, f"{source}: rules[{i}]") for i, rule in enumerate(rules)]


def load_rules(path: Path | str) -> list[Rule]:
    """The rules of a YAML or JSON file (JSON is YAML too); RulesError naming the file and rule."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RulesError(f"{path}: cannot read the rules: {exc}") from exc
    return rules_from_data(data, str(path))


__all__ = [
    "RULE_KEYS",
    "Rule",
    "RuleBook",
    "RulesError",
    "last_user_message",
    "load_rules",
    "message_text",
    "rule_from_data",
    "rules_from_data",
]
