"""`agentkernel dev llm` (issue 15 §2): a real subprocess serving real HTTP until SIGINT or SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import cli
from tests.conftest import ctrl_c_default

BIN = Path(sys.executable).parent


@contextmanager
def dev_llm(*args: str, cwd: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The server started; its process and the base URL it printed. Stopped (SIGTERM) if still running."""
    environment = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
    process = subprocess.Popen(
        [str(BIN / "agentkernel"), "dev", "llm", *args],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_default,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("scripted LLM at http://127.0.0.1:"), first + (
            process.stderr.read() if process.stderr else ""
        )
        yield process, first.split()[3]
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def chat(url: str, text: str) -> httpx.Response:
    body = {"model": "any", "messages": [{"role": "user", "content": text}]}
    return httpx.post(f"{url}/chat/completions", json=body, timeout=10)


def test_without_rules_it_echoes_and_ctrl_c_stops_it(tmp_path: Path) -> None:
    with dev_llm(cwd=tmp_path) as (process, url):
        answer = chat(url, "привет")
        assert answer.json()["choices"][0]["message"]["content"] == "привет"
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert out == "stopped after 1 request(s)\n"


def test_rules_from_a_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "- {error: 503, times: 1}\n- {contains: json, json: {ok: true}}\n- {reply: plain}\n", encoding="utf-8"
    )
    with dev_llm("--rules", str(rules), cwd=tmp_path) as (process, url):
        assert chat(url, "json").status_code == 503
        assert json.loads(chat(url, "json please").json()["choices"][0]["message"]["content"]) == {"ok": True}
        assert chat(url, "hi").json()["choices"][0]["message"]["content"] == "plain"
    assert process.returncode == 0


def test_a_chosen_port(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port free a moment ago; the server binds it again
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with dev_llm("--port", str(port), cwd=tmp_path) as (_, url):
        assert url == f"http://127.0.0.1:{port}/v1"
        done = cli("agentkernel", "dev", "llm", "--port", str(port), cwd=tmp_path)  # the port is taken
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"agentkernel: cannot listen on 127.0.0.1:{port}" in done.stderr


@pytest.mark.parametrize("port", ["65536", "-1"])
def test_a_port_out_of_range_is_a_usage_error(tmp_path: Path, port: str) -> None:
    done = cli("agentkernel", "dev", "llm", "--port", port, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert f"argument --port: expected a port 0-65535 (0: a free one), got {port!r}" in done.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- {reply: a, json: 1}\n", "rules.yaml:1: rules[0]: expected exactly one answer"),
        ("rules: []\n", "rules.yaml:1: rules: expected a non-empty list of rules"),
    ],
)
def test_bad_rules_exit_2(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "rules.yaml").write_text(text, encoding="utf-8")
    done = cli("agentkernel", "dev", "llm", "--rules", "rules.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
