"""The kernel's face (issue 10, shape 1): every verb callers use, and closing everything it opened.

Real components throughout: real QuickJS and Rhai scripts, the real SQLite
state and message stores, real DuckDB files. "Nothing left open" is read off
the process itself: no file descriptor of this process may still point into
the project folder once a kernel (or a CLI command) is done.
"""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.config import HookSpec, ToolSpec, load_kernel_config
from agentkernel.config.templates import TemplateSpec
from agentkernel.errors import ConfigError
from agentkernel.llm import LimitedProvider, OpenAICompatProvider
from agentkernel.llm.deferred import DeferredProvider
from agentkernel.llm.fallback import FallbackProvider
from agentkernel.llm.measured import MeasuredProvider
from agentkernel.services.state import Namespace, SqliteStateStore, StateError, from_config
from agentkernel.testing.parts import kernel_parts
from tests.conftest import ToolFactory, write_kernel_yaml

STORES_YAML = "state:\n  db_path: data/state.db\n"
KEEPER = """
function run(args) {
    state_set("global", "last", args.text);
    db_execute("notes.duckdb", "CREATE TABLE IF NOT EXISTS notes (text VARCHAR)");
    db_execute("notes.duckdb", "INSERT INTO notes VALUES ('" + args.text + "')");
    return String(db_query("notes.duckdb", "SELECT count(*) AS n FROM notes", 10).rows[0].n);
}
"""
KEEPER_HOOK = """
function before_user_message(ctx, msg) {
    state_set("global", "seen", msg.content);
    return {notice: "kept"};
}
"""
PARAMS = "parameters: {type: object, properties: {text: {type: string}}, required: [text]}\n"


def open_files_under(folder: Path) -> list[str]:
    """The files under `folder` this process holds open now (read from /proc/self/fd)."""
    root = str(folder.resolve())
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used, closed since
            continue
        if target.startswith(root):
            found.append(target)
    return sorted(found)


needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def make_hook(project: Path, name: str, source: str, extra: str = "") -> Path:
    hooks = project / "config" / "scripts" / "hooks"
    write(hooks / f"{name}.js", source)
    return write(hooks / f"{name}.yaml", f"kind: script_hook\nname: {name}\nscript: {name}.js\n{extra}")


def make_template(project: Path, name: str, body: str) -> Path:
    return write(project / "config" / "templates" / f"{name}.yaml", f"name: {name}\n{body}")


@pytest.fixture
def stores_project(project: Path) -> Path:
    """A project with the state store switched on and a tool that writes to it and to DuckDB."""
    write_kernel_yaml(project, STORES_YAML)
    tools = project / "config" / "scripts" / "tools"
    write(tools / "keeper.js", KEEPER)
    write(tools / "keeper.yaml", f"kind: script_tool\nname: keeper\nscript: keeper.js\n{PARAMS}")
    return project


# -- run_tool, arun_tool, tool, load_spec ---------------------------------------------------------


def test_run_tool_by_name_by_spec_and_for_a_process(
    kernel: Kernel, make_tool: ToolFactory, tmp_path: Path
) -> None:
    make_tool("shout", "function run(a) { return a.text.toUpperCase(); }", yaml_extra=PARAMS)
    make_tool("other", "function run() { return 'other'; }")
    assert kernel.run_tool("shout", {"text": "hi"}).content == "HI"
    refused = kernel.run_tool("shout", {})
    assert not refused.success and refused.content.startswith("invalid arguments for shout: ")
    assert kernel.run_tool("ghost", {}).content == "unknown tool 'ghost'"
    outside = write(tmp_path / "elsewhere" / "far.js", "function run() { return 'far'; }")
    far = write(outside.with_suffix(".yaml"), "kind: script_tool\nname: far\nscript: far.js\n")
    spec = kernel.load_spec(far)
    assert isinstance(spec, ToolSpec) and kernel.run_tool(spec, {}).content == "far"
    assert kernel.run_tool("far", {}).content == "unknown tool 'far'"  # loading a file registers nothing
    make_template(kernel.config.root, "narrow", "instructions: x\ntools: [shout]\n")
    process = kernel.spawn("narrow", session_id="s-1")
    assert kernel.run_tool("shout", {"text": "a"}, process).content == "A"  # S16.3: its template's tools
    assert kernel.run_tool("other", {}, process).content == "tool 'other' is not allowed for narrow"
    assert [t.name for t in kernel.list_tools(process)] == ["shout"]


