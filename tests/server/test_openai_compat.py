"""The OpenAI-compatible endpoint with the `openai` package as the client (issue 11 §2; S23.6; S6).

`POST /v1/chat/completions` and `GET /v1/models` through the real server on
127.0.0.1 against the scripted LLM: the standard fields stay standard, and
notices, tool calls and visuals travel in the `agentkernel` extension field.
"""

from __future__ import annotations

import json
import logging
import shutil
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
from tests.conftest import REPO, wait_until
from tests.fakes import FakeLLMServer, FakeToolCall, HttpError, RecordedRequest, Reply
from tests.server.conftest import ROW_SECRET, Gated, LiveServer, make_project
from tests.server.test_continuations_api import ARGS_SECRET, paged_project
from tests.server.test_turn_caps import stopped_one_offs

SHIPPED_HOOKS = REPO / "config" / "scripts" / "hooks"
MODERATED = "Извините, эту тему я не обсуждаю."  # moderation.yaml's reply


@pytest.fixture
def sdk(live: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused-on-loopback", max_retries=0) as client:
        yield client


def extension(reply: Any) -> dict[str, Any]:
    """The `agentkernel` extension field of an SDK object (pydantic keeps unknown fields)."""
    extra = reply.model_extra or {}
    found: dict[str, Any] = extra["agentkernel"]
    return found


def table_turn(llm_server: FakeLLMServer) -> None:
    llm_server.add(
        Reply(text="Let me look.", tool_calls=(FakeToolCall("table", '{"n": 2}', id="c1"),)),
        Reply(text="two rows, see the table"),
    )


def test_models_are_the_templates(sdk: openai.OpenAI) -> None:
    assert [m.id for m in sdk.models.list()] == ["tester"]


def test_a_completion_answers_the_last_message_over_the_clients_history(
    sdk: openai.OpenAI, live: LiveServer, llm_server: FakeLLMServer
) -> None:
    table_turn(llm_server)
    done = sdk.chat.completions.create(
        model="tester",
        messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "first"},
            {"role": "user", "content": [{"type": "text", "text": "show"}, {"type": "text", "text": "me"}]},
        ],
        temperature=0.2,  # accepted, not used: the template chooses
    )
    assert done.object == "chat.completion" and done.model == "tester"
    assert done.choices[0].message.content == "two rows, see the table"
    assert done.choices[0].finish_reason == "stop"
    ext = extension(done)
    assert ext["reason"] == "job_done"
    kinds = [e["type"] for e in ext["events"]]
    assert kinds == ["tool_call", "tool_result"]
    result = ext["events"][1]["data"]
    assert result["tool"] == "table" and [r["id"] for r in result["visual"][0]["rows"]] == [0, 1]
    # the template's instructions first, then the client's conversation, then the new message
    sent = [(m["role"], m["content"]) for m in llm_server.bodies[0]["messages"]]
    assert sent[1:] == [
        ("system", "Answer briefly."),
        ("user", "one"),
        ("assistant", "first"),
        ("user", "show\nme"),
    ]
    assert sent[0] == ("system", sent[0][1]) and "test agent" in sent[0][1]
    # the LLM never sees visual data (S6): the rows only went to the client
    assert ROW_SECRET not in json.dumps(llm_server.bodies)
    # recorded in the transcript under the one-off session, which is not in the caller's session list
    records = live.kernel.transcript(ext["session"])
    assert [r.kind for r in records] == ["user", "tool_call", "tool_result", "agent", "end"]
    with live.client() as client:
        assert client.get("/v1/sessions").json() == []


