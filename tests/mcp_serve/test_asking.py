"""A tool call through our MCP server that needs a person's approval (S24.4, issue 28).

A client that declared `elicitation` is asked through `elicitation/create`
(the official client's `elicitation_callback`); its answer is the decision
of its user, recorded in the approvals store like any other, and a decision
made meanwhile through the HTTP API wins. A client that cannot be asked gets
a clear error result at once: no wait. Over `/mcp` in `agentkernel serve`,
and over stdio (`agentkernel mcp serve`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.client.session import ElicitationFnT
from mcp.shared.exceptions import MCPError

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.services.approvals import Approvals
from tests.conftest import wait_until
from tests.mcp_serve.conftest import live_server, run, text_of
from tests.mcp_serve.test_serve_stdio import run as run_stdio
from tests.server.conftest import LiveServer, script_tool

TOKENS = {"alice-token": "alice", "bob-token": "bob"}
MODES = ["legacy", "auto"]  # the 2025 handshake (elicitation/create), and 2026-07-28 (input_required)
ALICE = {"Authorization": "Bearer alice-token"}
QUESTION = "Run the tool 'wire' with these arguments?\n\nTool: wire\nArguments:\n{\n  \"amount\": 5\n}"


def add_wire(project: Path) -> None:
    """`wire` (approval: always) counts its runs in the user's state, so a run is seen exactly once."""
    script_tool(
        project / "config" / "scripts" / "tools",
        "wire",
        """
        function run(args) {
          var n = (state_get('user', 'wired') || 0) + 1;
          state_set('user', 'wired', n);
          return 'wired ' + args.amount + ' (' + n + ')';
        }
        """,
        description="Wire money.",
        parameters={"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
        approval="always",
    )


@pytest.fixture
def served(mcp_project: Path) -> Iterator[LiveServer]:
    add_wire(mcp_project)
    lines = "".join(f'    "{token_hash(token)}": {user}\n' for token, user in TOKENS.items())
    with live_server(mcp_project, "server:\n  tokens:\n" + lines) as live:
        yield live


def wired(live: LiveServer) -> Any:
    """How many times `wire` ran for alice (None: never)."""
    kernel = live.kernel
    return json.loads(kernel.run_tool("recall_wired", {}, kernel.caller(user_id="alice")).content)


def pending(live: LiveServer) -> list[dict[str, Any]]:
    """GET /v1/approvals as alice (blocking: call it on a thread from the client's loop)."""
    with httpx.Client(base_url=live.url, headers=ALICE, timeout=30) as http:
        answer = http.get("/v1/approvals")
        assert answer.status_code == 200, answer.text
        listed: list[dict[str, Any]] = answer.json()["approvals"]
        return listed


def add_recall_wired(project: Path) -> None:
    script_tool(
        project / "config" / "scripts" / "tools",
        "recall_wired",
        "function run() { return JSON.stringify(state_get('user', 'wired')); }",
    )


@pytest.fixture(autouse=True)
def _recall(mcp_project: Path) -> None:
    add_recall_wired(mcp_project)


Answer = types.ElicitResult
Seen = list[tuple[types.ElicitRequestParams, list[dict[str, Any]]]]


def answering(answer: Answer, seen: Seen, live: LiveServer) -> ElicitationFnT:
    """An elicitation callback that notes what it was asked and what alice had pending then, and answers."""

    async def callback(context: ClientRequestContext, params: types.ElicitRequestParams) -> Answer:
        seen.append((params, await anyio.to_thread.run_sync(pending, live)))
        return answer

    return callback


@pytest.mark.parametrize("mode", MODES)
def test_a_client_with_elicitation_is_asked_and_its_yes_runs_the_call_once(
    served: LiveServer, mode: str
) -> None:
    """legacy: `elicitation/create` while the call waits; auto (2026-07-28): an `input_required` result,
    and the retry with the answer runs it."""
    seen: Seen = []
    yes = answering(Answer(action="accept", content={"approve": True}), seen, served)

    async def body(client: Client) -> None:
        result = await client.call_tool("wire", {"amount": 5})
        assert not result.is_error, result
        assert text_of(result) == "wired 5 (1)"

    run(served.url + "/mcp", body, token="alice-token", mode=mode, elicitation_callback=yes)
    ((params, listed),) = seen
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.message == QUESTION
    assert params.requested_schema["required"] == ["approve"]
    assert {k: v["type"] for k, v in params.requested_schema["properties"].items()} == {
        "approve": "boolean",
        "reason": "string",
    }
    (asked,) = listed  # while the client was asked, the approval was pending in the store, listed
    assert (asked["call"]["tool"], asked["call"]["args"], asked["call"]["origin"]) == (
        "wire",
        {"amount": 5},
        "mcp_client",
    )
    row = served.kernel.approvals().get(asked["run_id"], asked["call"]["id"])
    assert row is not None
    assert (row.status, row.decision, row.decided_by) == ("approved", "approve", "alice")
    assert pending(served) == []
    assert wired(served) == 1


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (Answer(action="accept", content={"approve": False, "reason": "not on a Friday"}), "not on a Friday"),
        (Answer(action="decline"), "declined by the MCP client"),
        (Answer(action="cancel"), "the MCP client dismissed the question without deciding"),
    ],
)
@pytest.mark.parametrize("mode", MODES)
def test_a_no_from_the_client_denies_the_call_with_its_reason(
    served: LiveServer, answer: Answer, reason: str, mode: str
) -> None:
    seen: Seen = []

    async def body(client: Client) -> None:
        result = await client.call_tool("wire", {"amount": 5})
        assert result.is_error
        assert text_of(result) == f"tool 'wire' not run: denied by alice: {reason}"

    no = answering(answer, seen, served)
    run(served.url + "/mcp", body, token="alice-token", mode=mode, elicitation_callback=no)
    ((_, (asked,)),) = seen
    row = served.kernel.approvals().get(asked["run_id"], asked["call"]["id"])
    assert row is not None
    assert (row.status, row.decided_by, row.reason) == ("denied", "alice", reason)
    assert wired(served) is None


