"""`run_subagent` (S17) from JS and Rhai against the scripted LLM server, through the real provider.

A script starts a child of its caller's process; the child runs the agent
loop on its task against tests/fakes/openai_server.py and is terminated
afterwards, whatever happened. Budgets are shared with the parent (also
under 20 scripts at once), `tools` only narrows, `output_schema` validates
the answer as llm_json does, depth and the script's deadline bound it all.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent
from agentkernel.agent.processes import Process
from agentkernel.config import load_kernel_config
from agentkernel.testing.parts import kernel_parts
from tests.conftest import ToolFactory, write_kernel_yaml
from tests.fakes import FakeLLMServer, FakeToolCall, HttpError, Reply

DELEGATE = {  # a tool handing its arguments to run_subagent, its error caught
    ".js": "function run(args) { try { const r = run_subagent(args); return {content: r.answer, data: r}; }"
    " catch (e) { return {content: e.message, data: {error: e.message}}; } }",
    ".rhai": "fn run(args) { try { let r = run_subagent(args); #{content: r.answer, data: r} }"
    " catch (e) { return #{content: e, data: #{error: e}} } }",
}
TEMPLATES = {
    "boss": "name: boss\ninstructions: Ты начальник.\ntools: [delegate, pass_on, upper]\n"
    "budget: {tokens: 1000}\n",
    "reviewer": "name: reviewer\ninstructions: Ты рецензент.\ntools: [upper, secret]\n"
    "budget: {tokens: 300}\n",
    "all-in": "name: all-in\ninstructions: Всё сразу.\ntools: [delegate, upper, secret]\n",
}


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as running:
        yield running


def write_project(project: Path, server: FakeLLMServer, extra: str = "") -> None:
    """The kernel's YAML; `extra`: more keys of its `limits:` section."""
    write_kernel_yaml(
        project,
        f"llm:\n  base_url: {server.base_url}\n  model: fake\n  max_retries: 0\n  timeout_secs: 10\n"
        "  max_concurrency: 4\n"
        # 20 tools run at once in a test, waiting on each other's budget: on a loaded machine that
        # passed the default 30 s, so the scripts' limit here is a hang's safety net, not a speed check
        "limits:\n  timeout_secs: 300\n" + extra,
    )
    folder = project / "config" / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in TEMPLATES.items():
        (folder / f"{name}.yaml").write_text(text, encoding="utf-8")


@pytest.fixture
def tools(make_tool: ToolFactory, engine: str) -> ToolFactory:
    make_tool("delegate", DELEGATE[engine], ext=engine)
    make_tool(
        "pass_on", DELEGATE[engine].replace("run_subagent(args)", "run_subagent(args.value)"), ext=engine
    )
    make_tool(
        "upper",
        "function run(a) { return a.text.toUpperCase(); }",
        yaml_extra="parameters: {type: object, properties: {text: {type: string}}, required: [text]}\n",
    )
    make_tool("secret", "function run() { return 'classified'; }")
    return make_tool


@pytest.fixture
def kernel(project: Path, server: FakeLLMServer, tools: ToolFactory) -> Iterator[Kernel]:
    write_project(project, server)
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml")) as built:
        yield built


def delegate(kernel: Kernel, caller: Process | None, **options: Any) -> Any:
    """Run the `delegate` tool with `options`: the sub-agent's `{pid, answer, data}` or `{error}`."""
    result = kernel.run_tool("delegate", options, caller)
    assert result.success, result
    return result.data


