"""Shared fixtures: a kernel on a temporary config, a factory for script tools, the scripted LLM server.

And what every test folder may import from here: `REPO`, `write_kernel_yaml`, `wait_until`,
`ctrl_c_default`.
"""

from __future__ import annotations

import signal
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from tests.fakes import FakeLLMServer

REPO = Path(__file__).resolve().parent.parent

# pg_cluster, pg_url: a throw-away PostgreSQL; temporal_address: a throw-away Temporal (S27.2)
pytest_plugins = ("tests.pg", "tests.temporal")

ToolFactory = Callable[..., Path]


# A test project leaves the package's built-ins out (`scripts.builtins: false`): what it lists and
# checks is its own, whatever built-ins ship. Tests of built-ins turn them on (`builtins: true`).
SCRIPT_FOLDERS = {"tools": ["config/scripts/tools"], "hooks": ["config/scripts/hooks"], "builtins": False}
BUILTINS_ON = "scripts:\n  builtins: true\n"  # `extra` for a test of the package's built-ins


def write_kernel_yaml(root: Path, extra: str = "") -> Path:
    """config/kernel.yaml scanning the usual script folders, no built-ins, plus `extra` (YAML text).

    A `scripts:` mapping in `extra` is merged into the folders' one, since a
    key given twice is a load error. The package's built-in tools and hooks
    are off (`scripts.builtins: false`), so a test sees the project it made
    and nothing else, however many built-ins ship; a test of the built-ins
    turns them on with `BUILTINS_ON` (or its own `scripts: {builtins: true}`).
    """
    config = root / "config" / "kernel.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    more = yaml.safe_load(extra) if extra.strip() else None
    if isinstance(more, dict) and "scripts" in more:
        more["scripts"] = {**SCRIPT_FOLDERS, **(more["scripts"] or {})}
        text = yaml.safe_dump(more, sort_keys=False, allow_unicode=True)
    else:
        # three lines, as before built-ins existed: tests name the lines of `extra` by number
        text = (
            "scripts: {tools: [config/scripts/tools],\n"
            "  hooks: [config/scripts/hooks],\n"
            "  builtins: false}\n" + extra
        )
    config.write_text(text, encoding="utf-8")
    (root / "config" / "scripts" / "tools").mkdir(parents=True, exist_ok=True)
    (root / "config" / "scripts" / "hooks").mkdir(parents=True, exist_ok=True)
    return config


def ctrl_c_default() -> None:
    """`preexec_fn` of a child a test sends SIGINT (Ctrl-C): SIGINT's default action in that child.

    A suite started with SIGINT ignored (a background job of a non-interactive
    shell, nohup in some shells) hands SIG_IGN on to every child, and Python
    keeps an inherited SIG_IGN, so the child would never see the test's Ctrl-C.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def switched_on(kernel_yaml: str, section: str, field: str) -> str:
    """`kernel_yaml` with `section.field: true` added, unless it sets that field itself.

    `shell.enabled` and `http.allow_private` are off by default (issue 8 §4);
    tests of what they open turn them on this way, visibly.
    """
    data = yaml.safe_load(kernel_yaml) or {}
    data.setdefault(section, {}).setdefault(field, True)
    return yaml.safe_dump(data, sort_keys=False)


def wait_until(check: Callable[[], bool], what: str) -> None:
    """Wait for a condition another thread brings about (bounded; the test never measures time)."""
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder with config/kernel.yaml and empty script folders."""
    write_kernel_yaml(tmp_path)
    return tmp_path


@pytest.fixture
def tools_dir(project: Path) -> Path:
    return project / "config" / "scripts" / "tools"


@pytest.fixture
def kernel(project: Path) -> Iterator[Kernel]:
    with Kernel(load_kernel_config(project / "config" / "kernel.yaml")) as built:
        yield built


@pytest.fixture
def make_tool(tools_dir: Path) -> ToolFactory:
    """Write `<name>.yaml` + its script into the tools folder; returns the YAML path."""

    def make(name: str, source: str, *, ext: str = ".js", yaml_extra: str = "") -> Path:
        script = tools_dir / f"{name}{ext}"
        script.write_text(textwrap.dedent(source), encoding="utf-8")
        spec = tools_dir / f"{name}.yaml"
        spec.write_text(
            f"kind: script_tool\nname: {name}\ndescription: test tool {name}\n"
            f"script: {script.name}\n" + textwrap.dedent(yaml_extra),
            encoding="utf-8",
        )
        return spec

    return make


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    """The scripted OpenAI-compatible server on 127.0.0.1, one per test."""
    with FakeLLMServer() as server:
        yield server
