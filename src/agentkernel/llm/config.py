"""The `llm:` section of kernel.yaml → `LLMConfig` → a ready provider (S2.4, S23.4).

The API key never sits in YAML: the config names the environment variable
that holds it (`api_key_env`), and the key is read only when the provider is
built. Errors name the field at fault and never echo a value that might be a
key.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agentkernel.errors import ConfigError
from agentkernel.llm.base import Provider

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
log = logging.getLogger("agentkernel.llm")


@dataclass(frozen=True)
class LLMConfig:
    """Where the LLM is and how to talk to it; no secrets, so safe to print."""

    base_url: str
    model: str
    provider: str = "openai_compat"
    api_key_env: str | None = None
    timeout_secs: float = 60.0
    max_retries: int = 3
    max_concurrency: int = 16


_FIELDS = ("provider", "base_url", "model", "api_key_env", "timeout_secs", "max_retries", "max_concurrency")
_SECRET_HINT = "the key never sits in YAML: put it in an environment variable and name it in `api_key_env`"


def parse_llm_config(raw: object, path: Path | str | None = None) -> LLMConfig:
    """Validate the `llm:` mapping of kernel.yaml at `path`; a ConfigError names the field."""
    section = _check_mapping(raw, path)
    return LLMConfig(
        provider=_provider_kind(section, path),
        base_url=_base_url(section, path),
        model=_required_text(section, "model", path),
        api_key_env=_api_key_env(section, path),
        timeout_secs=_number(section, "timeout_secs", 60.0, path),
        max_retries=_integer(section, "max_retries", 3, 0, path),
        max_concurrency=_integer(section, "max_concurrency", 16, 1, path),
    )


def _fail(path: Path | str | None, field: str, reason: str) -> ConfigError:
    return ConfigError(path, f"llm.{field}: {reason}" if field else f"llm: {reason}")


def _check_mapping(raw: object, path: Path | str | None) -> Mapping[str, object]:
    if not isinstance(raw, Mapping):
        raise _fail(path, "", f"expected a mapping, got {type(raw).__name__}")
    for key in raw:
        if key in ("api_key", "key", "token"):
            raise _fail(path, str(key), _SECRET_HINT)
        if key not in _FIELDS:
            raise _fail(path, str(key), f"unknown field (known: {', '.join(_FIELDS)})")
    return raw


def _provider_kind(section: Mapping[str, object], path: Path | str | None) -> str:
    kind = section.get("provider", "openai_compat")
    if kind not in _BUILDERS:
        raise _fail(path, "provider", f"unknown provider {kind!r} (known: {', '.join(_BUILDERS)})")
    return str(kind)


def _required_text(section: Mapping[str, object], field: str, path: Path | str | None) -> str:
    value = section.get(field)
    if value is None:
        raise _fail(path, field, "required")
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, field, f"expected a non-empty string, got {value!r}")
    return value.strip()


def _base_url(section: Mapping[str, object], path: Path | str | None) -> str:
    url = _required_text(section, "base_url", path)
    if not url.startswith(("http://", "https://")):
        raise _fail(path, "base_url", f"expected an http:// or https:// URL, got {url!r}")
    return url.rstrip("/")


def _api_key_env(section: Mapping[str, object], path: Path | str | None) -> str | None:
    value = section.get("api_key_env")
    if value is None:
        return None
    # the value is never echoed: someone may have pasted the key itself here
    if not isinstance(value, str) or not _ENV_NAME.match(value):
        raise _fail(path, "api_key_env", "expected the NAME of an environment variable (letters, digits, _)")
    return value


def _number(section: Mapping[str, object], field: str, default: float, path: Path | str | None) -> float:
    value = section.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise _fail(path, field, f"expected a number > 0, got {value!r}")
    return float(value)


def _integer(
    section: Mapping[str, object], field: str, default: int, minimum: int, path: Path | str | None
) -> int:
    value = section.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(path, field, f"expected an integer >= {minimum}, got {value!r}")
    return value


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
    """The kernel's provider: the configured backend behind the kernel-wide concurrency limit."""
    from agentkernel.llm.limited import LimitedProvider

    inner = _BUILDERS[config.provider](config, _api_key(config, environ))
    return LimitedProvider(inner, config.max_concurrency)


__all__ = ["LLMConfig", "build_provider", "parse_llm_config", "read_api_key"]