def test_s17_a_subagent_answers_from_js_and_rhai(kernel: Kernel, server: FakeLLMServer) -> None:
    server.add(
        Reply(
            tool_calls=(FakeToolCall("upper", '{"text": "отзыв"}'),), prompt_tokens=20, completion_tokens=10
        ),
        Reply(text="Одобрено: ОТЗЫВ", prompt_tokens=30, completion_tokens=10),
    )
    boss = kernel.spawn("boss", user_id="anna", session_id="s-1")
    got = delegate(kernel, boss, task="Оцени отзыв", instructions="Ты рецензент.", tools=["upper"])
    assert got["answer"] == "Одобрено: ОТЗЫВ" and got["data"] is None
    first = server.bodies[0]
    assert first["messages"][:2] == [
        {"role": "system", "content": "Ты рецензент."},
        {"role": "user", "content": "Оцени отзыв"},
    ]
    assert [t["function"]["name"] for t in first["tools"]] == ["upper"]
    assert server.bodies[1]["messages"][-1]["content"] == "ОТЗЫВ"  # the child's own tool call ran
    assert boss.budget.used == 70 and boss.tokens_used == 0  # the child spent the parent's group
    assert kernel.process(got["pid"]) is None  # cleaned up
    assert kernel.list_processes() == [boss]


def test_s17_a_named_template_keeps_only_what_the_parent_may_use(
    kernel: Kernel, server: FakeLLMServer
) -> None:
    server.add(Reply(text="ok", prompt_tokens=200, completion_tokens=50))
    boss = kernel.spawn("boss", session_id="s-1")
    got = delegate(kernel, boss, task="check", template="reviewer", name="rev")
    assert got["answer"] == "ok"
    request = server.bodies[0]
    assert request["messages"][0] == {"role": "system", "content": "Ты рецензент."}
    assert [t["function"]["name"] for t in request["tools"]] == ["upper"]  # `secret`: the boss may not
    assert boss.budget.used == 250


def test_s17_a_childs_own_budget_sits_inside_the_parents(kernel: Kernel, server: FakeLLMServer) -> None:
    server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "a"}'),), prompt_tokens=250, completion_tokens=100)
    )
    boss = kernel.spawn("boss", session_id="s-1")
    got = delegate(kernel, boss, task="check", template="reviewer")
    assert got == {"error": "run_subagent: caller budget exhausted"}  # the reviewer's 300, spent
    assert boss.budget.used == 350 and len(server.requests) == 1
    assert kernel.list_processes() == [boss]


def test_s17_tools_narrow_and_never_widen(kernel: Kernel, server: FakeLLMServer) -> None:
    boss = kernel.spawn("boss", session_id="s-1")
    got = delegate(kernel, boss, task="t", instructions="i", tools=["upper", "secret"])
    assert got == {"error": "run_subagent: tools[1]: 'secret' is not a tool that boss may use"}
    server.add(Reply(text="done"))
    assert delegate(kernel, boss, task="t", instructions="i", tools=[])["answer"] == "done"
    assert "tools" not in server.bodies[0]
    assert server.requests and kernel.list_processes() == [boss]


def test_s17_output_schema_validates_like_llm_json(kernel: Kernel, server: FakeLLMServer) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    boss = kernel.spawn("boss", session_id="s-1")
    server.add(Reply(text='```json\n{"score": 4}\n```'))
    first = delegate(kernel, boss, task="Оцени", instructions="i", output_schema=schema)
    assert first["data"] == {"score": 4}
    assert "JSON Schema" in server.bodies[0]["messages"][-1]["content"]
    server.add(Reply(text="четыре"), Reply(text='{"score": "4"}'), Reply(text='{"score": 4}'))
    third = delegate(kernel, boss, task="Оцени", instructions="i", output_schema=schema)
    assert third["data"] == {"score": 4}
    retries = [body["messages"][-1]["content"] for body in server.bodies[2:]]
    assert retries[0].startswith(
        "That answer did not validate against the JSON Schema: the answer is not JSON"
    )
    assert retries[1] == (
        "That answer did not validate against the JSON Schema: '4' is not of type 'integer' (at $.score). "
        "Answer again with only the corrected JSON."
    )
    server.add(Reply(text="no"), Reply(text="[]"), Reply(text='{"score": null}'))
    failed = delegate(kernel, boss, task="Оцени", instructions="i", output_schema=schema)
    assert failed == {
        "error": "run_subagent: structured output did not validate after 3 attempts: "
        "None is not of type 'integer' (at $.score)"
    }
    assert kernel.list_processes() == [boss]