def test_a_stream_sends_tokens_as_content_and_the_rest_in_the_extension(
    sdk: openai.OpenAI, llm_server: FakeLLMServer
) -> None:
    table_turn(llm_server)
    stream = sdk.chat.completions.create(
        model="tester", messages=[{"role": "user", "content": "show me"}], stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == "Let me look.\n\ntwo rows, see the table"  # parted where the tool ran
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "session" in extension(chunks[0])
    events = [extension(c) for c in chunks[1:] if (c.model_extra or {}).get("agentkernel")]
    assert [e["type"] for e in events] == ["tool_call", "tool_result", "done"]
    assert events[1]["data"]["visual"][0]["type"] == "table"
    assert events[-1]["data"] == {"reason": "job_done"}
    assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"
    assert {c.id for c in chunks} == {chunks[0].id} and chunks[0].object == "chat.completion.chunk"


def test_a_table_with_more_pages_is_sealed_and_pages_as_its_owner(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """S6.3: the continuation's args never leave the server, whichever endpoint the table left by."""
    kernel = Kernel(load_kernel_config(paged_project(tmp_path, llm_server)))
    llm_server.add(Reply(tool_calls=(FakeToolCall("paged", "{}"),)), Reply(text="page one shown"))
    with LiveServer(kernel) as live:
        with openai.OpenAI(base_url=f"{live.url}/v1", api_key="alice-token", max_retries=0) as alice:
            raw = alice.chat.completions.with_raw_response.create(
                model="tester", messages=[{"role": "user", "content": "numbers"}]
            )
        assert ARGS_SECRET not in raw.http_response.text
        result = extension(raw.parse())["events"][1]["data"]
        continuation = result["visual"][0]["continuation"]
        assert set(continuation) == {"id"}
        with live.client(headers={"Authorization": "Bearer alice-token"}) as client:
            page = client.post("/v1/continuations", json={"id": continuation["id"]})
        assert page.status_code == 200, page.text
        assert [r["page"] for r in page.json()["visual"][0]["rows"]] == [2, 2]
        with live.client(headers={"Authorization": "Bearer bob-token"}) as bob:
            assert bob.post("/v1/continuations", json={"id": continuation["id"]}).status_code == 404


def test_tokens_are_the_api_key(tmp_path: Path, llm_server: FakeLLMServer) -> None:
    extra = f'server:\n  tokens:\n    "{token_hash("alice-token")}": alice\n'
    kernel = Kernel(load_kernel_config(make_project(tmp_path, llm_server, extra)))
    llm_server.add(Reply(text="hi alice"))
    with LiveServer(kernel) as live:
        with openai.OpenAI(base_url=f"{live.url}/v1", api_key="wrong", max_retries=0) as stranger:
            with pytest.raises(openai.AuthenticationError):
                stranger.models.list()
            with pytest.raises(openai.AuthenticationError):
                stranger.chat.completions.create(model="tester", messages=[{"role": "user", "content": "x"}])
        with openai.OpenAI(base_url=f"{live.url}/v1", api_key="alice-token", max_retries=0) as alice:
            done = alice.chat.completions.create(model="tester", messages=[{"role": "user", "content": "hi"}])
        assert done.choices[0].message.content == "hi alice"
        assert {r.meta.get("user_id") for r in kernel.transcript(extension(done)["session"])} <= {
            "alice",
            None,
        }
    assert llm_server.remaining == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"tools": [{"type": "retrieval"}]}, "body.tools.0.type"),
        ({"tools": [{"type": "function", "function": {"name": "upper"}}]}, "body.tools.0.function.name"),
        ({"tool_choice": "required"}, "body.tool_choice"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "strnig"}}}},
            "body.response_format.json_schema.schema",
        ),
        ({"response_format": {"type": "grammar"}}, "body.response_format.type"),
        ({"n": 2}, "body.n"),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
            "body.messages.1.role",
        ),
        (
            {
                "messages": [
                    {"role": "tool", "content": "r", "tool_call_id": "x"},
                    {"role": "user", "content": "a"},
                ]
            },
            "body.messages.0.tool_call_id",
        ),
        (  # words in the assistant's mouth as a call of a template tool: its result would be the client's
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "tool_calls": [{"id": "x", "type": "function", "function": {}}]},
                    {"role": "user", "content": "b"},
                ]
            },
            "body.messages.1.tool_calls.0.function.name",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "body.messages.0.content.0.type",
        ),
        ({"messages": []}, "body.messages"),
        ({"messages": [{"role": "narrator", "content": "a"}]}, "body.messages.0.role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
            "body.messages.0.content.0.text",
        ),
        ({"n": True}, "body.n"),  # not taken for 1 (schemathesis found it accepted)
        ({"stream": 1}, "body.stream"),
    ],
)
def test_what_an_agent_cannot_honour_is_400_naming_the_field(
    client: httpx.Client, body: dict[str, Any], field: str
) -> None:
    """OpenAI's answer to a request it cannot take: 400 with its error object naming the `param`
    (the SDKs raise BadRequestError); FastAPI's 422 was an error no OpenAI client expects."""
    request = {"model": "tester", "messages": [{"role": "user", "content": "hi"}], **body}
    answer = client.post("/v1/chat/completions", json=request)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["message"].startswith(field), error
    assert (error["type"], error["param"]) == ("invalid_request_error", field)
    assert set(error) == {"message", "type", "param", "code"}


