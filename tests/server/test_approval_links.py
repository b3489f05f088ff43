"""Decision URLs (S24.4): an approval asked is posted to kernel.yaml's `approvals.notify` webhook with two
single-use links, and a person decides through them with no bearer token.

Real uvicorn (LiveServer), a real webhook receiver (tests/fakes/webhook.py)
and the scripted LLM. The `send` tool needs `approval: always`: its run
waits, the receiver gets `{approval, approve_url, deny_url, expires_at}`;
a GET of a link shows the call and decides nothing; a POST decides, once;
a forged, replayed, used or expired link decides nothing. Nothing waits on
time: on the receiver, the stream's events and the store.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.server.routes.approval_links import PATH as LINK_PATH
from agentkernel.services.approval_tokens import MAX_TOKEN_CHARS
from tests.fakes import FakeLLMServer
from tests.fakes.webhook import WebhookReceiver
from tests.server.conftest import LiveServer, make_project, script_tool, write
from tests.server.test_approvals import (
    ALICE,
    SEND,
    TOKENS,
    Turn,
    decide,
    new_session,
    send_call,
    tool_messages,
)

PUBLIC = "https://approvals.example.test"
BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}  # what a browser sends


def project_with(root: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver, more: str = "") -> Path:
    """Alice, Bob and Carol's tokens; loopback webhooks allowed (the receiver); `send` needs approval."""
    make_project(
        root,
        llm_server,
        f"server:\n  tokens:\n{TOKENS}http:\n  allow_private: true\n"
        f"approvals:\n  public_url: {PUBLIC}/\n  notify:\n    - {{type: webhook, url: {receiver.url}}}\n"
        + more,
    )
    tools = root / "config" / "scripts" / "tools"
    script_tool(
        tools,
        "send",
        "function run(args) { return 'sent to ' + args.to; }",
        parameters=SEND,
        approval="always",
    )
    write(
        root / "config" / "templates" / "tester.yaml",
        "name: tester\ninstructions: Test.\ntools: [upper, send]\nmax_turns: 4\n",
    )
    return root


@pytest.fixture
def live(tmp_path: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver) -> Iterator[LiveServer]:
    project = project_with(tmp_path, llm_server, receiver)
    with LiveServer(Kernel(load_kernel_config(project / "config" / "kernel.yaml"))) as server:
        yield server


def local(live: LiveServer, url: str) -> str:
    """A decision URL (under approvals.public_url) as this test reaches the server: its path."""
    assert url.startswith(PUBLIC + "/v1/approval-links/"), url
    return urlsplit(url).path