EITHER = "run_subagent: give either template (a template's name) or instructions, not both or neither"
SHAPE = "run_subagent: expected an object {task, template | instructions, name?, tools?, output_schema?}"
KEYS = "task, template, instructions, name, tools, output_schema"
TASK = {"task": "t", "instructions": "i"}


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ("a task", f"{SHAPE}, got 'a task'"),
        ({"instructions": "i"}, "run_subagent: task must be a non-empty string, got null"),
        ({"task": 5, "instructions": "i"}, "run_subagent: task must be a non-empty string, got 5"),
        ({"task": "t"}, EITHER),
        ({"task": "t", "template": "reviewer", "instructions": "i"}, EITHER),
        (
            {"task": "t", "template": "nope"},
            "run_subagent: template: unknown template 'nope' (loaded: all-in, boss, reviewer)",
        ),
        ({**TASK, "tools": "upper"}, "run_subagent: tools must be a list of tool names, got 'upper'"),
        ({**TASK, "tools": [1]}, "run_subagent: tools[0] must be a tool's name (a non-empty string), got 1"),
        (
            {**TASK, "output_schema": "json"},
            "run_subagent: output_schema must be a JSON Schema object, got 'json'",
        ),
        (
            {**TASK, "output_schema": {"type": "thing"}},
            "run_subagent: output_schema is not a valid JSON Schema: "
            "'thing' is not valid under any of the given schemas (at type)",
        ),
        (
            {
                **TASK,
                "output_schema": {"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"},
            },
            "run_subagent: output_schema at $defs.a.anyOf[0].$ref: $ref '#/$defs/a' leads back to a schema "
            "it is part of without going into the value: validating would never end",
        ),
        ({**TASK, "model": "gpt"}, f"run_subagent: unknown key 'model' (expected: {KEYS})"),
    ],
)
def test_s17_bad_input_is_named(kernel: Kernel, server: FakeLLMServer, options: Any, error: str) -> None:
    boss = kernel.spawn("boss", session_id="s-1")
    result = kernel.run_tool("pass_on", {"value": options}, boss)
    assert result.data == {"error": error}
    assert server.requests == [] and kernel.list_processes() == [boss]


def test_s17_without_the_service_it_throws(project: Path, server: FakeLLMServer, tools: ToolFactory) -> None:
    write_project(project, server)
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml"), live=False) as kernel:
        got = delegate(kernel, None, task="t", instructions="i")
    missing = "no subagent service attached to this kernel (hook_tool attaches it with --live)"
    assert got == {"error": f"run_subagent: {missing}"}


def test_s17_a_failed_child_is_an_error_and_is_cleaned_up(kernel: Kernel, server: FakeLLMServer) -> None:
    server.add(HttpError(400, "model not found"))
    boss = kernel.spawn("boss", session_id="s-1")
    got = delegate(kernel, boss, task="t", instructions="i", name="helper")
    assert got["error"].startswith(
        "run_subagent: sub-agent helper ended with error: the LLM refused the request: "
    )
    assert "model not found" in got["error"]
    assert kernel.list_processes() == [boss]


def test_s17_a_child_cannot_outlive_the_scripts_deadline(
    project: Path, server: FakeLLMServer, tools: ToolFactory, engine: str
) -> None:
    """The child's LLM call hangs; at the tool's deadline its loop is cancelled and the process ended."""
    write_project(project, server)
    tools("delegate", DELEGATE[engine], ext=engine, yaml_extra="timeout_secs: 1\n")
    server.add(Reply(text="too late", delay=8))
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml")) as kernel:
        boss = kernel.spawn("boss", session_id="s-1")
        result = kernel.run_tool("delegate", {"task": "t", "instructions": "i"}, boss)
        assert kernel.list_processes() == [boss]  # the child is gone when the tool's call returns
    pattern = r"run_subagent: sub-agent subagent \([0-9a-f-]{36}\) was stopped at the script's deadline "
    stopped = re.fullmatch(
        pattern + r"\(timeout_secs\)", result.content
    )  # the script caught it, or its own deadline stopped it first:
    assert stopped is not None or (result.success, result.content) == (
        False,
        "script exceeded timeout_secs (1 s)",
    )