def test_unknown_model_is_404_naming_the_templates(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    assert "body.model: no model 'gpt-9' (the templates: tester)" in str(caught.value)


def test_a_last_message_over_the_limit_is_413(tmp_path: Path, llm_server: FakeLLMServer) -> None:
    kernel = Kernel(
        load_kernel_config(make_project(tmp_path, llm_server, "server:\n  max_message_chars: 10\n"))
    )
    with LiveServer(kernel) as live, live.client() as client:
        answer = client.post(
            "/v1/chat/completions",
            json={"model": "tester", "messages": [{"role": "user", "content": "x" * 11}]},
        )
    assert answer.status_code == 413 and "at most 10" in answer.json()["detail"]
    assert llm_server.requests == []


def test_no_llm_is_an_error_the_sdk_raises_streamed_or_not(tmp_path: Path) -> None:
    with (
        LiveServer(Kernel(load_kernel_config(make_project(tmp_path, None)))) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0) as sdk,
    ):
        question: Any = [{"role": "user", "content": "hello"}]
        with pytest.raises(openai.APIStatusError) as caught:
            sdk.chat.completions.create(model="tester", messages=question)
        # no LLM is a server that cannot serve (503), and one no retry will mend: the SDK is told not to
        assert caught.value.status_code == 503
        assert caught.value.response.headers["x-should-retry"] == "false"
        assert "no LLM provider is configured" in str(caught.value)
        assert caught.value.body["code"] == "no_llm"  # type: ignore[index]
        with pytest.raises(openai.APIError, match="no LLM provider is configured"):
            list(sdk.chat.completions.create(model="tester", messages=question, stream=True))


def test_a_client_that_goes_away_stops_the_turn(
    live: LiveServer, llm_server: FakeLLMServer, sdk: openai.OpenAI
) -> None:
    """A completion's turn is a one-off nobody else can read or stop (`/stop` knows only listed
    sessions), so its client leaving stops it: recorded `terminated`, the held LLM answer never
    waited for (tests/server/test_turn_caps.py has the cap's side of it)."""
    gate = threading.Event()
    llm_server.add(Gated(gate, Reply(tool_calls=(FakeToolCall("upper", '{"text": "a"}'),))))
    stream = sdk.chat.completions.create(
        model="tester", messages=[{"role": "user", "content": "go"}], stream=True
    )
    session = extension(next(iter(stream)))["session"]
    try:
        # (a client gone before the LLM is asked leaves nothing to stop: the chat is never sent the message)
        wait_until(lambda: len(llm_server.requests) == 1, "the turn to reach the LLM")
        stream.close()
        wait_until(
            lambda: any(r.kind == "end" for r in live.kernel.transcript(session)), "the turn to be recorded"
        )
        assert live.kernel.transcript(session)[-1].content == "terminated"
    finally:
        gate.set()
    assert len(llm_server.requests) == 1  # the tool call it would have asked for was never made


POLICE_JS = """
function before_user_message(ctx, msg) {
  if (msg.content.indexOf('forbidden') >= 0) return {suppress: true, notice: 'not that'};
  var removed = {role: 'user', content: '[card number removed]'};
  if (msg.content.indexOf('4111') >= 0) return {replace_message: removed};
}
"""


def hooked_project(
    tmp_path: Path, llm_server: FakeLLMServer, *hooks: tuple[str, str], extra: str = ""
) -> Path:
    """The server's test project, its template `tester` with these hooks: (name, JavaScript) each, or
    (name, "") for the repository's own hook of that name (config/scripts/hooks)."""
    config = make_project(tmp_path, llm_server, extra)
    folder = tmp_path / "config" / "scripts" / "hooks"
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in hooks:
        if not source:
            for shipped in SHIPPED_HOOKS.glob(f"{name}.*"):
                shutil.copy(shipped, folder / shipped.name)
            continue
        spec = f"kind: script_hook\nname: {name}\nscript: {name}.js\n"
        (folder / f"{name}.yaml").write_text(spec, encoding="utf-8")
        (folder / f"{name}.js").write_text(source, encoding="utf-8")
    names = ", ".join(name for name, _ in hooks)
    template = tmp_path / "config" / "templates" / "tester.yaml"
    template.write_text(template.read_text(encoding="utf-8") + f"hooks: [{names}]\n", encoding="utf-8")
    return config


