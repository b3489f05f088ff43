"""pytest fixtures for agentkernel projects, loaded by pytest through the package's `pytest11` entry point.

    def test_currency(agentkernel_kernel):
        result = agentkernel_kernel.run_tool("currency", {"amount": 1, "from": "USD", "to": "RUB"})
        assert result.success

    def test_summary(agentkernel_factory, scripted_llm):
        scripted_llm.respond_with(RuleBook([Rule.text("short")]))
        kernel = agentkernel_factory(llm=scripted_llm)
        ...

`agentkernel_project` is the project folder the kernels are built on: by
default the one found from the working directory as the command line finds
it (`config/kernel.yaml` here or above); override the fixture in your
conftest.py to choose another. Every kernel keeps its data (stores, scratch
folders, transcript) under the test's `tmp_path`, and is closed after it.
Only pytest is imported here; the kernel is imported when a fixture is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from agentkernel.kernel import Kernel
    from agentkernel.testing.openai_server import FakeLLMServer

KernelFactory = Callable[..., "Kernel"]


@pytest.fixture
def scripted_llm() -> Iterator[FakeLLMServer]:
    """A started scripted OpenAI-compatible server on 127.0.0.1, stopped after the test."""
    from agentkernel.testing.openai_server import FakeLLMServer

    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def agentkernel_project() -> Path:
    """The project: its kernel.yaml as the command line finds it (override with a folder or a file)."""
    from agentkernel.config import find_kernel_config

    return find_kernel_config().resolve()


@pytest.fixture
def agentkernel_factory(agentkernel_project: Path, tmp_path: Path) -> Iterator[KernelFactory]:
    """`make(project=None, *, llm=None)`: a kernel on `project` (default `agentkernel_project`),
    data under tmp_path; `llm` a scripted server (or a base URL) its `llm:` talks to."""
    from agentkernel.testing.project import kernel_for_tests

    built: list[Kernel] = []

    def make(project: Path | str | None = None, *, llm: FakeLLMServer | str | None = None) -> Kernel:
        data = tmp_path / f"agentkernel-data-{len(built)}"
        kernel = kernel_for_tests(project or agentkernel_project, data, llm=llm)
        built.append(kernel)
        return kernel

    yield make
    for kernel in reversed(built):
        kernel.close()


@pytest.fixture
def agentkernel_kernel(agentkernel_factory: KernelFactory) -> Kernel:
    """A kernel on `agentkernel_project` with its data under tmp_path, its `llm:` as the project sets it."""
    return agentkernel_factory()
