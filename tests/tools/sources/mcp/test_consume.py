"""Consuming outside MCP servers (issue 16): a template's `mcp_servers:` tools in the agent loop.

The outside server is written with the `mcp` SDK (tests/fakes/mcp_server.py) and
runs as a real subprocess over stdio, or in-process over streamable HTTP
on 127.0.0.1; the LLM is the scripted OpenAI-compatible server. Its tools
take the one dispatch path (DESIGN rule 6): access, validation, limits,
history. Starting a server costs seconds (`import mcp`), so most tests
share one kernel whose server is started once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent
from agentkernel.agent.processes import Process
from agentkernel.cli.main import main
from agentkernel.config import load_kernel_config
from agentkernel.config.templates import load_template
from agentkernel.errors import ConfigError
from agentkernel.testing.parts import kernel_parts
from agentkernel.types import JSONObject
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.tools.sources.mcp.conftest import SERVER, make_project, stdio_server, write

GONE_WITHIN_SECS = 30.0  # a bound on waiting for a killed process to be reaped, not a timing assertion


def gone(pid: int) -> bool:
    """Whether process `pid` has ended and been reaped (no /proc entry, not even a zombie)."""
    return not Path(f"/proc/{pid}").exists()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Wait for `condition` (an event we cannot subscribe to), failing after GONE_WITHIN_SECS."""
    deadline = time.monotonic() + GONE_WITHIN_SECS
    while not condition():
        assert time.monotonic() < deadline, f"not within {GONE_WITHIN_SECS} s: {what}"
        time.sleep(0.02)


def send(chat: Any, text: str) -> tuple[Any, list[LoopEvent]]:
    events: list[LoopEvent] = []

    async def collect(event: LoopEvent) -> None:
        events.append(event)

    emit: Callable[[LoopEvent], Awaitable[None]] = collect
    return asyncio.run(chat.send(text, emit)), events


# -- one kernel, one server, shared ---------------------------------------------------------------


AGENT = """
name: agent
instructions: You use outside tools.
tools: [relay, delegate]
mcp_servers:
{server}
"""
OTHER = "name: other\ninstructions: No outside tools.\ntools: [relay, delegate]\n"
HELPER = """
name: helper
instructions: A sub-agent's template naming one more server.
mcp_servers:
{server}
{extra}
"""


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLMServer) -> Iterator[Kernel]:
    """A kernel whose template `agent` uses the fake server (only some of its tools, env named)."""
    server = stdio_server(
        extra="""
        env: {SEEN_BY_SERVER: OUTSIDE_NAMED}
        tools: [echo, env, pid, slow, dotted.name]
        timeout_secs: 3
        """
    )
    root = tmp_path_factory.mktemp("consume")
    helper = HELPER.format(server=server, extra=stdio_server("extra"))
    config = make_project(root, {"agent": AGENT.format(server=server), "other": OTHER, "helper": helper}, llm)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OUTSIDE_NAMED", "named-value")
        env.setenv("OUTSIDE_UNNAMED_SECRET", "must-not-leak")
        with Kernel(load_kernel_config(config)) as kernel:
            yield kernel


def test_the_llm_sees_the_outside_tools_with_their_schemas_and_calls_one(
    shared: Kernel, llm: FakeLLMServer
) -> None:
    start = len(llm.bodies)
    llm.add(
        Reply(tool_calls=(FakeToolCall("outside__echo", '{"text": "через MCP"}', id="c1"),)),
        Reply(text="done"),
    )
    chat = shared.chat("agent", session_id="s-llm")
    result, events = send(chat, "echo it")
    assert result.answer == "done"
    tools = {t["function"]["name"]: t["function"] for t in llm.bodies[start]["tools"]}
    assert sorted(tools) == [
        "delegate",
        "outside__dotted_name",  # `dotted.name`: the dot replaced, the server still called by its name
        "outside__echo",
        "outside__env",
        "outside__pid",
        "outside__slow",
        "relay",
    ]  # `crash` is not in the template's `tools:` filter, so it is not offered
    echo = tools["outside__echo"]
    assert echo["description"] == "Echo the text back."
    assert echo["parameters"]["properties"] == {"text": {"title": "Text", "type": "string"}}
    assert echo["parameters"]["required"] == ["text"]
    answer = llm.bodies[start + 1]["messages"][-1]
    assert (answer["role"], answer["tool_call_id"], answer["content"]) == ("tool", "c1", "через MCP")
    result_event = next(e for e in events if e.kind == "tool_result").data
    assert (result_event["content"], result_event["success"]) == ("через MCP", True)
    shared.end_chat(chat)


