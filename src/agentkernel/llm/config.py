"""The `llm:` section of kernel.yaml (`LLMConfig`, checked in agentkernel.config) → a ready provider
(S2.4, S23.4).

The API key never sits in YAML: the config names the environment variable
that holds it (`api_key_env`), and the key is read only when the provider is
built.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from agentkernel.config.sections import LLMConfig, parse_llm_config
from agentkernel.llm.base import Provider
from agentkernel.llm.measured import MeasuredProvider

log = logging.getLogger("agentkernel.llm")


def read_api_key(config: LLMConfig, environ: Mapping[str, str] = os.environ) -> str | None:
    """The key in the variable `api_key_env` names; None when none is named, or it is unset or empty."""
    if config.api_key_env is None:
        return None
    return environ.get(config.api_key_env) or None


def _api_key(config: LLMConfig, environ: Mapping[str, str]) -> str | None:
    """The key from the named variable, or None (with a warning) when it is unset or empty.

    Not an error: one kernel.yaml serves a local server that needs no key
    (Ollama, llama.cpp) and a hosted one that does; a server that needs it
    answers 401 with its own message, which the ProviderError carries.
    """
    key = read_api_key(config, environ)
    if key is None and config.api_key_env is not None:
        log.warning(
            "llm.api_key_env: environment variable %s is not set; sending no API key", config.api_key_env
        )
    return key


def _build_openai_compat(config: LLMConfig, api_key: str | None) -> Provider:
    from agentkernel.llm.openai_compat import OpenAICompatProvider  # httpx: paid when an LLM is used

    return OpenAICompatProvider(
        config.base_url,
        config.model,
        api_key,
        timeout_secs=config.timeout_secs,
        max_retries=config.max_retries,
    )


_BUILDERS: dict[str, Callable[[LLMConfig, str | None], Provider]] = {
    "openai_compat": _build_openai_compat,
}


def build_provider(config: LLMConfig, environ: Mapping[str, str] = os.environ) -> Provider:
    """The kernel's provider: the configured backends, asked in order (S26.4: the next on a retryable
    failure; a request may name the one to ask first), all behind one kernel-wide concurrency limit."""
    from agentkernel.llm.fallback import FallbackProvider
    from agentkernel.llm.limited import LimitedProvider  # aiologic: paid when an LLM is used

    chain = [(p.label, _BUILDERS[p.provider](p, _api_key(p, environ))) for p in config.chain()]
    return LimitedProvider(MeasuredProvider(FallbackProvider(chain), config.model), config.max_concurrency)


__all__ = ["LLMConfig", "build_provider", "parse_llm_config", "read_api_key"]
