"""Approvals in the web page (issue 28 §2, S24.4, S24.6): Chromium clicking Approve, Deny and Edit.

The real server (LiveServer) runs a project whose template has `send`, a tool
whose YAML says `approval: always`; the scripted LLM asks for it. The page
shows the waiting call as a card — tool, arguments, question, expiry — and
its buttons decide it through `POST /v1/runs/{run}/approvals/{call}`; the
answer then streams in on the same turn. Reloaded while a call waits, the
page lists it, shows the card again in its chat, and reads the run's events
on, so approving then completes the answer. Nothing waits on time: on the
page's elements, the LLM's requests, and the store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.server import token_hash
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import LiveServer, make_project, script_tool, write
from tests.server.test_page_browser import WIDTHS, check_layout, open_page, screenshot, send_in_new_chat
from tests.server.test_turns_across_processes import asked

SEND = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}
QUESTION = "Run the tool 'send' with these arguments?"


def approval_project(root: Path, llm: FakeLLMServer) -> Path:
    """make_project's, plus `send` (approval: always) in the template `tester`."""
    kernel_yaml = make_project(root, llm)
    script_tool(
        root / "config" / "scripts" / "tools",
        "send",
        "function run(args) { return 'sent to ' + args.to; }",
        description="Send a message.",
        parameters=SEND,
        approval="always",
        ui={"icon": "✉"},
    )
    write(
        root / "config" / "templates" / "tester.yaml",
        "name: tester\ndescription: A test agent.\ninstructions: Test.\ntools: [upper, send]\nmax_turns: 4\n",
    )
    return kernel_yaml


def ask_to_send(llm: FakeLLMServer, to: str = "bob", answer: str = "Done, it is sent.") -> None:
    llm.add(Reply(tool_calls=(FakeToolCall("send", json.dumps({"to": to}), id="c1"),)), Reply(text=answer))


def tool_messages(llm: FakeLLMServer, index: int) -> list[str]:
    return [m["content"] for m in asked(llm)[index]["messages"] if m["role"] == "tool"]


def decisions(page: Any) -> list[str]:
    """The decision requests the page sends from now on (their bodies), to count them."""
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.post_data or "") if "/approvals/" in r.url else None)
    return sent


