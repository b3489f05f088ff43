"""Every `tests:` block of a project's tools and hooks, checked: what `agentkernel check` adds to its list."""

from __future__ import annotations

from collections.abc import Iterable

from agentkernel.config import HookSpec, ScriptSpec, ToolSpec
from agentkernel.errors import LoadProblem
from agentkernel.testing.cases import read_cases
from agentkernel.testing.hook_cases import read_hook_cases


def tests_problems(specs: Iterable[ScriptSpec]) -> list[LoadProblem]:
    """Each problem of each tool's and hook's `tests:` block, in the order of `specs`."""
    found: list[LoadProblem] = []
    for spec in specs:
        if isinstance(spec, HookSpec):
            found += read_hook_cases(spec).problems
        elif isinstance(spec, ToolSpec):
            found += read_cases(spec).problems
    return found


__all__ = ["tests_problems"]