def test_s17_depth_limit_for_subagents_starting_subagents(
    project: Path, server: FakeLLMServer, tools: ToolFactory
) -> None:
    """A sub-agent starts one (it runs), which tries to start another: refused past max_subagent_depth."""
    write_project(project, server, "  max_subagent_depth: 2\n")
    deeper = FakeToolCall("delegate", '{"task": "deeper", "instructions": "again"}')
    server.add(
        Reply(tool_calls=(deeper,)),  # the child (depth 1) starts a grandchild
        Reply(tool_calls=(deeper,)),  # the grandchild (depth 2) tries too
        Reply(text="could not go deeper"),  # the grandchild's answer
        Reply(text="the grandchild said so"),  # the child's
    )
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml")) as kernel:
        root = kernel.spawn("all-in", session_id="s-1")
        got = delegate(kernel, root, task="go", instructions="start one more", tools=["delegate"])
        assert got["answer"] == "the grandchild said so"
        assert kernel.list_processes() == [root]
    refused, answered = (server.bodies[i]["messages"][-1] for i in (2, 3))
    assert refused["role"] == "tool" and refused["content"] == (
        "run_subagent: sub-agents nested 3 deep, more than limits.max_subagent_depth (2); "
        "does a sub-agent start sub-agents of itself?"
    )
    assert (answered["role"], answered["content"]) == ("tool", "could not go deeper")


def test_s17_budgets_shared_by_parent_and_subagents_under_20_parallel_scripts(
    kernel: Kernel, server: FakeLLMServer
) -> None:
    """Each child answer costs 100 tokens of the boss's 1000: every token is counted, the limit is never
    passed (each call holds its bound first, llm/token_bound.py), and once what is left cannot cover a
    call's bound no sub-agent asks the LLM again."""
    server.respond_with(
        lambda request: Reply(text="готово", prompt_tokens=60, completion_tokens=40, delay=0.02)
    )
    boss = kernel.spawn("boss", session_id="s-1")
    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(lambda i: delegate(kernel, boss, task=f"t{i}", instructions="i"), range(20)))
    answers = [r for r in results if "answer" in r]
    refused = [r for r in results if "error" in r]
    assert all(r["answer"] == "готово" for r in answers)
    assert all(r == {"error": "run_subagent: caller budget exhausted"} for r in refused)
    assert boss.budget.used == 100 * len(server.requests) == 100 * len(answers)  # nothing lost, nothing twice
    # how many fit depends on each prompt's bound (the task's bytes): at least one, and never past the limit
    assert 1 <= len(answers) <= 10 and boss.budget.used <= 1000 and boss.budget.held == 0
    before = len(server.requests)
    assert delegate(kernel, boss, task="one more", instructions="i") == {
        "error": "run_subagent: caller budget exhausted"
    }
    assert len(server.requests) == before and kernel.list_processes() == [boss]


def test_s17_from_an_agents_turn_on_its_event_loop(
    project: Path, server: FakeLLMServer, tools: ToolFactory
) -> None:
    """The LLM calls a tool that starts a sub-agent: the child runs on the chat's own loop, meanwhile."""
    write_project(project, server)
    server.add(
        Reply(tool_calls=(FakeToolCall("delegate", '{"task": "проверь", "template": "reviewer"}', id="c1"),)),
        Reply(text="одобрено", prompt_tokens=30, completion_tokens=10),
        Reply(text="Рецензент одобрил."),
    )
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml")) as kernel:
        chat = kernel.chat("boss", user_id="anna", session_id="s-chat")

        async def ignore(event: LoopEvent) -> None:
            pass

        result = asyncio.run(chat.send("проверь отзыв", ignore))
        assert result.answer == "Рецензент одобрил."
        assert kernel.list_processes() == [chat.process]
    tool_message = server.bodies[2]["messages"][-1]
    assert tool_message["content"] == "одобрено"
    assert server.bodies[1]["messages"][0] == {"role": "system", "content": "Ты рецензент."}
    assert chat.process.budget.used == 15 + 40 + 15


