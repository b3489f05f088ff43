"""`agentkernel serve` and `agentkernel token new` as people run them (issue 11 §1, §3)."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

from agentkernel.config import load_kernel_config
from tests.conftest import REPO, ctrl_c_default
from tests.server.conftest import make_project

BIN = Path(sys.executable).parent


def agentkernel(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
    return subprocess.Popen(
        [str(BIN / "agentkernel"), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_default,  # a test sends it Ctrl-C
    )


@contextmanager
def serving(cwd: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`agentkernel serve --port 0` in `cwd`: the process and the URL it printed; killed if still running."""
    server = agentkernel("serve", "--port", "0", cwd=cwd)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("agentkernel: serving on http://127.0.0.1:"), line
        assert line.endswith(" (Ctrl-C stops)\n"), line
        yield server, line.split()[3]
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert "Traceback" not in (server.stderr.read() if server.stderr else "")


def test_serve_prints_its_url_answers_and_exits_0_on_sigterm(tmp_path: Path) -> None:
    make_project(tmp_path, None)
    with serving(tmp_path) as (server, url):
        assert httpx.get(f"{url}/healthz", timeout=60).status_code == 200
        ran = httpx.post(f"{url}/v1/tools/upper/run", json={"args": {"text": "cli"}}, timeout=60)
        assert ran.json()["content"] == "CLI"
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=120) == 0


def test_readme_main_job_serves_the_shipped_project(tmp_path: Path) -> None:
    """The README's first command starts the server on the shipped project and prints what the README says."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first = readme.split("```sh\n", 1)[1].splitlines()[0]
    assert first.endswith(" && agentkernel serve"), first
    assert "`agentkernel: serving on\nhttp://127.0.0.1:8765 (Ctrl-C stops)`" in readme
    shutil.copytree(REPO / "config", tmp_path / "config")
    with serving(tmp_path) as (server, url):  # --port 0: the README's 8765 may be taken here
        assert httpx.get(f"{url}/healthz", timeout=60).status_code == 200
        assert "<html" in httpx.get(f"{url}/", timeout=60).text.lower()
        tools = {t["name"] for t in httpx.get(f"{url}/v1/tools", timeout=60).json()}
        assert {"text_stats", "text_stats_rhai", "currency", "wordcount"} <= tools
        server.send_signal(signal.SIGINT)  # Ctrl-C
        assert server.wait(timeout=120) == 0


def test_serving_beyond_loopback_without_tokens_is_refused(tmp_path: Path) -> None:
    make_project(tmp_path, None)
    server = agentkernel("serve", "--host", "0.0.0.0", "--port", "0", cwd=tmp_path)
    out, err = server.communicate(timeout=120)
    assert server.returncode == 1 and out == ""
    assert "refusing to listen on 0.0.0.0" in err and "server.tokens" in err and "token new" in err


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_out_of_range_is_a_usage_error_naming_it(tmp_path: Path, port: str) -> None:
    """As `dev llm` checks its port: argparse's exit 2 and one line, not a traceback from bind()."""
    make_project(tmp_path, None)
    server = agentkernel("serve", "--port", port, cwd=tmp_path)
    out, err = server.communicate(timeout=120)
    assert (server.returncode, out) == (2, ""), err
    assert err.splitlines()[-1] == (
        f"agentkernel serve: error: argument --port: expected a port 0-65535 (0: a free one), got {port!r}"
    )


def test_token_new_prints_a_token_and_the_line_kernel_yaml_accepts(tmp_path: Path) -> None:
    made = subprocess.run(
        [str(BIN / "agentkernel"), "token", "new", "carol"], capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    lines = made.stdout.splitlines()
    token, pasted = lines[1].strip(), lines[-1]
    assert token not in pasted
    kernel_yaml = make_project(tmp_path, None, "server:\n  tokens:\n" + pasted + "\n")
    settings = load_kernel_config(kernel_yaml).server
    assert settings.user_of(token) == "carol" and settings.user_of(token + "x") is None
    assert token not in kernel_yaml.read_text() and yaml.safe_load(kernel_yaml.read_text())["server"]
    bad = subprocess.run(
        [str(BIN / "agentkernel"), "token", "new", "no spaces"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "not a user id" in bad.stderr


def test_serve_warns_at_start_up_when_the_llm_does_not_answer_and_says_how_to_fix_it(tmp_path: Path) -> None:
    """Issue 26 §6: the check runs in the background (the URL is printed and answers meanwhile)."""
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        llm_url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    make_project(tmp_path, None, extra=f"llm:\n  base_url: {llm_url}\n  model: fake\n")
    with serving(tmp_path) as (server, url):
        assert httpx.get(f"{url}/healthz", timeout=60).status_code == 200
        lines: queue.Queue[str] = queue.Queue()
        stderr = server.stderr
        assert stderr is not None

        def read() -> None:
            for line in stderr:
                lines.put(line)

        threading.Thread(target=read, daemon=True).start()
        warning = lines.get(timeout=60)  # an upper bound on waiting, not a measured time
        assert warning.startswith("WARNING ") and f"Nothing answers at {llm_url}" in warning, warning
        assert "`agentkernel dev llm`" in warning and "--llm-url" in warning, warning
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=120) == 0


def test_serve_names_at_start_up_a_tool_that_did_not_load(tmp_path: Path) -> None:
    """A tool without run() is not served: serve says so on stderr with file and line, and serves the rest."""
    make_project(tmp_path, None)
    tools = tmp_path / "config" / "scripts" / "tools"
    (tools / "broken.js").write_text("function main(args) { return 1; }\n", encoding="utf-8")
    (tools / "broken.yaml").write_text(
        "kind: script_tool\nname: broken\ndescription: d\nscript: broken.js\n", encoding="utf-8"
    )
    with serving(tmp_path) as (server, url):
        assert httpx.get(f"{url}/healthz", timeout=60).status_code == 200
        ran = httpx.post(f"{url}/v1/tools/upper/run", json={"args": {"text": "ok"}}, timeout=60)
        assert ran.json()["content"] == "OK"
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=120) == 0
        stderr = server.stderr.read() if server.stderr else ""
    assert "agentkernel serve: 1 file(s) did not load and are not served" in stderr, stderr
    assert "config/scripts/tools/broken.yaml:4: script: broken.js defines no run() function" in stderr, stderr