def test_a_script_calls_an_outside_tool_with_call_tool(shared: Kernel) -> None:
    process = shared.spawn("agent", session_id="s-script")
    result = shared.run_tool("relay", {"text": "hello"}, process)
    assert (result.content, result.success) == ("relayed: hello", True)
    shared.terminate(process.pid)


def test_a_lone_surrogate_from_a_script_crosses_as_a_replacement_character(shared: Kernel) -> None:
    """A JS string may hold one; UTF-8 JSON cannot: it must not end the server's connection."""
    process = shared.spawn("agent", session_id="s-surrogate")
    pid = shared.run_tool("outside__pid", {}, process).content
    result = shared.run_tool("relay", {"text": "\ud800 tail"}, process)
    assert (result.content, result.success) == ("relayed: \ufffd tail", True)
    assert shared.run_tool("outside__pid", {}, process).content == pid  # the same server, not restarted
    shared.terminate(process.pid)


def test_another_template_may_not_call_them(shared: Kernel) -> None:
    process = shared.spawn("other")
    assert [s.name for s in shared.list_tools(process)] == ["delegate", "relay"]
    direct = shared.run_tool("outside__echo", {"text": "x"}, process)
    assert (direct.success, direct.content) == (False, "unknown tool 'outside__echo'")
    relayed = shared.run_tool("relay", {"text": "x"}, process)
    assert (relayed.success, relayed.content) == (False, "unknown tool 'outside__echo'")
    shared.terminate(process.pid)


def test_bad_arguments_are_refused_by_our_validation_naming_the_field(shared: Kernel) -> None:
    process = shared.spawn("agent")
    result = shared.run_tool("outside__echo", {"text": 3}, process)
    # our dispatcher's words (the server's own would read "Error executing tool echo: …")
    assert (result.success, result.content) == (
        False,
        "invalid arguments for outside__echo: text: 3 is not of type 'string'",
    )
    shared.terminate(process.pid)


def test_a_tool_left_out_by_the_filter_is_unknown(shared: Kernel) -> None:
    result = shared.run_tool("outside__crash", {}, shared.spawn("agent"))
    assert (result.success, result.content) == (False, "unknown tool 'outside__crash'")


def test_the_server_sees_only_the_named_variables(shared: Kernel) -> None:
    process = shared.spawn("agent")

    def seen(name: str) -> str:
        result = shared.run_tool("outside__env", {"name": name}, process)
        assert result.success, result.content
        return result.content

    assert seen("SEEN_BY_SERVER") == "named-value"
    assert seen("OUTSIDE_UNNAMED_SECRET") == "(unset)"  # the kernel's own environment is not passed on
    assert seen("OUTSIDE_NAMED") == "(unset)"  # only under the name the template gives it
    assert seen("PATH") != "(unset)"  # the SDK's safe defaults still are


def test_a_call_past_timeout_secs_is_a_failed_result_naming_server_tool_and_limit(shared: Kernel) -> None:
    process = shared.spawn("agent")
    result = shared.run_tool("outside__slow", {"secs": 30}, process)
    assert not result.success
    assert (
        result.content
        == "tool 'outside__slow': MCP server 'outside' did not answer 'slow' within 3 s (timeout_secs)"
    )
    assert shared.run_tool("outside__echo", {"text": "still here"}, process).content == "still here"


