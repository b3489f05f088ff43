"""A look at the LLM server before a chat starts: is it there, is this its API root, does it take our key.

`GET {base_url}/models` is the cheapest request that every OpenAI-compatible
server answers (OpenAI, vLLM, llama.cpp's server, Ollama), and it needs no
model loaded, so the terminal chat asks it before the first message. The
mistakes of a first hour then surface at once, each with what to do about
it: the server is not started, the URL lacks `/v1`, the API key is missing
or wrong. A failure raises `LLMCheckFailed` (`problem`: what happened,
`hint`: what to try); success gives the models the server lists, so a
caller can also warn about a model the server does not have.

The check is one request with a short timeout and no retries: it is there
to explain, not to wait for a server.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from agentkernel.errors import AgentKernelError
from agentkernel.llm.config import LLMConfig, read_api_key
from agentkernel.llm.openai_compat import USER_AGENT, describe_body, shown_url

CHECK_TIMEOUT_SECS = 10.0
_SHOWN_MODELS = 8
_NOT_AN_API = "is this an OpenAI-compatible API? does the URL end in /v1?"


class LLMCheckFailed(AgentKernelError):
    """The LLM server cannot be used as configured; `hint` says what to try."""

    def __init__(self, problem: str, hint: str) -> None:
        self.problem = problem
        self.hint = hint
        super().__init__(f"{problem}; {hint}")


@dataclass(frozen=True)
class LLMServer:
    """A server that answered the check: its address (fit to print) and the models it lists."""

    url: str
    models: tuple[str, ...]

    def missing_model(self, model: str) -> str | None:
        """Why `model` looks unavailable here, or None; a server that lists no models tells nothing.

        Ollama lists `llama3.1:latest` for what a request may call `llama3.1`.
        Only a warning: llama.cpp's server, for one, answers with its one
        model whatever name a request gives.
        """
        if not self.models or model in self.models or f"{model}:latest" in self.models:
            return None
        listed = ", ".join(self.models[:_SHOWN_MODELS]) + (", …" if len(self.models) > _SHOWN_MODELS else "")
        return (
            f"model {model!r} is not among the models {self.url} lists ({listed}); "
            f"with Ollama, `ollama pull {model}` fetches it; or set llm.model to a listed one"
        )


async def check_llm(config: LLMConfig, environ: Mapping[str, str] = os.environ) -> LLMServer:
    """Ask `GET {base_url}/models` with the configured key; `LLMCheckFailed` says what went wrong."""
    url = shown_url(config.base_url)
    key = read_api_key(config, environ)
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    timeout = min(config.timeout_secs, CHECK_TIMEOUT_SECS)
    try:
        async with httpx.AsyncClient(headers=headers, timeout=timeout) as client:
            response = await client.get(f"{config.base_url}/models")
    except httpx.TimeoutException as exc:
        raise LLMCheckFailed(
            f"{url} did not answer within {timeout:g} s",
            "is the LLM server up and not overloaded? (one still loading a model may need a moment)",
        ) from exc
    except httpx.TransportError as exc:
        raise LLMCheckFailed(
            f"nothing answers at {url} ({type(exc).__name__}: {exc or 'no detail'})",
            f"is Ollama (or your LLM server) running at {url}?",
        ) from exc
    if not response.is_success:
        said = describe_body(response.text)
        if key:
            said = said.replace(key, "***")
        problem = f"GET {url}/models answered HTTP {response.status_code}: {said}"
        raise LLMCheckFailed(problem, _status_hint(response.status_code, url, config, key))
    return LLMServer(url, _model_ids(response, url))


def _status_hint(status: int, url: str, config: LLMConfig, key: str | None) -> str:
    if status == 404:
        if url.rstrip("/").endswith("/v1"):
            return "there is no OpenAI-compatible API at this URL: check the host, the port and the path"
        return f"does the URL end in /v1? OpenAI-compatible servers answer under it: {url.rstrip('/')}/v1"
    if status in (401, 403):
        return _key_hint(config.api_key_env, key)
    if status >= 500:
        return "the server is there but failing; its log says why"
    return _NOT_AN_API


def _key_hint(env_name: str | None, key: str | None) -> str:
    """Where the key comes from (llm.api_key_env), and which step of getting it there went wrong."""
    if env_name is None:
        return (
            "this server wants an API key: put it in an environment variable "
            "and name that variable in llm.api_key_env of kernel.yaml"
        )
    if key is None:
        return f"the environment variable {env_name} (llm.api_key_env) is not set: export {env_name}=<key>"
    return f"the server refused the key in {env_name} (llm.api_key_env): check its value"


def _model_ids(response: httpx.Response, url: str) -> tuple[str, ...]:
    """The `id`s of `{"data": [{"id": …}, …]}`; anything else is not an OpenAI-compatible answer."""
    try:
        body = response.json()
    except ValueError as exc:
        raise LLMCheckFailed(
            f"GET {url}/models did not answer JSON: {describe_body(response.text)}", _NOT_AN_API
        ) from exc
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise LLMCheckFailed(f"GET {url}/models answered without a model list (`data`)", _NOT_AN_API)
    return tuple(m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str))


__all__ = ["CHECK_TIMEOUT_SECS", "LLMCheckFailed", "LLMServer", "check_llm"]
