"""Each origin of a tool call passes its template's `before_tool_call` hook, which can deny it (S24.1).

One project served by the real server (LiveServer) against the scripted
LLM. Its hook `guard` (JavaScript) denies the tools its YAML lists, and
`paged` only when a table's next page re-runs it, with a reason naming
`call.origin`; `scrub` replaces a key in results (`after_tool_call`);
`rguard` is a guard in Rhai. The denied tools have an effect a test can
look for — a POST to a webhook receiver, a file the outside MCP server
writes — so each test shows both that the hook saw the origin (the reason
"no TOOL from ORIGIN") and that the call did not run. A tool's effect
happens before its result is returned, so once the result is in, a missing
effect is settled: nothing is waited for.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.fakes.webhook import WebhookReceiver
from tests.mcp_serve.conftest import run, text_of
from tests.server.conftest import LiveServer, make_project, script_tool, sse_events, write
from tests.tools.sources.mcp.conftest import stdio_server

TAG = {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}
SECRET_KEY = "sk-abc123"
WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
GUARD_JS = """
function before_tool_call(ctx, call) {
  if (ctx.config.deny.includes(call.tool) || (call.tool === 'paged' && call.origin === 'continuation')) {
    return {deny: 'no ' + call.tool + ' from ' + call.origin};
  }
}
"""
SCRUB_JS = """
function after_tool_call(ctx, call, result) {
  const scrubbed = result.content.replace(/sk-[A-Za-z0-9]+/g, '[redacted]');
  if (scrubbed !== result.content) return {replace_result: {...result, content: scrubbed}};
}
"""
GUARD_RHAI = """
fn before_tool_call(ctx, tc) {
    if tc.tool == "effect" {
        return #{ deny: "no " + tc.tool + " from " + tc.origin + " (rhai)" };
    }
}
"""
PAGED_JS = """
function run(args, config) {
  var page = args.page || 1;
  http_post(config.url, {tag: 'page-' + page});
  var table = {type: 'table', columns: [{key: 'n'}], rows: [{n: page}]};
  if (page < 3) table.continuation = {args: {page: page + 1}};
  return {content: 'page ' + page, visual: table};
}
"""


def write_project(root: Path, llm: FakeLLMServer, hook_url: str) -> Path:
    """Tools with effects, the hooks, and one template for each way of guarding (none, JS, Rhai, broken)."""
    kernel_yaml = make_project(root, llm, "http:\n  allow_private: true\n")
    tools = root / "config" / "scripts" / "tools"
    post = (
        "function run(args, config) { http_post(config.url, {tag: args.tag}); return 'posted ' + args.tag }"
    )
    script_tool(tools, "effect", post, parameters=TAG, url=hook_url, description="Post a tag.")
    relay = "function run(args) { return 'inner: ' + call_tool('effect', {tag: args.tag}).content; }"
    script_tool(tools, "relay", relay, parameters=TAG, description="Post a tag through call_tool.")
    delegate = "function run(args) { return run_subagent({task: args.tag, template: 'helper'}).answer; }"
    script_tool(tools, "delegate", delegate, parameters=TAG, description="Ask a sub-agent.")
    loose = (
        "function run(args) {"
        " return run_subagent({task: args.tag, instructions: 'Post it.', tools: ['effect']}).answer; }"
    )
    script_tool(tools, "delegate_loose", loose, parameters=TAG, description="Ask a sub-agent (no template).")
    script_tool(tools, "secret", f"function run() {{ return 'key={SECRET_KEY} found'; }}")
    script_tool(tools, "paged", PAGED_JS, url=hook_url, description="Pages of numbers.")

    hooks = root / "config" / "scripts" / "hooks"
    write(hooks / "guard.js", GUARD_JS)
    write(
        hooks / "guard.yaml",
        "kind: script_hook\nname: guard\nscript: guard.js\nevents: [before_tool_call]\n"
        "deny: [effect, outside__touch, weather]\n",
    )
    write(hooks / "scrub.js", SCRUB_JS)
    write(hooks / "scrub.yaml", "kind: script_hook\nname: scrub\nscript: scrub.js\n")
    write(hooks / "rguard.rhai", GUARD_RHAI)
    write(hooks / "rguard.yaml", "kind: script_hook\nname: rguard\nscript: rguard.rhai\n")
    write(hooks / "broken.js", "function before_tool_call(ctx, call) { throw new Error('the guard broke'); }")
    write(hooks / "broken.yaml", "kind: script_hook\nname: broken\nscript: broken.js\n")
    write(hooks / "lenient.yaml", "kind: script_hook\nname: lenient\nscript: broken.js\non_error: allow\n")

    outside = stdio_server(extra="tools: [touch]")
    templates = {
        "guarded": "tools: [effect, relay, delegate, delegate_loose, secret, paged]\nhooks: [guard, scrub]\n",
        "helper": "tools: [effect]\nhooks: [guard]\n",
        "consumer": f"tools: [effect]\nhooks: [guard]\nmcp_servers:\n{outside}",
        "open_consumer": f"mcp_servers:\n{outside}",
        "rguarded": "tools: [effect]\nhooks: [rguard]\n",
        "fragile": "tools: [effect]\nhooks: [broken]\n",
        "lenient": "tools: [effect]\nhooks: [lenient]\n",
        "open": "tools: [effect]\n",
    }
    for name, body in templates.items():
        write(
            root / "config" / "templates" / f"{name}.yaml",
            f"name: {name}\ninstructions: Test.\nmax_turns: 4\n{body}",
        )
    return kernel_yaml


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(max_requests=2000) as server:
        yield server


@pytest.fixture(scope="module")
def webhook() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory, llm: FakeLLMServer, webhook: WebhookReceiver
) -> Iterator[LiveServer]:
    """One server for the module (the outside MCP server it starts costs seconds: started once)."""
    kernel_yaml = write_project(tmp_path_factory.mktemp("origins"), llm, webhook.url)
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as server:
        yield server


@pytest.fixture
def client(live: LiveServer, llm: FakeLLMServer) -> Iterator[httpx.Client]:
    with live.client() as http:
        yield http
    assert llm.clear() == 0, "the test left scripted answers unused"


def posted(webhook: WebhookReceiver) -> list[Any]:
    """The tags POSTed so far: the effects of the calls that ran."""
    return [body["tag"] for body in webhook.attempts]


def session(client: httpx.Client, template: str) -> str:
    made = client.post("/v1/sessions", json={"template": template})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def say(client: httpx.Client, session_id: str, text: str) -> dict[str, Any]:
    """A message's turn, its events by kind (the last of each)."""
    answer = client.post(f"/v1/sessions/{session_id}/messages", json={"content": text})
    assert answer.status_code == 200, answer.text
    return dict(sse_events(answer.text))


