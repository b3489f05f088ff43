"""Does the configured LLM answer (issue 26 §6): `GET /v1/llm/status`, checked when stale, one at a time.

The LLM server is the scripted one on 127.0.0.1, or a port where nothing
listens, or a socket that takes the connection and never answers.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.server import token_hash
from agentkernel.llm.config import LLMConfig
from agentkernel.server.llm_status import LLMWatch
from tests.conftest import wait_until
from tests.fakes import FakeLLMServer
from tests.fakes.openai_server import MODELS_PATH
from tests.server.conftest import LiveServer, make_project


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def project_with_llm_at(root: Path, url: str) -> Path:
    return make_project(root, None, extra=f"llm:\n  base_url: {url}\n  model: fake\n  max_retries: 0\n")


def test_an_llm_that_does_not_answer_is_named_with_how_to_fix_it_and_checked_again(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    with (
        LiveServer(Kernel(load_kernel_config(project_with_llm_at(tmp_path, url)))) as live,
        live.client() as client,
    ):
        down = client.get("/v1/llm/status").json()
        assert down["ok"] is False and down["configured"] is True
        assert (down["url"], down["model"]) == (url, "fake")
        assert down["problem"].startswith(f"nothing answers at {url}")
        assert "`agentkernel dev llm`" in down["fix"] and "--llm-url" in down["fix"]
        with FakeLLMServer(port=port, models=("fake",)):  # started now, where kernel.yaml points
            wait_until(lambda: client.get("/v1/llm/status").json()["ok"], "the status to see the LLM")
            up = client.get("/v1/llm/status").json()
        assert up["problem"] is None and up["fix"] is None


def test_no_llm_configured_says_how_to_add_one(tmp_path: Path) -> None:
    with LiveServer(Kernel(load_kernel_config(make_project(tmp_path, None)))) as live, live.client() as http:
        status = http.get("/v1/llm/status").json()
    assert status["ok"] is False and status["configured"] is False and status["url"] is None
    assert "`llm:`" in status["problem"]
    assert "`agentkernel dev llm`" in status["fix"] and "--llm-url" in status["fix"]


def test_the_status_needs_a_token_when_tokens_are_configured(tmp_path: Path) -> None:
    kernel_yaml = make_project(
        tmp_path, None, extra=f'server:\n  tokens:\n    "{token_hash("alice-token")}": alice\n'
    )
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live, live.client() as client:
        assert client.get("/v1/llm/status").status_code == 401
        with_token = client.get("/v1/llm/status", headers={"Authorization": "Bearer alice-token"})
        assert with_token.status_code == 200 and with_token.json()["configured"] is False


def test_many_asking_at_once_make_one_check_and_a_stale_answer_is_checked_again() -> None:
    """Pages polling cannot make the server hammer the LLM: one check in flight, then fresh for a while."""
    now = [0.0]
    with FakeLLMServer(models=("m",)) as server:
        watch = LLMWatch(LLMConfig(base_url=server.base_url, model="m"), fresh_secs=10, clock=lambda: now[0])

        async def ask(times: int) -> list[bool]:
            return [s.ok for s in await asyncio.gather(*(watch.status() for _ in range(times)))]

        assert asyncio.run(ask(50)) == [True] * 50
        assert [(r.method, r.path) for r in server.requests] == [("GET", MODELS_PATH)]
        now[0] = 9.0
        asyncio.run(ask(5))
        assert len(server.requests) == 1  # still fresh
        now[0] = 10.5
        asyncio.run(ask(5))
        assert len(server.requests) == 2


def test_a_server_that_never_answers_is_given_up_on_within_the_check_s_timeout() -> None:
    """A socket that takes the connection and never answers: the check ends at its own timeout, not llm's."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepted by the kernel's backlog, never read
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        config = LLMConfig(base_url=url, model="m", timeout_secs=600)
        status = asyncio.run(LLMWatch(config, timeout_secs=0.2).status())
    assert status.ok is False and status.problem == f"{url} did not answer within 0.2 s"
    assert status.warning() is not None and "--llm-url" in status.warning()  # type: ignore[operator]


def test_a_model_the_server_does_not_list_is_said_though_the_llm_answers() -> None:
    with FakeLLMServer(models=("llama3.1:latest",)) as server:
        status = asyncio.run(LLMWatch(LLMConfig(base_url=server.base_url, model="mistral")).status())
    assert status.ok is True and status.problem is not None and "ollama pull mistral" in status.problem