def waiting_notice(
    live: LiveServer, client: httpx.Client, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> tuple[Turn, dict[str, Any]]:
    """A run waiting on `send`, and the notice its receiver got."""
    send_call(llm_server)
    turn = Turn(client, new_session(client), "send it")
    required = turn.wait_for("approval_required")
    notice = receiver.wait_for(1)[0]
    assert notice["approval"]["run_id"] == required["run_id"]
    return turn, notice


def test_a_notice_carries_two_links_a_get_decides_nothing_and_a_post_approves_once(
    live: LiveServer, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    with live.client() as client:
        turn, notice = waiting_notice(live, client, llm_server, receiver)
        approval = notice["approval"]
        run = approval["run_id"]
        assert approval["call"] == {"id": "c1", "tool": "send", "args": {"to": "bob"}, "origin": "llm"}
        assert approval["status"] == "pending"
        assert set(notice) == {"approval", "approve_url", "deny_url", "expires_at"}
        assert notice["expires_at"] == approval["expires_at"]
        assert receiver.headers[0]["Idempotency-Key"] == f"approval/{run}/c1/0"
        approve, deny = local(live, notice["approve_url"]), local(live, notice["deny_url"])
        assert approve != deny

        page = client.get(approve, headers=BROWSER)  # no bearer token: the link's token is the credential
        assert page.status_code == 200, page.text
        assert page.headers["content-type"].startswith("text/html")
        assert page.headers["cache-control"] == "no-store"
        assert page.headers["referrer-policy"] == "no-referrer"
        assert "script-src" not in page.headers["content-security-policy"]
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        assert "<script" not in page.text
        assert page.text.count("<form") == 1 and '<form method="post">' in page.text
        assert ">Approve</button>" in page.text and "send" in page.text
        assert "&quot;to&quot;: &quot;bob&quot;" in page.text  # the arguments, escaped
        assert "Run the tool &#x27;send&#x27; with these arguments?" in page.text
        assert client.get(f"/v1/runs/{run}", headers=ALICE).json()["status"] == "waiting_approval"
        assert [a["run_id"] for a in client.get("/v1/approvals", headers=ALICE).json()["approvals"]] == [run]

        decided = client.post(approve, headers=BROWSER)
        assert decided.status_code == 200, decided.text
        assert "The call was approved" in decided.text
        assert decided.headers["cache-control"] == "no-store"
        events = turn.events()
        assert dict(events)["tool_result"]["content"] == "sent to bob"
        assert tool_messages(llm_server, 1) == ["sent to bob"]

        again = client.post(approve, headers=BROWSER)
        assert again.status_code == 409, again.text
        assert "cannot be used again" in again.text and "works once" in again.text
        other = client.post(deny, headers=BROWSER)  # the same approval's other link: decided already
        assert other.status_code == 409, other.text
        assert "approve by link" in other.text
        assert client.get(deny).status_code == 409
        assert client.get(f"/v1/runs/{run}", headers=ALICE).json()["status"] == "ended"


def forged(path: str) -> str:
    """`path` with one byte of its token's signature changed."""
    head, last = path[:-3], path[-3]
    return head + ("A" if last != "A" else "B") + path[-2:]


def test_a_forged_or_overlong_token_is_404_and_decides_nothing(
    live: LiveServer, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    with live.client() as client:
        turn, notice = waiting_notice(live, client, llm_server, receiver)
        approve = local(live, notice["approve_url"])
        payload = approve.rsplit(".", 1)[0]
        for bad in (forged(approve), forged(payload) + approve[len(payload) :], approve + "x"):
            for method in ("GET", "POST"):
                answer = client.request(method, bad, headers=BROWSER)
                assert answer.status_code == 404, (bad, answer.text)
                assert "no such decision link" in answer.text
                assert "send" not in answer.text and "bob" not in answer.text  # nothing leaks
        as_json = client.post(forged(approve), headers={"Accept": "application/json"})
        assert as_json.status_code == 404
        assert as_json.json()["detail"].startswith("no such decision link")
        long = "/v1/approval-links/" + "a" * (MAX_TOKEN_CHARS + 1)
        assert client.post(long).status_code == 404
        assert client.get(long).status_code == 404
        assert client.get("/v1/approvals", headers=ALICE).json()["approvals"] != []  # still pending
        assert client.post(approve).status_code == 200  # the real one still works
        turn.events()


def test_a_deny_link_with_a_reason_tells_the_llm_and_a_program_gets_json(
    live: LiveServer, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    with live.client() as client:
        turn, notice = waiting_notice(live, client, llm_server, receiver)
        deny = local(live, notice["deny_url"])
        page = client.get(deny, headers=BROWSER)
        assert '<textarea id="reason" name="reason"' in page.text and ">Deny</button>" in page.text
        looked = client.get(deny).json()  # a program (no text/html in its Accept) gets JSON
        assert (looked["decision"], looked["approval"]["status"]) == ("deny", "pending")
        decided = client.post(deny, data={"reason": "not <today>"})
        assert decided.status_code == 200, decided.text
        body = decided.json()
        assert (body["status"], body["decision"], body["reason"], body["decided_by"]) == (
            "denied",
            "deny",
            "not <today>",
            "link",
        )
        events = turn.events()
    assert "tool_result" not in dict(events) or dict(events)["tool_result"]["success"] is False
    (message,) = tool_messages(llm_server, 1)
    assert "not <today>" in message


def test_a_link_replayed_after_a_decision_through_the_api_is_refused(
    live: LiveServer, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    with live.client() as client:
        turn, notice = waiting_notice(live, client, llm_server, receiver)
        run = notice["approval"]["run_id"]
        assert decide(client, run, ALICE, decision="deny", reason="no").status_code == 200
        turn.events()
        replayed = client.post(local(live, notice["approve_url"]), headers={"Accept": "application/json"})
        assert replayed.status_code == 409, replayed.text
        assert "decided already: deny by alice" in replayed.json()["detail"]
    assert "sent to bob" not in tool_messages(llm_server, 1)


def test_a_link_past_the_approvals_expiry_is_refused(
    tmp_path: Path, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    project = project_with(tmp_path, llm_server, receiver, "  timeout_secs: 2\n")
    kernel = Kernel(load_kernel_config(project / "config" / "kernel.yaml"))
    with LiveServer(kernel) as live, live.client() as client:
        turn, notice = waiting_notice(live, client, llm_server, receiver)
        events = turn.events()  # the run goes on once the approval expired: its call denied
        assert "approvals.timeout_secs" in tool_messages(llm_server, 1)[0]
        for method in ("GET", "POST"):
            answer = client.request(method, local(live, notice["approve_url"]), headers=BROWSER)
            assert answer.status_code == 410, answer.text
            assert "expired" in answer.text
    assert [kind for kind, _ in events][-1] == "done"


def test_a_failing_receiver_is_tried_again_with_the_same_idempotency_key(
    live: LiveServer, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    receiver.script = [500, 500]
    with live.client() as client:
        send_call(llm_server)
        turn = Turn(client, new_session(client), "send it")
        turn.wait_for("approval_required")
        (notice,) = receiver.wait_for(1)
        assert len(receiver.attempts) == 3
        assert len({headers["Idempotency-Key"] for headers in receiver.headers}) == 1
        assert receiver.attempts[0] == notice  # the same notice each time, its links still valid
        assert client.post(local(live, notice["approve_url"])).status_code == 200
        turn.events()


def test_only_the_link_routes_go_without_a_bearer_token(live: LiveServer) -> None:
    """Every route of the API asks who calls (server/identity.py), except the health check and the two
    decision-URL routes (the page, `/`, is no API route)."""
    with live.client() as client:
        paths = client.get("/openapi.json").json()["paths"]
        served = set()
        for path, methods in paths.items():
            for method in methods:
                answer = client.request(method.upper(), re.sub(r"\{[^}]+\}", "x1", path))
                if answer.status_code != 401:
                    served.add((method, path, answer.status_code))
    assert served == {("get", "/healthz", 200), ("get", LINK_PATH, 404), ("post", LINK_PATH, 404)}


def test_a_notice_does_not_hold_the_run_that_asked(
    live: LiveServer, llm_server: FakeLLMServer, receiver: WebhookReceiver
) -> None:
    """The receiver answers nothing until released: the run's approval is listed and decided meanwhile."""
    receiver.hold = threading.Event()
    try:
        with live.client() as client:
            send_call(llm_server)
            turn = Turn(client, new_session(client), "send it")
            run = turn.wait_for("approval_required")["run_id"]
            (held,) = receiver.wait_for(1, attempts=True)
            assert decide(client, run, ALICE, decision="approve").status_code == 200
            assert dict(turn.events())["tool_result"]["content"] == "sent to bob"
            assert held["approval"]["run_id"] == run
    finally:
        receiver.hold.set()