def tool_messages(llm: FakeLLMServer, request: int) -> list[str]:
    """The tool results the LLM read in request `request` (negative: from the end)."""
    return [m["content"] for m in llm.bodies[request]["messages"] if m["role"] == "tool"]


def panel_run(client: httpx.Client, tool: str, args: dict[str, Any], session_id: str) -> dict[str, Any]:
    answer = client.post(f"/v1/tools/{tool}/run", json={"args": args, "session": session_id})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


# -- the eight origins ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "denied"),
    [
        ("guarded", "denied by hook guard: no effect from llm"),
        ("rguarded", "denied by hook rguard: no effect from llm (rhai)"),
    ],
)
def test_llm_a_call_the_llm_asks_for_is_denied_and_the_llm_reads_why(
    client: httpx.Client, llm: FakeLLMServer, webhook: WebhookReceiver, template: str, denied: str
) -> None:
    tag = f"from-llm-{template}"
    llm.add(Reply(tool_calls=(FakeToolCall("effect", json.dumps({"tag": tag}), "c1"),)), Reply(text="no"))
    events = say(client, session(client, template), "post it")
    assert (events["tool_result"]["success"], events["tool_result"]["content"]) == (False, denied)
    assert tool_messages(llm, -1) == [denied]
    assert events["reply"]["content"] == "no"
    assert tag not in posted(webhook)


