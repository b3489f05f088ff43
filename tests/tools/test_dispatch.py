"""The one dispatch path (DESIGN rule 6): lookup, access, validation, crash protection, history."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.config import ScriptLimits, load_kernel_config
from agentkernel.helpers import default_helper_table
from agentkernel.helpers.table import HelperTable, ScriptCall
from agentkernel.identity import Caller
from agentkernel.scripting.contract import HelperBinding, LoadedScript, ScriptEngine
from agentkernel.scripting.host import ScriptHost
from agentkernel.testing.parts import kernel_parts
from agentkernel.tools.dispatch import Asker, Decision, Vetted, certainly_valid
from agentkernel.tools.history import ToolResultHistory
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONValue, NoValue
from agentkernel.util.file_stamps import Stamp
from tests.conftest import ToolFactory

STATS = "function run(args) { return `${args.text.length}:${args.count ?? 0}`; }"
STATS_PARAMS = """
parameters:
  type: object
  properties:
    text: {type: string, minLength: 1}
    count: {type: integer, minimum: 0}
  required: [text]
  additionalProperties: false
"""


def test_unknown_tool(kernel: Kernel) -> None:
    result = kernel.run_tool("nope", {})
    assert (result.success, result.content) == (False, "unknown tool 'nope'")


BAD_PARAMETERS = "parameters:\n  type: object\n  required: 5\n"


def test_s2_5_a_tool_whose_file_failed_says_why(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path
) -> None:
    make_tool("stats", STATS, yaml_extra=BAD_PARAMETERS)
    (tools_dir / "other.yaml").write_text("kind: script_tool\nname: other\nscript: gone.js\n")
    result = kernel.run_tool("stats", {"text": "x"}, kernel.caller())
    assert (result.success, result.content) == (
        False,
        "tool 'stats' is not available: config/scripts/tools/stats.yaml:7 failed to load: "
        "parameters.required: not a valid JSON Schema: 5 is not of type 'array'",
    )
    assert "other" not in result.content  # only the file meant to declare `stats`


def test_s2_5_fixing_the_file_makes_the_tool_available(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("stats", STATS, yaml_extra=BAD_PARAMETERS)
    assert "is not available" in kernel.run_tool("stats", {"text": "x"}).content
    make_tool("stats", STATS, yaml_extra=STATS_PARAMS)
    assert kernel.run_tool("stats", {"text": "abc"}).content == "3:0"


@pytest.mark.parametrize(
    ("file", "yaml", "script", "reason"),
    [
        # The YAML does not parse: the file's stem is the tool's name.
        ("wc.yaml", "kind: script_tool\nname: wc\n  script: [\n", None, ":3 failed to load: bad YAML: "),
        # It parses: its `name:` counts, whatever the file is called.
        ("wc_v2.yaml", "kind: script_tool\nname: wc\nscript: gone.js\n", None,
         ":3 failed to load: script: file 'gone.js' not found (looked at config/scripts/tools/gone.js)"),
        ("wc.yaml", "kind: script_tol\nname: wc\nscript: wc.js\n", None,
         ":1 failed to load: kind: expected 'script_tool' or 'script_hook', got 'script_tol'"),
        # The script does not compile: its location is shown inside the project.
        ("wc.yaml", "kind: script_tool\nname: wc\nscript: wc.js\n", "function run( {",
         ":3 failed to load: script wc.js: SyntaxError: "),
    ],
)  # fmt: skip
def test_s2_5_which_file_declares_the_unavailable_tool(
    kernel: Kernel, tools_dir: Path, file: str, yaml: str, script: str | None, reason: str
) -> None:
    (tools_dir / file).write_text(yaml)
    if script is not None:
        (tools_dir / "wc.js").write_text(script)
    content = kernel.run_tool("wc", {}).content
    assert content.startswith(f"tool 'wc' is not available: config/scripts/tools/{file}{reason}")
    assert str(tools_dir) not in content  # the project's own paths, not the server's


def test_a_failed_hook_of_the_same_name_is_not_the_tool(kernel: Kernel, project: Path) -> None:
    hooks = project / "config" / "scripts" / "hooks"
    (hooks / "audit.yaml").write_text("kind: script_hook\nname: audit\nscript: gone.rhai\n")
    assert kernel.run_tool("audit", {}).content == "unknown tool 'audit'"


PLAIN_PARAMS = """
parameters:
  type: object
  properties:
    text: {type: string, description: the text}
    count: {type: integer}
  required: [text]
  additionalProperties: false
