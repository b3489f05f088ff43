"""Every YAML file the kernel reads is checked one way (config/schema.py): `file:line: field: why`.

For each kind of file beside kernel.yaml and the tool YAML — a template, an
entry of its `mcp_servers:`, a static job of `cron.jobs`, a scripted LLM's
rule and a tool's test case — a misspelt key is refused with a "did you
mean", and a value of the wrong type is named with its field and its line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel.config import ToolSpec, load_kernel_config, load_script_spec
from agentkernel.config.templates import load_template
from agentkernel.errors import ConfigError
from agentkernel.testing import RulesError, load_rules
from agentkernel.testing.cases import read_cases

TEMPLATE = "name: t\ninstructions: x\n"
STDIO = "mcp_servers:\n  - name: srv\n    command: npx\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def template_error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path / "t.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_template(path)
    return str(caught.value).removeprefix(f"{tmp_path}/")


def kernel_yaml_error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path / "config" / "kernel.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_kernel_config(path)
    return str(caught.value).removeprefix(f"{tmp_path}/")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            TEMPLATE + "max_turn: 3\n",
            "t.yaml:3: unknown key 'max_turn' (allowed: budget, description, hooks, instructions, max_turns,"
            " mcp_servers, model, name, tools); did you mean 'max_turns'?",
        ),
        (
            TEMPLATE + "model: {temprature: 1}\n",
            "t.yaml:3: model: unknown key 'temprature' (allowed: max_tokens, name, provider, providers,"
            " temperature); did you mean 'temperature'?",
        ),
        (TEMPLATE + "max_turns: 3.0\n", "t.yaml:3: max_turns: 3.0 is not of type 'integer'"),
        (TEMPLATE + "budget:\n  tokens: '500'\n", "t.yaml:4: budget.tokens: '500' is not of type 'integer'"),
    ],
)
def test_a_template(tmp_path: Path, text: str, error: str) -> None:
    assert template_error(tmp_path, text) == error


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            TEMPLATE + STDIO + "    timeout_sec: 5\n",
            "t.yaml:6: mcp_servers[0]: unknown key 'timeout_sec' (allowed: args, command, env, name,"
            " timeout_secs, tools); did you mean 'timeout_secs'?",
        ),
        (
            TEMPLATE + STDIO + "    timeout_secs: soon\n",
            "t.yaml:6: mcp_servers[0].timeout_secs: 'soon' is not of type 'number'",
        ),
        (
            TEMPLATE + STDIO + "    args: [-y, 3]\n",
            "t.yaml:6: mcp_servers[0].args[1]: 3 is not of type 'string'",
        ),
        (
            TEMPLATE + "mcp_servers:\n  - name: srv\n    url: http://127.0.0.1:1/mcp\n    tools: tool\n",
            "t.yaml:6: mcp_servers[0].tools: 'tool' is not of type 'array'",
        ),
    ],
)
def test_an_mcp_servers_entry(tmp_path: Path, text: str, error: str) -> None:
    assert template_error(tmp_path, text) == error


JOB = "cron:\n  jobs:\n    - name: nightly\n      template: hello\n      prompt: report\n"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            JOB + "      shedule: '0 0 3 * * *'\n",
            "config/kernel.yaml:6: cron.jobs[0].shedule: unknown field (known: name, template, interval_secs,"
            " schedule, oneshot_at, timezone, prompt, notify, misfire); did you mean 'schedule'?",
        ),
        (
            JOB + "      interval_secs: hourly\n",
            "config/kernel.yaml:6: cron.jobs[0].interval_secs: expected a number of seconds, got 'hourly'",
        ),
        (
            JOB + "      schedule: 5\n",
            "config/kernel.yaml:6: cron.jobs[0].schedule: expected a cron expression of six fields, seconds"
            ' first ("0 0 9 * * *"), got 5',
        ),
        (
            JOB + "      interval_secs: 60\n      notify:\n        - {type: wbhook, url: 'http://x'}\n",
            "config/kernel.yaml:8: cron.jobs[0].notify[0].type: expected one of log, webhook, session,"
            " got 'wbhook'; did you mean 'webhook'?",
        ),
        (
            "cron:\n  jobs:\n    - name: nightly\n      template: hello\n      interval_secs: 60\n",
            "config/kernel.yaml:3: cron.jobs[0].prompt: required",
        ),
    ],
)
def test_a_static_cron_job(tmp_path: Path, text: str, error: str) -> None:
    assert kernel_yaml_error(tmp_path, text) == error


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "rules:\n  - reply: a\n  - contians: x\n    reply: b\n",
            "r.yaml:3: rules[1]: unknown key 'contians' (allowed: contains, echo, error, json, last_role,"
            " matches, message, reply, retry_after, times, tool_call, tool_calls); did you mean 'contains'?",
        ),
        ("- reply: a\n  times: twice\n", "r.yaml:2: rules[0].times: expected an integer >= 1, got 'twice'"),
        ("- error: '503'\n", "r.yaml:1: rules[0].error: expected an HTTP status 400-599, got '503'"),
        (
            "- {reply: a, echo: true}\n",
            "r.yaml:1: rules[0]: expected exactly one answer of reply, tool_call, tool_calls, json, error,"
            " echo; got reply, echo",
        ),
    ],
)
def test_a_scripted_llm_rule(tmp_path: Path, text: str, error: str) -> None:
    path = write(tmp_path / "r.yaml", text)
    with pytest.raises(RulesError) as caught:
        load_rules(path)
    assert str(caught.value).removeprefix(f"{tmp_path}/") == error


TOOL = "kind: script_tool\nname: echo\nscript: echo.js\ntests:\n  - name: c\n    args: {}\n"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            TOOL + "    expect: {success: true}\n    users: alice\n",
            "echo.yaml:8: tests[0].users (case 'c'): unknown key 'users'"
            " (allowed: args, expect, llm, name, user); did you mean 'user'?",
        ),
        (
            TOOL + "    expect:\n      success: 'yes'\n",
            "echo.yaml:8: tests[0].expect.success (case 'c'): expected true or false, got 'yes'",
        ),
    ],
)
def test_a_tools_test_case(tmp_path: Path, text: str, error: str) -> None:
    write(tmp_path / "echo.js", "function run() { return 'ok'; }\n")
    spec = load_script_spec(write(tmp_path / "echo.yaml", text))
    assert isinstance(spec, ToolSpec)
    (problem,) = read_cases(spec).problems
    assert str(problem).removeprefix(f"{tmp_path}/") == error