def test_call_tool_the_outer_tool_runs_and_its_inner_call_is_denied(
    client: httpx.Client, webhook: WebhookReceiver
) -> None:
    result = panel_run(client, "relay", {"tag": "from-script"}, session(client, "guarded"))
    assert result["success"] is True  # `relay` itself is let through (origin panel)
    assert result["content"] == "inner: denied by hook guard: no effect from call_tool"
    assert "from-script" not in posted(webhook)


def test_subagent_the_sub_agent_s_call_passes_its_template_s_guard(
    client: httpx.Client, llm: FakeLLMServer, webhook: WebhookReceiver
) -> None:
    llm.add(
        Reply(tool_calls=(FakeToolCall("delegate", '{"tag": "post from-subagent"}', "c1"),)),
        Reply(tool_calls=(FakeToolCall("effect", '{"tag": "from-subagent"}', "s1"),)),  # the sub-agent's
        Reply(text="the sub-agent could not post"),
        Reply(text="done"),
    )
    events = say(client, session(client, "guarded"), "delegate it")
    # the sub-agent's LLM read why, in its second request
    assert tool_messages(llm, -2) == ["denied by hook guard: no effect from subagent"]
    assert events["tool_result"]["content"] == "the sub-agent could not post"
    assert "from-subagent" not in posted(webhook)


def test_subagent_a_sub_agent_from_instructions_is_guarded_as_its_caller(
    client: httpx.Client, llm: FakeLLMServer, webhook: WebhookReceiver
) -> None:
    llm.add(
        Reply(tool_calls=(FakeToolCall("delegate_loose", '{"tag": "post from-loose"}', "c1"),)),
        Reply(tool_calls=(FakeToolCall("effect", '{"tag": "from-loose"}', "s1"),)),
        Reply(text="the sub-agent answered"),
        Reply(text="done"),
    )
    say(client, session(client, "guarded"), "delegate it")
    assert "from-loose" not in posted(webhook)


@pytest.mark.parametrize(
    ("template", "denied"),
    [
        ("guarded", "denied by hook guard: no effect from panel"),
        ("rguarded", "denied by hook rguard: no effect from panel (rhai)"),
    ],
)
def test_panel_a_run_in_a_session_passes_its_template_s_guard(
    client: httpx.Client, webhook: WebhookReceiver, template: str, denied: str
) -> None:
    tag = f"from-panel-{template}"
    result = panel_run(client, "effect", {"tag": tag}, session(client, template))
    assert (result["success"], result["error"]) == (False, denied)
    assert tag not in posted(webhook)


def test_panel_an_unguarded_template_runs_the_same_call(
    client: httpx.Client, webhook: WebhookReceiver
) -> None:
    """The control: the effect the guarded tests look for does happen when no hook denies it."""
    result = panel_run(client, "effect", {"tag": "from-open"}, session(client, "open"))
    assert (result["success"], result["content"]) == (True, "posted from-open")
    assert "from-open" in posted(webhook)


def test_mcp_client_a_call_through_our_mcp_server_is_denied(
    live: LiveServer, webhook: WebhookReceiver
) -> None:
    seen: list[types.CallToolResult] = []

    async def body(mcp: Client) -> None:
        seen.append(await mcp.call_tool("effect", {"tag": "from-mcp"}))

    run(live.url + "/mcp/guarded", body)
    (result,) = seen
    assert result.is_error
    assert text_of(result) == "denied by hook guard: no effect from mcp_client"
    assert "from-mcp" not in posted(webhook)


