"""An OpenAI SDK's retry of a completion is the run it retries when that run ran a tool (S25.5).

The SDKs mark a retry with `x-stainless-retry-count` and send the same body.
A retry of a completion whose run called a tool is answered from that run's
records: the same answer, its tool not run again, the LLM not asked again.
A retry of a run that only asked the LLM and failed runs again
(test_openai_compat.py, `test_a_turn_that_failed_before_any_tool_ran_may_be_retried`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkernel.config import ServerSettings, load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.kernel import Kernel
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.across_deployments  # S27.3: on the project's files and on PostgreSQL

TOKENS = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}
ALICE, BOB = {"Authorization": "Bearer alice-token"}, {"Authorization": "Bearer bob-token"}
BODY: dict[str, Any] = {"model": "tester", "messages": [{"role": "user", "content": "upper a"}]}
RETRY = {"x-stainless-retry-count": "1"}


@pytest.fixture
def client(kernel_yaml: Path) -> Iterator[httpx.Client]:
    with (
        LiveServer(Kernel(load_kernel_config(kernel_yaml)), ServerSettings(tokens=TOKENS)) as live,
        live.client() as made,
    ):
        yield made


def tool_turn(llm_server: FakeLLMServer, answer: str = "A it is") -> None:
    llm_server.add(Reply(tool_calls=(FakeToolCall("upper", '{"text": "a"}', "c1"),)), Reply(text=answer))


def complete(client: httpx.Client, headers: dict[str, str], **extra: Any) -> httpx.Response:
    return client.post("/v1/chat/completions", json={**BODY, **extra}, headers=headers)


def test_a_retry_of_a_run_that_called_a_tool_is_that_run(
    client: httpx.Client, llm_server: FakeLLMServer
) -> None:
    tool_turn(llm_server)
    first = complete(client, ALICE)
    assert first.status_code == 200, first.text
    asked = len(llm_server.requests)
    again = complete(client, {**ALICE, **RETRY})
    assert again.status_code == 200, again.text
    assert again.json()["choices"][0]["message"]["content"] == "A it is"
    assert again.json()["agentkernel"]["run"] == first.json()["agentkernel"]["run"]
    assert len(llm_server.requests) == asked  # neither the LLM nor the tool ran again
    assert again.json()["usage"] == first.json()["usage"]  # what the run cost, told again
    assert first.json()["usage"]["total_tokens"] > 0
    tool_turn(llm_server, "streamed")  # a streamed request is another body: its retry is streamed too
    options = {"stream": True, "stream_options": {"include_usage": True}}
    original = complete(client, ALICE, **options)
    asked = len(llm_server.requests)
    streamed = complete(client, {**ALICE, **RETRY}, **options)
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert text == "streamed" and streamed.text.rstrip().endswith("data: [DONE]")
    assert len(llm_server.requests) == asked
    usage = [json.loads(line[6:])["usage"] for line in original.text.splitlines() if '"usage"' in line]
    assert [c["usage"] for c in chunks if c.get("usage")] == usage and usage[0]["total_tokens"] > 0


def test_the_same_body_without_the_retry_header_or_from_another_user_is_a_new_run(
    client: httpx.Client, llm_server: FakeLLMServer
) -> None:
    tool_turn(llm_server, "first")
    tool_turn(llm_server, "second")
    tool_turn(llm_server, "bob's")
    first = complete(client, ALICE)
    again = complete(client, ALICE)  # asked again on purpose: the SDK did not say it retries
    theirs = complete(client, {**BOB, **RETRY})  # another user's retry is not alice's run
    answers = [r.json()["choices"][0]["message"]["content"] for r in (first, again, theirs)]
    assert answers == ["first", "second", "bob's"]
    runs = {r.json()["agentkernel"]["run"] for r in (first, again, theirs)}
    assert len(runs) == 3