def test_a_subagent_gets_only_the_servers_its_parent_may_use(shared: Kernel, llm: FakeLLMServer) -> None:
    start = len(llm.bodies)
    llm.add(Reply(text="helped"), Reply(text="helped"), Reply(text="instructed"))
    agent, other = shared.spawn("agent", session_id="s-sub"), shared.spawn("other", session_id="s-sub")
    runs: list[tuple[Process, JSONObject]] = [
        (agent, {"task": "t", "template": "helper"}),
        (other, {"task": "t", "template": "helper"}),
        (agent, {"task": "t", "instructions": "i"}),
    ]
    for parent, options in runs:
        result = shared.run_tool("delegate", options, parent)
        assert result.success, result.content
    seen = [sorted(t["function"]["name"] for t in body.get("tools", [])) for body in llm.bodies[start:]]
    outside = ["outside__dotted_name", "outside__echo", "outside__env", "outside__pid", "outside__slow"]
    assert seen[0] == outside  # helper's own `extra` server is not the parent's to give
    assert seen[1] == []  # a parent with no servers gives none
    assert seen[2] == sorted([*outside, "delegate", "relay"])  # instructions only: the parent's own tools


def test_structured_content_reaches_scripts_as_data(shared: Kernel) -> None:
    result = shared.run_tool("outside__echo", {"text": "structured"}, shared.spawn("agent"))
    assert (result.content, result.data) == ("structured", {"result": "structured"})


# -- a kernel of its own: lifecycle -------------------------------------------------------------


@pytest.fixture
def lone(tmp_path: Path) -> Iterator[Kernel]:
    config = make_project(tmp_path, {"agent": AGENT.format(server=stdio_server())})
    kernel = Kernel(load_kernel_config(config))
    yield kernel
    kernel.close()


def test_a_server_restarts_after_dying_and_stops_with_the_kernel(lone: Kernel) -> None:
    process = lone.spawn("agent")

    def server_pid() -> int:
        result = lone.run_tool("outside__pid", {}, process)
        assert result.success, result.content
        return int(result.content)

    first = server_pid()
    assert server_pid() == first  # one process serves every call
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: gone(first), f"the killed server {first} reaped")
    # asyncio's child watcher reaps at once; the pool sees the closed pipe a moment later (a call in
    # between fails as the crash test below shows)
    wait_until(lambda: not kernel_parts(lone).outside.running("outside"), "the pool to see its server gone")
    second = server_pid()  # started again by the next call
    assert second != first

    crashed = lone.run_tool("outside__crash", {}, process)
    assert not crashed.success
    assert crashed.content.startswith(
        "tool 'outside__crash': MCP server 'outside' closed the connection during the call (did it crash?)"
    )
    assert "outside server: stdio" in crashed.content  # the tail of its stderr
    third = server_pid()
    assert third not in (first, second)

    lone.close()
    assert gone(third)  # closing waited for the server's process to end


def test_closing_from_async_code_lets_the_loop_run_while_servers_stop(lone: Kernel) -> None:
    """`aclose` (a server's shutdown) stops the servers on a worker thread: stopping a stdio server may
    take seconds, and the loop's other work went on meanwhile only once it stopped blocking it."""
    process = lone.spawn("agent")
    pid = int(lone.run_tool("outside__pid", {}, process).content)
    turns = 0
    closed = False

    async def other_work() -> None:
        nonlocal turns
        while not closed:
            turns += 1
            await asyncio.sleep(0)  # a turn of the loop, nothing waited for

    async def main() -> None:
        nonlocal closed
        working = asyncio.create_task(other_work())
        await lone.aclose()
        closed = True
        await working

    asyncio.run(main())
    assert turns > 0  # the loop ran while the kernel closed
    assert gone(pid)  # and the server's process has ended


def test_listing_starts_the_server_lazily(lone: Kernel) -> None:
    process = lone.spawn("agent")
    assert not kernel_parts(lone).outside.running("outside")  # spawning starts nothing
    names = [s.name for s in lone.list_tools(process)]
    assert "outside__crash" in names  # no `tools:` filter: every tool
    assert kernel_parts(lone).outside.running("outside")


# -- streamable HTTP -----------------------------------------------------------------------------