def test_arun_tool_runs_on_worker_threads(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("square", "function run(a) { return String(a.n * a.n); }")

    async def many() -> list[str]:
        results = await asyncio.gather(*(kernel.arun_tool("square", {"n": n}) for n in range(8)))
        return [r.content for r in results]

    assert asyncio.run(many()) == [str(n * n) for n in range(8)]


def test_tool_and_hook_say_why_a_name_is_missing(
    kernel: Kernel, make_tool: ToolFactory, project: Path
) -> None:
    make_tool("fine", "function run() { return 1; }")
    make_tool("broken", "function run( {")
    assert kernel.tool("fine").name == "fine"
    with pytest.raises(
        ConfigError,
        match=r"tool 'broken' is not available: .*broken.yaml:4 failed to load: script broken.js: Syn",
    ):
        kernel.tool("broken")
    with pytest.raises(ConfigError, match=r"unknown tool 'nope' \(loaded: fine; 1 file failed to load"):
        kernel.tool("nope")
    make_hook(project, "audit", "function before_user_message() { return 'n'; }")
    assert kernel.hook("audit").name == "audit"
    with pytest.raises(ConfigError, match=r"unknown hook 'nope' \(loaded: audit\)"):
        kernel.hook("nope")
    hook_file = project / "config" / "scripts" / "hooks" / "audit.yaml"
    assert isinstance(kernel.load_spec(hook_file), HookSpec)
    with pytest.raises(ConfigError, match=r"script broken\.js: SyntaxError"):
        kernel.load_spec(project / "config" / "scripts" / "tools" / "broken.yaml")


# -- listing and problems -------------------------------------------------------------------------


def test_lists_and_problems_are_what_check_shows(
    kernel: Kernel, make_tool: ToolFactory, project: Path
) -> None:
    make_tool("beta", "function run() { return 1; }")
    make_tool("alpha", "fn run() { 2 }", ext=".rhai")
    make_tool("broken", "function run( {")
    make_hook(project, "late", "function after_loop() {}", "priority: 5\n")
    make_hook(project, "early", "function after_loop() {}", "priority: -5\n")
    make_template(project, "good", "instructions: x\ntools: [alpha]\nhooks: [early]\n")
    make_template(project, "ghostly", "instructions: x\ntools: [ghost]\n")
    make_template(project, "bad", "instructions: x\nmax_turns: 0\n")
    assert [t.name for t in kernel.list_tools()] == ["alpha", "beta"]
    assert [h.name for h in kernel.list_hooks()] == ["early", "late"]  # the order they run in
    assert [t.name for t in kernel.list_templates()] == ["ghostly", "good"]  # ghostly loads, cannot start
    every = [(p.path.name, p.line) for p in kernel.problems()]
    assert every == [("broken.yaml", 4), ("bad.yaml", 3), ("ghostly.yaml", 3)]  # by path, then line
    assert [p.path.name for p in kernel.problems(templates=False)] == ["broken.yaml"]
    assert [p.path.name for p in kernel.problems(scripts=False)] == ["bad.yaml", "ghostly.yaml"]
    assert kernel.template("good").tools == ("alpha",)
    with pytest.raises(ConfigError, match="unknown tool 'ghost'"):
        kernel.template("ghostly")


# -- run_hooks: the loop's recording --------------------------------------------------------------

GATE = """
function before_user_message(ctx, msg) { return {suppress: true, notice: "held: " + msg.content}; }
function after_turn(ctx, question, answer) { return "after " + question.content + " / " + answer; }
function after_loop(ctx, reason) { throw new Error("no journal"); }
"""


def test_run_hooks_runs_three_events_in_order(kernel: Kernel, project: Path) -> None:
    make_hook(project, "gate", GATE)
    make_hook(
        project, "echo", "function before_user_message(ctx, m) { return {reply: 'pong'}; }", "priority: -1\n"
    )
    run = kernel.run_hooks(["gate", "echo"], {"role": "user", "content": "ping"})
    assert (run.before.reply, run.before.suppressed) == ("pong", False)  # echo runs first and ends the chain
    assert run.after_notices == ["after ping / [object Object]"]  # the reply is the answer
    assert [(r.hook, r.event, r.failed) for r in run.records] == [
        ("echo", "before_user_message", False),
        ("gate", "after_turn", False),
        ("gate", "after_loop", True),
    ]
    alone = kernel.run_hooks(kernel.hook("gate"), {"role": "user", "content": "x"})
    assert alone.before.suppressed and alone.after_notices == ["after x / null"]  # suppressed: no answer
    with pytest.raises(ConfigError, match="unknown hook 'ghost'"):
        kernel.run_hooks("ghost", {"role": "user", "content": "x"})


def test_run_hooks_records_as_the_agent_loop_does(project: Path) -> None:
    """One hook, one message: through a chat (the loop) and through run_hooks; the hook records match.

    The hook suppresses the message, so the loop never asks an LLM.
    """
    make_hook(project, "gate", GATE)
    make_template(project, "held", "instructions: x\nhooks: [gate]\n")
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml")) as kernel:

        async def quiet(event: object) -> None:
            return None

        chat = kernel.chat("held", session_id="s-loop")
        result = asyncio.run(chat.send("hello", quiet))
        assert result.reason.value == "blocked"
        kernel.run_hooks("gate", {"role": "user", "content": "hello"}, kernel.caller(session_id="s-tool"))
        by_loop = [r for r in kernel.transcript("s-loop") if r.role == "hook"]
        by_tool = kernel.transcript("s-tool")
    entries = [[(r.role, r.kind, r.content, r.meta) for r in rs] for rs in (by_loop, by_tool)]
    assert entries[0] == entries[1]
    verdict = {"suppress": True, "notice": "held: hello"}
    failure = "Error: no journal (at gate.js:4:51)"
    assert entries[1] == [
        (
            "hook",
            "hook",
            json.dumps(verdict),
            {"hook": "gate", "event": "before_user_message", "result": verdict},
        ),
        (
            "hook",
            "hook",
            '"after hello / null"',
            {"hook": "gate", "event": "after_turn", "result": "after hello / null"},
        ),
        ("hook", "error", failure, {"hook": "gate", "event": "after_loop", "error": failure}),
    ]  # kernel.md 9: content is the return value as JSON, or the failure's text


def test_a_kernel_that_is_not_live_records_no_hooks(project: Path) -> None:
    make_hook(project, "gate", GATE)
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml"), live=False) as kernel:
        kernel.run_hooks("gate", {"role": "user", "content": "x"}, kernel.caller(session_id="s"))
    assert not (project / "data" / "messages.db").exists()


# -- processes and chats --------------------------------------------------------------------------


def test_spawn_terminate_and_the_process_table(kernel: Kernel, project: Path) -> None:
    make_template(project, "boss", "instructions: x\nbudget: {tokens: 100}\n")
    make_template(project, "helper", "instructions: y\n")
    boss = kernel.spawn("boss", user_id="anna", session_id="s-1")
    child = kernel.spawn("helper", parent=boss, name="helper-1")
    assert (child.session_id, child.user_id, child.name, child.parent_pid) == (
        "s-1",
        "anna",
        "helper-1",
        boss.pid,
    )
    assert child.budget is boss.budget and boss.temp_dir is not None and child.temp_dir == boss.temp_dir
    assert boss.temp_dir.parent == kernel.config.temp_root.resolve()  # made on first use (test_files.py)
    assert kernel.process(child.pid) is child and kernel.list_processes() == [boss, child]
    assert kernel.terminate(boss.pid) == [boss, child]
    assert child.terminated and kernel.process(boss.pid) is None and kernel.list_processes() == []
    assert kernel.terminate(boss.pid) == []
    with pytest.raises(ConfigError, match="unknown template 'ghost'"):
        kernel.spawn("ghost")
    made = kernel.spawn(TemplateSpec(name="adhoc", instructions="z", budget_tokens=7))  # built in code
    assert (made.template_name, made.budget.remaining, made.session_id) == ("adhoc", 7, None)


def test_end_chat_ends_its_process_and_keeps_its_tool_results_for_the_sessions_next_chat(
    kernel: Kernel, make_tool: ToolFactory, project: Path
) -> None:
    """The results live in the store: another process may serve the session, or a chat reopen on it."""
    make_tool("echo", "function run(a) { return String(a.n); }")
    make_template(project, "talker", "instructions: x\ntools: [echo]\n")
    chat = kernel.chat("talker", user_id="anna")
    process = chat.process
    assert process.session_id and kernel.list_processes() == [process]
    kernel.run_tool("echo", {"n": 1}, process)
    caller = process.caller(kernel.caller().services)
    assert kernel_parts(kernel).history.get(caller, "echo") is not None
    kernel.end_chat(chat)
    assert process.terminated and kernel.list_processes() == []
    assert kernel_parts(kernel).history.get(caller, "echo") is not None  # bounded by limits.history_sessions
    again = kernel.chat("talker", user_id="anna", session_id=process.session_id, resume=True)
    caller_again = again.process.caller(kernel.caller().services)
    assert kernel_parts(kernel).history.get(caller_again, "echo") is not None
    kernel.end_chat(again)


# -- closing ----------------------------------------------------------------------------------------


@needs_proc
def test_the_context_manager_closes_every_service_and_the_store(stores_project: Path) -> None:
    config = load_kernel_config(stores_project / "config" / "kernel.yaml")
    with Kernel(config) as kernel:
        caller = kernel.caller(user_id="anna", session_id="s-1")
        assert kernel.run_tool("keeper", {"text": "one"}, caller).content == "1"
        assert kernel.run_tool("keeper", {"text": "two"}, caller).content == "2"
        kernel.run_hooks([], {"role": "user", "content": "x"}, caller)
        kernel.transcript("s-1")  # opens the message store
        held = open_files_under(stores_project)
        assert any(p.endswith("state.db") for p in held) and any(p.endswith("notes.duckdb") for p in held)
        assert any(p.endswith("messages.db") for p in held)
    assert open_files_under(stores_project) == []
    kernel.close()  # twice is harmless
    with Kernel(config) as again:  # what was written is all there
        assert again.run_tool("keeper", {"text": "three"}).content == "3"


def test_a_service_handed_in_is_closed_with_the_kernel(project: Path) -> None:
    config = load_kernel_config(write_kernel_yaml(project, STORES_YAML))
    store = from_config(config)
    assert isinstance(store, SqliteStateStore)
    with Kernel(config, extra_services={"state": store}):
        pass  # never used: still the kernel's to close
    with pytest.raises(StateError, match="the state store is closed"):
        store.get(Namespace("global", ""), "k")


def test_async_with_closes_the_llm_client_on_its_loop(project: Path) -> None:
    from tests.fakes import FakeLLMServer, Reply

    make_template(project, "talker", "instructions: x\n")
    with FakeLLMServer() as server:
        server.add(Reply(text="hello"))
        config = load_kernel_config(
            write_kernel_yaml(project, f"llm:\n  base_url: {server.base_url}\n  model: m\n  max_retries: 0\n")
        )

        async def talk() -> DeferredProvider:
            async with Kernel(config) as kernel:

                async def quiet(event: object) -> None:
                    return None

                result = await kernel.chat("talker", stream=False).send("hi", quiet)
                assert result.answer == "hello"
                llm = kernel_parts(kernel).provider  # the provider the metered one wraps
                assert isinstance(llm, DeferredProvider) and llm.built
            return llm

        llm = asyncio.run(talk())
    limited = llm.inner
    assert isinstance(limited, LimitedProvider) and isinstance(limited.inner, MeasuredProvider)
    assert isinstance(limited.inner.inner, FallbackProvider)
    ((_, backend),) = limited.inner.inner.providers
    assert isinstance(backend, OpenAICompatProvider)
    assert backend._clients == {}  # released on the loop that used it


def test_close_inside_an_event_loop_asks_for_aclose(project: Path) -> None:
    config = load_kernel_config(
        write_kernel_yaml(project, "llm:\n  base_url: http://127.0.0.1:9/v1\n  model: m\n")
    )

    async def inside() -> None:
        kernel = Kernel(config)
        assert kernel_parts(kernel).llm is not None
        llm = kernel_parts(kernel).provider  # the provider the metered one wraps
        assert llm.inner is not None  # type: ignore[union-attr]  # built: it closes on a loop
        with pytest.raises(RuntimeError, match=r"use `await kernel.aclose\(\)`"):
            kernel.close()
        await kernel.aclose()
        kernel.close()  # closed now: nothing left to do, inside a loop or not

    asyncio.run(inside())


class Refusing:
    """A service whose close fails: the others still close, and the failure is raised."""

    def close(self) -> None:
        raise OSError("disk gone")


@needs_proc
def test_a_failing_close_does_not_keep_the_rest_open(stores_project: Path) -> None:
    config = load_kernel_config(stores_project / "config" / "kernel.yaml")
    kernel = Kernel(config, extensions={"broken": Refusing()})
    assert kernel.run_tool("keeper", {"text": "one"}).content == "1"
    with pytest.raises(OSError, match="disk gone"):
        kernel.close()
    assert open_files_under(stores_project) == []


# -- the command line leaves nothing open ----------------------------------------------------------


@needs_proc
def test_tool_run_and_hook_tool_leave_nothing_open(
    stores_project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentkernel.cli import hook_tool
    from agentkernel.cli.main import main

    write_kernel_yaml(stores_project, STORES_YAML + "llm:\n  base_url: http://127.0.0.1:9/v1\n  model: m\n")
    hook = make_hook(
        stores_project,
        "keeper",
        KEEPER_HOOK,
    )
    monkeypatch.chdir(stores_project)
    monkeypatch.delenv("AGENTKERNEL_CONFIG", raising=False)
    assert main(["tool", "run", "keeper", '{"text": "a"}', "--session", "s-1"]) == 0
    assert json.loads(capsys.readouterr().out)["content"] == "1"
    assert open_files_under(stores_project) == []
    assert hook_tool.main([str(hook), "user", "hi", "--live", "--session", "s-2"]) == 0
    assert capsys.readouterr().out == '{"event": "before_user_message", "result": {"notice": "kept"}}\n'
    assert open_files_under(stores_project) == []  # the state store too, not only the transcript
    for command in (["check"], ["tool", "list"], ["hook", "list"], ["template", "list"]):
        main(command)
        assert open_files_under(stores_project) == [], command


def test_from_config_file_takes_a_path_as_text(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "kernel.yaml").write_text("{}\n", encoding="utf-8")
    kernel = Kernel.from_config_file(str(tmp_path / "config" / "kernel.yaml"), live=False)
    try:
        assert kernel.config.root.resolve() == tmp_path.resolve()
    finally:
        kernel.close()
