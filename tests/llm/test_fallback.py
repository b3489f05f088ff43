"""Model fallback (S26.4): `llm.fallback` providers asked in order, on a retryable failure only.

Two scripted OpenAI-compatible servers on 127.0.0.1; a real kernel chatting
through its agent loop, streamed and not. The first server fails in each
retryable way (a 5xx, a 429, a dropped connection, a timeout) and the
second answers; a 400 — the request's own fault — is not asked again
elsewhere. A fallback is asked for its own model, not the first's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.agent.loop import LoopEvent
from agentkernel.config import load_kernel_config
from agentkernel.errors import ConfigError
from agentkernel.testing.openai_server import Turn
from tests.conftest import write_kernel_yaml
from tests.fakes import Drop, FakeLLMServer, HttpError, Reply
from tests.fakes.openai_server import CHAT_PATH


@pytest.fixture
def servers() -> Iterator[tuple[FakeLLMServer, FakeLLMServer]]:
    with FakeLLMServer() as first, FakeLLMServer() as second:
        yield first, second


def project(root: Path, first: FakeLLMServer, second: FakeLLMServer, model: str = "") -> Kernel:
    write_kernel_yaml(
        root,
        f"llm:\n  base_url: {first.base_url}\n  model: first-model\n  max_retries: 0\n  timeout_secs: 1\n"
        f"  fallback:\n    - base_url: {second.base_url}\n      model: second-model\n      max_retries: 0\n",
    )
    templates = root / "config" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    named = f"model: {{name: {model}}}\n" if model else ""
    (templates / "t.yaml").write_text(f"name: t\ninstructions: Be brief.\n{named}", encoding="utf-8")
    return Kernel(load_kernel_config(root / "config" / "kernel.yaml"))


def chat(kernel: Kernel, text: str, *, stream: bool) -> tuple[Any, list[LoopEvent]]:
    events: list[LoopEvent] = []

    async def collect(event: LoopEvent) -> None:
        events.append(event)

    session = kernel.chat("t", user_id="u", stream=stream)
    return asyncio.run(session.send(text, collect)), events


def asked(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path == CHAT_PATH]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    "failure",
    [HttpError(500), HttpError(503), HttpError(429), Drop(), Drop(delay=3.0)],
    ids=["500", "503", "429", "dropped", "timeout"],
)
def test_a_retryable_failure_of_the_first_is_answered_by_the_next(
    tmp_path: Path, servers: tuple[FakeLLMServer, FakeLLMServer], failure: Turn, stream: bool
) -> None:
    first, second = servers
    first.add(failure)
    second.add(Reply(text="from the second"))
    with project(tmp_path, first, second) as kernel:
        result, _ = chat(kernel, "hi", stream=stream)
    assert result.answer == "from the second"
    assert len(asked(first)) == 1 and len(asked(second)) == 1
    assert asked(second)[0].get("model", "second-model") == "second-model"


def test_a_request_the_first_refuses_is_not_asked_elsewhere(
    tmp_path: Path, servers: tuple[FakeLLMServer, FakeLLMServer]
) -> None:
    first, second = servers
    first.add(HttpError(400, "your request is wrong"))
    with project(tmp_path, first, second) as kernel:
        result, events = chat(kernel, "hi", stream=True)
    assert result.answer is None and result.reason.value == "error"
    errors = [e.data for e in events if e.kind == "error"]
    assert (
        errors and errors[0]["code"] == "llm_refused" and "your request is wrong" in str(errors[0]["message"])
    )
    assert asked(second) == []


def test_when_every_provider_fails_the_last_ones_failure_is_told(
    tmp_path: Path, servers: tuple[FakeLLMServer, FakeLLMServer]
) -> None:
    first, second = servers
    first.add(HttpError(502))
    second.add(HttpError(503, "the second is down too"))
    with project(tmp_path, first, second) as kernel:
        _, events = chat(kernel, "hi", stream=False)
    errors = [e.data for e in events if e.kind == "error"]
    assert errors and "the second is down too" in str(errors[0]["message"])
    assert errors[0]["code"] == "llm_unavailable"


def test_a_template_s_model_goes_to_the_first_and_a_fallback_asks_for_its_own(
    tmp_path: Path, servers: tuple[FakeLLMServer, FakeLLMServer]
) -> None:
    first, second = servers
    first.add(HttpError(500))
    second.add(Reply(text="ok"))
    with project(tmp_path, first, second, model="big-model") as kernel:
        chat(kernel, "hi", stream=True)
    assert asked(first)[0]["model"] == "big-model"
    assert asked(second)[0]["model"] == "second-model"


def test_a_fallback_s_fields_are_checked_as_the_first_s(tmp_path: Path) -> None:
    write_kernel_yaml(
        tmp_path,
        "llm:\n  base_url: http://127.0.0.1:1/v1\n  model: m\n"
        "  fallback:\n    - base_url: ftp://x\n      model: n\n",
    )
    with pytest.raises(
        ConfigError, match=r"llm\.fallback\[0\]\.base_url: expected an http:// or https:// URL"
    ):
        load_kernel_config(tmp_path / "config" / "kernel.yaml")
