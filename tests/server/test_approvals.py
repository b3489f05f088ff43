"""A call a person must approve (S24.4, S24.6): the run waits, journaled; a decision lets it go on.

Real uvicorn (LiveServer) and the scripted LLM. A tool whose YAML says
`approval: always` pauses its run: the stream shows `approval_required`,
`GET /v1/approvals` lists it, `POST /v1/runs/{run}/approvals/{call}`
decides — approve, deny (the LLM sees the reason), edit (new arguments,
validated) — exactly once; another user gets 404. Nothing waits on time:
on the stream's events and the store.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.server import token_hash
from tests.conftest import wait_until
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.fakes.webhook import WebhookReceiver
from tests.server.conftest import LiveServer, make_project, script_tool, sse_frames, write
from tests.server.test_run_resume import effect_tool, ended, kill, start_run
from tests.server.test_turns_across_processes import asked, serving

ALICE, BOB, CAROL = (
    {"Authorization": "Bearer alice-token"},
    {"Authorization": "Bearer bob-token"},
    {"Authorization": "Bearer carol-token"},
)

pytestmark = pytest.mark.across_deployments  # S27.3: on the project's files and on PostgreSQL
TOKENS = "".join(f"    {token_hash(name + '-token')}: {name}\n" for name in ("alice", "bob", "carol"))
SEND = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}


@pytest.fixture
def project(tmp_path: Path, llm_server: FakeLLMServer) -> Path:
    make_project(tmp_path, llm_server, f"server:\n  tokens:\n{TOKENS}")
    tools = tmp_path / "config" / "scripts" / "tools"
    script_tool(
        tools,
        "send",
        "function run(args) { return 'sent to ' + args.to; }",
        parameters=SEND,
        approval="always",
        approvers=["carol"],
    )
    write(
        tmp_path / "config" / "templates" / "tester.yaml",
        "name: tester\ninstructions: Test.\ntools: [upper, send]\nmax_turns: 4\n",
    )
    return tmp_path


@pytest.fixture
def live(project: Path) -> Iterator[LiveServer]:
    with LiveServer(Kernel(load_kernel_config(project / "config" / "kernel.yaml"))) as server:
        yield server


class Turn:
    """A message's stream read on a thread of its own: its frames as they come, and when each kind came."""

    def __init__(self, client: httpx.Client, session: str, text: str) -> None:
        self.frames: list[tuple[str, int | None, Any]] = []
        self.seen = threading.Condition()
        self.status = 0
        self._thread = threading.Thread(target=self._read, args=(client, session, text), daemon=True)
        self._thread.start()

    def _read(self, client: httpx.Client, session: str, text: str) -> None:
        url = f"/v1/sessions/{session}/messages"
        with client.stream("POST", url, json={"content": text}, headers=ALICE) as stream:
            self.status = stream.status_code
            buffer = ""
            for chunk in stream.iter_text():
                buffer += chunk
                *whole, buffer = buffer.split("\n\n")
                with self.seen:
                    for frame in whole:
                        self.frames.extend(sse_frames(frame + "\n\n"))
                    self.seen.notify_all()

    def wait_for(self, kind: str) -> Any:
        with self.seen:
            assert self.seen.wait_for(lambda: any(f[0] == kind for f in self.frames), timeout=60), self.frames
            return next(f[2] for f in self.frames if f[0] == kind)

    def events(self) -> list[tuple[str, Any]]:
        self._thread.join(60)
        return [(kind, data) for kind, _, data in self.frames if kind not in ("run", "token")]


def new_session(client: httpx.Client) -> str:
    made = client.post("/v1/sessions", json={"template": "tester"}, headers=ALICE)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def tool_messages(llm_server: FakeLLMServer, index: int) -> list[str]:
    body = asked(llm_server)[index]
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def send_call(llm_server: FakeLLMServer, to: str = "bob", answer: str = "done") -> None:
    call = FakeToolCall("send", json.dumps({"to": to}), "c1")
    llm_server.add(Reply(tool_calls=(call,)), Reply(text=answer))


def decide(
    client: httpx.Client, run: str, headers: dict[str, str], call: str = "c1", **body: Any
) -> httpx.Response:
    return client.post(f"/v1/runs/{run}/approvals/{call}", json=body, headers=headers)