"""


@pytest.mark.parametrize(
    ("args", "outcome"),
    [
        ({"text": "ab"}, "2:0"),
        ({"text": "ab", "count": 3}, "2:3"),
        (
            {"text": "ab", "count": 1.0},
            "2:1",
        ),  # an integer to JSON Schema: the quick check leaves it to jsonschema
        ({}, "invalid arguments for stats: 'text' is a required property"),
        ({"text": "a", "count": True}, "invalid arguments for stats: count: True is not of type 'integer'"),
        ({"text": "a", "extra": 1}, "Additional properties are not allowed ('extra' was unexpected)"),
        ([1, 2], "invalid arguments for stats: [1, 2] is not of type 'object'"),
    ],
)
def test_a_plain_schema_passes_and_refuses_as_jsonschema_does(
    kernel: Kernel, make_tool: ToolFactory, args: JSONValue, outcome: str
) -> None:
    make_tool("stats", STATS, yaml_extra=PLAIN_PARAMS)
    assert certainly_valid(kernel.tool("stats"), {"text": "a"}, None)
    assert outcome in kernel.run_tool("stats", args).content


def test_a_quick_yes_waits_for_no_deadline_that_passed(kernel: Kernel, make_tool: ToolFactory) -> None:
    """Past its caller's deadline a nested call is not run, whether its arguments are checked quickly
    or by jsonschema."""
    make_tool("stats", STATS, yaml_extra=PLAIN_PARAMS)
    late = replace(kernel.caller(), deadline=time.monotonic() - 1)
    assert certainly_valid(kernel.tool("stats"), {"text": "a"}, None)
    assert not certainly_valid(kernel.tool("stats"), {"text": "a"}, late.deadline)
    assert not kernel.run_tool("stats", {"text": "a"}, late).success


def test_callers_outside_the_allow_list_learn_nothing_of_the_file(
    kernel: Kernel, make_tool: ToolFactory
) -> None:
    make_tool("stats", STATS, yaml_extra=BAD_PARAMETERS)
    outsider = kernel.caller(template="hello-agent", allowed_tools=frozenset({"other"}))
    assert kernel.run_tool("stats", {}, outsider).content == "unknown tool 'stats'"
    insider = kernel.caller(template="hello-agent", allowed_tools=frozenset({"stats"}))
    assert kernel.run_tool("stats", {}, insider).content.startswith("tool 'stats' is not available: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "invalid arguments for stats: 'text' is a required property"),
        ({"text": 5}, "invalid arguments for stats: text: 5 is not of type 'string'"),
        ({"text": ""}, "invalid arguments for stats: text: '' should be non-empty"),
        ({"text": "a", "count": -1}, "invalid arguments for stats: count: -1 is less than the minimum of 0"),
        ({"text": "a", "extra": 1}, "Additional properties are not allowed ('extra' was unexpected)"),
        ([1, 2], "invalid arguments for stats: [1, 2] is not of type 'object'"),
        ({"text": 1, "count": "x"}, "count: 'x' is not of type 'integer'; text: 1 is not of type 'string'"),
    ],
)
def test_s2_5_arguments_are_refused_before_the_script_runs(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path, args: JSONValue, message: str
) -> None:
    # The script would leave a trace if it ran; it must not.
    make_tool("stats", "function run() { throw new Error('script ran'); }", yaml_extra=STATS_PARAMS)
    result = kernel.run_tool("stats", args)
    assert result.success is False
    assert message in result.content
    assert "script ran" not in result.content


def test_valid_arguments_reach_the_script(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("stats", STATS, yaml_extra=STATS_PARAMS)
    assert kernel.run_tool("stats", {"text": "abc", "count": 2}).content == "3:2"


def test_access_check_refuses_tools_outside_the_allow_list(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("open", "function run() { return 'open'; }")
    make_tool("secret", "function run() { return 'secret'; }")
    caller = kernel.caller(template="hello-agent", allowed_tools=frozenset({"open"}))
    assert kernel.run_tool("open", {}, caller).content == "open"
    refused = kernel.run_tool("secret", {}, caller)
    assert (refused.success, refused.content) == (False, "tool 'secret' is not allowed for hello-agent")
    assert [t.name for t in kernel.list_tools(caller)] == ["open"]
    assert [t.name for t in kernel.list_tools(kernel.caller())] == ["open", "secret"]
    assert [t.name for t in kernel.list_tools()] == ["open", "secret"]


def test_s16_3_list_tools_shows_name_description_parameters(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("stats", STATS, yaml_extra=STATS_PARAMS)
    (entry,) = kernel.list_tools(kernel.caller())
    assert entry.name == "stats" and entry.description == "test tool stats"
    assert entry.parameters["required"] == ["text"]


def test_history_is_per_session_and_newest_first(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("echo", "function run(a) { return String(a.n); }")
    alice = kernel.caller(session_id="s-alice")
    bob = kernel.caller(session_id="s-bob")
    for n in range(3):
        kernel.run_tool("echo", {"n": n}, alice)
    kernel.run_tool("echo", {"n": 99}, bob)
    assert [kernel_parts(kernel).history.get(alice, "echo", i).content for i in range(3)] == ["2", "1", "0"]  # type: ignore[union-attr]
    assert kernel_parts(kernel).history.get(alice, "echo", 3) is None
    assert kernel_parts(kernel).history.get(bob, "echo").content == "99"  # type: ignore[union-attr]
    kernel.run_tool("echo", {"n": 5}, kernel.caller())  # no session: nothing recorded
    assert kernel_parts(kernel).history.get(alice, "echo").content == "2"  # type: ignore[union-attr]


def test_history_is_keyed_by_user_and_session(kernel: Kernel, make_tool: ToolFactory) -> None:
    """A session id is not a secret: B naming A's session id reads B's own results."""
    make_tool("echo", "function run(a) { return String(a.n); }")
    alice = kernel.caller(user_id="alice", session_id="shared")
    bob = kernel.caller(user_id="bob", session_id="shared")
    kernel.run_tool("echo", {"n": 1}, alice)
    assert kernel_parts(kernel).history.get(bob, "echo") is None
    kernel.run_tool("echo", {"n": 2}, bob)
    assert kernel_parts(kernel).history.get(alice, "echo").content == "1"  # type: ignore[union-attr]
    kernel_parts(kernel).history.forget_session("alice", "shared")
    assert kernel_parts(kernel).history.get(alice, "echo") is None
    assert kernel_parts(kernel).history.get(bob, "echo").content == "2"  # type: ignore[union-attr]


def test_history_holds_a_bounded_number_of_sessions() -> None:
    """A kernel that runs for weeks meets sessions without end: the least recently used go."""
    history = ToolResultHistory(per_tool=2, sessions=3)  # in memory
    callers = [Caller(user_id="u", session_id=f"s{n}") for n in range(5)]
    for caller in callers[:3]:
        history.record(caller, "t", ToolResult(content=caller.session_id or ""))
    history.record(callers[0], "t", ToolResult(content="s0 again"))  # s0 is now the most recent
    for caller in callers[3:]:
        history.record(caller, "t", ToolResult(content=caller.session_id or ""))
    assert len(history) == 3
    assert history.get(callers[1], "t") is None and history.get(callers[2], "t") is None
    assert history.get(callers[0], "t").content == "s0 again"  # type: ignore[union-attr]


def test_history_is_bounded(project: Path, make_tool: ToolFactory) -> None:
    config = project / "config" / "kernel.yaml"
    config.write_text(config.read_text() + "limits:\n  history_per_tool: 2\n")
    kernel = Kernel(load_kernel_config(config))
    make_tool("echo", "function run(a) { return String(a.n); }")
    caller = kernel.caller(session_id="s")
    for n in range(5):
        kernel.run_tool("echo", {"n": n}, caller)
    assert kernel_parts(kernel).history.get(caller, "echo", 1).content == "3"  # type: ignore[union-attr]
    assert kernel_parts(kernel).history.get(caller, "echo", 2) is None


class ExplodingEngine:
    """A real engine whose calls fail with a Python bug, to prove crash protection."""

    name = "exploding"

    def compile(self, path: Path, source: str, deadline: float | None = None) -> Path:
        return path

    def call(
        self,
        script: Path,
        function: str,
        args: Sequence[JSONValue],
        optional: Sequence[JSONValue],
        binding: HelperBinding,
        limits: ScriptLimits,
    ) -> JSONValue | NoValue:
        raise ZeroDivisionError("engine bug")

    def defined_functions(self, *args: object) -> frozenset[str]:
        return frozenset({"run"})  # a tool loads only when its script defines run


def test_crash_protection_turns_kernel_bugs_into_failed_results(
    kernel: Kernel, make_tool: ToolFactory, caplog: pytest.LogCaptureFixture
) -> None:
    kernel_parts(kernel).host.engines[".boom"] = ExplodingEngine()
    make_tool("boom", "anything", ext=".boom")
    make_tool("fine", "function run() { return 'fine'; }")
    with caplog.at_level(logging.ERROR, logger="agentkernel.dispatch"):
        result = kernel.run_tool("boom", {})
    assert result.success is False
    assert result.content == "tool 'boom' failed inside the kernel: ZeroDivisionError: engine bug"
    assert "Traceback" in caplog.text and "engine bug" in caplog.text
    assert kernel.run_tool("fine", {}).content == "fine"


def test_s1_1_any_other_extension_runs_on_rhai(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("txt", "fn run(args) { `rhai ${args.n + 1}` }", ext=".txt")
    make_tool("py", "print('hi')", ext=".py")  # not Rhai: a char literal holds one character
    assert kernel.run_tool("txt", {"n": 41}).content == "rhai 42"
    (problem,) = kernel.problems()
    assert problem.path.name == "py.yaml"
    assert "Syntax error: Invalid character: 'hi'" in problem.reason and "py.py:1:7" in problem.reason


def test_acall_runs_on_worker_threads_concurrently(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("square", "function run(a) { return String(a.n * a.n); }")
    caller = kernel.caller()

    async def many() -> list[str]:
        results = await asyncio.gather(*(kernel.arun_tool("square", {"n": n}, caller) for n in range(20)))
        return [r.content for r in results]

    assert asyncio.run(many()) == [str(n * n) for n in range(20)]


def test_acall_puts_a_call_that_needs_a_person_to_its_asker_and_runs_it_as_decided(
    kernel: Kernel, make_tool: ToolFactory
) -> None:
    """S24.4: with an asker, `approval: always` is asked on the event loop (no desk, no wait); a tool
    that needs nobody never reaches the asker; an asker that fails denies the call."""
    make_tool("echo", "function run(a) { return 'ran ' + a.text; }", yaml_extra="approval: always\n")
    make_tool("plain", "function run() { return 'plain ran'; }")
    caller = kernel.caller(user_id="alice")
    asked: list[Vetted] = []

    def asker(decision: Decision) -> Asker:
        async def ask(vetted: Vetted, who: Caller) -> Decision:
            assert who.user_id == "alice"
            asked.append(vetted)
            return decision

        return ask

    async def broken(vetted: Vetted, who: Caller) -> Decision:
        raise RuntimeError("the line went dead")

    async def calls() -> list[ToolResult]:
        yes, no = asker(Decision(True)), asker(Decision(False, reason="denied: not today"))
        return [
            await kernel.arun_tool("echo", {"text": "hi"}, caller, "mcp_client", asker=yes),
            await kernel.arun_tool("echo", {"text": "hi"}, caller, "mcp_client", asker=no),
            await kernel.arun_tool("echo", {"text": "hi"}, caller, "mcp_client", asker=broken),
            await kernel.arun_tool("plain", {}, caller, "mcp_client", asker=no),
        ]

    approved, denied, failed, plain = asyncio.run(calls())
    assert (approved.success, approved.content) == (True, "ran hi")
    assert (denied.success, denied.content) == (False, "tool 'echo' not run: denied: not today")
    assert failed.content == (
        "tool 'echo' not run: denied: asking a person failed: RuntimeError: the line went dead"
    )
    assert (plain.success, plain.content) == (True, "plain ran")
    assert [(v.spec.name, v.call.args, v.call.origin, v.ask) for v in asked] == [
        ("echo", {"text": "hi"}, "mcp_client", "Run the tool 'echo' with these arguments?")
    ] * 2
    assert kernel.approvals().pending_for("alice") == []  # the asker asked; the desk never did


def test_results_serialise_to_the_cli_shape(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("shape", "function run() { return {content: 'c', error: 'e', success: false}; }")
    assert json.loads(json.dumps(kernel.run_tool("shape", {}).to_json())) == {
        "content": "c",
        "success": False,
        "error": "e",
        "visual": None,
        "warnings": [],
    }


# -- one budget per call (issue 10): compiling, the engine and the helpers share one deadline -----------


class BudgetHost(ScriptHost):
    """The real host, noting the deadline each compile was given."""

    def __init__(self, table: HelperTable) -> None:
        super().__init__(table)
        self.compile_deadlines: list[float | None] = []

    def compile(
        self, path: Path, deadline: float | None = None, known: Stamp = None
    ) -> tuple[ScriptEngine[Any], LoadedScript]:
        self.compile_deadlines.append(deadline)
        return super().compile(path, deadline, known)


@pytest.mark.parametrize("ext", [".js", ".rhai"])
def test_a_call_has_one_budget_from_compile_to_helper(
    project: Path, make_tool: ToolFactory, ext: str
) -> None:
    seen: list[ScriptCall] = []

    def probe(call: ScriptCall) -> float:
        seen.append(call)
        return call.remaining_secs() or 0.0

    table = default_helper_table()
    table.register("budget_probe", probe)
    kernel = Kernel(load_kernel_config(project / "config" / "kernel.yaml"), helpers=table)
    host = BudgetHost(table)
    kernel_parts(kernel).dispatcher.host = host
    source = (
        "function run() { return String(budget_probe()); }"
        if ext == ".js"
        else "fn run(args) { `${budget_probe()}` }"
    )
    make_tool("limited", source, ext=ext, yaml_extra="timeout_secs: 7\nmax_operations: 123456\n")
    first = kernel.run_tool("limited", {})
    second = kernel.run_tool("limited", {})
    assert first.success and second.success, (first.content, second.content)
    budgets = [call.budget for call in seen]
    assert all(b is not None for b in budgets) and budgets[0] is not budgets[1]  # one per call, made once
    assert [(b.timeout_secs, b.max_operations) for b in budgets if b] == [(7, 123456)] * 2
    # the first call compiled the script by its own deadline; the second found it cached
    assert host.compile_deadlines[0] == budgets[0].deadline  # type: ignore[union-attr]
    assert 0 < float(first.content) <= 7


@pytest.mark.parametrize("ext", [".js", ".rhai"])
def test_a_call_asks_the_file_system_about_its_script_once_and_still_sees_each_edit(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path, ext: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalog's lookup has just seen the script's stamp; the script cache takes it from
    there rather than asking again (one `stat` of the script a call, not two)."""
    source = {".js": 'function run(args) { return "v1"; }', ".rhai": 'fn run(args) { "v1" }'}[ext]
    make_tool("stamped", source, ext=ext)
    assert kernel.run_tool("stamped", {}).content == "v1"
    script = str(tools_dir / f"stamped{ext}")
    asked: list[str] = []
    real_stat = os.stat

    def counting_stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if os.fspath(path) == script:
            asked.append(script)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting_stat)
    assert kernel.run_tool("stamped", {}).content == "v1"
    assert len(asked) == 1
    (tools_dir / f"stamped{ext}").write_text(source.replace("v1", "v2 longer"), encoding="utf-8")
    assert kernel.run_tool("stamped", {}).content == "v2 longer"  # the next call runs the edit
