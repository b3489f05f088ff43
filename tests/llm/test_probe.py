"""The start-up check of an LLM server (`llm/probe.py`): each first-hour mistake gets its hint (issue 8.7)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from agentkernel.llm.config import LLMConfig
from agentkernel.llm.probe import LLMCheckFailed, LLMServer, check_llm
from tests.fakes import FakeLLMServer
from tests.fakes.openai_server import MODELS_PATH
from tests.helpers.http_server import LocalHTTPServer


def check(
    url: str, *, key_env: str | None = None, env: dict[str, str] | None = None, timeout: float = 5
) -> LLMServer:
    config = LLMConfig(base_url=url, model="m", api_key_env=key_env, timeout_secs=timeout)
    return asyncio.run(check_llm(config, env or {}))


def failure(url: str, **options: object) -> LLMCheckFailed:
    with pytest.raises(LLMCheckFailed) as caught:
        check(url, **options)  # type: ignore[arg-type]
    return caught.value


def test_a_server_that_answers_lists_its_models() -> None:
    with FakeLLMServer(models=("llama3.1:latest", "qwen2.5:7b"), api_key="sk-1") as server:
        found = check(server.base_url, key_env="THE_KEY", env={"THE_KEY": "sk-1"})
        (request,) = server.requests
    assert found == LLMServer(server.base_url, ("llama3.1:latest", "qwen2.5:7b"))
    assert (request.method, request.path, request.headers["authorization"]) == (
        "GET",
        MODELS_PATH,
        "Bearer sk-1",
    )


def test_missing_model() -> None:
    server = LLMServer("http://h/v1", ("llama3.1:latest", "qwen2.5:7b"))
    assert server.missing_model("llama3.1") is None  # Ollama's implicit tag
    assert server.missing_model("qwen2.5:7b") is None
    said = server.missing_model("mistral")
    assert said is not None and "'mistral' is not among the models http://h/v1 lists" in said
    assert "ollama pull mistral" in said
    assert LLMServer("http://h/v1", ()).missing_model("anything") is None  # an empty list tells nothing


def test_nothing_listening() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    problem = failure(url)
    assert problem.problem.startswith(f"nothing answers at {url} (ConnectError")
    assert problem.hint == f"is Ollama (or your LLM server) running at {url}?"


def test_404_with_and_without_v1() -> None:
    with FakeLLMServer() as server:
        root = server.base_url.removesuffix("/v1")
        bare = failure(root)
        assert "HTTP 404" in bare.problem
        assert bare.hint.startswith("does the URL end in /v1?") and f"{root}/v1" in bare.hint
        wrong = failure(root + "/api/v1")
        assert wrong.hint.startswith("there is no OpenAI-compatible API at this URL")


@pytest.mark.parametrize(
    ("key_env", "env", "hint"),
    [
        (None, {}, "this server wants an API key: put it in an environment variable and name that variable"),
        ("K", {}, "the environment variable K (llm.api_key_env) is not set: export K=<key>"),
        ("K", {"K": "sk-bad"}, "the server refused the key in K (llm.api_key_env): check its value"),
    ],
)
def test_401_says_where_the_key_comes_from(key_env: str | None, env: dict[str, str], hint: str) -> None:
    with FakeLLMServer(api_key="sk-good") as server:
        problem = failure(server.base_url, key_env=key_env, env=env)
    assert "HTTP 401" in problem.problem and problem.hint.startswith(hint)
    assert "sk-bad" not in str(problem)  # the server echoed the key; the check does not


def test_a_failing_server() -> None:
    with FakeLLMServer(max_requests=0) as server:  # past the limit, every request is a 500
        problem = failure(server.base_url)
    assert "HTTP 500" in problem.problem and "its log says why" in problem.hint


@pytest.mark.parametrize(
    ("path", "problem"),
    [("/echo", "answered without a model list"), ("/bad-utf8", "did not answer JSON")],
)
def test_something_that_is_not_an_openai_api(path: str, problem: str) -> None:
    with LocalHTTPServer() as web:
        found = failure(web.base + path)
    assert (
        problem in found.problem
        and found.hint == "is this an OpenAI-compatible API? does the URL end in /v1?"
    )


def test_a_server_that_does_not_answer_in_time() -> None:
    with LocalHTTPServer() as web:
        found = failure(web.base + "/slow", timeout=0.2)
    assert found.problem == f"{web.base}/slow did not answer within 0.2 s"
    assert "is the LLM server up" in found.hint
