"""Metering (S26.3): every LLM call of every path counted in the usage ledger, through the real provider.

A turn with a tool call, a hook's `llm()`, a tool run's `llm()` and a
sub-agent, a cron run, streamed and not, against the scripted LLM server;
a server that reports no usage is counted with the kernel's bound, marked
estimated; a ledger that cannot be written does not fail the call.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent
from agentkernel.config import load_kernel_config
from agentkernel.llm.base import ChatMessage, CompletionRequest
from agentkernel.llm.config import build_provider
from agentkernel.llm.token_bound import message_bound, prompt_bound
from agentkernel.ports import UsageRow
from agentkernel.services.metering import MeteredProvider
from agentkernel.services.usage import UsageLedger
from tests.conftest import ToolFactory, write_kernel_yaml
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.fakes.webhook import WebhookReceiver
from tests.services.test_cron import Scheduling, job, js, run

TEMPLATES = {
    "tester": "name: tester\ninstructions: Test.\ntools: [upper, ask, delegate]\nhooks: [asker]\n",
    "helper": "name: helper\ninstructions: Help.\n",
    "plain": "name: plain\ninstructions: Plain.\n",
}


def since_yesterday() -> datetime:
    return datetime.now(UTC) - timedelta(days=1)


def make_kernel(project: Path, server: FakeLLMServer, provider: bool = False) -> Kernel:
    """A kernel on the scripted server (its `llm:`, or the same provider handed in), with test templates."""
    llm = f"llm:\n  base_url: {server.base_url}\n  model: fake\n  max_retries: 0\n  timeout_secs: 10\n"
    config = load_kernel_config(
        write_kernel_yaml(project, llm + "http:\n  allow_private: true\ncron:\n  min_interval_secs: 0.05\n")
    )
    folder = project / "config" / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in TEMPLATES.items():
        (folder / f"{name}.yaml").write_text(text, encoding="utf-8")
    hooks = project / "config" / "scripts" / "hooks"
    (hooks / "asker.yaml").write_text("kind: script_hook\nname: asker\nscript: asker.js\n")
    (hooks / "asker.js").write_text(
        "function before_user_message(ctx, msg) {"
        " if (msg.content === 'ask first') return {notice: llm('a hook asks')}; }"
    )
    assert config.llm is not None
    return Kernel(config, provider=build_provider(config.llm) if provider else None)


@pytest.fixture
def scripts(make_tool: ToolFactory) -> None:
    make_tool(
        "upper",
        "function run(a) { return a.text.toUpperCase(); }",
        yaml_extra="parameters: {type: object, properties: {text: {type: string}}, required: [text]}\n",
    )
    make_tool("ask", "function run(a) { return llm('a tool asks'); }")
    make_tool(
        "delegate", "function run(a) { return run_subagent({task: 'help', template: 'helper'}).answer; }"
    )


@pytest.fixture
def kernel(project: Path, llm_server: FakeLLMServer, scripts: None) -> Iterator[Kernel]:
    with make_kernel(project, llm_server) as made:
        yield made


def rows(kernel: Kernel, user: str | None) -> list[tuple[str | None, str, int, int, int, int]]:
    """The user's rows as (template, model, calls, input, output, estimated calls)."""
    found: list[UsageRow] = kernel.usage().rows(user=user, since=since_yesterday().date())
    return [(r.template, r.model, r.calls, r.input_tokens, r.output_tokens, r.estimated_calls) for r in found]


async def quiet(event: LoopEvent) -> None:
    return None


def talk(
    kernel: Kernel, text: str, *, template: str = "tester", user: str = "ann", stream: bool = True
) -> str:
    async def turn() -> str:
        result = await kernel.chat(template, user_id=user, stream=stream).send(text, quiet)
        return result.answer or ""

    return asyncio.run(turn())


@pytest.mark.parametrize("stream", [True, False])
def test_a_turn_with_a_tool_call_counts_both_calls_as_the_server_reported_them(
    kernel: Kernel, llm_server: FakeLLMServer, stream: bool
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "a"}'),), prompt_tokens=11, completion_tokens=3),
        Reply(text="done", prompt_tokens=20, completion_tokens=4, model="fake-2"),
    )
    assert talk(kernel, "go", stream=stream) == "done"
    assert rows(kernel, "ann") == [("tester", "fake-2", 1, 20, 4, 0), ("tester", "fake-model", 1, 11, 3, 0)]
    assert rows(kernel, "bob") == []


def test_a_hooks_and_a_tools_llm_calls_and_a_subagents_are_counted_under_the_turns_user(
    kernel: Kernel, llm_server: FakeLLMServer
) -> None:
    llm_server.add(
        Reply(text="hook's", prompt_tokens=1, completion_tokens=1),  # before_user_message's llm()
        Reply(tool_calls=(FakeToolCall("ask", "{}"), FakeToolCall("delegate", "{}")), prompt_tokens=2),
    )
    llm_server.respond_with(lambda request: Reply(text="ok", prompt_tokens=100, completion_tokens=10))
    talk(kernel, "ask first")
    counted = {(template, calls, inputs) for template, _, calls, inputs, _, _ in rows(kernel, "ann")}
    # the hook's llm(), the turn's two calls and the tool's llm() are the turn's template's; the
    # sub-agent's call its own
    assert counted == {("tester", 4, 1 + 2 + 100 + 100), ("helper", 1, 100)}
    assert len(llm_server.requests) == 5