def test_a_decision_made_through_the_api_first_wins(served: LiveServer) -> None:
    """Someone denies through POST /v1/runs/{run}/approvals/{call} while the client is asked; its yes
    comes second and is refused by the store: the call is denied with the API's reason."""

    def deny_through_the_api() -> None:
        (asked,) = pending(served)
        with httpx.Client(base_url=served.url, headers=ALICE, timeout=30) as http:
            where = f"/v1/runs/{asked['run_id']}/approvals/{asked['call']['id']}"
            answer = http.post(where, json={"decision": "deny", "reason": "seen on the page first"})
            assert answer.status_code == 200, answer.text

    async def yes_too_late(context: ClientRequestContext, params: types.ElicitRequestParams) -> Answer:
        await anyio.to_thread.run_sync(deny_through_the_api)
        return Answer(action="accept", content={"approve": True})

    async def body(client: Client) -> None:
        result = await client.call_tool("wire", {"amount": 5})
        assert text_of(result) == "tool 'wire' not run: denied by alice: seen on the page first"

    run(served.url + "/mcp", body, token="alice-token", mode="legacy", elicitation_callback=yes_too_late)
    assert wired(served) is None


@pytest.mark.parametrize("mode", MODES)
def test_a_client_that_cannot_be_asked_gets_a_clear_error_at_once(served: LiveServer, mode: str) -> None:
    """No elicitation callback, so no `elicitation` capability: denied at once, saying why and how to
    approve; nothing is left pending."""
    why = "it did not declare the `elicitation` capability (MCP 2025-06-18 and later)"

    async def body(client: Client) -> None:
        result = await client.call_tool("wire", {"amount": 5})
        assert result.is_error
        said = text_of(result)
        assert said.startswith(
            "tool 'wire' not run: denied: it needs a person's approval, and this MCP client cannot be asked: "
            + why
        ), said
        assert "call it from an MCP client that supports elicitation" in said
        assert "approve one call of 'wire' with `remember: true`" in said

    run(served.url + "/mcp", body, token="alice-token", mode=mode)
    assert pending(served) == []
    assert wired(served) is None


def test_a_rule_lets_the_call_through_without_asking(served: LiveServer) -> None:
    served.kernel.approvals().add_rule("alice", "wire", "")

    async def body(client: Client) -> None:
        assert text_of(await client.call_tool("wire", {"amount": 5})) == "wired 5 (1)"

    run(served.url + "/mcp", body, token="alice-token", mode="legacy")  # no callback: asking would fail


