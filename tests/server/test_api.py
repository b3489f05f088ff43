"""The HTTP API through the real server on 127.0.0.1 against the scripted LLM (issue 11 §2, §5; S23.6)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkernel import Kernel
from agentkernel.config import ServerSettings, load_kernel_config
from agentkernel.server.events import EVENT_TYPES
from tests.conftest import wait_until
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import ROW_SECRET, Gated, LiveServer, make_project, sse_events

JSON = {"content-type": "application/json"}


def new_session(client: httpx.Client, template: str = "tester") -> str:
    made = client.post("/v1/sessions", json={"template": template})
    assert made.status_code == 201, made.text
    assert made.json()["template"] == template
    return str(made.json()["id"])


def send(client: httpx.Client, session: str, content: str) -> list[tuple[str, Any]]:
    answer = client.post(f"/v1/sessions/{session}/messages", json={"content": content})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    return sse_events(answer.text)


def kinds(client: httpx.Client, session: str) -> list[str]:
    records = client.get(f"/v1/sessions/{session}/messages")
    assert records.status_code == 200, records.text
    return [r["kind"] for r in records.json()]


# -- the server ---------------------------------------------------------------------------------


def test_healthz_openapi_and_request_ids(client: httpx.Client) -> None:
    health = client.get("/healthz")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert len(health.headers["x-request-id"]) == 32
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/sessions", "/v1/sessions/{session_id}/messages", "/v1/tools", "/v1/tools/{name}/run"} <= set(
        paths
    )


# -- a streamed turn (S23.6) -------------------------------------------------------------------


def test_streamed_turn_with_a_tool_call_and_a_visual_table(
    client: httpx.Client, llm_server: FakeLLMServer
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("table", '{"n": 2}', id="c1"),)), Reply(text="two rows, see the table")
    )
    session = new_session(client)
    events = send(client, session, "show me")
    types = [t for t, _ in events]
    assert set(types) <= set(EVENT_TYPES)
    assert types[0] == "tool_call" and types[-2:] == ["reply", "done"]
    call = dict(events)["tool_call"]
    assert call == {"id": "c1", "tool": "table", "args": {"n": 2}}
    result = dict(events)["tool_result"]
    assert result["id"] == "c1" and result["tool"] == "table" and result["success"] is True
    assert result["content"] == "2 rows shown to the user"
    (table,) = result["visual"]
    assert table["type"] == "table" and [r["id"] for r in table["rows"]] == [0, 1]
    tokens = "".join(d["text"] for t, d in events if t == "token")
    assert tokens == "two rows, see the table" == dict(events)["reply"]["content"]
    assert dict(events)["done"] == {"reason": "job_done"}
    # the LLM never sees visual data (issue 11 §2, S6)
    assert ROW_SECRET not in json.dumps(llm_server.bodies)
    assert kinds(client, session) == ["user", "tool_call", "tool_result", "agent", "end"]


def test_the_conversation_goes_on_in_the_same_session(
    client: httpx.Client, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(text="first"), Reply(text="second"))
    session = new_session(client)
    send(client, session, "one")
    assert dict(send(client, session, "two"))["reply"]["content"] == "second"
    contents = [m["content"] for m in llm_server.bodies[1]["messages"]]
    assert contents[1:] == ["one", "first", "two"]


def test_no_llm_configured_is_an_error_event_not_a_failure(tmp_path: Path) -> None:
    with (
        LiveServer(Kernel(load_kernel_config(make_project(tmp_path, None)))) as live,
        live.client() as client,
    ):
        events = send(client, new_session(client), "hello")
    assert [t for t, _ in events] == ["error", "done"]
    assert "no LLM provider is configured" in events[0][1]["message"]
    assert events[1][1] == {"reason": "error"}


def test_a_client_that_disconnects_does_not_stop_the_turn(
    client: httpx.Client, llm_server: FakeLLMServer
) -> None:
    gate = threading.Event()
    llm_server.add(Reply(tool_calls=(FakeToolCall("upper", '{"text": "a"}'),)), Gated(gate))
    session = new_session(client)
    with client.stream("POST", f"/v1/sessions/{session}/messages", json={"content": "go"}) as stream:
        lines = stream.iter_lines()
        assert next(lines) == "event: run"  # the turn's run, then its events
        assert next(lines).startswith("data: ")
        assert [next(lines), next(lines)] == ["", "event: tool_call"]
    gate.set()  # the client is gone; the LLM now answers
    wait_until(lambda: "end" in kinds(client, session), "the turn to be recorded")
    records = client.get(f"/v1/sessions/{session}/messages").json()
    assert records[-2]["content"] == "after the gate" and records[-1]["content"] == "job_done"


def test_many_concurrent_streams(kernel_yaml: Path, llm_server: FakeLLMServer) -> None:
    """One user's 100 turns at once: the per-user cap (test_turn_caps.py) raised to let them all run."""
    llm_server.respond_with(
        lambda request: Reply(text="answer to " + request.body["messages"][-1]["content"])
    )

    async def one(client: httpx.AsyncClient, n: int) -> list[tuple[str, Any]]:
        made = await client.post("/v1/sessions", json={"template": "tester"})
        answer = await client.post(f"/v1/sessions/{made.json()['id']}/messages", json={"content": f"q{n}"})
        assert answer.status_code == 200, answer.text
        return sse_events(answer.text)

    async def all_of_them() -> list[list[tuple[str, Any]]]:
        # no connection is reused: under load uvicorn's keep-alive (5 s from its last byte) could close one
        # just as the client picked it from the pool, whatever the client's own expiry
        limits = httpx.Limits(max_connections=120, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=live.url, timeout=120, limits=limits) as client:
            return await asyncio.gather(*(one(client, n) for n in range(100)))

    settings = ServerSettings(max_running_turns_per_user=100)
    with LiveServer(Kernel(load_kernel_config(kernel_yaml)), settings) as live:
        answers = asyncio.run(all_of_them())
    for n, events in enumerate(answers):
        assert "reply" in dict(events), events  # an error event says why
        assert dict(events)["reply"]["content"] == f"answer to q{n}"
        assert dict(events)["done"] == {"reason": "job_done"}