def test_a_tool_runs_llm_call_is_counted_as_its_callers_without_a_template(
    kernel: Kernel, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(text="answer", prompt_tokens=7, completion_tokens=2))
    result = kernel.run_tool("ask", {}, kernel.caller(user_id="bob"))
    assert result.success, result.content
    assert rows(kernel, "bob") == [(None, "fake-model", 1, 7, 2, 0)]


def test_a_server_that_reports_no_usage_is_counted_with_the_kernels_bound_as_estimated(
    kernel: Kernel, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(text="ответ без счёта", usage=False))
    result = kernel.run_tool("ask", {}, kernel.caller(user_id="bob"))
    assert result.success, result.content
    [(_, _, calls, inputs, outputs, estimated)] = rows(kernel, "bob")
    sent = llm_server.bodies[0]["messages"]
    prompt = prompt_bound([ChatMessage(m["role"], m["content"]) for m in sent])
    assert (calls, estimated, inputs) == (1, 1, prompt)
    assert outputs == message_bound(ChatMessage.assistant("ответ без счёта"))


def test_a_cron_run_is_counted_as_its_jobs_user_and_template(
    kernel: Kernel, make_tool: ToolFactory, llm_server: FakeLLMServer
) -> None:
    llm_server.respond_with(lambda request: Reply(text="tick", prompt_tokens=5, completion_tokens=1))
    with WebhookReceiver() as hook:
        ann = kernel.caller(user_id="ann", session_id="chat-1")
        soon = time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3)
        )  # whole seconds: a slow call must not see it past
        options = job(template="plain", oneshot_at=soon, notify=[{"type": "webhook", "url": hook.url}])
        assert run(kernel, make_tool, js(options), ann)["ok"]
        with Scheduling(kernel):
            hook.wait_for(1)
    assert rows(kernel, "ann") == [("plain", "fake-model", 1, 5, 1, 0)]


def test_a_provider_handed_to_the_kernel_is_metered_too(
    project: Path, llm_server: FakeLLMServer, scripts: None
) -> None:
    llm_server.add(Reply(text="hi", prompt_tokens=3, completion_tokens=2))
    with make_kernel(project, llm_server, provider=True) as kernel:
        assert talk(kernel, "hello", template="plain") == "hi"
        assert rows(kernel, "ann") == [("plain", "fake-model", 1, 3, 2, 0)]


def test_a_ledger_that_cannot_be_written_does_not_fail_the_call(
    project: Path, llm_server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.add(Reply(text="still answered"))
    config = load_kernel_config(
        write_kernel_yaml(project, f"llm:\n  base_url: {llm_server.base_url}\n  model: m\n")
    )
    assert config.llm is not None
    ledger = UsageLedger(project / "usage.db")
    ledger.close()  # every write fails now
    metered = MeteredProvider(build_provider(config.llm), lambda: ledger)

    async def call() -> str | None:
        try:
            request = CompletionRequest(messages=(ChatMessage.user("hi"),), user="ann")
            return (await metered.complete(request)).text
        finally:
            await metered.aclose()

    with caplog.at_level(logging.ERROR, logger="agentkernel.usage"):
        assert asyncio.run(call()) == "still answered"
    assert "could not be recorded" in caplog.text and "'ann'" in caplog.text


def test_a_call_is_counted_on_the_event_loop_unless_the_ledger_is_held(
    project: Path, llm_server: FakeLLMServer
) -> None:
    """A worker thread's hop costs more than the ledger's write: the write is made on the loop when the
    ledger takes it at once; while another process holds the file, on a worker thread, which waits."""
    llm_server.add(Reply(text="one"), Reply(text="two"))
    config = load_kernel_config(
        write_kernel_yaml(project, f"llm:\n  base_url: {llm_server.base_url}\n  model: m\n")
    )
    assert config.llm is not None
    path = project / "usage.db"
    ledger = UsageLedger(path)
    counted_on: list[str] = []
    asked_to_wait = threading.Event()

    def traced(statement: str) -> None:
        if statement.startswith("INSERT INTO usage"):
            counted_on.append(threading.current_thread().name)
        elif statement == "BEGIN IMMEDIATE" and threading.current_thread() is not threading.main_thread():
            asked_to_wait.set()

    ledger._conn.set_trace_callback(traced)
    metered = MeteredProvider(build_provider(config.llm), lambda: ledger)
    request = CompletionRequest(messages=(ChatMessage.user("hi"),), user="ann")
    other = sqlite3.connect(path, isolation_level=None)

    async def calls() -> list[str | None]:
        try:
            first = await metered.complete(request)
            other.execute("BEGIN IMMEDIATE")  # another process writing the file
            second = asyncio.create_task(metered.complete(request))
            assert await asyncio.to_thread(asked_to_wait.wait, 30)  # the worker thread waits its turn
            other.execute("COMMIT")
            return [first.text, (await second).text]
        finally:
            await metered.aclose()

    try:
        assert asyncio.run(calls()) == ["one", "two"]
        assert counted_on[0] == threading.main_thread().name and counted_on[1] != counted_on[0]
        assert ledger.totals(user="ann", since=datetime.now(UTC).date()).calls == 2
    finally:
        other.close()
        ledger.close()
