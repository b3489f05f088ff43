"""A run whose server is killed is resumed by the next one, never repeating a side effect (S25.3).

Real `agentkernel serve` processes on one project, killed with SIGKILL at
each point of a run: during the LLM's call (streaming or not), during a
tool call (idempotent or not), between a tool's result and the answer.
The tools' side effects are POSTs to a receiver in the test, counted: a
call whose result was recorded never runs again, a call cut short runs
again only when its YAML says `idempotent: true`. Two servers taking a run
over at once: one does. A damaged journal ends the run `error`, saying why.
Nothing waits on time: on the LLM's requests, the receiver's, the store.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentkernel.agent.resume import INTERRUPTED
from agentkernel.config.server import token_hash
from tests.conftest import wait_until
from tests.deployed import store_sql, usage_ledger
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.fakes.webhook import WebhookReceiver
from tests.server.conftest import make_project, script_tool, sse_events, write
from tests.server.test_turns_across_processes import ALICE, Held, Server, asked, new_session, serving

pytestmark = pytest.mark.across_deployments  # S27.3: on the project's files and on PostgreSQL

EFFECT = """
function run(args) {{
  var sent = http_post('{url}', JSON.stringify({{n: args.n, tool: '{name}'}}), 'application/json');
  return '{version} ' + sent.status + ' ' + args.n;
}}
"""
NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    opened = threading.Event()
    try:
        yield opened
    finally:
        opened.set()


def effect_tool(root: Path, name: str, url: str, version: str = "effect", **fields: Any) -> None:
    script = EFFECT.format(url=url, name=name, version=version)
    script_tool(root / "config" / "scripts" / "tools", name, script, parameters=NUMBER, **fields)


@pytest.fixture
def project(tmp_path: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver) -> Path:
    make_project(
        tmp_path,
        llm_server,
        f"http:\n  allow_private: true\nserver:\n  turn_lease_secs: 1\n"
        f"  tokens:\n    {token_hash('alice-token')}: alice\n",
    )
    effect_tool(tmp_path, "effect", receiver.url)
    effect_tool(tmp_path, "effect_again", receiver.url, idempotent=True)
    write(
        tmp_path / "config" / "templates" / "tester.yaml",
        "name: tester\ninstructions: Test.\ntools: [upper, effect, effect_again]\nmax_turns: 4\n",
    )
    return tmp_path


def start_run(server: Server, client: httpx.Client, text: str) -> tuple[str, str, httpx.Response]:
    """A message sent and left streaming: its session, its run id, the open response."""
    session = new_session(client)
    stream = client.send(
        client.build_request(
            "POST", f"/v1/sessions/{session}/messages", json={"content": text}, headers=ALICE
        ),
        stream=True,
    )
    assert stream.status_code == 200, stream.read()
    return session, stream.headers["x-run-id"], stream


def kill(server: Server) -> None:
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()


def ended(client: httpx.Client, run_id: str) -> dict[str, Any]:
    """The run once a server has taken it over and ended it."""
    found: list[dict[str, Any]] = []

    def over() -> bool:
        answer = client.get(f"/v1/runs/{run_id}", headers=ALICE)
        assert answer.status_code == 200, answer.text
        found.append(answer.json())
        return bool(found[-1]["status"] == "ended")

    wait_until(over, f"run {run_id} to be resumed and ended")
    return found[-1]


def tool_messages(llm_server: FakeLLMServer, index: int) -> list[tuple[str, str]]:
    return [
        (m["tool_call_id"], m["content"]) for m in asked(llm_server)[index]["messages"] if m["role"] == "tool"
    ]


def records(client: httpx.Client, session: str) -> list[tuple[str, str]]:
    got = client.get(f"/v1/sessions/{session}/messages", headers=ALICE)
    return [(r["kind"], r["content"]) for r in got.json()]


def test_a_run_killed_during_its_first_llm_call_is_resumed_by_the_next_server(
    project: Path, llm_server: FakeLLMServer, gate: threading.Event
) -> None:
    llm_server.add(Held(gate), Reply(text="resumed answer"))
    with serving(project, "a") as a, a.client() as to_a:
        session, run_id, stream = start_run(a, to_a, "one")
        wait_until(lambda: len(asked(llm_server)) == 1, "A's run to reach the LLM")
        kill(a)
        stream.close()
    with serving(project, "b") as b, b.client() as to_b:
        run = ended(to_b, run_id)
        assert (run["reason"], run["answer"]) == ("job_done", "resumed answer")
        assert [m["content"] for m in asked(llm_server)[1]["messages"] if m["role"] == "user"] == ["one"]
        page = text_string_to_metric_families(to_b.get("/metrics", headers=ALICE).text)
        resumed = [s.value for f in page for s in f.samples if s.name == "agentkernel_runs_resumed_total"]
        assert resumed == [1.0]  # S26.2
        said = records(to_b, session)
        assert said.count(("user", "one")) == 1 and said[-1] == ("end", "job_done"), said
        events = sse_events(to_b.get(f"/v1/runs/{run_id}/events", headers=ALICE).text)
        assert events[-2:] == [
            ("reply", {"content": "resumed answer", "streamed": False}),
            ("done", {"reason": "job_done"}),
        ]


def test_a_run_killed_while_streaming_its_answer_is_asked_again(
    project: Path, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(text="Раз два три", chunk_chars=4, stall_after_chunks=2), Reply(text="Заново"))
    with serving(project, "a") as a, a.client() as to_a:
        session, run_id, stream = start_run(a, to_a, "считай")
        lines = stream.iter_lines()
        wait_until(lambda: next(lines) == "event: token", "a token of the answer")
        kill(a)
        stream.close()
    with serving(project, "b") as b, b.client() as to_b:
        assert ended(to_b, run_id)["answer"] == "Заново"
        assert ("agent", "Заново") in records(to_b, session)


@pytest.mark.parametrize(
    ("tool", "runs", "seen"),
    [("effect", 1, INTERRUPTED), ("effect_again", 2, "effect 200 1")],
    ids=["not-idempotent", "idempotent"],
)
def test_a_run_killed_during_a_tool_call_runs_it_again_only_when_its_tool_says_so(
    project: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver, tool: str, runs: int, seen: str
) -> None:
    llm_server.add(Reply(tool_calls=(FakeToolCall(tool, '{"n": 1}', "c1"),)), Reply(text="after the call"))
    receiver.hold = hold = threading.Event()
    with serving(project, "a") as a, a.client() as to_a:
        session, run_id, stream = start_run(a, to_a, "do it")
        receiver.wait_for(1)  # the call reached its effect, and waits there
        kill(a)
        stream.close()
    hold.set()
    with serving(project, "b") as b, b.client() as to_b:
        assert ended(to_b, run_id)["answer"] == "after the call"
        assert len(receiver.bodies) == runs
        assert tool_messages(llm_server, 1) == [("c1", seen)]
        results = [content for kind, content in records(to_b, session) if kind == "tool_result"]
        assert results == [seen]  # one result of the call, whichever server wrote it
    # S26.3: each LLM call counted once, by the server that made it; the recorded answer is not asked again
    with usage_ledger(project / "data" / "messages.db") as ledger:
        spent = ledger.totals(user="alice", since=datetime.now(UTC).date() - timedelta(days=1))
    assert spent.calls == len(asked(llm_server)) == 2


def test_a_run_killed_after_a_tool_s_result_reuses_it_and_its_next_call_uses_the_tool_as_changed(
    project: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver, gate: threading.Event
) -> None:
    """The recorded result stands (its tool never runs again for it); the next call runs the new YAML."""
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("effect", '{"n": 1}', "c1"),)),
        Held(gate),
        Reply(tool_calls=(FakeToolCall("effect", '{"n": 2}', "c2"),)),
        Reply(text="both done"),
    )
    with serving(project, "a") as a, a.client() as to_a:
        _, run_id, stream = start_run(a, to_a, "twice")
        wait_until(lambda: len(asked(llm_server)) == 2, "the result to reach the LLM")
        kill(a)
        stream.close()
    effect_tool(project, "effect", receiver.url, version="v2")
    with serving(project, "b") as b, b.client() as to_b:
        assert ended(to_b, run_id)["answer"] == "both done"
    assert [body["n"] for body in receiver.bodies] == [1, 2]
    assert tool_messages(llm_server, 2) == [("c1", "effect 200 1")]
    assert tool_messages(llm_server, 3) == [("c1", "effect 200 1"), ("c2", "v2 200 2")]


def test_two_servers_taking_over_one_run_at_once_resume_it_once(
    project: Path, llm_server: FakeLLMServer, gate: threading.Event
) -> None:
    llm_server.add(Held(gate), Reply(text="once"), Reply(text="twice?"))
    with serving(project, "a") as a, a.client() as to_a:
        session, run_id, stream = start_run(a, to_a, "one")
        wait_until(lambda: len(asked(llm_server)) == 1, "A's run to reach the LLM")
        kill(a)
        stream.close()
    with serving(project, "b") as b, serving(project, "c") as c, b.client() as to_b:
        assert ended(to_b, run_id)["answer"] == "once"
        new = new_session(to_b)  # both servers still answer, and took the run once
        with c.client() as to_c:
            reply = to_c.post(f"/v1/sessions/{new}/messages", json={"content": "hi"}, headers=ALICE)
        assert dict(sse_events(reply.text))["reply"]["content"] == "twice?"
        assert [k for k, _ in records(to_b, session)].count("agent") == 1
    assert "resuming run" in (b.log.read_text() + c.log.read_text())


def test_a_damaged_journal_ends_its_run_in_error_and_nothing_else(
    project: Path, llm_server: FakeLLMServer, gate: threading.Event
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "a"}', "c1"),)), Held(gate), Reply(text="ok")
    )
    with serving(project, "a") as a, a.client() as to_a:
        session, run_id, stream = start_run(a, to_a, "one")
        wait_until(lambda: len(asked(llm_server)) == 2, "the result to reach the LLM")
        kill(a)
        stream.close()
    store_sql(
        project / "data" / "messages.db",
        "UPDATE messages SET meta = '{\"tool\": \"upp' WHERE run_id = ? AND kind = 'tool_call'",
        (run_id,),
    )
    with serving(project, "b") as b, b.client() as to_b:
        run = ended(to_b, run_id)
        assert run["reason"] == "error"
        said = records(to_b, session)
        assert said[-1] == ("end", "error")
        assert "has a meta that is not JSON" in said[-2][1] and said[-2][0] == "error", said
        reply = to_b.post(f"/v1/sessions/{session}/messages", json={"content": "again"}, headers=ALICE)
        assert dict(sse_events(reply.text))["reply"]["content"] == "ok"  # the session goes on


def test_the_page_reconnects_by_itself_to_the_server_that_resumed_its_run(
    project: Path, llm_server: FakeLLMServer, gate: threading.Event, browser: Any
) -> None:
    """The page's stream breaks with its server (kill -9); a server started on the same address resumes
    the run, and the page, reading the run's events after the last it showed, shows the answer."""
    from tests.server.test_page_browser import send_in_new_chat

    llm_server.add(Held(gate), Reply(text="answered after the restart"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kernel_yaml = project / "config" / "kernel.yaml"  # no tokens: the page's user is `local`
    tokens = f"  tokens:\n    {token_hash('alice-token')}: alice\n"
    kernel_yaml.write_text(kernel_yaml.read_text().replace(tokens, ""))
    with serving(project, "a", port) as a:
        page, _ = send_in_new_chat(browser, a.url, "one")
        wait_until(lambda: len(asked(llm_server)) == 1, "the page's run to reach the LLM")
        kill(a)
    with serving(project, "b", port):
        page.wait_for_selector(".msg.agent:has-text('answered after the restart')")
        page.wait_for_selector("#send:enabled")
        page.screenshot(path=str(project / "reconnected.png"))
    assert len(asked(llm_server)) == 2


def test_a_run_whose_resuming_server_dies_each_time_is_given_up_after_three_takeovers(
    project: Path, llm_server: FakeLLMServer
) -> None:
    """A tool that kills its server, marked idempotent so each resume runs it again: without a bound,
    every server started on the project would die resuming it. The fourth takeover ends it `error`."""
    kernel_yaml = project / "config" / "kernel.yaml"
    kernel_yaml.write_text(kernel_yaml.read_text() + "shell:\n  enabled: true\n")
    tools = project / "config" / "scripts" / "tools"
    script_tool(tools, "crash", "function run() { shell('kill -9 $PPID'); return 'alive'; }", idempotent=True)
    write(
        project / "config" / "templates" / "tester.yaml",
        "name: tester\ninstructions: Test.\ntools: [crash]\n",
    )
    llm_server.add(*[Reply(tool_calls=(FakeToolCall("crash", "{}", "c1"),))], Reply(text="never"))
    with serving(project, "a") as a, a.client() as to_a:
        session, run_id, stream = start_run(a, to_a, "crash")
        a.process.wait()  # the tool killed it
        stream.close()
    for name in ("b", "c", "d"):  # each takes the run over, runs the tool again, and dies of it
        with serving(project, name) as server:
            server.process.wait()
    with serving(project, "e") as e, e.client() as to_e:
        run = ended(to_e, run_id)
        assert (run["reason"], run["answer"]) == ("error", None)
        said = records(to_e, session)
        assert said[-1] == ("end", "error")
        assert "was taken over 3 times after its server died" in said[-2][1], said
        assert e.process.poll() is None  # the server that gave it up lives


def test_a_chat_completion_s_run_whose_server_died_is_ended_not_resumed(
    project: Path, llm_server: FakeLLMServer, gate: threading.Event
) -> None:
    """Its conversation was its client's and left with it: the next server ends the run `terminated`."""
    llm_server.add(Held(gate))
    body = {"model": "tester", "messages": [{"role": "user", "content": "hi"}]}
    with serving(project, "a") as a, a.client() as to_a:
        asking = threading.Thread(
            target=_post_quietly, args=(to_a, "/v1/chat/completions", body), daemon=True
        )
        asking.start()
        wait_until(lambda: len(asked(llm_server)) == 1, "the completion's run to reach the LLM")
        kill(a)
        asking.join(60)
    [(run_id,)] = store_sql(project / "data" / "messages.db", "SELECT id FROM runs WHERE one_off = 1")
    with serving(project, "b") as b, b.client() as to_b:
        assert ended(to_b, run_id)["reason"] == "terminated"
    assert len(asked(llm_server)) == 1  # nothing asked again
    assert "a chat completion's, whose client has gone" in b.log.read_text()


def _post_quietly(client: httpx.Client, path: str, body: dict[str, Any]) -> None:
    """POST, the connection's end (its server killed) being expected."""
    with contextlib.suppress(httpx.HTTPError):
        client.post(path, json=body, headers=ALICE)


def test_a_run_its_server_stops_gracefully_during_a_tool_call_goes_on_in_the_next_from_its_next_call(
    project: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    """SIGTERM past shutdown_grace_secs hands a session's run off (S25.3): the running call is waited
    for and recorded, the next is not started (so it is not `interrupted`), and the next server goes
    on with it: each call ran once, the run ends once."""
    kernel_yaml = project / "config" / "kernel.yaml"
    kernel_yaml.write_text(
        kernel_yaml.read_text().replace("server:\n", "server:\n  shutdown_grace_secs: 0\n")
    )
    calls = (FakeToolCall("effect", '{"n": 1}', "c1"), FakeToolCall("effect", '{"n": 2}', "c2"))
    llm_server.add(Reply(tool_calls=calls), Reply(text="after both"))
    receiver.hold = hold = threading.Event()
    with serving(project, "a") as a, a.client() as to_a:
        session, run_id, stream = start_run(a, to_a, "do both")
        receiver.wait_for(1)  # the first call reached its effect, and waits there
        a.process.send_signal(signal.SIGTERM)
        wait_until(lambda: "running turn(s)" in a.log.read_text(), "A to stop its running turn")
        hold.set()
        assert a.process.wait() == 0
        stream.close()
    assert [body["n"] for body in receiver.bodies] == [1]
    with serving(project, "b") as b, b.client() as to_b:
        assert ended(to_b, run_id)["answer"] == "after both"
        results = [content for kind, content in records(to_b, session) if kind == "tool_result"]
    assert [body["n"] for body in receiver.bodies] == [1, 2]
    assert results == ["effect 200 1", "effect 200 2"]
    assert tool_messages(llm_server, 1) == [("c1", "effect 200 1"), ("c2", "effect 200 2")]