@pytest.mark.parametrize("mode", MODES)
def test_over_stdio_the_client_is_asked_too(mcp_project: Path, mode: str) -> None:
    add_wire(mcp_project)
    asked: list[str] = []

    async def yes(context: ClientRequestContext, params: types.ElicitRequestParams) -> Answer:
        asked.append(params.message)
        return Answer(action="accept", content={"approve": True, "reason": "fine"})

    async def body(client: Client) -> None:
        assert text_of(await client.call_tool("wire", {"amount": 5})) == "wired 5 (1)"
        assert text_of(await client.call_tool("wire", {"amount": 5})) == "wired 5 (2)"  # asked again

    run_stdio(mcp_project, body, mode=mode, elicitation_callback=yes)
    assert asked == [QUESTION, QUESTION]


def test_a_stateless_mcp_endpoint_cannot_ask_and_says_so_at_once(mcp_project: Path) -> None:
    """With server.mcp_stateless no answer could find its way back to the call: the clear error, no wait."""
    add_wire(mcp_project)

    async def never(context: ClientRequestContext, params: types.ElicitRequestParams) -> Answer:
        raise AssertionError("must not be asked")

    async def body(client: Client) -> None:
        said = text_of(await client.call_tool("wire", {"amount": 5}))
        assert "this MCP client cannot be asked: this connection cannot carry a request back" in said, said

    with live_server(mcp_project, "server:\n  mcp_stateless: true\n") as live:
        run(live.url + "/mcp", body, mode="legacy", elicitation_callback=never)
        assert wired(live) is None


def test_a_question_left_unanswered_is_denied_at_the_approvals_timeout(mcp_project: Path) -> None:
    """The approval's expiry bounds the wait as everywhere: denied, saying so, and the question withdrawn."""
    add_wire(mcp_project)
    done = anyio.Event()

    async def silent(context: ClientRequestContext, params: types.ElicitRequestParams) -> Answer:
        await done.wait()  # the person never answers while the call waits
        return Answer(action="accept", content={"approve": True})

    async def body(client: Client) -> None:
        said = text_of(await client.call_tool("wire", {"amount": 5}))
        done.set()
        assert said.startswith("tool 'wire' not run: denied: no decision within approvals.timeout_secs"), said

    with live_server(mcp_project, "approvals:\n  timeout_secs: 1\n") as live:
        run(live.url + "/mcp", body, mode="legacy", elicitation_callback=silent)
        assert wired(live) is None