def test_an_approved_call_runs_once_its_owner_approves(live: LiveServer, llm_server: FakeLLMServer) -> None:
    send_call(llm_server)
    with live.client() as client:
        turn = Turn(client, new_session(client), "send it")
        required = turn.wait_for("approval_required")
        run = required["run_id"]
        assert required["call"] == {"id": "c1", "tool": "send", "args": {"to": "bob"}}
        assert required["question"] == "Run the tool 'send' with these arguments?"
        assert client.get(f"/v1/runs/{run}", headers=ALICE).json()["status"] == "waiting_approval"
        listed = client.get("/v1/approvals", headers=ALICE).json()["approvals"]
        assert [(a["run_id"], a["call"]["id"]) for a in listed] == [(run, "c1")]
        assert len(asked(llm_server)) == 1  # nothing goes on before the decision
        answer = decide(client, run, ALICE, decision="approve")
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "approved"
        events = turn.events()
    kinds = [kind for kind, _ in events]
    assert kinds == ["tool_call", "approval_required", "approval_decided", "tool_result", "reply", "done"]
    assert dict(events)["tool_result"]["content"] == "sent to bob"
    assert tool_messages(llm_server, 1) == ["sent to bob"]
    with live.client() as client:
        assert client.get("/v1/approvals", headers=ALICE).json()["approvals"] == []
        assert decide(client, run, ALICE, decision="approve").status_code == 409  # decided once
        assert client.get(f"/v1/runs/{run}", headers=ALICE).json()["status"] == "ended"


def test_a_denied_call_does_not_run_and_the_llm_reads_why(
    live: LiveServer, llm_server: FakeLLMServer
) -> None:
    send_call(llm_server, answer="I did not send it")
    with live.client() as client:
        turn = Turn(client, new_session(client), "send it")
        run = turn.wait_for("approval_required")["run_id"]
        assert decide(client, run, BOB, decision="deny").status_code == 404  # not bob's to decide
        denied = decide(client, run, ALICE, decision="deny", reason="not to bob, ever")
        assert denied.status_code == 200, denied.text
        events = dict(turn.events())
    assert events["tool_result"]["success"] is False
    assert tool_messages(llm_server, 1) == ["tool 'send' not run: denied by alice: not to bob, ever"]
    assert events["reply"]["content"] == "I did not send it"


def test_an_edit_runs_the_call_with_the_new_arguments_once_they_validate(
    live: LiveServer, llm_server: FakeLLMServer
) -> None:
    send_call(llm_server)
    with live.client() as client:
        turn = Turn(client, new_session(client), "send it")
        run = turn.wait_for("approval_required")["run_id"]
        wrong = decide(client, run, ALICE, decision="edit", args={"to": 5})
        assert wrong.status_code == 422 and "to" in wrong.json()["detail"], wrong.text
        assert decide(client, run, ALICE, decision="edit").status_code == 422  # an edit needs args
        edited = decide(client, run, ALICE, decision="edit", args={"to": "carol"})
        assert edited.status_code == 200, edited.text
        events = dict(turn.events())
    assert events["tool_result"]["content"] == "sent to carol"


def test_a_named_approver_may_decide_and_a_remembered_approval_asks_no_more(
    live: LiveServer, llm_server: FakeLLMServer
) -> None:
    send_call(llm_server)
    with live.client() as client:
        session = new_session(client)
        turn = Turn(client, session, "send it")
        run = turn.wait_for("approval_required")["run_id"]
        assert [a["call"]["id"] for a in client.get("/v1/approvals", headers=CAROL).json()["approvals"]] == [
            "c1"
        ]
        assert client.get("/v1/approvals", headers=BOB).json()["approvals"] == []
        assert decide(client, run, CAROL, decision="approve", remember=True).status_code == 200
        assert dict(turn.events())["tool_result"]["content"] == "sent to bob"
        rules = client.get("/v1/approval-rules", headers=ALICE).json()["rules"]
        assert [(r["tool"], r["template"]) for r in rules] == [("send", "tester")]
        send_call(llm_server, to="dan")
        again = Turn(client, session, "and to dan")
        allowed = again.events()  # by the rule, at once: the decision is recorded, saying so
        assert [k for k, _ in allowed] == ["tool_call", "approval_decided", "tool_result", "reply", "done"]
        assert dict(allowed)["approval_decided"]["reason"] == "allowed by a rule the user made"
        assert client.delete(f"/v1/approval-rules/{rules[0]['id']}", headers=BOB).status_code == 404
        assert client.delete(f"/v1/approval-rules/{rules[0]['id']}", headers=ALICE).status_code == 204
        send_call(llm_server, to="eve")
        third = Turn(client, session, "and to eve")
        asked_again = third.wait_for("approval_required")  # asks again once the rule is gone
        run, call = asked_again["run_id"], asked_again["call"]["id"]  # c1 renamed: the LLM used it before
        assert decide(client, run, ALICE, call, decision="approve").status_code == 200
        third.events()