class HttpOutside:
    """The fake server's app over streamable HTTP, in-process on 127.0.0.1, behind a bearer token."""

    def __init__(self, token: str, port: int = 0) -> None:
        self.token = token
        self.port = port
        self.url = ""
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def _guarded(self, app: Any) -> Any:
        expected = f"Bearer {self.token}".encode()

        async def guarded(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"bearer token required"})
                return
            await app(scope, receive, send)

        return guarded

    def __enter__(self) -> HttpOutside:
        import uvicorn

        from agentkernel.server.serving import bind, url_of
        from tests.fakes.mcp_server import app

        sock = bind("127.0.0.1", self.port)
        self.port = sock.getsockname()[1]
        self.url = f"{url_of(sock)}/mcp"
        config = uvicorn.Config(
            self._guarded(app.streamable_http_app()),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=1,  # the client's open event stream would hold a graceful stop
        )
        self._server = uvicorn.Server(config)

        def main() -> None:
            with sock:
                asyncio.run(self._server.serve(sockets=[sock]))

        self._thread = threading.Thread(target=main, name="outside-http", daemon=True)
        self._thread.start()  # the bound socket queues connections until uvicorn accepts them
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        assert self._thread is not None
        self._thread.join(60)


def test_an_http_server_is_consumed_with_a_header_from_a_named_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with HttpOutside("s3cret") as outside:
        template = f"""
            name: agent
            instructions: x
            tools: [relay]
            mcp_servers:
              - name: outside
                url: {outside.url}
                headers_env: {{Authorization: OUTSIDE_TOKEN}}
              - name: refused
                url: {outside.url}
                headers_env: {{Authorization: WRONG_TOKEN}}
              - name: unset
                url: {outside.url}
                headers_env: {{Authorization: NEVER_SET_VARIABLE}}
            """
        config = make_project(tmp_path, {"agent": template})
        monkeypatch.setenv("OUTSIDE_TOKEN", "Bearer s3cret")
        monkeypatch.setenv("WRONG_TOKEN", "Bearer guess")
        monkeypatch.delenv("NEVER_SET_VARIABLE", raising=False)
        with Kernel(load_kernel_config(config)) as kernel:
            process = kernel.spawn("agent")
            assert kernel.run_tool("outside__echo", {"text": "over http"}, process).content == "over http"
            assert kernel.run_tool("relay", {"text": "too"}, process).content == "relayed: too"
            refused = kernel.run_tool("refused__echo", {"text": "x"}, process)
            assert not refused.success
            assert refused.content.startswith(
                "tool 'refused__echo' is not available: MCP server 'refused' failed to start:"
            )
            assert refused.content.endswith("; the server answered HTTP 401 Unauthorized")
            unset = kernel.run_tool("unset__echo", {"text": "x"}, process)
            assert unset.content == (
                "tool 'unset__echo' is not available: MCP server 'unset' failed to start: "
                "headers_env.Authorization names the environment variable 'NEVER_SET_VARIABLE', "
                "which is not set in the kernel's environment"
            )


def test_an_http_server_that_restarts_is_connected_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OUTSIDE_TOKEN", "Bearer s3cret")
    with HttpOutside("s3cret") as first:
        template = f"""
            name: agent
            instructions: x
            mcp_servers:
              - {{name: outside, url: {first.url}, headers_env: {{Authorization: OUTSIDE_TOKEN}}}}
            """
        kernel = Kernel(load_kernel_config(make_project(tmp_path, {"agent": template})))
        process = kernel.spawn("agent")
        assert kernel.run_tool("outside__echo", {"text": "one"}, process).content == "one"
    try:
        with HttpOutside("s3cret", port=first.port):
            lost = kernel.run_tool("outside__echo", {"text": "two"}, process)
            if not lost.success:  # the call that finds the old session gone fails, naming the server
                assert lost.content.startswith("tool 'outside__echo': MCP server 'outside' failed the call")
            again = kernel.run_tool("outside__echo", {"text": "three"}, process)
            assert (again.success, again.content) == (True, "three")
    finally:
        kernel.close()


