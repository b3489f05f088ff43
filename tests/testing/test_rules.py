"""The scripted LLM's rules (issue 15 §2), over real HTTP: reply, tool call, JSON, fail N times, echo.

Each request goes to the real `FakeLLMServer` through httpx, and what comes
back is read as a client reads it; the file format's mistakes name the rule
and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkernel.testing import FakeLLMServer, Rule, RuleBook, RulesError, load_rules
from agentkernel.testing.rules import rules_from_data


def ask(server: FakeLLMServer, *messages: tuple[str, str]) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": role, "content": text} for role, text in messages]}
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=10)


def message(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()["choices"][0]["message"]
    return answer


@pytest.fixture
def server() -> Any:
    with FakeLLMServer() as started:
        yield started


def test_rules_match_on_text_regex_and_role_in_order(server: FakeLLMServer) -> None:
    server.respond_with(
        RuleBook(
            [
                Rule.tool_call("forecast", {"city": "Paris"}, contains="weather", last_role="user"),
                Rule.text("Sunny.", last_role="tool"),
                Rule.json({"answer": 42}, matches=r"^sum \d+$"),
            ]
        )
    )
    call = message(ask(server, ("user", "the weather in Paris?")))["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("forecast", {"city": "Paris"})
    assert message(ask(server, ("user", "the weather?"), ("tool", "21 °C")))["content"] == "Sunny."
    assert json.loads(message(ask(server, ("user", "sum 12")))["content"]) == {"answer": 42}
    refused = ask(server, ("user", "sum twelve"))
    assert refused.status_code == 500
    assert "no rule answers this request (last user message: 'sum twelve')" in refused.text


def test_fail_n_times_then_the_next_rule(server: FakeLLMServer) -> None:
    server.respond_with(RuleBook([Rule.error(503, times=2), Rule.text("back")]))
    first, second = ask(server, ("user", "hi")), ask(server, ("user", "hi"))
    assert (first.status_code, second.status_code) == (503, 503)
    assert first.headers["retry-after"] == "0"  # the kernel's retry does not wait
    assert message(ask(server, ("user", "hi")))["content"] == "back"


def test_scripted_turns_come_before_the_rules(server: FakeLLMServer) -> None:
    from agentkernel.testing import Reply

    server.add(Reply(text="scripted"))
    server.respond_with(RuleBook([Rule(echo=True)]))
    assert message(ask(server, ("user", "one")))["content"] == "scripted"
    assert message(ask(server, ("user", "two")))["content"] == "two"


def test_rules_from_a_yaml_file(server: FakeLLMServer, tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "rules:\n"
        "  - error: 429\n    times: 1\n    retry_after: 0.5\n"
        "  - contains: цена\n    json: {price: 990}\n"
        "  - tool_calls: [{name: a}, {name: b, arguments: {x: 1}}]\n    times: 1\n"
        "  - reply: готово\n",
        encoding="utf-8",
    )
    server.respond_with(RuleBook(load_rules(path)))
    limited = ask(server, ("user", "цена?"))
    assert (limited.status_code, limited.headers["retry-after"]) == (429, "0.5")
    assert json.loads(message(ask(server, ("user", "цена?")))["content"]) == {"price": 990}
    calls = message(ask(server, ("user", "x")))["tool_calls"]
    shown = [(c["function"]["name"], c["function"]["arguments"]) for c in calls]
    assert shown == [("a", "{}"), ("b", '{"x": 1}')]
    assert message(ask(server, ("user", "x")))["content"] == "готово"


def test_rules_from_a_json_list(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps([{"echo": True}]), encoding="utf-8")
    assert load_rules(path)[0].echo


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([{"reply": "a", "json": 1}], "rules[0]: expected exactly one answer of reply, tool_call, "),
        ([{"contains": "x"}], "rules[0]: expected exactly one answer"),
        ([{"reply": "a", "matches": "[x"}], "rules[0].matches: not a valid regular expression '[x'"),
        ([{"reply": "a", "when": "x"}], "rules[0]: unknown key 'when'"),
        ([{"reply": 5}], "rules[0].reply: expected a string, got 5"),
        ([{"error": 200}], "rules[0].error: expected an HTTP status 400-599, got 200"),
        ([{"reply": "a", "times": 0}], "rules[0].times: expected an integer >= 1, got 0"),
        ([{"reply": "a", "last_role": "bot"}], "rules[0].last_role: expected one of user, assistant, tool"),
        ([{"tool_call": {"arguments": {}}}], "rules[0].tool_call: expected {name: TOOL, arguments: {...}}"),
        ([], "expected a non-empty list of rules"),
        ({"rule": []}, "unknown key 'rule' (allowed: rules); did you mean 'rules'?"),
    ],
)
def test_bad_rules_name_the_rule_and_field(data: object, message: str) -> None:
    with pytest.raises(RulesError) as caught:
        rules_from_data(data, "demo.yaml")
    assert str(caught.value).startswith("demo.yaml"), str(caught.value)
    assert message in str(caught.value)


def test_an_unreadable_rules_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match=r"missing\.yaml: cannot read: "):
        load_rules(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [\n", encoding="utf-8")
    with pytest.raises(RulesError, match=r"bad\.yaml:2: bad YAML: "):
        load_rules(bad)
