"""`call_tool`, `list_tools` and `get_tool_result` (S16) from JS and Rhai, through the real dispatch path.

Every call runs a real script tool that calls another real script tool: the
nested call takes the one dispatch path (access check against the caller's
template, argument validation, crash protection, truncation, history) with
the original caller's identity, one level deeper, never past its calling
script's deadline. The agent-loop cases run against the scripted LLM server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent
from agentkernel.config import load_kernel_config
from agentkernel.tools.results import ToolResult
from tests.conftest import ToolFactory, write_kernel_yaml
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.helpers.probes import probe_source

UPPER_YAML = "parameters: {type: object, properties: {text: {type: string}}, required: [text]}\n"
UPPER_JS = """
function run(args) {
  return {content: args.text.toUpperCase(), data: {length: args.text.length},
          visual: {type: 'file', path: 'report.docx', name: 'report.docx'}};
}
"""
WHOAMI_JS = "function run() { return {content: 'me', data: caller()}; }"


def obj(engine: str, text: str) -> str:
    """A literal object in the engine's syntax: `{…}` in JS, `#{…}` in Rhai."""
    return text if engine == ".js" else "#" + text


def probe(kernel: Kernel, make_tool: ToolFactory, engine: str, expr: str, **call: Any) -> dict[str, Any]:
    """Run `expr` in a probe tool of `engine`; its `{value}` or `{error}`."""
    make_tool("probe", probe_source(engine, expr), ext=engine)
    result = kernel.run_tool("probe", {}, call.get("caller"))
    assert isinstance(result.data, dict), result
    return result.data


@pytest.fixture
def tools(make_tool: ToolFactory) -> ToolFactory:
    make_tool("upper", UPPER_JS, yaml_extra=UPPER_YAML)
    make_tool("whoami", WHOAMI_JS)
    make_tool("plain", "function run() { return 'just text'; }")
    make_tool("secret", "function run() { return 'classified'; }")
    make_tool("probe", "function run() { return 'replaced by each probe'; }")
    return make_tool


@pytest.fixture
def templates(project: Path) -> Path:
    folder = project / "config" / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tester.yaml").write_text(
        "name: tester\ninstructions: test\ntools: [probe, upper, whoami]\n", encoding="utf-8"
    )
    return folder


def test_s16_1_call_tool_returns_content_success_data_visual(
    kernel: Kernel, tools: ToolFactory, engine: str
) -> None:
    got = probe(kernel, tools, engine, 'call_tool("upper", ' + obj(engine, '{text: "отчёт"}') + ")")
    assert got == {
        "value": {
            "content": "ОТЧЁТ",
            "success": True,
            "data": {"length": 5},
            "visual": [{"type": "file", "path": "report.docx", "name": "report.docx"}],
        }
    }
    plain = probe(kernel, tools, engine, 'call_tool("plain", ' + obj(engine, "{}") + ")")
    assert plain == {"value": {"content": "just text", "success": True, "data": None, "visual": None}}


def test_s16_1_visual_passes_on_untouched(kernel: Kernel, tools: ToolFactory) -> None:
    """The manual's example: a script forwards the file block another tool made."""
    tools(
        "forward",
        """
        function run() {
          const r = call_tool("upper", {text: "# Отчёт"});
          return {content: "готово", success: r.success, visual: r.visual};
        }
        """,
    )
    result = kernel.run_tool("forward", {})
    assert (result.content, result.success) == ("готово", True)
    assert result.visual == [{"type": "file", "path": "report.docx", "name": "report.docx"}]


def test_s16_1_the_nested_call_keeps_the_callers_identity(
    kernel: Kernel, tools: ToolFactory, templates: Path, engine: str
) -> None:
    process = kernel.spawn("tester", user_id="anna", session_id="s-1")
    got = probe(kernel, tools, engine, 'call_tool("whoami", ' + obj(engine, "{}") + ").data", caller=process)
    assert got["value"] == {
        "pid": process.pid,
        "session_id": "s-1",
        "user_id": "anna",
        "template": "tester",
        "temp_dir": str(process.temp_dir),
    }


def test_s16_1_call_tool_is_refused_a_tool_the_template_does_not_allow(
    kernel: Kernel, tools: ToolFactory, templates: Path, engine: str
) -> None:
    process = kernel.spawn("tester", session_id="s-1")
    got = probe(kernel, tools, engine, 'call_tool("secret", ' + obj(engine, "{}") + ")", caller=process)
    assert got["value"] == {
        "content": "tool 'secret' is not allowed for tester",
        "success": False,
        "data": None,
        "visual": None,
    }