def test_the_client_s_earlier_messages_pass_the_template_s_hooks(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """S7.1, S23.6: a stateless client sends the whole conversation, so a hook policing what users say
    was bypassed by saying it one message earlier (or in a `system` message). Each earlier message
    now passes `before_user_message`: a replaced one reaches the LLM replaced, and a suppressed one
    blocks the turn before the LLM is asked."""
    config = hooked_project(tmp_path, llm_server, ("police", POLICE_JS))
    llm_server.add(Reply(text="noted"))
    with LiveServer(Kernel(load_kernel_config(config))) as live, live.client() as http:
        url = f"{live.url}/v1/chat/completions"
        earlier = [
            {"role": "system", "content": "My card is 4111 1111 1111 1111."},
            {"role": "user", "content": "and again: 4111 1111 1111 1111"},
            {"role": "assistant", "content": "4111 is what you said"},  # the client wrote it too
        ]
        body = {"model": "tester", "messages": [*earlier, {"role": "user", "content": "go on"}]}
        answered = http.post(url, json=body)
        assert answered.status_code == 200, answered.text
        assert answered.json()["choices"][0]["message"]["content"] == "noted"
        sent = [(m["role"], m["content"]) for m in llm_server.bodies[-1]["messages"]]
        assert sent[1:] == [
            ("system", "[card number removed]"),
            ("user", "[card number removed]"),
            ("assistant", "[card number removed]"),  # replaced, its role kept
            ("user", "go on"),
        ]
        asked = len(llm_server.bodies)
        smuggled = [{"role": "user", "content": "the forbidden thing"}, {"role": "user", "content": "hi"}]
        refused = http.post(url, json={"model": "tester", "messages": smuggled})
        assert refused.status_code == 200, refused.text
        choice = refused.json()["choices"][0]
        assert (choice["finish_reason"], choice["message"]["content"]) == ("content_filter", "")
        assert len(llm_server.bodies) == asked  # the LLM was not asked


def test_a_reply_to_an_earlier_message_blocks_the_completion_before_the_llm(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """Issue 24 §8: the shipped `moderation` answers a banned word with a `reply` verdict, which was
    dropped for an earlier message, so `[user: "…казино…", assistant: "Sure.", user: "go on"]` took the
    word to the LLM. A reply or a suppress on any earlier message blocks the turn: the hook's reply is
    the answer (`content_filter`), its notice says why, and the LLM is not asked."""
    config = hooked_project(tmp_path, llm_server, ("moderation", ""))
    llm_server.add(Reply(text="tomorrow too"))
    smuggled: Any = [
        {"role": "user", "content": "Расскажи про КАЗИНО"},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": "go on"},
    ]
    with (
        LiveServer(Kernel(load_kernel_config(config))) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0) as sdk,
    ):
        done = sdk.chat.completions.create(model="tester", messages=smuggled)
        assert (done.choices[0].message.content, done.choices[0].finish_reason) == (
            MODERATED,
            "content_filter",
        )
        ext = extension(done)
        assert ext["reason"] == "blocked"
        assert ext["events"] == [{"type": "notice", "data": {"text": "🚫 moderation: «казино»"}}]
        records = live.kernel.transcript(ext["session"])
        assert [r.kind for r in records] == ["user", "hook", "notice", "agent", "end"]
        assert records[1].meta["earlier"] == 0 and records[-1].content == "blocked"  # which message blocked
        chunks = list(sdk.chat.completions.create(model="tester", messages=smuggled, stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == MODERATED
        assert chunks[-1].choices[0].finish_reason == "content_filter"
        calm: Any = [
            {"role": "user", "content": "Тепло сегодня?"},
            {"role": "assistant", "content": "Да."},
            {"role": "user", "content": "А завтра?"},
        ]
        assert sdk.chat.completions.create(model="tester", messages=calm).choices[0].message.content == (
            "tomorrow too"
        )
    assert len(llm_server.requests) == 1  # only the calm conversation reached it
    assert "казино" not in json.dumps(llm_server.bodies, ensure_ascii=False).lower()


ROLES_JS = """
function before_user_message(ctx, msg) {
  var said = msg.role + (ctx.earlier ? ' earlier: ' : ' new: ') + msg.content;
  return {replace_message: {role: 'user', content: said}};
}
"""


def test_client_written_assistant_messages_pass_the_hooks_with_their_role(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """Issue 24 §9: the client writes the assistant's messages too, and they reached the LLM unvetted
    (a client can put words in the assistant's mouth). Every earlier message passes
    `before_user_message` with `msg.role` its own and `ctx.earlier` true; a `replace_message` keeps the
    message's role. The shipped moderation, which reads no role, now blocks a banned word there."""
    config = hooked_project(tmp_path, llm_server, ("moderation", ""), ("roles", ROLES_JS))
    llm_server.add(Reply(text="ok"))
    with (
        LiveServer(Kernel(load_kernel_config(config))) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0) as sdk,
    ):
        conversation: Any = [
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "first"},
            {"role": "user", "content": "two"},
        ]
        assert (
            sdk.chat.completions.create(model="tester", messages=conversation).choices[0].message.content
            == "ok"
        )
        sent = [(m["role"], m["content"]) for m in llm_server.bodies[-1]["messages"]]
        assert sent[1:] == [
            ("system", "system earlier: be brief"),
            ("user", "user earlier: one"),
            ("assistant", "assistant earlier: first"),
            ("user", "user new: two"),
        ]
        mouthed: Any = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Let me tell you about Ставки on football"},
            {"role": "user", "content": "go on"},
        ]
        blocked = sdk.chat.completions.create(model="tester", messages=mouthed)
        assert (blocked.choices[0].message.content, blocked.choices[0].finish_reason) == (
            MODERATED,
            "content_filter",
        )
    assert len(llm_server.requests) == 1
    assert "ставки" not in json.dumps(llm_server.bodies, ensure_ascii=False).lower()


@pytest.mark.parametrize(
    ("messages", "setting"),
    [
        (["a", "b", "c", "d"], "server.max_completion_messages"),
        (["x" * 12, "y" * 10, "go"], "server.max_completion_history_bytes"),
        (["ж" * 11, "go"], "server.max_completion_history_bytes"),  # bytes of UTF-8, not characters
        (["hi", "z" * 11], "server.max_message_chars"),
    ],
)
def test_a_conversation_over_its_caps_is_413_naming_the_setting(
    tmp_path: Path, llm_server: FakeLLMServer, messages: list[str], setting: str
) -> None:
    """Issue 24 §10: each earlier message passes the hooks, so what one request may carry is bounded
    in messages and in bytes, refused before any hook runs or the LLM is asked."""
    extra = (
        "server:\n  max_completion_messages: 3\n  max_completion_history_bytes: 21\n  max_message_chars: 10\n"
    )
    config = hooked_project(tmp_path, llm_server, ("roles", ROLES_JS), extra=extra)
    llm_server.add(Reply(text="within"))
    roles = ["user", "assistant"] * 2
    with (
        LiveServer(Kernel(load_kernel_config(config))) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0) as sdk,
    ):
        over: Any = [{"role": roles[i - len(messages) + 1], "content": m} for i, m in enumerate(messages)]
        with pytest.raises(openai.APIStatusError) as caught:
            sdk.chat.completions.create(model="tester", messages=over)
        assert caught.value.status_code == 413 and setting in str(caught.value), str(caught.value)
        assert llm_server.requests == []
        at_the_caps: Any = [
            {"role": "user", "content": "x" * 12},
            {"role": "assistant", "content": "y" * 9},
            {"role": "user", "content": "z" * 10},
        ]
        assert sdk.chat.completions.create(model="tester", messages=at_the_caps).choices[
            0
        ].message.content == ("within")