def test_a_session_whose_run_waits_refuses_another_message_and_its_user_may_start_others(
    project: Path, llm_server: FakeLLMServer
) -> None:
    """The run keeps its session (409), but it is not one of its user's running turns: a person may
    take a day to decide, and the user chats on meanwhile."""
    kernel_yaml = project / "config" / "kernel.yaml"
    kernel_yaml.write_text(
        kernel_yaml.read_text().replace("server:\n", "server:\n  max_running_turns_per_user: 1\n")
    )
    send_call(llm_server)
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live, live.client() as client:
        session = new_session(client)
        turn = Turn(client, session, "send it")
        run = turn.wait_for("approval_required")["run_id"]
        busy = client.post(f"/v1/sessions/{session}/messages", json={"content": "again"}, headers=ALICE)
        assert busy.status_code == 409, busy.text
        llm_server.add(Reply(text="meanwhile"))
        other = client.post(
            f"/v1/sessions/{new_session(client)}/messages", json={"content": "hi"}, headers=ALICE
        )
        assert other.status_code == 200, other.text
        assert decide(client, run, ALICE, decision="approve").status_code == 200
        turn.events()


def test_an_approval_pending_when_its_server_is_killed_twice_is_decided_on_the_third_and_runs_once(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """The wait is the run's, in the store (S24.4, S25.3): a server killed with SIGKILL while the call
    waits, and the next killed too, leave it pending; approved through the third, the call runs once."""
    with WebhookReceiver() as receiver:
        make_project(
            tmp_path,
            llm_server,
            "http:\n  allow_private: true\nserver:\n  turn_lease_secs: 1\n"
            f"  tokens:\n    {token_hash('alice-token')}: alice\n",
        )
        effect_tool(tmp_path, "effect", receiver.url, approval="always")
        write(
            tmp_path / "config" / "templates" / "tester.yaml",
            "name: tester\ninstructions: Test.\ntools: [effect]\nmax_turns: 4\n",
        )
        llm_server.add(
            Reply(tool_calls=(FakeToolCall("effect", '{"n": 1}', "c1"),)), Reply(text="approved, sent")
        )
        with serving(tmp_path, "a") as a, a.client() as to_a:
            _, run_id, stream = start_run(a, to_a, "send it")
            wait_until(lambda: bool(pending_calls(to_a)), "the call to wait for a decision")
            kill(a)
            stream.close()
        for name in ("b", "c"):
            with serving(tmp_path, name) as server, server.client() as client:
                wait_until(lambda: "resuming run" in server.log.read_text(), f"{name} to take the run over")
                assert pending_calls(client) == [(run_id, "c1")]  # the same approval, still pending
                if name == "b":
                    kill(server)
                    continue
                assert decide(client, run_id, ALICE, decision="approve").status_code == 200
                assert ended(client, run_id)["answer"] == "approved, sent"
                journal = [(k, c) for k, c in records_of(client, run_id)]
        assert len(receiver.bodies) == 1, journal
        assert [k for k, _ in journal].count("approval_required") == 1
        assert [k for k, _ in journal].count("tool_result") == 1
        assert len(asked(llm_server)) == 2  # the recorded response was never asked for again


def pending_calls(client: httpx.Client) -> list[tuple[str, str]]:
    listed = client.get("/v1/approvals", headers=ALICE).json()["approvals"]
    return [(a["run_id"], a["call"]["id"]) for a in listed]


def records_of(client: httpx.Client, run_id: str) -> list[tuple[str, Any]]:
    return [
        (kind, data)
        for kind, _, data in sse_frames(client.get(f"/v1/runs/{run_id}/events", headers=ALICE).text)
    ]


def test_a_streamed_completion_waits_for_the_decision_with_the_openai_sdk(
    live: LiveServer, llm_server: FakeLLMServer
) -> None:
    """The OpenAI endpoint's stream stays open while the call waits (S24.6 event in the extension
    field); a decision made through the API lets it go on, in the same stream."""
    send_call(llm_server, answer="sent, as approved")
    sdk = openai.OpenAI(base_url=f"{live.url}/v1", api_key="alice-token", max_retries=0)
    texts: list[str] = []
    with live.client() as client:
        stream = sdk.chat.completions.create(
            model="tester", messages=[{"role": "user", "content": "send it"}], stream=True
        )
        for chunk in stream:
            extension = (chunk.model_extra or {}).get("agentkernel") or {}
            if extension.get("type") == "approval_required":
                required = extension["data"]
                assert decide(client, required["run_id"], ALICE, decision="approve").status_code == 200
            texts.extend(c.delta.content or "" for c in chunk.choices)
    assert "".join(texts) == "sent, as approved"
    assert tool_messages(llm_server, 1) == ["sent to bob"]


def test_a_non_streamed_completion_waits_as_long_as_completion_wait_secs_then_the_call_is_denied(
    project: Path, llm_server: FakeLLMServer
) -> None:
    kernel_yaml = project / "config" / "kernel.yaml"
    kernel_yaml.write_text(kernel_yaml.read_text() + "approvals:\n  completion_wait_secs: 0.5\n")
    send_call(llm_server, answer="nobody approved")
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live:
        sdk = openai.OpenAI(base_url=f"{live.url}/v1", api_key="alice-token", max_retries=0)
        answer = sdk.chat.completions.create(
            model="tester", messages=[{"role": "user", "content": "send it"}]
        )
    assert answer.choices[0].message.content == "nobody approved"
    denied = tool_messages(llm_server, 1)[0]
    assert denied.startswith("tool 'send' not run: denied: no decision within approvals.completion_wait_secs")


def test_a_hooks_ask_pauses_the_call_with_its_question_and_the_tools_yaml_fields_reach_the_hook(
    project: Path, llm_server: FakeLLMServer
) -> None:
    """`ask` from `before_tool_call` (S24.2) is an approval as `approval: always` is, with the hook's
    question; the hook reads the tool's own YAML fields in `call.config` (here `risky: true`)."""
    tools, hooks = project / "config" / "scripts" / "tools", project / "config" / "scripts" / "hooks"
    script_tool(tools, "wipe", "function run() { return 'wiped'; }", risky=True)
    write(hooks / "careful.yaml", "kind: script_hook\nname: careful\nscript: careful.js\n")
    write(
        hooks / "careful.js",
        "function before_tool_call(ctx, call) {"
        " if (call.config.risky) return {ask: 'Really ' + call.tool + ' (from ' + call.origin + ')?'}; }",
    )
    write(
        project / "config" / "templates" / "tester.yaml",
        "name: tester\ninstructions: Test.\ntools: [upper, wipe]\nhooks: [careful]\nmax_turns: 4\n",
    )
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "a"}', "c0"), FakeToolCall("wipe", "{}", "c1"))),
        Reply(text="both done"),
    )
    with (
        LiveServer(Kernel(load_kernel_config(project / "config" / "kernel.yaml"))) as live,
        live.client() as client,
    ):
        turn = Turn(client, new_session(client), "wipe it")
        required = turn.wait_for("approval_required")
        assert (required["call"]["id"], required["question"]) == ("c1", "Really wipe (from llm)?")
        assert decide(client, required["run_id"], ALICE, decision="approve").status_code == 200
        events = turn.events()
    results = [data["content"] for kind, data in events if kind == "tool_result"]
    assert results == ["A", "wiped"]  # the call the hook let through ran at once, the other once approved