def test_s16_1_arguments_are_validated_and_a_crash_is_a_result(
    kernel: Kernel, tools: ToolFactory, engine: str
) -> None:
    bad = probe(kernel, tools, engine, 'call_tool("upper", ' + obj(engine, "{text: 5}") + ")")
    assert bad["value"]["success"] is False
    assert bad["value"]["content"] == "invalid arguments for upper: text: 5 is not of type 'string'"
    tools("thrower", "function run() { throw new Error('boom'); }")
    thrown = probe(kernel, tools, engine, 'call_tool("thrower", ' + obj(engine, "{}") + ")")
    assert thrown["value"]["success"] is False
    assert thrown["value"]["content"].startswith("Error: boom")
    missing = probe(kernel, tools, engine, 'call_tool("nope", ' + obj(engine, "{}") + ")")
    assert missing["value"] == {
        "content": "unknown tool 'nope'",
        "success": False,
        "data": None,
        "visual": None,
    }


def test_s16_1_a_long_result_is_cut_as_the_llm_would_get_it(kernel: Kernel, tools: ToolFactory) -> None:
    tools("long", "function run() { return 'x'.repeat(60000); }")
    got = probe(kernel, tools, ".js", 'call_tool("long", {}).content.length')
    assert 50_000 < got["value"] < 50_200  # max_result_chars, plus the note saying so


@pytest.mark.parametrize("bad", ['"upper", [1]', '"upper", "text"', '"upper", 5', '"upper", null'])
def test_call_tool_args_must_be_an_object(kernel: Kernel, tools: ToolFactory, engine: str, bad: str) -> None:
    expr = f"call_tool({bad})".replace("null", "()" if engine == ".rhai" else "null")
    got = probe(kernel, tools, engine, expr)
    assert got["error"].startswith("call_tool: args must be an object (the tool's arguments), got ")


@pytest.mark.parametrize("bad", ["5", '""'])
def test_call_tool_name_must_be_a_name(kernel: Kernel, tools: ToolFactory, engine: str, bad: str) -> None:
    got = probe(kernel, tools, engine, f"call_tool({bad}, " + obj(engine, "{}") + ")")
    assert got["error"].startswith("call_tool: name must be a tool's name (a non-empty string), got ")


# -- depth ----------------------------------------------------------------------------------


RECURSE = {
    ".js": 'function run() { return "<" + call_tool("recurse", {}).content; }',
    ".rhai": 'fn run(args) { "<" + call_tool("recurse", #{}).content }',
}


@pytest.mark.parametrize("depth", [8, 2])
def test_s16_2_recursion_ends_at_the_depth_limit(
    project: Path, make_tool: ToolFactory, engine: str, depth: int
) -> None:
    """A tool calling itself runs max_call_depth + 1 times, then is refused, long before max_operations."""
    if depth != 8:
        write_kernel_yaml(project, f"limits:\n  max_call_depth: {depth}\n")
    make_tool("recurse", RECURSE[engine], ext=engine)
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml")) as kernel:
        result = kernel.run_tool("recurse", {})
    assert result.success is True
    refusal = (
        f"tool 'recurse' not run: calls nested {depth + 1} deep through call_tool, more than "
        f"limits.max_call_depth ({depth}); does a tool call itself?"
    )
    assert result.content == "<" * (depth + 1) + refusal


def test_a_deep_chain_of_deep_js_stacks_stays_inside_the_thread(
    kernel: Kernel, make_tool: ToolFactory
) -> None:
    """Each level fills its JS stack, then calls the next: a nested call's stack is halved, so no crash."""
    make_tool(
        "dive",
        """
        function dive(n) {
          try { return dive(n + 1); } catch (e) { return call_tool("dive", {}).content + "|" + n; }
        }
        function run() { return dive(0); }
        """,
    )
    results: list[ToolResult] = []

    async def on_a_worker_thread() -> None:  # as the agent loop runs tools
        results.append(await kernel.arun_tool("dive", {}))

    asyncio.run(on_a_worker_thread())
    (result,) = results
    levels = result.content.split("|")
    assert levels[0].startswith("tool 'dive' not run: calls nested 9 deep")
    assert len(levels) == 10 and all(int(n) > 50 for n in levels[1:])


HOG_JS = """
function run(args) {
  const held = "x".repeat(args.mb * 1000000);
  if (args.depth === 0) return "held " + held.length;
  const inner = call_tool("hog", {mb: args.inner_mb, inner_mb: args.inner_mb, depth: args.depth - 1});
  return held.length + " then " + inner.content;
}
"""