def test_stopping_the_server_lets_a_running_turn_finish_and_records_it(
    kernel_yaml: Path, llm_server: FakeLLMServer
) -> None:
    gate = threading.Event()
    llm_server.add(Gated(gate, Reply(text="finished anyway")))
    live = LiveServer(Kernel(load_kernel_config(kernel_yaml))).__enter__()
    with live.client() as client:
        session = new_session(client)
        with client.stream("POST", f"/v1/sessions/{session}/messages", json={"content": "go"}) as stream:
            wait_until(lambda: llm_server.requests != [], "the turn to reach the LLM")
            stopping = threading.Thread(target=live.stop)
            stopping.start()  # Ctrl-C while the turn waits for the LLM
            gate.set()
            events = sse_events(stream.read().decode())
        stopping.join(timeout=120)
    assert dict(events)["done"] == {"reason": "job_done"}
    with Kernel(load_kernel_config(kernel_yaml)) as kernel:
        assert [r.content for r in kernel.transcript(session)][-2:] == ["finished anyway", "job_done"]


# -- sessions and who may see them (§3) ---------------------------------------------------------


def test_sessions_lists_and_transcripts_belong_to_their_user(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    from agentkernel.config.server import token_hash

    tokens = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}
    extra = "server:\n  tokens:\n" + "".join(f'    "{h}": {user}\n' for h, user in tokens.items())
    kernel = Kernel(load_kernel_config(make_project(tmp_path, llm_server, extra)))
    llm_server.add(Reply(text="hi alice"))
    with LiveServer(kernel) as live:
        alice = live.client(headers={"Authorization": "Bearer alice-token"})
        bob = live.client(headers={"authorization": "bearer bob-token"})
        anonymous = live.client()
        with alice, bob, anonymous:
            session = new_session(alice)
            send(alice, session, "hello")
            assert [s["id"] for s in alice.get("/v1/sessions").json()] == [session]
            assert bob.get("/v1/sessions").json() == []
            for answer in (
                bob.get(f"/v1/sessions/{session}/messages"),
                bob.post(f"/v1/sessions/{session}/messages", json={"content": "mine now"}),
                bob.post("/v1/tools/upper/run", json={"args": {"text": "x"}, "session": session}),
                alice.get("/v1/sessions/no-such-session/messages"),
            ):
                assert answer.status_code == 404, answer.text
            assert bob.get(f"/v1/sessions/{session}/messages").json()["detail"] == (
                alice.get("/v1/sessions/no-such-session/messages")
                .json()["detail"]
                .replace("no-such-session", session)
            )
            for request in (
                anonymous.get("/v1/sessions"),
                anonymous.get("/v1/tools"),
                anonymous.post("/v1/sessions", json={"template": "tester"}),
                anonymous.get("/v1/sessions", headers={"Authorization": "Bearer wrong"}),
                anonymous.get("/v1/sessions", headers={"Authorization": "alice-token"}),
            ):
                assert request.status_code == 401, request.text
                assert request.headers["www-authenticate"] == "Bearer"
            assert anonymous.get("/healthz").status_code == 200
            assert len(alice.get(f"/v1/sessions/{session}/messages").json()) >= 3
    assert llm_server.remaining == 0


