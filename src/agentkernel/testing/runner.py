"""Running tool test cases: each through the one dispatch path, in a throw-away data folder.

A run owns a temporary folder and one kernel on the project whose stores all
live in it (testing/project.py), so a run starts empty and leaves nothing
behind; each case calls `Kernel.run_tool` — the path an LLM's call takes:
access check, argument validation, limits, warnings, truncation, history —
as its user, in a session of its own. When a case scripts the LLM (`llm:`),
the run starts the scripted server and points the kernel's `llm:` at it;
when none does, the kernel has no LLM at all, so a test can never reach a
real one. A case passes when every expectation holds and its scripted
replies were all used, no more and no fewer.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agentkernel.short_text import shown_value

if TYPE_CHECKING:
    from agentkernel.config import KernelConfig, ToolSpec
    from agentkernel.kernel import Kernel
    from agentkernel.testing.cases import Expectation, ToolCase
    from agentkernel.testing.openai_server import FakeLLMServer
    from agentkernel.tools.results import ToolResult

SHOWN_CHARS = 160  # how much of a content or error a failure line shows


@dataclass(frozen=True)
class CaseOutcome:
    """One case's verdict: `failures` empty means it passed."""

    case: ToolCase
    failures: tuple[str, ...]
    secs: float
    result: ToolResult | None = None

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def why(self) -> str:
        return "; ".join(self.failures)


def _shown(text: str | None) -> str:
    return "none" if text is None else shown_value(text, SHOWN_CHARS)


def _visual_failures(expect: Expectation, result: ToolResult) -> list[str]:
    blocks = [b for b in result.visual or () if expect.visual_type in (None, b.get("type"))]
    if not blocks:
        types = [b.get("type") for b in result.visual or ()]
        wanted = f"a {expect.visual_type!r} block" if expect.visual_type else "a visual block"
        return [f"visual: expected {wanted}, got {types or 'no visual blocks'}"]
    if expect.visual_rows is None:
        return []
    rows = blocks[0].get("rows")
    got = len(rows) if isinstance(rows, list) else "no rows"
    return [] if got == expect.visual_rows else [f"visual.rows: expected {expect.visual_rows}, got {got}"]


def mismatches(expect: Expectation, result: ToolResult) -> list[str]:
    """Each expectation `result` breaks, as `field: expected …, got …`."""
    found: list[str] = []
    content = result.content
    if result.success != expect.success:
        detail = f"error: {_shown(result.error)}" if result.error else f"content: {_shown(content)}"
        found.append(
            f"success: expected {str(expect.success).lower()}, got {str(result.success).lower()} ({detail})"
        )
    if expect.content is not None and content != expect.content:
        found.append(f"content: expected {_shown(expect.content)}, got {_shown(content)}")
    found += [
        f"contains: {_shown(part)} not in content {_shown(content)}"
        for part in expect.contains
        if part not in content
    ]
    if expect.matches is not None and expect.matches.search(content) is None:
        found.append(f"matches: /{expect.matches.pattern}/ not found in content {_shown(content)}")
    if expect.error_contains is not None and expect.error_contains not in (result.error or ""):
        found.append(
            f"error_contains: expected {_shown(expect.error_contains)} in the error, "
            f"got {_shown(result.error) if result.error else 'no error'}"
        )
    if expect.checks_visual:
        found += _visual_failures(expect, result)
    return found


class ToolTestRun:
    """A run of cases on one project: `with ToolTestRun(config, needs_llm) as run: run.case(spec, case)`."""

    def __init__(self, config: KernelConfig, *, needs_llm: bool) -> None:
        self._config = config
        self._needs_llm = needs_llm
        self._stack = ExitStack()
        self._sessions = itertools.count(1)
        self.server: FakeLLMServer | None = None
        self.kernel: Kernel | None = None

    def __enter__(self) -> ToolTestRun:
        from agentkernel.kernel import Kernel
        from agentkernel.testing.openai_server import FakeLLMServer
        from agentkernel.testing.project import throwaway_config

        with self._stack:  # on a failure here, what was started is stopped
            folder = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="agentkernel-test-")))
            url = None
            if self._needs_llm:
                self.server = self._stack.enter_context(FakeLLMServer())
                url = self.server.base_url
            config = throwaway_config(self._config, folder, llm_url=url)
            if url is None:
                config = replace(config, llm=None)  # no case scripts the LLM: none is reachable
            self.kernel = self._stack.enter_context(Kernel(config))
            self._stack = self._stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def case(self, spec: ToolSpec, case: ToolCase) -> CaseOutcome:
        """Run one case in a fresh session; its verdict."""
        assert self.kernel is not None, "ToolTestRun is not entered"
        server = self.server
        unexpected = server.unexpected if server is not None else 0
        if server is not None:
            server.clear()
            server.add(*case.llm_turns())
        caller = self.kernel.caller(user_id=case.user, session_id=f"tool-test-{next(self._sessions)}")
        started = time.perf_counter()
        result = self.kernel.run_tool(spec, case.args, caller)
        secs = time.perf_counter() - started
        failures = mismatches(case.expect, result)
        if server is not None:
            failures += _llm_failures(len(case.llm), server.clear(), server.unexpected - unexpected)
        return CaseOutcome(case, tuple(failures), secs, result)


def _llm_failures(scripted: int, unused: int, extra: int) -> list[str]:
    found = []
    if unused:
        found.append(f"llm: {unused} of {scripted} scripted replies not used (the tool asked the LLM less)")
    if extra:
        found.append(f"llm: the tool asked the LLM {extra} more time(s) than the {scripted} scripted")
    return found


def run_cases(config: KernelConfig, cases: Iterable[tuple[ToolSpec, ToolCase]]) -> Iterator[CaseOutcome]:
    """Each case's outcome, in order, as it finishes (a run of its own, started once)."""
    todo = list(cases)
    with ToolTestRun(config, needs_llm=any(case.llm for _, case in todo)) as run:
        for spec, case in todo:
            yield run.case(spec, case)


__all__ = ["CaseOutcome", "ToolTestRun", "mismatches", "run_cases"]