def test_s17_the_caller_of_an_ended_process_gets_no_subagent(kernel: Kernel, server: FakeLLMServer) -> None:
    boss = kernel.spawn("boss", session_id="s-1")
    caller = boss.caller(kernel_parts(kernel).services)
    kernel.terminate(boss.pid)
    result = kernel.run_tool("delegate", {"task": "t", "instructions": "i"}, caller)
    assert result.data == {"error": f"run_subagent: the calling process {boss.pid} is not running"}
    assert server.requests == []


def test_s17_from_the_terminal_a_subagent_is_a_process_of_its_own(
    kernel: Kernel, server: FakeLLMServer
) -> None:
    server.add(Reply(text="hi"))
    got = delegate(kernel, None, task="t", template="reviewer")
    assert got["answer"] == "hi" and kernel.list_processes() == []
    assert [t["function"]["name"] for t in server.bodies[0]["tools"]] == ["secret", "upper"]


def test_s17_a_hook_starts_a_subagent_on_the_chats_loop(
    project: Path, server: FakeLLMServer, tools: ToolFactory
) -> None:
    """Before any tool runs: the hook's sub-agent runs on the chat's event loop, not on a loop of its own."""
    write_project(project, server)
    hooks = project / "config" / "scripts" / "hooks"
    (hooks / "second_opinion.yaml").write_text(
        "kind: script_hook\nname: second_opinion\nscript: second_opinion.js\n", encoding="utf-8"
    )
    (hooks / "second_opinion.js").write_text(
        "function before_user_message(ctx, msg) {\n"
        "  const r = run_subagent({task: msg.content, instructions: 'Оцени.', tools: []});\n"
        "  return {notice: 'мнение: ' + r.answer};\n"
        "}\n",
        encoding="utf-8",
    )
    (project / "config" / "templates" / "hooked.yaml").write_text(
        "name: hooked\ninstructions: Ты помощник.\ntools: [upper]\nhooks: [second_opinion]\n",
        encoding="utf-8",
    )
    server.add(Reply(text="годится"), Reply(text="Ответ."))
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml")) as kernel:
        chat = kernel.chat("hooked", session_id="s-hook")
        events: list[LoopEvent] = []

        async def collect(event: LoopEvent) -> None:
            events.append(event)

        result = asyncio.run(chat.send("вопрос", collect))
        assert result.answer == "Ответ."
        assert kernel_parts(kernel).home.owns_loop is False
    assert [e.data["text"] for e in events if e.kind == "notice"] == ["мнение: годится"]


def test_s17_from_agentkernel_tool_run(project: Path, server: FakeLLMServer, tools: ToolFactory) -> None:
    """The terminal: a sub-agent on the kernel's own loop, its connections closed there, the command exits."""
    write_project(project, server)
    server.add(Reply(text="из терминала"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentkernel.cli.main",
            "tool",
            "run",
            "delegate",
            '{"task": "t", "template": "reviewer"}',
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,  # a safety net against a hang, not a speed check
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert (shown["content"], shown["success"]) == ("из терминала", True)


def test_s17_tools_from_the_terminal_must_be_loaded(kernel: Kernel, server: FakeLLMServer) -> None:
    got = delegate(kernel, None, task="t", instructions="i", tools=["upper", "ghost"])
    assert got == {"error": "run_subagent: tools[1]: 'ghost' is not a tool loaded"}
    assert server.requests == []