def test_unknown_template_is_named(client: httpx.Client) -> None:
    answer = client.post("/v1/sessions", json={"template": "nope"})
    assert answer.status_code == 422
    assert answer.json()["detail"] == "body.template: template 'nope' is unknown (loaded: tester)"


# -- tools (§2) ---------------------------------------------------------------------------------


def test_tools_list_and_run_with_no_llm_configured(tmp_path: Path) -> None:
    with (
        LiveServer(Kernel(load_kernel_config(make_project(tmp_path, None)))) as live,
        live.client() as client,
    ):
        every = client.get("/v1/tools").json()
        assert [t["name"] for t in every] == ["other", "table", "upper"]
        upper = next(t for t in every if t["name"] == "upper")
        assert upper["description"] == "Upper-case a text." and upper["ui"] == {"icon": "🔠"}
        assert upper["parameters"]["required"] == ["text"]
        assert [t["name"] for t in client.get("/v1/tools", params={"template": "tester"}).json()] == [
            "table",
            "upper",
        ]
        assert client.get("/v1/tools", params={"template": "nope"}).status_code == 404
        ran = client.post("/v1/tools/upper/run", json={"args": {"text": "abc"}})
        assert ran.status_code == 200
        assert ran.json() == {
            "content": "ABC",
            "success": True,
            "error": None,
            "visual": None,
            "warnings": [],
        }
        table = client.post("/v1/tools/table/run", json={"args": {"n": 1}}).json()
        assert table["visual"][0]["rows"] == [{"id": 0, "secret": ROW_SECRET}]
        bad = client.post("/v1/tools/upper/run", json={"args": {"text": 1}}).json()
        assert bad["success"] is False and "text" in bad["error"]
        assert client.post("/v1/tools/nope/run", json={"args": {}}).status_code == 404
        session = new_session(client)
        in_session = client.post("/v1/tools/other/run", json={"args": {}, "session": session})
        assert in_session.status_code == 404  # `other` is not among the template's tools
        ok = client.post("/v1/tools/upper/run", json={"args": {"text": "s"}, "session": session})
        assert ok.json()["content"] == "S"


# -- bad input (§5) -----------------------------------------------------------------------------


def test_bad_input_gets_the_codes_and_names_the_field(client: httpx.Client) -> None:
    session = new_session(client)
    url = f"/v1/sessions/{session}/messages"
    malformed = client.post(url, content=b'{"content": ', headers=JSON)
    assert malformed.status_code == 422 and malformed.json()["errors"][0]["field"].startswith("body")
    wrong_type = client.post(url, json={"content": 5})
    assert wrong_type.status_code == 422 and wrong_type.json()["errors"][0]["field"] == "body.content"
    missing = client.post("/v1/sessions", json={})
    assert missing.status_code == 422 and missing.json()["detail"] == "body.template: Field required"
    assert client.post("/v1/sessions/nope/messages", json={"content": "x"}).status_code == 404
    bad_limit = client.get(url, params={"limit": 0})
    assert bad_limit.status_code == 422 and bad_limit.json()["errors"][0]["field"] == "query.limit"
    for answer in (malformed, wrong_type, missing):
        assert answer.json()["request_id"] == answer.headers["x-request-id"]
        assert "Traceback" not in answer.text


