"""The codebase stays clean: ruff, mypy --strict, and an intentional public surface.

These run inside the README's test command, so CI (which runs exactly that
command) checks them too.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import agentkernel
from tests.conftest import REPO

BIN = Path(sys.executable).parent


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def test_ruff_lint_is_clean() -> None:
    done = run_tool("ruff", "check", "src", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_clean() -> None:
    done = run_tool("ruff", "format", "--check", "src", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_is_clean() -> None:
    """src, tests and benchmarks (pyproject.toml's `files`): a test's wrong type is a test's bug too."""
    done = run_tool("mypy")
    assert done.returncode == 0, done.stdout + done.stderr


def test_public_surface_is_what_we_mean() -> None:
    assert sorted(agentkernel.__all__) == [
        "AgentKernelError",
        "Caller",
        "ChatSession",
        "ConfigError",
        "HelperError",
        "HelperTable",  # the seam for a helper: HelperTable.register(name, function(call, *args))
        "HookRecord",
        "HookRun",
        "HookSpec",
        "Kernel",
        "KernelConfig",
        "KernelLimits",
        "LoadProblem",
        "Process",
        "Provider",  # the seam for an LLM backend: Kernel(config, provider=...)
        "ScriptCall",
        "ScriptError",
        "ScriptLimitError",
        "ScriptSyntaxError",
        "Services",  # the seam for a service: Kernel(config, extensions={name: service})
        "TemplateSpec",
        "ToolResult",
        "ToolSpec",
        "__version__",
        "default_helper_table",
        "load_kernel_config",
    ]
    for name in agentkernel.__all__:
        assert hasattr(agentkernel, name), name


def test_lazy_packages_export_what_they_list() -> None:
    """The PEP 562 roots: `__all__` (literal, for type checkers) and the lazy table agree."""
    import agentkernel.llm
    import agentkernel.rhai

    for package in (agentkernel, agentkernel.llm, agentkernel.rhai):
        exports = package._EXPORTS
        assert set(package.__all__) - {"__version__"} == set(exports) - {"__version__"}, package.__name__
        for name, module in exports.items():
            assert getattr(package, name) is getattr(importlib.import_module(module), name)


def test_the_wheel_builds_without_a_deprecation_warning(tmp_path: Path) -> None:
    """`pip wheel .` as a packager runs it (an isolated build); setuptools' warnings say what will break.

    Built from a copy of the tree, so the build/ folder it leaves is the test's own.
    """
    source = tmp_path / "source"
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "deprecat" not in output.lower(), output
    (wheel,) = (tmp_path / "dist").glob("agentkernel-*.whl")
    with zipfile.ZipFile(wheel) as built:
        metadata = next(n for n in built.namelist() if n.endswith(".dist-info/METADATA"))
        assert "License-Expression: MIT" in built.read(metadata).decode().splitlines()
