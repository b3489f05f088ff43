"""Quotas in `agentkernel serve` (S26.3), hit from each path: a turn, mid-turn, the OpenAI endpoint, a tool
run's `llm()`, a sub-agent, a cron run, an MCP tool call.

One real server process (`agentkernel serve --port 0`) for the module, wired
to the scripted LLM in this process; every user may make one LLM call a day
(`calls_per_day: 1`) but `rich`, whose override lifts it, and template
`writer` allows each user 20 tokens a day (each answer costs 15). Each test
has users of its own, so the tests share the server and not their figures.
The cron job's owner starts the day with its call spent: its usage is put in
the ledger (the store every process reads) before the server starts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import httpx
import httpx2
import openai
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentkernel.config.server import token_hash
from agentkernel.services.usage import UsageLedger
from tests.conftest import wait_until
from tests.fakes import FakeLLMServer, FakeToolCall, RecordedRequest, Reply
from tests.fakes.openai_server import Turn
from tests.mcp_serve.conftest import text_of
from tests.server.conftest import make_project, script_tool, sse_events, write
from tests.server.test_many_processes import WAIT_SECS, Served

USERS = ("ann", "bob", "mid", "oai", "oai2", "tool", "tool2", "sub", "rich", "cronny", "mcp")
QUOTAS = """
quotas:
  default: {calls_per_day: 1}
  users: {rich: {calls_per_day: null}}
  templates: {writer: {tokens_per_day: 20}}
cron:
  user: cronny
  jobs:
    - {name: nightly, template: tester, interval_secs: 1, prompt: "How is the price?"}
"""
ASK = """
function run(args) {
  try { return llm(args.q); } catch (e) { return 'caught: ' + e.message; }
}
"""
DELEGATE = """
function run(args) {
  try { return run_subagent({task: 'sum it up', template: 'tester'}).answer; }
  catch (e) { return 'caught: ' + e.message; }
}
"""


def headers(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}-token"}


def tomorrow() -> str:
    day = datetime.now(UTC).date() + timedelta(days=1)
    return f"{day.isoformat()}T00:00:00Z"


def spent(user: str) -> str:
    """The refusal of a user's second call of the day."""
    return f"quota exhausted: calls_per_day for user {user}: 1 of 1 used; resets at {tomorrow()}"


def answer(request: RecordedRequest) -> Turn:
    """A call of `upper` for a message asking for it (once), else a plain answer."""
    said = json.dumps((request.body or {}).get("messages", []))
    if "use upper" in said and '"role": "tool"' not in said:
        return Reply(tool_calls=(FakeToolCall("upper", '{"text": "x"}'),))
    return Reply(text="an answer")


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(max_requests=2000) as server:
        server.respond_with(answer)
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLMServer) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("quotas")
    tokens = "".join(f'    "{token_hash(f"{user}-token")}": {user}\n' for user in USERS)
    make_project(root, llm, f"server:\n  tokens:\n{tokens}" + QUOTAS)
    tools = root / "config" / "scripts" / "tools"
    script_tool(tools, "ask", ASK, parameters={"type": "object", "properties": {"q": {"type": "string"}}})
    script_tool(tools, "ask_plain", "function run(args) { return llm('hi'); }")
    script_tool(tools, "delegate", DELEGATE)
    write(root / "config" / "templates" / "writer.yaml", "name: writer\ninstructions: Write.\n")
    ledger = UsageLedger(root / "data" / "messages.db")  # the cron job's owner: today's call spent
    ledger.record(user="cronny", template="tester", model="m", provider=None, input_tokens=1, output_tokens=1)
    ledger.close()
    server = Served(root, root / "serve.log")
    try:
        yield server
    finally:
        server.stop()


def client(served: Served, user: str) -> httpx.Client:
    return httpx.Client(base_url=served.url, headers=headers(user), timeout=WAIT_SECS)


def session(http: httpx.Client, template: str = "tester") -> str:
    made = http.post("/v1/sessions", json={"template": template})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def say(http: httpx.Client, session_id: str, text: str) -> httpx.Response:
    return http.post(f"/v1/sessions/{session_id}/messages", json={"content": text})


def asked(llm: FakeLLMServer, text: str) -> int:
    """How many LLM requests carried `text`."""
    return sum(text in json.dumps((r.body or {}).get("messages", [])) for r in llm.requests)


def test_a_turn_past_the_users_quota_is_429_at_once_and_other_users_go_on(
    served: Served, llm: FakeLLMServer
) -> None:
    with client(served, "ann") as ann, client(served, "bob") as bob:
        chat = session(ann)
        first = say(ann, chat, "ann's first")
        assert first.status_code == 200 and ("done", {"reason": "job_done"}) in sse_events(first.text)
        refused = say(ann, chat, "ann's second")
        theirs = say(bob, session(bob), "bob's first")
    assert refused.status_code == 429, refused.text
    assert refused.json()["detail"] == spent("ann")
    assert refused.json()["quota"] == {
        "name": "calls_per_day",
        "template": None,
        "used": 1,
        "limit": 1,
        "resets_at": tomorrow(),
    }
    assert refused.json()["error"]["type"] == "insufficient_quota"
    assert 0 < int(refused.headers["Retry-After"]) <= 86_400
    assert asked(llm, "ann's second") == 0  # no run started, the LLM never asked
    assert theirs.status_code == 200 and ("done", {"reason": "job_done"}) in sse_events(theirs.text)