def test_a_call_id_the_llm_uses_again_is_a_new_call_asked_about_again(
    live: LiveServer, llm_server: FakeLLMServer
) -> None:
    """A server that numbers its calls afresh in each response (`c1` again): the second is another
    call, renamed in the conversation, and its approval is asked for anew — never the first's."""
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("send", '{"to": "bob"}', "c1"),)),
        Reply(tool_calls=(FakeToolCall("send", '{"to": "mallory"}', "c1"),)),
        Reply(text="done"),
    )
    with live.client() as client:
        turn = Turn(client, new_session(client), "send twice")
        first = turn.wait_for("approval_required")
        assert decide(client, first["run_id"], ALICE, decision="approve").status_code == 200
        with turn.seen:
            assert turn.seen.wait_for(
                lambda: sum(f[0] == "approval_required" for f in turn.frames) == 2, timeout=60
            )
            second = [f[2] for f in turn.frames if f[0] == "approval_required"][1]
        assert (second["call"]["id"], second["call"]["args"]) == ("c1_2", {"to": "mallory"})
        denied = client.post(
            f"/v1/runs/{first['run_id']}/approvals/c1_2", json={"decision": "deny"}, headers=ALICE
        )
        assert denied.status_code == 200, denied.text
        turn.events()
    assert tool_messages(llm_server, 2) == ["sent to bob", "tool 'send' not run: denied by alice"]


def test_a_tool_run_from_the_panel_is_approved_by_its_runner_and_hooks_still_see_it(
    live: LiveServer, llm_server: FakeLLMServer
) -> None:
    """The person who would be asked is the one running the tool (the page's tools panel, the API's
    tool runs): an `approval: always` tool runs at once, nothing waits, nothing is listed."""
    with live.client() as client:
        ran = client.post(
            "/v1/tools/send/run", json={"args": {"to": "bob"}, "session": new_session(client)}, headers=ALICE
        )
        assert ran.status_code == 200, ran.text
        assert ran.json()["content"] == "sent to bob"
        assert client.get("/v1/approvals", headers=ALICE).json()["approvals"] == []