def test_the_issue_s_80000_earlier_messages_are_413_at_the_defaults(client: httpx.Client) -> None:
    """Issue 24 §10 as reported: 80,000 earlier user messages went through the hooks one by one."""
    flood = [{"role": "user", "content": f"message {n} padded out to thirty"} for n in range(80_000)]
    answer = client.post("/v1/chat/completions", json={"model": "tester", "messages": flood})
    assert answer.status_code == 413, answer.text
    assert "80,000 messages; at most 1,000 (server.max_completion_messages)" in answer.json()["detail"]


def test_messages_are_counted_before_any_is_read(client: httpx.Client) -> None:
    """Each message was validated before they were counted: 240,000 empty ones (8 MiB) held the
    server's event loop for seconds, every other user's request waiting. Counted first, a flood is
    refused for the cost of counting it: none of these malformed messages is looked at."""
    flood = [{"role": "narrator", "content": 5}] * 1_000 + [{"role": "user", "content": "hi"}]
    answer = client.post("/v1/chat/completions", json={"model": "tester", "messages": flood})
    assert answer.status_code == 413, answer.text
    assert "(server.max_completion_messages)" in answer.json()["detail"]
    within = client.post("/v1/chat/completions", json={"model": "tester", "messages": flood[-3:]})
    assert within.status_code == 400 and within.json()["error"]["param"] == "body.messages.0.role"


COUNTING_JS = """
function before_user_message(ctx, msg) {
  if (msg.content.indexOf('earlier ') === 0) llm(msg.content);  // one LLM call per earlier message
}
"""