def test_a_nested_call_gets_half_its_caller_s_memory(kernel: Kernel, make_tool: ToolFactory) -> None:
    """S16.2, S21: every level of a chain holds its heap while the next runs; with the full limit at each,
    a tool calling itself held nine heaps at once (495 MB in one call). Halved each level, a chain holds
    about twice one call's memory, and what fits in half still runs."""
    make_tool("hog", HOG_JS)
    assert kernel.config.limits.memory_limit_mb == 64  # the default: 32 MiB one level down, 16 two
    fits = kernel.run_tool("hog", {"mb": 40, "inner_mb": 20, "depth": 1})
    assert fits.content == "40000000 then held 20000000"
    deeper = kernel.run_tool("hog", {"mb": 40, "inner_mb": 40, "depth": 1})
    assert deeper.content == "40000000 then script ran out of memory (limit 32 MiB)"
    chain = kernel.run_tool("hog", {"mb": 20, "inner_mb": 20, "depth": 3})
    assert chain.content == "20000000 then 20000000 then script ran out of memory (limit 16 MiB)"


def test_a_nested_call_ends_at_its_callers_deadline(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "spin",
        "function run() { while (true) {} }",
        yaml_extra="timeout_secs: 30\nmax_operations: 100000000000000\n",
    )
    make_tool(
        "impatient",
        """
        function run() {
          const r = call_tool("spin", {});
          return "spin returned: " + r.content;
        }
        """,
        yaml_extra="timeout_secs: 0.5\n",
    )
    result = kernel.run_tool("impatient", {})
    shown = re.fullmatch(r"spin returned: script exceeded timeout_secs \((0\.\d+) s\)", result.content)
    assert shown is not None, result.content
    assert float(shown[1]) <= 0.5  # the time its caller had left, not its own 30 s


# -- list_tools -----------------------------------------------------------------------------


def test_s16_3_list_tools_is_what_the_callers_llm_sees(
    kernel: Kernel, tools: ToolFactory, templates: Path, engine: str
) -> None:
    process = kernel.spawn("tester")
    got = probe(kernel, tools, engine, "list_tools()", caller=process)
    names = [t["name"] for t in got["value"]]
    assert names == ["probe", "upper", "whoami"]
    upper = got["value"][1]
    assert upper == {
        "name": "upper",
        "description": "test tool upper",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    }
    everything = probe(kernel, tools, engine, "list_tools()")  # the kernel itself: every tool
    assert [t["name"] for t in everything["value"]] == ["plain", "probe", "secret", "upper", "whoami"]


def test_s16_3_list_tools_takes_no_arguments(kernel: Kernel, tools: ToolFactory, engine: str) -> None:
    got = probe(kernel, tools, engine, 'list_tools("x")')
    assert got["error"] == "list_tools: expected at most 0 argument(s), got 1"


# -- get_tool_result ------------------------------------------------------------------------


def test_s16_4_get_tool_result_reads_this_sessions_results(
    kernel: Kernel, tools: ToolFactory, engine: str
) -> None:
    anna = kernel.caller(user_id="anna", session_id="s-1")
    kernel.run_tool("upper", {"text": "first"}, anna)
    kernel.run_tool("upper", {"text": "second"}, anna)
    latest = probe(kernel, tools, engine, 'get_tool_result("upper")', caller=anna)
    assert latest["value"] == {
        "content": "SECOND",
        "success": True,
        "data": {"length": 6},
        "visual": [{"type": "file", "path": "report.docx", "name": "report.docx"}],
    }
    before = probe(kernel, tools, engine, 'get_tool_result("upper", 1)', caller=anna)
    assert before["value"]["content"] == "FIRST"
    missing = probe(kernel, tools, engine, 'get_tool_result("upper", 2)', caller=anna)
    assert missing["error"] == "get_tool_result: no result of 'upper' at index 2 in this session"
    boris = kernel.caller(user_id="boris", session_id="s-1")  # the same session id, another user
    other = probe(kernel, tools, engine, 'get_tool_result("upper")', caller=boris)
    assert other["error"] == "get_tool_result: no result of 'upper' at index 0 in this session"


def test_s16_4_a_call_tool_result_is_in_the_history(kernel: Kernel, tools: ToolFactory, engine: str) -> None:
    session = kernel.caller(session_id="s-2")
    probe(kernel, tools, engine, 'call_tool("upper", ' + obj(engine, '{text: "abc"}') + ")", caller=session)
    got = probe(kernel, tools, engine, 'get_tool_result("upper").content', caller=session)
    assert got["value"] == "ABC"


