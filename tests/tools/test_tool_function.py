"""A tool whose script defines no `run` does not load (S3.1): never offered, never listed, its line named.

`agentkernel check` reports it (tests/cli/test_check.py); here the kernel
itself refuses it when the tool is looked up, listed or called, in both
engines, so a server or a chat never offers the LLM a tool that cannot run.
"""

from __future__ import annotations

import re

import pytest

from agentkernel import Kernel
from agentkernel.errors import ConfigError
from tests.conftest import ToolFactory

NO_RUN = {".js": "function main(args) { return 'ok'; }\n", ".rhai": "fn main(args) { 1 }\n"}


@pytest.mark.parametrize("ext", sorted(NO_RUN))
def test_a_tool_without_run_is_not_loaded(kernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    make_tool("fine", "function run(args) { return 'ok'; }")
    make_tool("norun", NO_RUN[ext], ext=ext)
    reason = f"norun.yaml:4 failed to load: script: norun{ext} defines no run() function"
    with pytest.raises(ConfigError, match=rf"tool 'norun' is not available: .*{re.escape(reason)}"):
        kernel.tool("norun")
    assert [spec.name for spec in kernel.list_tools()] == ["fine"]
    (problem,) = kernel.problems(templates=False)
    assert (problem.path.name, problem.line) == ("norun.yaml", 4)
    assert "did you mean run?" in problem.reason


@pytest.mark.parametrize("ext", sorted(NO_RUN))
def test_the_tool_loads_once_run_is_defined(kernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    path = make_tool("later", NO_RUN[ext], ext=ext)
    with pytest.raises(ConfigError):
        kernel.tool("later")
    fixed = NO_RUN[ext].replace("main", "run")
    script = path.with_suffix(ext)
    script.write_text(fixed + "// edited\n", encoding="utf-8")
    assert kernel.run_tool("later", {}).success
