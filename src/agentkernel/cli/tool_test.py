"""`agentkernel tool|hook test [NAME…] [--junit FILE]`: the `tests:` cases of tools or hooks, as CI runs them.

Prints a line per case — `PASS  tool: case`, or `FAIL  tool: case (file:line)
— why` with what was expected and what came — then a summary, and exits 1
when any case failed or any `tests:` block has problems (printed as `ERROR
file:line: …`), 0 otherwise; a NAME that is no tool (hook) of the project is
a usage error (exit 2). Those without `tests:` are named in the summary, not
failed. The cases run in a throw-away data folder (testing/runner.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agentkernel.cli.common import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, load_project_config

if TYPE_CHECKING:
    from agentkernel.config import HookSpec, ToolSpec
    from agentkernel.errors import LoadProblem
    from agentkernel.kernel import Kernel
    from agentkernel.testing.cases import ToolCase
    from agentkernel.testing.hook_cases import HookCase
    from agentkernel.testing.runner import CaseOutcome

EXIT_FAILED = 1
SpecT = TypeVar("SpecT")


class UnknownTool(Exception):
    """A NAME on the command line that is no tool (or hook) of the project."""


def chosen_tools(kernel: Kernel, names: list[str]) -> list[ToolSpec]:
    """The tools NAMEs name (each once, in order), or every tool; UnknownTool saying why."""
    return _chosen(kernel.list_tools, kernel.tool, names)


def chosen_hooks(kernel: Kernel, names: list[str]) -> list[HookSpec]:
    """The hooks NAMEs name (each once, in order), or every hook; UnknownTool saying why."""
    return _chosen(kernel.list_hooks, kernel.hook, names)


def _chosen(every: Callable[[], list[SpecT]], one: Callable[[str], SpecT], names: list[str]) -> list[SpecT]:
    from agentkernel.errors import ConfigError

    if not names:
        return every()
    chosen: list[SpecT] = []
    for name in dict.fromkeys(names):
        try:
            chosen.append(one(name))
        except ConfigError as exc:
            raise UnknownTool(str(exc)) from exc
    return chosen


def outcome_line(outcome: CaseOutcome) -> str:
    case = outcome.case
    if outcome.passed:
        return f"PASS  {case.subject}: {case.name}"
    return f"FAIL  {case.subject}: {case.name} ({_where(outcome)}) — {outcome.why}"


def _where(outcome: CaseOutcome) -> str:
    from agentkernel.cli.problems import shown_path

    line = f":{outcome.case.line}" if outcome.case.line is not None else ""
    return f"{shown_path(outcome.case.yaml_path)}{line}"


def _summary(
    outcomes: list[CaseOutcome], problems: list[LoadProblem], untested: list[str], secs: float, noun: str
) -> str:
    failed = sum(not o.passed for o in outcomes)
    owners = len({o.case.subject for o in outcomes})
    parts = [f"{len(outcomes) - failed} passed", f"{failed} failed"]
    if problems:
        parts.append(f"{len(problems)} tests: block problem{'s' if len(problems) != 1 else ''}")
    text = ", ".join(parts) + f" ({len(outcomes)} case{'s' if len(outcomes) != 1 else ''} of {owners} "
    text += f"{noun}{'s' if owners != 1 else ''} in {secs:.2f} s)"
    if untested:
        text += "; without tests: " + ", ".join(untested)
    return text


def _collect(kernel: Kernel, kind: str, names: list[str]) -> tuple[list[Any], list[LoadProblem], list[str]]:
    """The cases to run, the problems of blocks that cannot run, the tools (hooks) without a block."""
    from agentkernel.testing.cases import read_cases
    from agentkernel.testing.hook_cases import read_hook_cases

    cases: list[ToolCase | HookCase] = []
    problems: list[LoadProblem] = []
    untested: list[str] = []
    specs: list[ToolSpec] | list[HookSpec]
    specs = chosen_hooks(kernel, names) if kind == "hook" else chosen_tools(kernel, names)
    for spec in specs:
        block = read_hook_cases(spec) if kind == "hook" else read_cases(spec)  # type: ignore[arg-type]
        problems += block.problems
        if block.problems:
            continue
        cases += block.cases
        if not block.cases:
            untested.append(spec.name)
    return cases, problems, untested


def run(options: argparse.Namespace) -> int:
    from agentkernel.cli.problems import problem_text
    from agentkernel.testing.runner import ToolTestRun

    started = time.perf_counter()
    config = load_project_config("agentkernel", options.config)  # exits 1 without a project
    outcomes: list[CaseOutcome] = []
    kind = "hook" if options.command == "hook" else "tool"
    with ToolTestRun(config) as run:
        try:
            cases, problems, untested = _collect(run.kernel, kind, options.names)
        except UnknownTool as exc:
            print(f"agentkernel: {exc}", file=sys.stderr)
            return EXIT_USAGE
        broken = len(run.kernel.problems(templates=False))
        for problem in problems:
            print(f"ERROR {problem_text(problem)}", flush=True)
        if any(case.llm for case in cases):
            run.use_llm()
        for case in cases:
            outcomes.append(run.case(case))
            print(outcome_line(outcomes[-1]), flush=True)
    print(_summary(outcomes, problems, untested, time.perf_counter() - started, kind))
    if broken and not options.names:
        print(f"note: {broken} tool or hook file(s) did not load; see `agentkernel check`", file=sys.stderr)
    if options.junit is not None:
        from agentkernel.testing.junit import write_junit

        try:
            write_junit(options.junit, outcomes, problems)
        except OSError as exc:
            print(f"agentkernel: cannot write {options.junit}: {exc}", file=sys.stderr)
            return EXIT_NOT_FOUND
    failed = problems or any(not o.passed for o in outcomes)
    return EXIT_FAILED if failed else EXIT_OK


__all__ = ["EXIT_FAILED", "UnknownTool", "chosen_hooks", "chosen_tools", "outcome_line", "run"]