@pytest.mark.parametrize(
    ("headers", "sent"),
    [
        ({}, "no Content-Type header"),
        ({"content-type": "text/plain"}, "Content-Type 'text/plain'"),
        (
            {"content-type": "application/x-www-form-urlencoded"},
            "Content-Type 'application/x-www-form-urlencoded'",
        ),
    ],
)
def test_a_json_body_without_its_content_type_says_which_header_to_send(
    client: httpx.Client, headers: dict[str, str], sent: str
) -> None:
    """`curl -d` and a bare `content=` send no JSON Content-Type: the error said only "Input should be a
    valid dictionary"; the body is still refused (no CORS preflight guards such a body), naming the header."""
    session = new_session(client)
    detail = f"body: not read as JSON: the request has {sent}; send Content-Type: application/json"
    for path, body in [
        ("/v1/sessions", b'{"template": "tester"}'),
        (f"/v1/sessions/{session}/messages", b'{"content": "hi"}'),
        ("/v1/tools/upper/run", b'{"args": {"text": "a"}}'),
        ("/v1/continuations", b'{"id": "x"}'),
    ]:
        refused = client.post(path, content=body, headers=headers)
        assert (refused.status_code, refused.json()["detail"]) == (422, detail), (path, refused.text)
        assert refused.json()["error"]["message"] == detail
    assert client.post("/v1/sessions", json="tester").json()["detail"] == (  # JSON, but not an object
        "body: Input should be a valid dictionary or object to extract fields from"
    )


def test_a_message_over_the_limit_is_413(tmp_path: Path, llm_server: FakeLLMServer) -> None:
    kernel = Kernel(
        load_kernel_config(make_project(tmp_path, llm_server, "server:\n  max_message_chars: 10\n"))
    )
    with LiveServer(kernel) as live, live.client() as client:
        session = new_session(client)
        too_long = client.post(f"/v1/sessions/{session}/messages", json={"content": "x" * 11})
        assert too_long.status_code == 413
        assert too_long.json()["detail"] == "body.content: 11 characters; at most 10"
    assert llm_server.requests == []


def test_a_second_message_while_the_turn_runs_is_409(client: httpx.Client, llm_server: FakeLLMServer) -> None:
    gate = threading.Event()
    llm_server.add(Gated(gate, Reply(text="done at last")), Reply(text="next"))
    session = new_session(client)
    url = f"/v1/sessions/{session}/messages"
    with client.stream("POST", url, json={"content": "slow"}) as stream:
        wait_until(lambda: llm_server.requests != [], "the turn to reach the LLM")
        busy = client.post(url, json={"content": "again"})
        assert busy.status_code == 409
        assert "still answering" in busy.json()["detail"]
        gate.set()
        assert dict(sse_events(stream.read().decode()))["reply"]["content"] == "done at last"
    assert dict(send(client, session, "again"))["reply"]["content"] == "next"


def test_stop_ends_the_running_turn_terminated_and_recorded(
    client: httpx.Client, llm_server: FakeLLMServer
) -> None:
    gate = threading.Event()
    llm_server.add(Gated(gate))
    session = new_session(client)
    try:
        assert client.post(f"/v1/sessions/{session}/stop").json() == {"stopped": False}  # nothing runs yet
        with client.stream("POST", f"/v1/sessions/{session}/messages", json={"content": "go"}) as stream:
            wait_until(lambda: len(llm_server.requests) == 1, "the LLM to be asked")
            assert client.post(f"/v1/sessions/{session}/stop").json() == {"stopped": True}
            events = sse_events("".join(stream.iter_text()))
    finally:
        gate.set()
    assert events[-1] == ("done", {"reason": "terminated"})
    assert kinds(client, session)[-1] == "end"
    assert client.get(f"/v1/sessions/{session}/messages").json()[-1]["content"] == "terminated"
    assert client.post("/v1/sessions/no-such/stop").status_code == 404