def test_approve_runs_the_call_and_the_answer_streams_in(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    ask_to_send(llm_server)
    with LiveServer(Kernel(load_kernel_config(approval_project(tmp_path, llm_server)))) as live:
        page, problems = send_in_new_chat(browser, live.url, "send it to bob")
        card = page.locator("#log section.approval")
        card.wait_for()
        assert card.locator("h3 code").inner_text() == "send"
        assert json.loads(card.locator("pre.args").inner_text()) == {"to": "bob"}
        assert card.locator(".question").inner_text() == QUESTION
        assert "Waits until" in card.locator(".expires").inner_text()
        assert len(asked(llm_server)) == 1  # the call waits: nothing goes on
        card.get_by_label("remember for this tool").check()
        card.get_by_role("button", name="Approve").click()
        card.locator(".outcome:has-text('Approved')").wait_for()
        outcome = "✔ Approved by local — remembered: send runs without asking from now on"
        assert card.locator(".outcome").inner_text() == outcome
        page.wait_for_selector(".msg.agent .md:has-text('Done, it is sent.')")
        page.wait_for_selector("details.tool-call pre.content:has-text('sent to bob')", state="attached")
        assert card.get_by_role("button", name="Approve").is_disabled()
        assert card.get_by_role("button", name="Deny").is_disabled()
        assert tool_messages(llm_server, 1) == ["sent to bob"]
        page.wait_for_selector("#send:enabled")
        rules = live.client().get("/v1/approval-rules").json()["rules"]
        assert [(r["tool"], r["template"]) for r in rules] == [("send", "tester")]
        # opened again later, the card is read from the transcript, decided
        page.reload()
        page.locator("#session-list button").first.click()
        again = page.locator("#log section.approval.approved")
        again.locator(".outcome:text-is('✔ Approved')").wait_for()
        assert again.get_by_role("button", name="Approve").is_disabled()
        assert page.locator("#approvals").is_hidden()
        assert problems == []


def test_deny_with_a_reason_the_llm_reads(tmp_path: Path, llm_server: FakeLLMServer, browser: Any) -> None:
    ask_to_send(llm_server, answer="I did not send it.")
    with LiveServer(Kernel(load_kernel_config(approval_project(tmp_path, llm_server)))) as live:
        page, problems = send_in_new_chat(browser, live.url, "send it to bob")
        card = page.locator("#log section.approval")
        card.get_by_role("button", name="Deny").click()
        reason = card.get_by_label("Reason (optional)")
        reason.wait_for()
        assert reason.evaluate("(n) => n === document.activeElement")  # the keyboard goes on from there
        page.keyboard.type("not to bob, ever")
        page.keyboard.press("Enter")  # the form's submit
        card.locator(".outcome:text-is('✖ Denied by local: not to bob, ever')").wait_for()
        page.wait_for_selector(".msg.agent .md:has-text('I did not send it.')")
        assert tool_messages(llm_server, 1) == ["tool 'send' not run: denied by local: not to bob, ever"]
        assert card.get_by_role("button", name="Edit").is_disabled()
        assert problems == []


def test_edit_checks_the_json_then_shows_the_server_s_422_then_runs_with_the_new_args(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    ask_to_send(llm_server)
    with LiveServer(Kernel(load_kernel_config(approval_project(tmp_path, llm_server)))) as live:
        page, problems = send_in_new_chat(browser, live.url, "send it to bob")
        sent = decisions(page)
        card = page.locator("#log section.approval")
        card.get_by_role("button", name="Edit").click()
        args = card.get_by_label("Arguments (JSON)")
        assert json.loads(args.input_value()) == {"to": "bob"}
        run = card.get_by_role("button", name="Run with these arguments")

        args.fill('{"to": "carol"')  # not JSON: said at once, nothing sent
        run.click()
        problem = card.locator(".approval-form [role=alert]")
        problem.locator("text=not JSON").wait_for()
        assert sent == []

        args.fill('{"to": 5}')  # JSON, but not what the tool's parameters say: the server's 422
        run.click()
        problem.locator("text=to").wait_for()
        page.wait_for_function("() => !document.querySelector('#log .approval-form textarea').disabled")
        assert "not JSON" not in problem.inner_text()
        assert len(sent) == 1 and card.locator(".outcome").inner_text() == ""

        args.fill('{"to": "carol"}')
        run.click()
        card.locator(".outcome:text-is('✔ Approved by local, with the arguments edited')").wait_for()
        page.wait_for_selector(".msg.agent .md:has-text('Done, it is sent.')")
        assert tool_messages(llm_server, 1) == ["sent to carol"]
        assert [json.loads(s)["args"] for s in sent] == [{"to": 5}, {"to": "carol"}]
        assert problems == [] or all("422" in p for p in problems), problems  # the 422 is logged


def test_reloaded_while_a_call_waits_the_card_comes_back_and_approving_finishes_the_answer(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    ask_to_send(llm_server)
    with LiveServer(Kernel(load_kernel_config(approval_project(tmp_path, llm_server)))) as live:
        page, problems = send_in_new_chat(browser, live.url, "send it to bob")
        page.locator("#log section.approval").wait_for()
        page.reload()
        # listed: no chat is shown yet, so the waiting one is in the list, and marked in the chats
        waiting = page.locator("#approvals button.open-approval")
        waiting.wait_for()
        assert "send" in waiting.inner_text() and page.locator("#approvals-count").inner_text() == "1"
        assert page.locator("#session-list button.waiting .badge").is_visible()
        screenshot(page, tmp_path / "web-chat-approvals-listed.png")
        waiting.click()
        card = page.locator("#log section.approval")
        card.wait_for()
        assert json.loads(card.locator("pre.args").inner_text()) == {"to": "bob"}
        assert page.locator("details.tool-call .state").inner_text() == " waiting for your approval…"
        assert page.locator("#log section.approval").count() == 1  # at its place, once
        page.locator("#approvals").wait_for(state="hidden")  # it is in the chat shown now
        page.locator("#stop:visible").wait_for()  # the run is followed: its answer comes here
        card.get_by_role("button", name="Approve").click()
        page.wait_for_selector(".msg.agent .md:has-text('Done, it is sent.')")
        page.wait_for_selector("details.tool-call .state:has-text('done')")
        page.wait_for_selector("#send:enabled")
        assert page.locator("#session-list button.waiting").count() == 0
        assert problems == []


def test_a_call_decided_elsewhere_updates_the_card_and_a_late_click_says_decided_already(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    """Another tab, a named approver or a webhook link decided: the `approval_decided` event updates the
    card; a tab that did not hear of it (its run's events held back here) gets 409 and says so."""
    ask_to_send(llm_server)
    with LiveServer(Kernel(load_kernel_config(approval_project(tmp_path, llm_server)))) as live:
        page, problems = send_in_new_chat(browser, live.url, "send it to bob")
        card = page.locator("#log section.approval")
        card.wait_for()
        late, _ = open_page(browser, live.url)
        late.route("**/v1/runs/*/events", lambda route: route.abort())  # it hears of nothing
        late.locator("#approvals button.open-approval").click()
        stale = late.locator("#log section.approval")
        stale.wait_for()
        with live.client() as client:
            run = client.get("/v1/approvals").json()["approvals"][0]["run_id"]
            decided = client.post(f"/v1/runs/{run}/approvals/c1", json={"decision": "deny", "reason": "no"})
            assert decided.status_code == 200, decided.text
        card.locator(".outcome:has-text('Denied')").wait_for()  # the first tab's stream said so
        assert card.locator(".outcome").inner_text() == "✖ Denied by local: no."
        assert card.get_by_role("button", name="Approve").is_disabled()
        stale.get_by_role("button", name="Approve").click()
        stale.locator(".outcome:has-text('Decided already')").wait_for()
        assert stale.get_by_role("button", name="Approve").is_disabled()
        page.wait_for_selector("#send:enabled")
        assert problems == []


def test_a_named_approver_decides_from_the_list_of_calls_waiting(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    """A call in alice's chat whose tool names carol in `approvers:`: carol's page has no such chat, so
    the card itself is in her list of calls waiting, and her Approve lets alice's answer go on."""
    kernel_yaml = approval_project(tmp_path, llm_server)
    tokens = "".join(f"    {token_hash(name + '-token')}: {name}\n" for name in ("alice", "carol"))
    with kernel_yaml.open("a", encoding="utf-8") as config:
        config.write(f"server:\n  tokens:\n{tokens}")
    send_yaml = tmp_path / "config" / "scripts" / "tools" / "send.yaml"
    send_yaml.write_text(send_yaml.read_text(encoding="utf-8") + "approvers: [carol]\n", encoding="utf-8")
    ask_to_send(llm_server)
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live:
        alice = live.client()
        session = alice.post(
            "/v1/sessions", json={"template": "tester"}, headers={"Authorization": "Bearer alice-token"}
        )
        url = f"/v1/sessions/{session.json()['id']}/messages"
        with alice.stream(
            "POST", url, json={"content": "send it"}, headers={"Authorization": "Bearer alice-token"}
        ) as turn:
            lines = turn.iter_lines()
            assert any(line == "event: approval_required" for line in lines)
            page = browser.new_page(viewport={"width": 390, "height": 844})
            page.goto(live.url)
            page.fill("#token", "carol-token")
            page.keyboard.press("Enter")
            card = page.locator("#approvals section.approval")
            card.wait_for()
            assert "a chat of tester" in page.locator("#approval-list li").inner_text()
            check_layout(page)
            screenshot(page, tmp_path / "web-chat-approver-390.png")
            card.get_by_role("button", name="Approve").click()
            card.locator(".outcome:text-is('✔ Approved by carol')").wait_for()
            rest = "\n".join(lines)  # alice's turn goes on, to its end
        assert "sent to bob" in rest and "event: done" in rest


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_a_waiting_card_fits_the_page_and_is_decided_by_the_keyboard(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any, width: int, height: int
) -> None:
    ask_to_send(llm_server, to="a-very-long-recipient-name-" + "x" * 80)
    with LiveServer(Kernel(load_kernel_config(approval_project(tmp_path, llm_server)))) as live:
        page, problems = open_page(browser, live.url, width=width, height=height)
        page.get_by_role("button", name="New chat").click()
        page.wait_for_selector("#send:enabled")
        page.fill("#message", "send it")
        page.keyboard.press("Enter")
        card = page.locator("#log section.approval")
        card.wait_for()
        card.get_by_role("button", name="Edit").click()
        card.get_by_label("Arguments (JSON)").wait_for()
        check_layout(page)
        screenshot(page, tmp_path / f"web-chat-approval-{width}.png")
        page.keyboard.press("Escape")  # closes the edit form, gives the focus back to Edit, stops nothing
        assert card.get_by_label("Arguments (JSON)").is_hidden()
        assert page.evaluate("document.activeElement.textContent") == "Edit"
        page.keyboard.press("Shift+Tab")  # Deny
        page.keyboard.press("Shift+Tab")  # remember
        page.keyboard.press("Shift+Tab")  # Approve
        assert page.evaluate("document.activeElement.textContent") == "Approve"
        page.keyboard.press("Enter")
        card.locator(".outcome:has-text('Approved')").wait_for()
        page.wait_for_selector(".msg.agent .md:has-text('Done, it is sent.')")
        assert problems == []