def test_a_2026_retry_must_be_its_users_and_about_the_call_asked(served: LiveServer) -> None:
    """The `requestState` of an `input_required` result is the client's to echo, so it is checked: another
    user's retry with it is refused; the asker's own retry with other arguments does not run; an answer
    sent twice runs the call once."""
    states: list[str] = []

    async def never(context: ClientRequestContext, params: types.ElicitRequestParams) -> Answer:
        raise AssertionError("asked by hand here")

    async def alice_asks(client: Client) -> None:
        first = await client.session.call_tool("wire", {"amount": 5}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        assert first.request_state is not None
        states.append(first.request_state)

    async def bob_retries(client: Client) -> None:
        answer: types.InputResponses = {"approval": Answer(action="accept", content={"approve": True})}
        with pytest.raises(MCPError, match="requestState names no question of yours about 'wire'"):
            await client.call_tool("wire", {"amount": 5}, input_responses=answer, request_state=states[0])

    async def alice_changes_the_call(client: Client) -> None:
        answer: types.InputResponses = {"approval": Answer(action="accept", content={"approve": True})}
        state = states[0]
        said = await client.call_tool("wire", {"amount": 500}, input_responses=answer, request_state=state)
        assert text_of(said) == (
            "tool 'wire' not run: denied: the call's arguments are not those the person was asked about"
        )

    async def alice_approves_twice(client: Client) -> None:
        answer: types.InputResponses = {"approval": Answer(action="accept", content={"approve": True})}
        state = states[1]
        first = await client.call_tool("wire", {"amount": 5}, input_responses=answer, request_state=state)
        assert text_of(first) == "wired 5 (1)"
        again = await client.call_tool("wire", {"amount": 5}, input_responses=answer, request_state=state)
        assert text_of(again).startswith("tool 'wire' not run: denied: the approval of call "), again
        assert text_of(again).endswith("call the tool again to be asked anew")

    url = served.url + "/mcp"
    run(url, alice_asks, token="alice-token", mode="auto", elicitation_callback=never)
    (asked,) = pending(served)  # the question waits in the store meanwhile, listed
    run(url, bob_retries, token="bob-token", mode="auto", elicitation_callback=never)
    assert pending(served) == [asked]
    run(url, alice_changes_the_call, token="alice-token", mode="auto", elicitation_callback=never)
    assert wired(served) is None
    run(url, alice_asks, token="alice-token", mode="auto", elicitation_callback=never)
    run(url, alice_approves_twice, token="alice-token", mode="auto", elicitation_callback=never)
    assert wired(served) == 1  # one answer, one run


@pytest.mark.parametrize("mode", MODES)
def test_a_hooks_ask_reaches_the_client_with_its_question(mcp_project: Path, mode: str) -> None:
    """`ask` from a template's `before_tool_call` hook (S24.2) at /mcp/{template}: the hook's question is
    what the client is asked, and the template is named."""
    hooks = mcp_project / "config" / "scripts" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    (hooks / "careful.yaml").write_text("kind: script_hook\nname: careful\nscript: careful.js\n")
    (hooks / "careful.js").write_text(
        "function before_tool_call(ctx, call) { return {ask: 'Upper-case from ' + call.origin + '?'}; }"
    )
    (mcp_project / "config" / "templates" / "careful.yaml").write_text(
        "name: careful\ninstructions: Test.\ntools: [upper]\nhooks: [careful]\n"
    )
    asked: list[str] = []

    async def yes(context: ClientRequestContext, params: types.ElicitRequestParams) -> Answer:
        asked.append(params.message)
        return Answer(action="accept", content={"approve": True})

    async def body(client: Client) -> None:
        assert text_of(await client.call_tool("upper", {"text": "hi"})) == "HI"

    with live_server(mcp_project) as live:
        run(live.url + "/mcp/careful", body, mode=mode, elicitation_callback=yes)
    shown = 'Tool: upper (template \'careful\')\nArguments:\n{\n  "text": "hi"\n}'
    assert asked == [f"Upper-case from mcp_client?\n\n{shown}"]


@pytest.mark.embedded_only  # the message store's file, broken or read behind the kernel's back
@pytest.mark.parametrize("over", ["http", "stdio"])
def test_a_call_the_client_cancels_while_it_is_asked_leaves_no_approval_pending(
    mcp_project: Path, over: str
) -> None:
    """The cancel reaches the question (over /mcp too, where the call itself runs to its end whatever
    happens to its request): its approval is denied, saying so, not left listed with nobody waiting."""
    add_wire(mcp_project)
    asked, done = anyio.Event(), anyio.Event()

    async def slow(context: ClientRequestContext, params: types.ElicitRequestParams) -> Answer:
        asked.set()
        await done.wait()
        return Answer(action="accept", content={"approve": True})

    async def body(client: Client) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "wire", {"amount": 5})
            await asked.wait()
            group.cancel_scope.cancel()  # the client gives up on the call: notifications/cancelled
        await anyio.to_thread.run_sync(wait_until, withdrawn, "the approval denied")
        done.set()

    kernel = Kernel(load_kernel_config(mcp_project / "config" / "kernel.yaml"))
    store = kernel.approvals()
    assert isinstance(store, Approvals)  # the embedded store: the test reads its file

    def withdrawn() -> bool:
        return store.pending_for("local") == [] and bool(denied())

    def denied() -> list[str | None]:
        with store._reading() as conn:  # every approval, whatever its status: the test's own look
            rows = conn.execute("SELECT reason FROM approvals WHERE status = 'denied'").fetchall()
        return [row[0] for row in rows]

    with kernel:
        if over == "stdio":
            run_stdio(mcp_project, body, mode="legacy", elicitation_callback=slow)
        else:
            with live_server(mcp_project) as live:
                run(live.url + "/mcp", body, mode="legacy", elicitation_callback=slow)
                assert wired(live) is None
        assert denied() == ["the MCP client cancelled the call before anyone decided"]