def test_outside_mcp_a_consumed_server_s_tool_is_denied_before_it_is_sent(
    client: httpx.Client, llm: FakeLLMServer, tmp_path: Path
) -> None:
    touched = tmp_path / "touched.txt"
    args = json.dumps({"path": str(touched), "text": "ran"})
    llm.add(Reply(tool_calls=(FakeToolCall("outside__touch", args, "c1"),)), Reply(text="not touched"))
    events = say(client, session(client, "consumer"), "touch it")
    denied = "denied by hook guard: no outside__touch from outside_mcp"
    assert (events["tool_result"]["success"], events["tool_result"]["content"]) == (False, denied)
    assert tool_messages(llm, -1) == [denied]
    assert not touched.exists()
    # the control: with no hook, the same call (from the panel this time) writes the file
    ran = panel_run(
        client, "outside__touch", {"path": str(touched), "text": "ran"}, session(client, "open_consumer")
    )
    assert ran["success"] is True, ran
    assert touched.read_text() == "ran"


def test_continuation_a_next_page_re_runs_the_tool_through_the_guard(
    client: httpx.Client, llm: FakeLLMServer, webhook: WebhookReceiver
) -> None:
    llm.add(Reply(tool_calls=(FakeToolCall("paged", "{}", "c1"),)), Reply(text="see the table"))
    events = say(client, session(client, "guarded"), "numbers")
    (table,) = events["tool_result"]["visual"]  # the first page: the LLM's call, let through
    assert table["rows"] == [{"n": 1}]
    assert "page-1" in posted(webhook)
    page = client.post("/v1/continuations", json={"id": table["continuation"]["id"]})
    assert page.status_code == 200, page.text
    assert (page.json()["success"], page.json()["error"]) == (
        False,
        "denied by hook guard: no paged from continuation",
    )
    assert "page-2" not in posted(webhook)


def test_client_a_client_s_tool_call_is_not_handed_and_the_llm_is_asked_again(
    client: httpx.Client, llm: FakeLLMServer
) -> None:
    llm.add(
        Reply(tool_calls=(FakeToolCall("weather", '{"city": "Oslo"}', "w1"),)),
        Reply(text="I may not ask for the weather."),
    )
    asked = {"model": "guarded", "messages": [{"role": "user", "content": "weather?"}], "tools": [WEATHER]}
    answer = client.post("/v1/chat/completions", json=asked)
    assert answer.status_code == 200, answer.text
    (choice,) = answer.json()["choices"]
    assert choice["finish_reason"] == "stop" and not choice["message"].get("tool_calls")
    assert choice["message"]["content"] == "I may not ask for the weather."
    sent = llm.bodies[-1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == "w1"
    assert (sent[-1]["role"], sent[-1]["tool_call_id"]) == ("tool", "w1")
    assert "no weather from client" in sent[-1]["content"]


# -- after_tool_call, and a hook that fails ----------------------------------------------------


def test_after_tool_call_scrubs_a_key_before_the_llm_and_the_transcript_see_it(
    live: LiveServer, client: httpx.Client, llm: FakeLLMServer
) -> None:
    llm.add(Reply(tool_calls=(FakeToolCall("secret", "{}", "c1"),)), Reply(text="found it"))
    chat = session(client, "guarded")
    events = say(client, chat, "the key?")
    assert events["tool_result"]["content"] == "key=[redacted] found"
    assert tool_messages(llm, -1) == ["key=[redacted] found"]
    transcript = client.get(f"/v1/sessions/{chat}/messages")
    assert transcript.status_code == 200 and SECRET_KEY not in transcript.text


def test_after_tool_call_scrubs_a_panel_run(client: httpx.Client) -> None:
    result = panel_run(client, "secret", {}, session(client, "guarded"))
    assert (result["success"], result["content"]) == (True, "key=[redacted] found")


def test_a_hook_that_throws_denies_the_call_unless_it_says_on_error_allow(
    client: httpx.Client, webhook: WebhookReceiver
) -> None:
    result = panel_run(client, "effect", {"tag": "through-broken"}, session(client, "fragile"))
    assert result["success"] is False
    assert result["error"].startswith("denied by hook broken: the hook failed (on_error: deny): ")
    assert "the guard broke" in result["error"]
    assert "through-broken" not in posted(webhook)
    result = panel_run(client, "effect", {"tag": "through-lenient"}, session(client, "lenient"))
    assert (result["success"], result["content"]) == (True, "posted through-lenient")
    assert "through-lenient" in posted(webhook)