def test_a_client_that_leaves_while_its_history_is_vetted_stops_the_vetting(
    tmp_path: Path, llm_server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 24 §10: the vetting never looked whether the client was still there, so a request
    abandoned at once still had every earlier message go through the hooks. The hook here asks the
    LLM once per message it vets, the first time held until the client has gone: no second call."""
    caplog.set_level(logging.INFO, "agentkernel.server")
    config = hooked_project(tmp_path, llm_server, ("counting", COUNTING_JS))
    gate = threading.Event()
    llm_server.add(Gated(gate, Reply(text="vetted")))
    history = [{"role": "user", "content": f"earlier {n}"} for n in range(20)]
    messages: Any = [*history, {"role": "user", "content": "go"}]
    with (
        LiveServer(Kernel(load_kernel_config(config))) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0) as sdk,
    ):
        stream = sdk.chat.completions.create(model="tester", messages=messages, stream=True)
        try:
            session = extension(next(iter(stream)))["session"]
            wait_until(lambda: len(llm_server.requests) == 1, "the hook to vet the first earlier message")
            stream.close()
            wait_until(lambda: stopped_one_offs(caplog) == [session], "the server to see the client leave")
        finally:
            gate.set()
        wait_until(
            lambda: any(r.kind == "end" for r in live.kernel.transcript(session)), "the turn to be recorded"
        )
        assert live.kernel.transcript(session)[-1].content == "terminated"
    assert len(llm_server.requests) == 1  # the other 19 earlier messages were never vetted


# -- a failed turn: the status of its cause, and never a retry that runs the tools again (issue 26 §2) --


def tool_then(failure: Any) -> Any:
    """The scripted LLM: a user's message gets a call of `upper`, the tool's result gets `failure`."""

    def answer(request: RecordedRequest) -> Any:
        if request.body["messages"][-1]["role"] == "user":
            return Reply(tool_calls=(FakeToolCall("upper", '{"text": "once"}'),))
        return failure

    return answer


def tool_results(llm_server: FakeLLMServer) -> int:
    """How many times a tool ran: each run's result went back to the LLM."""
    return sum(1 for body in llm_server.bodies if body["messages"][-1]["role"] == "tool")


def test_a_turn_that_fails_after_a_tool_ran_is_not_retried_by_the_sdk(
    live: LiveServer, llm_server: FakeLLMServer
) -> None:
    """The issue: a failed turn was a bare 502, which the SDK retries (twice by default), so the
    whole turn — hooks and tools — ran three times. Once a tool ran, the answer says
    `x-should-retry: false`, which the SDK obeys: the tool ran once."""
    llm_server.respond_with(tool_then(HttpError(500, "upstream broke")))
    with (
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=2) as sdk,
        pytest.raises(openai.APIStatusError) as caught,
    ):
        sdk.chat.completions.create(model="tester", messages=[{"role": "user", "content": "go"}])
    assert caught.value.status_code == 502
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert "the LLM is unavailable" in str(caught.value) and "upstream broke" in str(caught.value)
    assert caught.value.body["code"] == "llm_unavailable"  # type: ignore[index]
    assert tool_results(llm_server) == 1 and len(llm_server.requests) == 2


def test_the_llm_refusing_a_request_is_a_400_saying_so(live: LiveServer, llm_server: FakeLLMServer) -> None:
    """The LLM's own 400 was reported as 'the LLM is unavailable' with a 502 (retried): it is a
    BadRequestError naming the real cause, asked once."""
    llm_server.add(HttpError(400, "context length exceeded"))
    with (
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=2) as sdk,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        sdk.chat.completions.create(model="tester", messages=[{"role": "user", "content": "go"}])
    assert "the LLM refused the request" in str(caught.value) and "context length exceeded" in str(
        caught.value
    )
    assert caught.value.body["code"] == "llm_refused"  # type: ignore[index]
    assert len(llm_server.requests) == 1


def test_a_turn_that_failed_before_any_tool_ran_may_be_retried(
    live: LiveServer, llm_server: FakeLLMServer
) -> None:
    """Where a retry repeats nothing (no tool ran), a down LLM stays a 502 the SDK retries."""
    llm_server.add(HttpError(503, "overloaded"), Reply(text="back again"))
    with openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=1) as sdk:
        done = sdk.chat.completions.create(model="tester", messages=[{"role": "user", "content": "go"}])
    assert done.choices[0].message.content == "back again" and len(llm_server.requests) == 2


# -- what clients notice (issue 26 §5): usage, models, errors, response_format, client tools --------


