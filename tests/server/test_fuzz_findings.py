"""What fuzzing the API found (test_schemathesis.py, and hand-made hostile bodies), one regression test each.

All through the real server on 127.0.0.1 (issue 11 section 5: no traceback, no
500, malformed JSON is a 422 naming the field).
"""

from __future__ import annotations

import logging

import httpx
import pytest

from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import LiveServer, sse_events
from tests.server.test_api import JSON, new_session, send


def test_a_session_id_with_a_lone_surrogate_is_an_unknown_session_not_a_500(client: httpx.Client) -> None:
    """JSON may spell a lone surrogate (`"\\ud800"`), which SQLite cannot look up: it was a 500."""
    ran = client.post(
        "/v1/tools/upper/run", content=b'{"args": {"text": "a"}, "session": "\\ud800"}', headers=JSON
    )
    assert ran.status_code == 404, ran.text
    assert ran.json()["detail"] == "no session '\\ud800'"


def test_lone_surrogates_from_the_model_do_not_cut_the_stream(
    client: httpx.Client, llm_server: FakeLLMServer
) -> None:
    """The model's text and tool arguments reach the stream as U+FFFD (they cut it short, unfinished)."""
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("no_such_tool", '{"text": "\\ud800"}', id="c1"),)),
        Reply(text="half \ud800 a pair"),  # the scripted server sends it as the JSON escape
    )
    session = new_session(client)
    answer = client.post(f"/v1/sessions/{session}/messages", json={"content": "go"})
    assert answer.status_code == 200
    answer.content.decode("utf-8")  # every frame is UTF-8
    events = dict(sse_events(answer.text))
    assert events["tool_call"] == {"id": "c1", "tool": "no_such_tool", "args": {"text": "\ufffd"}}
    assert events["reply"]["content"] == "half \ufffd a pair"
    assert events["done"] == {"reason": "job_done"}


def test_bodies_that_are_no_json_text_are_422_naming_the_body(client: httpx.Client) -> None:
    """Bytes that are not UTF-8, nesting too deep to parse, and integers too long to read were a bare 400
    naming nothing."""
    cases = {
        b'{"template": "\xff"}': "body: not valid JSON: not UTF-8 text (byte 0xff at 14)",
        b"[" * 100_000 + b"]" * 100_000: "body: not valid JSON: nested too deeply to read",
        b'{"template": ': "body: not valid JSON: Expecting value (at character 13)",
        # Python reads no integer of more than 4300 digits (a guard against quadratic time): a bare 400 too
        b'{"template": 1' + b"0" * 5000 + b"}": "body: not valid JSON: an integer of more than 4,300 digits",
    }
    for body, detail in cases.items():
        refused = client.post("/v1/sessions", content=body, headers=JSON)
        assert refused.status_code == 422, refused.text
        assert refused.json()["detail"] == detail
        assert refused.json()["errors"] == [{"field": "body", "message": detail.removeprefix("body: ")}]
        assert refused.json()["request_id"] == refused.headers["x-request-id"]


def test_the_spec_documents_the_error_bodies_the_server_sends(client: httpx.Client) -> None:
    """FastAPI documented only 200 and a 422 shape the server never sends; clients trusted the wrong one."""
    spec = client.get("/openapi.json").json()
    send = spec["paths"]["/v1/sessions/{session_id}/messages"]["post"]["responses"]
    assert {"200", "401", "403", "404", "409", "413", "422", "500"} <= set(send)
    assert "text/event-stream" in send["200"]["content"]
    refs = {
        code: answer["content"]["application/json"]["schema"]["$ref"]
        for code, answer in send.items()
        if code != "200"
    }
    assert refs.pop("422") == "#/components/schemas/InvalidRequest"
    assert set(refs.values()) == {"#/components/schemas/Problem"}
    problem = spec["components"]["schemas"]["Problem"]
    assert problem["required"] == ["detail", "request_id", "error"]
    unknown = client.get("/v1/sessions/nope/messages")
    assert set(unknown.json()) == set(problem["properties"])


def test_a_session_whose_template_no_longer_loads_says_so_not_internal_error(
    live: LiveServer, client: httpx.Client, llm_server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    """It was `internal error while answering` and a traceback logged as a fault of the server."""
    template = live.kernel.config.templates_dir / "tester.yaml"
    kept = template.read_text(encoding="utf-8")
    session = new_session(client)
    template.write_text("name: tester\ninstructions: [unclosed\n", encoding="utf-8")
    events = send(client, session, "hello")
    assert events == [
        (
            "error",
            {
                "message": f"session {session}: its template 'tester' does not load now "
                "(see `agentkernel check`); nothing was sent"
            },
        ),
        ("done", {"reason": "error"}),
    ]
    logged = [r for r in caplog.records if r.name == "agentkernel.server" and session in r.getMessage()]
    assert [r.levelno for r in logged] == [logging.WARNING] and logged[0].exc_info is None
    template.write_text(kept, encoding="utf-8")  # mended: the session goes on
    llm_server.add(Reply(text="back"))
    assert dict(send(client, session, "again"))["reply"]["content"] == "back"


def test_a_method_not_allowed_lists_every_method_the_path_answers(client: httpx.Client) -> None:
    """`Allow` named only the first route's methods: `DELETE /v1/sessions` said POST, though GET is served."""
    for method, path, allowed in [
        ("DELETE", "/v1/sessions", "GET, POST"),
        ("OPTIONS", "/v1/sessions/some-id/messages", "GET, POST"),
        ("PUT", "/v1/tools", "GET"),
        ("GET", "/v1/tools/upper/run", "POST"),
    ]:
        refused = client.request(method, path)
        assert refused.status_code == 405, (method, path)
        assert refused.headers["allow"] == allowed, (method, path)
        assert refused.json()["request_id"] == refused.headers["x-request-id"]
