"""Routing (S26.4): a request, a template or a script names the provider of `llm:` to ask first.

Two scripted OpenAI-compatible servers on 127.0.0.1 behind the kernel's own
provider stack (`build_provider`), and a real kernel whose template names
the second. Every answer says which provider gave it (`Completion.provider`),
whether it streamed or not; the named provider's failure still falls back,
to the others in their order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.errors import ConfigError
from agentkernel.llm import build_provider, parse_llm_config
from agentkernel.llm.base import ChatMessage, Completion, CompletionRequest, ProviderError, StreamDone
from tests.conftest import write_kernel_yaml
from tests.fakes import FakeLLMServer, HttpError, Reply
from tests.fakes.openai_server import CHAT_PATH


@pytest.fixture
def servers() -> Iterator[tuple[FakeLLMServer, FakeLLMServer]]:
    with FakeLLMServer() as first, FakeLLMServer() as second:
        yield first, second


def section(first: FakeLLMServer, second: FakeLLMServer) -> str:
    return (
        f"llm:\n  base_url: {first.base_url}\n  model: first-model\n  max_retries: 0\n"
        f"  fallback:\n    - base_url: {second.base_url}\n      model: second-model\n"
        "      name: spare\n      max_retries: 0\n"
    )


def asked(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path == CHAT_PATH]


def ask(first: FakeLLMServer, second: FakeLLMServer, provider: str | None, *, stream: bool) -> Completion:
    import yaml

    config = parse_llm_config(yaml.safe_load(section(first, second))["llm"])
    request = CompletionRequest((ChatMessage.user("hi"),), provider=provider)

    async def go() -> Completion:
        llm = build_provider(config)
        try:
            if not stream:
                return await llm.complete(request)
            done = [e async for e in llm.stream(request) if isinstance(e, StreamDone)]
            return done[0].completion
        finally:
            await llm.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_names_its_provider_and_a_named_one_is_asked_first(
    servers: tuple[FakeLLMServer, FakeLLMServer], stream: bool
) -> None:
    first, second = servers
    first.add(Reply(text="one"))
    second.add(Reply(text="two"))
    assert ask(first, second, None, stream=stream).provider == "first-model"  # unnamed: by its model
    named = ask(first, second, "spare", stream=stream)
    assert (named.text, named.provider) == ("two", "spare")
    assert len(asked(first)) == 1 and asked(second)[0]["model"] == "second-model"


@pytest.mark.parametrize("stream", [False, True])
def test_a_named_provider_s_retryable_failure_falls_back_to_the_others(
    servers: tuple[FakeLLMServer, FakeLLMServer], stream: bool
) -> None:
    first, second = servers
    second.add(HttpError(503))
    first.add(Reply(text="one"))
    answer = ask(first, second, "spare", stream=stream)
    assert (answer.text, answer.provider) == ("one", "first-model")


def test_a_provider_no_one_configured_is_a_clear_error(servers: tuple[FakeLLMServer, FakeLLMServer]) -> None:
    first, second = servers
    with pytest.raises(ProviderError, match=r"no LLM provider is named 'nope' \(kernel.yaml `llm:` names: "):
        ask(first, second, "nope", stream=False)
    assert not asked(first) and not asked(second)


def test_two_providers_with_one_name_do_not_load(tmp_path: Path) -> None:
    write_kernel_yaml(
        tmp_path,
        "llm:\n  base_url: http://127.0.0.1:1/v1\n  model: m\n"
        "  fallback:\n    - base_url: http://127.0.0.1:2/v1\n      model: m\n",
    )
    with pytest.raises(
        ConfigError, match=r"llm\.fallback\[0\]\.model: a provider named 'm' is listed already"
    ):
        load_kernel_config(tmp_path / "config" / "kernel.yaml")


def test_a_template_naming_a_provider_sends_its_turns_there(
    tmp_path: Path, servers: tuple[FakeLLMServer, FakeLLMServer]
) -> None:
    first, second = servers
    second.add(Reply(text="from the spare"))
    write_kernel_yaml(tmp_path, section(first, second))
    templates = tmp_path / "config" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    (templates / "t.yaml").write_text("name: t\ninstructions: Be brief.\nmodel: {provider: spare}\n")
    with Kernel(load_kernel_config(tmp_path / "config" / "kernel.yaml")) as kernel:
        session = kernel.chat("t", user_id="u", stream=False)
        result = asyncio.run(session.send("hi", _ignore))
    assert result.answer == "from the spare"
    assert not asked(first) and len(asked(second)) == 1


async def _ignore(event: object) -> None:
    return None


def test_a_template_naming_a_provider_llm_lacks_is_a_problem_at_its_line(tmp_path: Path) -> None:
    """Found when templates load (`agentkernel check`, a turn of it), not at its first LLM call."""
    write_kernel_yaml(tmp_path, "llm:\n  base_url: http://127.0.0.1:1/v1\n  model: m\n  name: main\n")
    templates = tmp_path / "config" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    (templates / "t.yaml").write_text(
        "name: t\ninstructions: x\nmodel:\n  provider: mian\n  providers: [main, x]\n"
    )
    with Kernel(load_kernel_config(tmp_path / "config" / "kernel.yaml")) as kernel:
        problems = [str(p) for p in kernel.problems()]
        with pytest.raises(ConfigError, match="unknown LLM provider 'mian'"):
            kernel.chat("t")
    assert any(
        "t.yaml:4: template t: model.provider: unknown LLM provider 'mian' (kernel.yaml `llm:` names: main); "
        "did you mean 'main'?" in p
        for p in problems
    ), problems
    assert any("t.yaml:5: template t: model.providers[1]: unknown LLM provider 'x'" in p for p in problems)