@pytest.mark.parametrize(
    ("expr", "error"),
    [
        ('get_tool_result("upper", -1)', "get_tool_result: index must be an integer, 0 or more, got -1"),
        ('get_tool_result("upper", "1")', "get_tool_result: index must be an integer, 0 or more, got '1'"),
        ("get_tool_result(7)", "get_tool_result: tool must be a tool's name (a non-empty string), got 7"),
    ],
)
def test_get_tool_result_bad_input(
    kernel: Kernel, tools: ToolFactory, engine: str, expr: str, error: str
) -> None:
    got = probe(kernel, tools, engine, expr, caller=kernel.caller(session_id="s"))
    assert got["error"] == error


def test_get_tool_result_needs_a_session_and_an_allowed_tool(
    kernel: Kernel, tools: ToolFactory, templates: Path, engine: str
) -> None:
    got = probe(kernel, tools, engine, 'get_tool_result("upper")')
    assert got["error"] == "get_tool_result: no result of 'upper': this call has no session"
    process = kernel.spawn("tester", session_id="s-3")
    kernel.run_tool("secret", {}, kernel.caller(session_id="s-3"))
    refused = probe(kernel, tools, engine, 'get_tool_result("secret")', caller=process)
    assert refused["error"] == "get_tool_result: tool 'secret' is not allowed for tester"


# -- without the services (hook_tool without --live) ---------------------------------------------


LIVE_ONLY = "attached to this kernel (hook_tool attaches it with --live)"


@pytest.mark.parametrize(
    ("expr", "error"),
    [
        ('call_tool("upper", OBJ)', f"call_tool: no tool-call service {LIVE_ONLY}"),
        ("list_tools()", f"list_tools: no tool-call service {LIVE_ONLY}"),
        ('get_tool_result("upper")', f"get_tool_result: no tool-result history {LIVE_ONLY}"),
    ],
)
def test_s16_2_without_the_services_each_helper_throws(
    project: Path, tools: ToolFactory, engine: str, expr: str, error: str
) -> None:
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml"), live=False) as kernel:
        got = probe(
            kernel,
            tools,
            engine,
            expr.replace("OBJ", obj(engine, "{}")),
            caller=kernel.caller(session_id="s"),
        )
    assert got["error"] == error


# -- from the agent loop, against the scripted LLM ----------------------------------------------


@pytest.fixture
def llm_project(project: Path) -> Iterator[tuple[Path, FakeLLMServer]]:
    with FakeLLMServer() as server:
        write_kernel_yaml(project, f"llm:\n  base_url: {server.base_url}\n  model: fake\n  max_retries: 0\n")
        yield project, server


def test_an_agents_tool_reaches_only_its_templates_tools(
    llm_project: tuple[Path, FakeLLMServer], tools: ToolFactory, templates: Path, engine: str
) -> None:
    project, server = llm_project
    source = {
        ".js": 'function run(a) { const r = call_tool(a.tool, {text: "x"}); '
        + 'return r.success + ": " + r.content; }',
        ".rhai": 'fn run(a) { let r = call_tool(a.tool, #{text: "x"}); `${r.success}: ${r.content}` }',
    }[engine]
    tools("probe", source, ext=engine)
    server.add(
        Reply(tool_calls=(FakeToolCall("probe", '{"tool": "secret"}', id="c1"),)),
        Reply(tool_calls=(FakeToolCall("probe", '{"tool": "upper"}', id="c2"),)),
        Reply(text="done"),
    )
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml")) as kernel:
        chat = kernel.chat("tester", session_id="s-agent")

        async def ignore(event: LoopEvent) -> None:
            pass

        result = asyncio.run(chat.send("go", ignore))
    assert result.answer == "done"
    tool_messages = [m for m in server.bodies[2]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [
        "false: tool 'secret' is not allowed for tester",
        "true: X",
    ]
    offered = [t["function"]["name"] for t in server.bodies[0]["tools"]]
    assert offered == ["probe", "upper", "whoami"]


def test_history_results_carry_data_for_scripts(kernel: Kernel, tools: ToolFactory) -> None:
    session = kernel.caller(session_id="s-4")
    kernel.run_tool("upper", {"text": "ab"}, session)
    got = probe(kernel, tools, ".js", 'JSON.stringify(get_tool_result("upper").data)', caller=session)
    assert json.loads(got["value"]) == {"length": 2}


def test_a_nested_caller_is_the_same_caller_one_deeper(kernel: Kernel) -> None:
    """Every field but the depth and the deadline is copied, including any a Caller gains later."""
    caller = kernel.caller(user_id="anna", session_id="s-1", template="t", allowed_tools=frozenset({"a"}))
    nested = caller.one_deeper(123.0).one_deeper(456.0)
    assert (nested.call_depth, nested.deadline) == (2, 123.0)
    for field in dataclasses.fields(caller):
        if field.name not in ("call_depth", "deadline"):
            assert getattr(nested, field.name) is getattr(caller, field.name), field.name