# -- configuration and `agentkernel check` -------------------------------------------------------


def test_mcp_servers_are_strict_and_errors_name_file_line_and_field(tmp_path: Path) -> None:
    bad = write(tmp_path / "t.yaml", """
        name: t
        instructions: x
        mcp_servers:
          - name: srv
            comand: npx
        """)  # fmt: skip
    with pytest.raises(
        ConfigError, match=r"t\.yaml:6: mcp_servers\[0\]: unknown key 'comand' .*did you mean 'command'"
    ):
        load_template(bad)
    secret = write(tmp_path / "s.yaml", """
        name: s
        instructions: x
        mcp_servers:
          - name: srv
            url: http://127.0.0.1:1/mcp
            headers_env: {Authorization: "Bearer abc"}
        """)  # fmt: skip
    with pytest.raises(
        ConfigError, match=r"s\.yaml:7: mcp_servers\[0\]\.headers_env\.Authorization: 'Bearer abc'"
    ):
        load_template(secret)  # a value where the name of a variable belongs: never a literal secret
    twice = write(tmp_path / "d.yaml", """
        name: d
        instructions: x
        mcp_servers:
          - {name: srv, command: a}
          - {name: srv, command: b}
        """)  # fmt: skip
    with pytest.raises(ConfigError, match=r"d\.yaml:6: mcp_servers\[1\]\.name: server 'srv' is listed twice"):
        load_template(twice)


