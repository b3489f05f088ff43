"""The `llm:` section of kernel.yaml and building the kernel's provider from it (S2.4, S9.2)."""

from __future__ import annotations

import asyncio
import logging
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentkernel.errors import ConfigError
from agentkernel.llm import (
    ChatMessage,
    CompletionRequest,
    LimitedProvider,
    LLMConfig,
    OpenAICompatProvider,
    Provider,
    build_provider,
    parse_llm_config,
)
from agentkernel.llm.fallback import FallbackProvider
from agentkernel.llm.measured import MeasuredProvider
from tests.fakes import FakeLLMServer, Reply

KEY = "sk-live-abcdef0123456789"
MINIMAL = {"base_url": "http://127.0.0.1:11434/v1/", "model": "llama3.1"}


def ask(provider: Provider) -> str | None:
    async def main() -> str | None:
        try:
            return (await provider.complete(CompletionRequest((ChatMessage.user("hi"),)))).text
        finally:
            await provider.aclose()

    return asyncio.run(main())


def test_minimal_config_gets_defaults() -> None:
    assert parse_llm_config(MINIMAL) == LLMConfig(base_url="http://127.0.0.1:11434/v1", model="llama3.1")
    assert LLMConfig("http://x/v1", "m").max_concurrency == 16


def test_full_config_from_kernel_yaml(tmp_path: Path) -> None:
    kernel_yaml = tmp_path / "kernel.yaml"
    kernel_yaml.write_text(
        textwrap.dedent("""\
            llm:
              provider: openai_compat
              base_url: https://api.openai.com/v1
              model: gpt-4o-mini
              api_key_env: OPENAI_API_KEY
              timeout_secs: 30
              max_retries: 5
              max_concurrency: 4
            """),
        encoding="utf-8",
    )
    config = parse_llm_config(yaml.safe_load(kernel_yaml.read_text())["llm"], kernel_yaml)
    assert config == LLMConfig(
        base_url="https://api.openai.com/v1",
        model="gpt-4o-mini",
        api_key_env="OPENAI_API_KEY",
        timeout_secs=30.0,
        max_retries=5,
        max_concurrency=4,
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"base_url": None}, "llm.base_url: required"),
        ({"model": None}, "llm.model: required"),
        ({"model": ""}, "llm.model: expected a non-empty string"),
        (
            {"base_url": "ftp://host/v1"},
            "llm.base_url: expected an http:// or https:// URL, got 'ftp://host/v1'",
        ),
        ({"provider": "anthropic"}, "llm.provider: unknown provider 'anthropic' (known: openai_compat)"),
        ({"temperature": 0.2}, "llm.temperature: unknown field (known: provider, base_url, model"),
        ({"timeout_secs": 0}, "llm.timeout_secs: expected a number > 0, got 0"),
        ({"timeout_secs": "fast"}, "llm.timeout_secs: expected a number > 0, got 'fast'"),
        ({"max_retries": -1}, "llm.max_retries: expected an integer >= 0, got -1"),
        ({"max_retries": True}, "llm.max_retries: expected an integer >= 0, got True"),
        ({"max_concurrency": 0}, "llm.max_concurrency: expected an integer >= 1, got 0"),
        ({"max_concurrency": 2.5}, "llm.max_concurrency: expected an integer >= 1, got 2.5"),
    ],
)
def test_errors_name_the_field(change: dict[str, Any], message: str) -> None:
    raw = {k: v for k, v in {**MINIMAL, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as caught:
        parse_llm_config(raw, "config/kernel.yaml")
    assert caught.value.path == "config/kernel.yaml"
    assert message in caught.value.reason


def test_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match=r"^llm: \['http://x'\] is not of type 'object'$"):
        parse_llm_config(["http://x"])  # the text kernel.yaml's loading gives


@pytest.mark.parametrize("raw", [{**MINIMAL, "api_key": KEY}, {**MINIMAL, "api_key_env": KEY + "!"}])
def test_a_key_in_yaml_is_refused_without_echoing_it(raw: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_llm_config(raw)
    assert KEY not in str(caught.value)
    assert "environment variable" in str(caught.value)


def test_build_provider_wraps_the_backend_in_the_limit() -> None:
    config = parse_llm_config({**MINIMAL, "api_key_env": "LLM_KEY", "timeout_secs": 5, "max_retries": 1})
    provider = build_provider(config, environ={"LLM_KEY": KEY})
    assert isinstance(provider, LimitedProvider)
    measured = provider.inner  # each call's time and tokens in the metrics (S26.2)
    assert isinstance(measured, MeasuredProvider) and measured.model == "llama3.1"
    assert isinstance(measured.inner, FallbackProvider)  # one provider: a chain of one, that names it
    assert measured.inner.names == ("llama3.1",)
    inner = measured.inner.providers[0][1]
    assert isinstance(inner, OpenAICompatProvider)
    assert (inner.base_url, inner.model, inner.timeout_secs, inner.retry.max_retries) == (
        "http://127.0.0.1:11434/v1",
        "llama3.1",
        5.0,
        1,
    )
    assert KEY not in repr(provider) and KEY not in repr(config)


def test_unset_key_variable_sends_no_key_and_warns(
    llm_server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    """One kernel.yaml serves a keyless local server and a hosted one: unset is not an error."""
    config = parse_llm_config(
        {"base_url": llm_server.base_url, "model": "m", "api_key_env": "NOT_SET_ANYWHERE"}
    )
    with caplog.at_level(logging.WARNING, "agentkernel.llm"):
        provider = build_provider(config, environ={"NOT_SET_ANYWHERE": ""})
    assert "environment variable NOT_SET_ANYWHERE is not set" in caplog.text
    llm_server.add(Reply(text="hello"))
    assert ask(provider) == "hello"
    assert "authorization" not in llm_server.requests[0].headers


def test_built_provider_sends_the_key_from_the_environment(llm_server: FakeLLMServer) -> None:
    config = parse_llm_config({"base_url": llm_server.base_url, "model": "m", "api_key_env": "LLM_KEY"})
    provider = build_provider(config, environ={"LLM_KEY": KEY})
    llm_server.add(Reply(text="hello"))
    assert ask(provider) == "hello"
    assert llm_server.requests[0].headers["authorization"] == f"Bearer {KEY}"