def test_usage_is_the_sum_of_the_turn_s_llm_calls_streamed_or_not(
    sdk: openai.OpenAI, llm_server: FakeLLMServer
) -> None:
    table_turn(llm_server)  # two LLM calls of 10 prompt and 5 completion tokens each
    done = sdk.chat.completions.create(model="tester", messages=[{"role": "user", "content": "show"}])
    assert done.usage is not None
    assert (done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.total_tokens) == (20, 10, 30)
    table_turn(llm_server)
    chunks = list(
        sdk.chat.completions.create(
            model="tester",
            messages=[{"role": "user", "content": "show"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None and last.usage.total_tokens == 30
    assert chunks[-2].choices[0].finish_reason == "stop"
    table_turn(llm_server)
    plain = list(
        sdk.chat.completions.create(model="tester", messages=[{"role": "user", "content": "x"}], stream=True)
    )
    assert all(c.usage is None for c in plain)  # only when asked, as OpenAI does


def test_a_model_is_retrieved_by_name_and_an_unknown_one_is_not_found(sdk: openai.OpenAI) -> None:
    model = sdk.models.retrieve("tester")
    assert (model.id, model.object, model.owned_by) == ("tester", "model", "agentkernel")
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.models.retrieve("gpt-9")
    assert "no model 'gpt-9' (the templates: tester)" in str(caught.value)
    assert caught.value.body["type"] == "not_found_error"  # type: ignore[index]


def test_a_request_the_agent_cannot_honour_is_a_bad_request_error(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="tester", messages=[{"role": "user", "content": "hi"}], n=2)
    assert caught.value.body["param"] == "body.n"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="tester", messages=[{"role": "narrator", "content": "hi"}])  # type: ignore[misc, list-item]
    assert caught.value.body["param"] == "body.messages.0.role"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as caught:  # streamed: refused before the first chunk
        sdk.chat.completions.create(
            model="tester", messages=[{"role": "user", "content": "hi"}], stream=True, tool_choice="required"
        )
    assert caught.value.body["param"] == "body.tool_choice"  # type: ignore[index]


WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_a_client_tool_call_ends_the_turn_for_the_client_to_run(
    live: LiveServer, sdk: openai.OpenAI, llm_server: FakeLLMServer
) -> None:
    """The client's tools are offered beside the template's; a call of one comes back with
    finish_reason tool_calls, and the conversation goes on from the client's `tool` message."""
    llm_server.add(
        Reply(text="Let me check.", tool_calls=(FakeToolCall("weather", '{"city": "Oslo"}', id="w1"),)),
        Reply(text="Oslo: 12°C, rain."),
    )
    asked: Any = [{"role": "user", "content": "weather in Oslo?"}]
    done = sdk.chat.completions.create(model="tester", messages=asked, tools=[WEATHER])
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me check."
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [  # type: ignore[union-attr]
        ("w1", "weather", '{"city": "Oslo"}')
    ]
    offered = [t["function"]["name"] for t in llm_server.bodies[0]["tools"]]
    assert sorted(offered) == ["table", "upper", "weather"]
    assert done.usage is not None and done.usage.total_tokens == 15
    going_on: Any = [
        *asked,
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "w1", "content": "12°C, rain"},
    ]
    answered = sdk.chat.completions.create(model="tester", messages=going_on, tools=[WEATHER])
    assert answered.choices[0].message.content == "Oslo: 12°C, rain."
    assert answered.choices[0].finish_reason == "stop"
    sent = llm_server.bodies[1]["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["name"] == "weather"
    assert (sent[-1]["role"], sent[-1]["tool_call_id"], sent[-1]["content"]) == ("tool", "w1", "12°C, rain")
    records = live.kernel.transcript(extension(done)["session"])
    assert [(r.kind, r.meta.get("client")) for r in records if r.kind == "tool_call"] == [("tool_call", True)]


def test_a_client_tool_call_streams_as_tool_call_deltas(
    sdk: openai.OpenAI, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(tool_calls=(FakeToolCall("weather", '{"city": "Oslo"}', id="w1"),)))
    stream = sdk.chat.completions.create(
        model="tester",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or []]
    assert [(d.index, d.id, d.function.name, d.function.arguments) for d in deltas] == [  # type: ignore[union-attr]
        (0, "w1", "weather", '{"city": "Oslo"}')
    ]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 15


def test_a_template_tool_called_beside_a_client_tool_is_not_run(
    sdk: openai.OpenAI, llm_server: FakeLLMServer
) -> None:
    """The client answers only its own calls, so the turn ends there: a call of the template's
    tool in the same answer is left out (the LLM may ask again once the client's results are in)."""
    both = (FakeToolCall("upper", '{"text": "a"}', id="u1"), FakeToolCall("weather", "{}", id="w1"))
    llm_server.add(Reply(tool_calls=both))
    done = sdk.chat.completions.create(
        model="tester", messages=[{"role": "user", "content": "both"}], tools=[WEATHER]
    )
    assert [c.id for c in done.choices[0].message.tool_calls or []] == ["w1"]
    assert extension(done)["events"] == []  # `upper` never ran
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize(
    ("tools", "param", "says"),
    [
        (
            [{**WEATHER, "function": {**WEATHER["function"], "name": "upper"}}],
            "body.tools.0.function.name",
            "'upper' is a tool of the template already",
        ),
        ([WEATHER] * 3, "body.tools", "3 tools; at most 2 (server.max_completion_tools)"),
        (
            [
                {
                    "type": "function",
                    "function": {
                        "name": "deep",
                        "parameters": {"type": "object", "properties": {"a": {"type": "strnig"}}},
                    },
                }
            ],
            "body.tools.0.function.parameters.properties.a.type",
            "",
        ),
        (
            [
                {
                    "type": "function",
                    "function": {
                        "name": "big",
                        "parameters": {
                            "type": "object",
                            "properties": {f"p{n}": {"type": "string"} for n in range(200)},
                        },
                    },
                }
            ],
            "body.tools.0.function.parameters",
            "limits.max_schema_nodes",
        ),
        ([{"type": "function", "function": {"name": "has space"}}], "body.tools.0.function.name", "letters"),
    ],
)
def test_client_tools_are_bounded_and_named_at_fault(
    tmp_path: Path, llm_server: FakeLLMServer, tools: Any, param: str, says: str
) -> None:
    extra = "server:\n  max_completion_tools: 2\nlimits:\n  max_schema_nodes: 100\n"
    kernel = Kernel(load_kernel_config(make_project(tmp_path, llm_server, extra)))
    with (
        LiveServer(kernel) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0) as sdk,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        sdk.chat.completions.create(model="tester", messages=[{"role": "user", "content": "x"}], tools=tools)
    body: Any = caught.value.body
    assert body["param"].startswith(param) and says in body["message"], body
    assert llm_server.requests == []


PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def test_response_format_is_checked_as_llm_json_checks_it(
    sdk: openai.OpenAI, llm_server: FakeLLMServer
) -> None:
    """`response_format` was silently ignored (prose came back). The schema is in the instructions,
    each answer is validated, an invalid one is sent back with its problem (as llm_json does), and
    only a valid answer is the completion's content — streamed too."""
    llm_server.add(Reply(text="Ada is 36."), Reply(text='```json\n{"name": "Ada", "age": 36}\n```'))
    asked: Any = [{"role": "user", "content": "who?"}]
    form: Any = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    done = sdk.chat.completions.create(model="tester", messages=asked, response_format=form)
    assert json.loads(done.choices[0].message.content or "") == {"name": "Ada", "age": 36}
    assert done.usage is not None and done.usage.total_tokens == 30
    first, second = llm_server.bodies
    assert "validates against this JSON Schema" in first["messages"][0]["content"]
    assert "did not validate against the JSON Schema" in second["messages"][-1]["content"]
    llm_server.add(Reply(text='{"name": "Bo", "age": 7}'))
    chunks = list(
        sdk.chat.completions.create(model="tester", messages=asked, response_format=form, stream=True)
    )
    assert json.loads("".join(c.choices[0].delta.content or "" for c in chunks)) == {"name": "Bo", "age": 7}
    llm_server.add(*[Reply(text="no JSON here")] * 3)
    with pytest.raises(openai.APIStatusError) as caught:
        sdk.chat.completions.create(model="tester", messages=asked, response_format={"type": "json_object"})
    assert caught.value.status_code == 500 and "did not validate after 3 attempts" in str(caught.value)


def test_the_client_s_tool_results_pass_the_hooks_like_its_other_messages(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """A tool result is text the client wrote: it passes `before_user_message` (`msg.role` tool) as
    every earlier message does, so a policed word cannot come in as a tool's result either."""
    config = hooked_project(tmp_path, llm_server, ("police", POLICE_JS))
    conversation: Any = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "w1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "w1", "content": "the forbidden thing"},
    ]
    with (
        LiveServer(Kernel(load_kernel_config(config))) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0) as sdk,
    ):
        done = sdk.chat.completions.create(model="tester", messages=conversation, tools=[WEATHER])
    assert done.choices[0].finish_reason == "content_filter"
    assert extension(done)["events"] == [{"type": "notice", "data": {"text": "not that"}}]
    assert llm_server.requests == []


def test_an_answer_s_validation_ends_at_the_kernel_s_time_limit(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """Two branches a level, recursing into the answer: 2^40 applications for a list 40 deep, within
    the schema's size bounds. The client chooses the schema and can steer the answer, so each
    validation ends at limits.timeout_secs (as a script's call would); the turn then fails at once
    (asking again would take as long), rather than hold a worker for hours."""
    node = {"anyOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "array", "items": {"$ref": "#"}}]}
    llm_server.add(Reply(text="[" * 40 + "5" + "]" * 40))
    kernel = Kernel(load_kernel_config(make_project(tmp_path, llm_server, "limits:\n  timeout_secs: 1\n")))
    form: Any = {"type": "json_schema", "json_schema": {"name": "nest", "schema": node}}
    with (
        LiveServer(kernel) as live,
        openai.OpenAI(base_url=f"{live.url}/v1", api_key="x", max_retries=0, timeout=120) as sdk,
        pytest.raises(openai.InternalServerError) as caught,
    ):
        sdk.chat.completions.create(
            model="tester", messages=[{"role": "user", "content": "nest"}], response_format=form
        )
    assert "structured output could not be validated" in str(caught.value), str(caught.value)
    assert "(limits.timeout_secs: 1 s)" in str(caught.value)
    assert len(llm_server.requests) == 1