def test_check_reports_broken_servers_and_one_name_with_two_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dies = "import sys; sys.stderr.write('boom: no config file'); sys.exit(2)"
    broken = f"""
        name: broken
        instructions: x
        mcp_servers:
          - name: missing
            command: no-such-command-for-agentkernel
          - name: dies
            command: {json.dumps(sys.executable)}
            args: [-c, {json.dumps(dies)}]
        """
    one = "name: one\ninstructions: x\nmcp_servers:\n  - {name: shared, command: a}\n"
    two = "name: two\ninstructions: x\nmcp_servers:\n  - {name: shared, command: b}\n"
    config = make_project(tmp_path, {"broken": broken, "one": one, "two": two})
    assert main(["check", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    templates = tmp_path / "config" / "templates"
    assert (
        f"{templates / 'broken.yaml'}:5: template broken: MCP server 'missing' failed to start:"
        " command not found: no-such-command-for-agentkernel"
    ) in out
    assert (
        f"{templates / 'broken.yaml'}:7: template broken: MCP server 'dies' failed to start: "
        "the server closed the connection during the handshake (did it exit?); stderr: boom: no config file"
    ) in out
    clash = "mcp_servers: server 'shared' is declared with other settings in template"
    assert f"{templates / 'one.yaml'}:4: {clash} two ({templates / 'two.yaml'}:4)" in out
    assert f"{templates / 'two.yaml'}:4: {clash} one ({templates / 'one.yaml'}:4)" in out


def test_check_reports_outside_tools_that_cannot_be_offered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = stdio_server(extra="tools: [echo, pid, nope]")
    template = f"name: agent\ninstructions: x\nmcp_servers:\n{server}"
    config = make_project(tmp_path, {"agent": template})
    tools = tmp_path / "config" / "scripts" / "tools"
    write(tools / "outside__echo.yaml", "kind: script_tool\nname: outside__echo\nscript: relay.js\n")
    assert main(["check", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    where = f"{tmp_path / 'config' / 'templates' / 'agent.yaml'}:4: template agent: MCP server 'outside'"
    assert f"{where}: tools: 'nope' is not a tool it lists" in out
    assert f"{where}: tool 'echo': 'outside__echo' is also a script tool's name; not offered" in out
    with Kernel(load_kernel_config(config)) as kernel:  # the script tool keeps its name
        assert kernel.run_tool(
            "outside__pid", {}, kernel.caller(allowed_tools=frozenset({"outside__*"}))
        ).success
        assert kernel.tool("outside__echo").origin == "project"


def test_check_counts_each_server_s_tools_and_tool_list_shows_a_template_s(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`check` says what each server offers; `tool list --template T` lists T's tools, its servers' too."""
    server = stdio_server(extra="tools: [echo, pid]")
    template = f"name: agent\ninstructions: x\ntools: [relay]\nmcp_servers:\n{server}"
    config = make_project(tmp_path, {"agent": template})
    assert main(["check", "--config", str(config)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "ok: 2 tools, 0 hooks, 1 template; MCP servers: outside (2 tools)"
    assert main(["tool", "list", "--config", str(config), "--template", "agent"]) == 0
    rows = [line.split(None, 3) for line in capsys.readouterr().out.splitlines()]
    assert [row[:3] for row in rows] == [
        ["relay", "project", "relay.js"],
        ["outside__echo", "mcp", "server"],
        ["outside__pid", "mcp", "server"],
    ]
    assert main(["tool", "list", "--config", str(config), "--template", "agent", "--json"]) == 0
    listed = {t["name"]: t for t in json.loads(capsys.readouterr().out)["tools"]}
    assert listed["outside__echo"]["mcp_server"] == "outside" and "mcp_server" not in listed["relay"]
    assert listed["outside__echo"]["parameters"]["required"] == ["text"]
    assert main(["tool", "list", "--config", str(config)]) == 0  # no template: the project's tools only
    assert "outside__" not in capsys.readouterr().out
    assert main(["tool", "list", "--config", str(config), "--template", "nope"]) == 1
    assert "unknown template 'nope' (loaded: agent)" in capsys.readouterr().err


def test_a_stdio_server_runs_in_the_project_folder_whatever_the_kernel_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`args: [servers/x.py]` names a file of the project, even for a kernel started elsewhere."""
    project = tmp_path / "project"
    (project / "servers").mkdir(parents=True)
    (project / "servers" / "outside.py").write_text(SERVER.read_text(encoding="utf-8"), encoding="utf-8")
    server = f"  - name: local\n    command: {json.dumps(sys.executable)}\n    args: [servers/outside.py]\n"
    config = make_project(project, {"agent": f"name: agent\ninstructions: x\nmcp_servers:\n{server}"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with Kernel(load_kernel_config(config)) as kernel:
        caller = kernel.caller(template="agent", allowed_tools=kernel.template("agent").allowed_tools())
        result = kernel.run_tool("local__echo", {"text": "found"}, caller)
    assert (result.success, result.content) == (True, "found")


def test_a_running_server_s_new_tools_are_offered_once_listed_again(
    lone: Kernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a server offers may change while it runs: its list is asked for again (RELIST_SECS, or when
    it says so with tools/list_changed), and the new tool takes the one path like the others."""
    from agentkernel.tools.sources.mcp import client_pool

    process = lone.spawn("agent")
    assert "outside__sprout" not in [s.name for s in lone.list_tools(process)]
    grown = lone.run_tool("outside__grow", {"name": "sprout"}, process)
    assert (grown.success, grown.content) == (True, "now offering sprout")
    assert "outside__sprout" not in [s.name for s in lone.list_tools(process)]  # listed < RELIST_SECS ago
    monkeypatch.setattr(client_pool, "RELIST_SECS", 0.0)
    assert "outside__sprout" in [s.name for s in lone.list_tools(process)]
    result = lone.run_tool("outside__sprout", {}, process)
    assert (result.success, result.content) == (True, "sprout grown")


def test_a_server_s_list_changed_notification_makes_its_list_stale() -> None:
    import mcp_types

    from agentkernel.config.mcp_servers import McpServerSpec
    from agentkernel.tools.sources.mcp.client_pool import _Connection

    connection = _Connection(McpServerSpec(name="far", command="x"))
    connection.listed, connection.listed_at = [], time.monotonic()
    asyncio.run(connection.on_message(mcp_types.ResourceListChangedNotification()))
    assert not connection.needs_listing(time.monotonic())
    asyncio.run(connection.on_message(mcp_types.ToolListChangedNotification()))
    assert connection.needs_listing(time.monotonic())