def test_a_quota_hit_mid_turn_ends_the_run_with_its_error(served: Served) -> None:
    """The turn's first call asks for a tool; the call after the tool's result is refused."""
    with client(served, "mid") as mid:
        chat = session(mid)
        ran = say(mid, chat, "use upper")
        run_id = ran.headers["X-Run-Id"]
        run = mid.get(f"/v1/runs/{run_id}").json()
    events = sse_events(ran.text)
    assert [kind for kind, _ in events if kind in ("tool_call", "tool_result")] == [
        "tool_call",
        "tool_result",
    ]
    assert ("error", {"message": spent("mid"), "code": "quota_exhausted"}) in events
    assert events[-1] == ("done", {"reason": "error"})
    assert (run["status"], run["reason"]) == ("ended", "error")


def test_the_openai_endpoint_answers_429_which_the_sdk_raises_as_a_rate_limit(served: Served) -> None:
    sdk = openai.OpenAI(base_url=f"{served.url}/v1", api_key="oai-token", max_retries=0)
    said = [{"role": "user", "content": "hello"}]
    first = sdk.chat.completions.create(model="tester", messages=said)  # type: ignore[arg-type]
    assert first.choices[0].message.content == "an answer"
    with pytest.raises(openai.RateLimitError) as refused:
        sdk.chat.completions.create(model="tester", messages=said)  # type: ignore[arg-type]
    assert refused.value.code == "quota_exhausted"
    assert refused.value.body["message"] == spent("oai")  # type: ignore[index]
    assert refused.value.response.headers["x-should-retry"] == "false"


def test_a_completion_whose_quota_runs_out_mid_turn_is_a_429_too(served: Served) -> None:
    sdk = openai.OpenAI(base_url=f"{served.url}/v1", api_key="oai2-token", max_retries=0)
    with pytest.raises(openai.RateLimitError) as refused:
        sdk.chat.completions.create(model="tester", messages=[{"role": "user", "content": "use upper"}])
    assert refused.value.code == "quota_exhausted"
    assert refused.value.body["message"] == spent("oai2")  # type: ignore[index]


def test_a_tool_run_s_llm_throws_quota_exhausted_which_the_script_catches(served: Served) -> None:
    with client(served, "tool") as tool:
        runs = [tool.post("/v1/tools/ask/run", json={"args": {"q": "hi"}}) for _ in range(2)]
    assert [r.status_code for r in runs] == [200, 200]
    assert runs[0].json()["content"] == "an answer"
    assert runs[1].json()["content"] == f"caught: {spent('tool')}"


def test_a_tool_run_that_fails_on_the_quota_is_429(served: Served) -> None:
    with client(served, "tool2") as tool:
        runs = [tool.post("/v1/tools/ask_plain/run", json={"args": {}}) for _ in range(2)]
    assert runs[0].status_code == 200 and runs[0].json()["content"] == "an answer"
    assert runs[1].status_code == 429, runs[1].text
    assert runs[1].json()["detail"] == spent("tool2")


def test_a_sub_agents_caller_gets_the_quota_error(served: Served) -> None:
    with client(served, "sub") as sub:
        assert sub.post("/v1/tools/ask/run", json={"args": {"q": "hi"}}).json()["content"] == "an answer"
        delegated = sub.post("/v1/tools/delegate/run", json={"args": {}})
    assert delegated.json()["content"] == f"caught: {spent('sub')}"


def test_a_templates_limit_holds_within_it_and_a_users_override_lifts_the_default(served: Served) -> None:
    """rich may make any number of calls a day, but 20 tokens' worth within `writer`."""
    with client(served, "rich") as rich:
        chat = session(rich, "writer")
        statuses = [say(rich, chat, f"note {n}").status_code for n in range(3)]  # 15, 30 tokens, then 429
        refused = say(rich, chat, "once more")
        elsewhere = say(rich, session(rich), "in tester")
    assert statuses == [200, 200, 429]
    assert refused.json()["detail"] == (
        "quota exhausted: tokens_per_day for user rich in template writer: 30 of 20 used; "
        f"resets at {tomorrow()}"
    )
    assert elsewhere.status_code == 200 and ("done", {"reason": "job_done"}) in sse_events(elsewhere.text)


def test_a_cron_run_records_the_refusal(served: Served) -> None:
    def failed() -> dict[str, Any] | None:
        with client(served, "cronny") as cronny:
            jobs = {job["name"]: job for job in cronny.get("/v1/cron").json()}
        job = jobs.get("nightly")
        return job if job is not None and job["last_error"] is not None else None

    wait_until(lambda: failed() is not None, "the cron job's first run")
    job = failed()
    assert job is not None and job["last_ok"] is False
    assert job["last_error"] == spent("cronny")


def test_an_mcp_tool_call_past_the_quota_is_a_tool_error(served: Served) -> None:
    async def calls() -> list[tuple[bool, str]]:
        results = []
        http = httpx2.AsyncClient(headers=headers("mcp"), timeout=WAIT_SECS)
        async with http, Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as mcp:
            for _ in range(2):
                result = await mcp.call_tool("ask_plain", {})
                results.append((bool(result.is_error), text_of(result)))
        return results

    first, second = anyio.run(calls)
    assert first == (False, "an answer")
    assert second[0] is True and spent("mcp") in second[1]