@pytest.mark.embedded_only  # the message store's file, broken or read behind the kernel's back
def test_a_500_shows_a_request_id_and_logs_it_never_a_traceback(
    tmp_path: Path, llm_server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    kernel_yaml = make_project(tmp_path, llm_server, "logging:\n  messages_db_path: data/store/messages.db\n")
    (tmp_path / "data" / "store" / "messages.db").mkdir(parents=True)  # a folder where the file should be
    with (
        LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live,
        live.client() as client,
    ):
        session = new_session(client)
        failed = client.get(f"/v1/sessions/{session}/messages")
    assert failed.status_code == 500
    rid = failed.headers["x-request-id"]
    assert failed.json() == {
        "detail": "internal server error",
        "request_id": rid,
        "error": {"message": "internal server error", "type": "server_error"},
    }
    logged = [r for r in caplog.records if r.name == "agentkernel.server" and rid in r.getMessage()]
    assert logged and logged[0].exc_info is not None


def test_a_body_over_the_limit_is_413_before_it_is_read(tmp_path: Path, llm_server: FakeLLMServer) -> None:
    kernel_yaml = make_project(tmp_path, llm_server, "server:\n  max_body_bytes: 100\n")
    with (
        LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live,
        live.client() as client,
    ):
        declared = client.post("/v1/tools/upper/run", json={"args": {"text": "x" * 200}})
        assert declared.status_code == 413
        assert declared.json()["detail"] == "the request body is over server.max_body_bytes (100 bytes)"
        assert declared.json()["request_id"] == declared.headers["x-request-id"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: sent chunked
            yield b'{"args": {"text": "'
            yield b"x" * 200
            yield b'"}}'

        chunked = client.post("/v1/tools/upper/run", content=chunks(), headers=JSON)
        assert chunked.status_code == 413
        assert client.post("/v1/tools/upper/run", json={"args": {"text": "ok"}}).json()["content"] == "OK"


def test_a_quiet_stream_gets_keepalive_comments(tmp_path: Path, llm_server: FakeLLMServer) -> None:
    kernel_yaml = make_project(tmp_path, llm_server, "server:\n  keepalive_secs: 0.01\n")
    gate = threading.Event()
    llm_server.add(Gated(gate, Reply(text="late")))
    with (
        LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live,
        live.client() as client,
    ):
        session = new_session(client)
        with client.stream("POST", f"/v1/sessions/{session}/messages", json={"content": "wait"}) as stream:
            lines = stream.iter_lines()
            assert [next(lines), next(lines)][0] == "event: run"  # the run's id comes first
            assert next(lines) == ""
            assert next(lines) == ": keep-alive"  # nothing else can come before the gate opens
            gate.set()
            rest = [line for line in lines if line != ": keep-alive"]
    assert sse_events("\n".join(rest))[-1] == ("done", {"reason": "job_done"})


def test_a_session_goes_on_with_its_conversation_after_a_restart(
    kernel_yaml: Path, llm_server: FakeLLMServer
) -> None:
    """`Kernel.chat(resume=True)`: the conversation is read back from the transcript (S23.5)."""
    llm_server.add(Reply(text="first answer"), Reply(text="second answer"))
    with (
        LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live,
        live.client() as client,
    ):
        session = new_session(client)
        send(client, session, "first question")
    with (
        LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live,
        live.client() as client,
    ):
        assert [s["id"] for s in client.get("/v1/sessions").json()] == [session]
        assert dict(send(client, session, "second question"))["reply"]["content"] == "second answer"
    sent = [(m["role"], m["content"]) for m in llm_server.bodies[1]["messages"]]
    assert sent[1:] == [
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
    ]


def test_idle_chats_past_max_open_chats_reopen_with_their_conversation(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    kernel_yaml = make_project(tmp_path, llm_server, "server:\n  max_open_chats: 1\n")
    llm_server.respond_with(lambda request: Reply(text="re: " + request.body["messages"][-1]["content"]))
    with (
        LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live,
        live.client() as client,
    ):
        first, second = new_session(client), new_session(client)
        send(client, first, "a")
        assert [p.session_id for p in live.kernel.list_processes()] == [first]
        send(client, second, "b")  # closes `first`, idle
        assert [p.session_id for p in live.kernel.list_processes()] == [second]
        assert dict(send(client, first, "c"))["reply"]["content"] == "re: c"
    sent = [m["content"] for m in llm_server.bodies[-1]["messages"][1:]]
    assert sent == ["a", "re: a", "c"]
