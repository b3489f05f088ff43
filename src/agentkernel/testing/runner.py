"""Running tool and hook test cases: each through the path a run takes, in a throw-away data folder.

A run owns a temporary folder and one kernel on the project whose stores all
live in it (testing/project.py), so a run starts empty and leaves nothing
behind; each case calls `Kernel.run_tool` — the path an LLM's call takes:
access check, argument validation, limits, warnings, truncation, history —
as its user, in a session of its own. When a case scripts the LLM (`llm:`),
the run starts the scripted server and points the kernel's `llm:` at it;
when none does, the kernel has no LLM at all, so a test can never reach a
real one. A hook's case calls its one function through the loop's hook
pipeline (`Kernel.run_hook_event`). A case passes when every expectation
holds and its scripted replies were all used, no more and no fewer.
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

from agentkernel.testing.hook_cases import HookCase
from agentkernel.testing.hook_checks import hook_mismatches
from agentkernel.util.short_text import shown_value

if TYPE_CHECKING:
    from agentkernel.config import KernelConfig
    from agentkernel.kernel import Kernel
    from agentkernel.testing.cases import Expectation, ToolCase
    from agentkernel.testing.openai_server import FakeLLMServer
    from agentkernel.tools.results import ToolResult

SHOWN_CHARS = 160  # how much of a content or error a failure line shows


@dataclass(frozen=True)
class CaseOutcome:
    """One case's verdict: `failures` empty means it passed."""

    case: ToolCase | HookCase
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
    """A run of cases on one project: `with ToolTestRun(config) as run: run.case(case)`.

    `kernel` is there from the start, with no LLM, for choosing the tools;
    `use_llm()` starts the scripted server and rebuilds the kernel with its
    `llm:` pointed there (the compile cache of the first kernel is reused).
    """

    def __init__(self, config: KernelConfig) -> None:
        self._project = config
        self._stack = ExitStack()
        self._sessions = itertools.count(1)
        self._folder: Path | None = None
        self.server: FakeLLMServer | None = None
        self._kernel: Kernel | None = None

    @property
    def kernel(self) -> Kernel:
        assert self._kernel is not None, "ToolTestRun is not entered"
        return self._kernel

    def __enter__(self) -> ToolTestRun:
        with self._stack:  # on a failure here, what was started is stopped
            folder = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="agentkernel-test-"))
            self._folder = Path(folder)
            self._kernel = self._build(None)
            self._stack.callback(lambda: self.kernel.close())
            self._stack = self._stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _build(self, llm_url: str | None) -> Kernel:
        """A kernel whose stores are in the run's folder; with no `llm_url`, none is reachable."""
        from agentkernel.kernel import Kernel
        from agentkernel.testing.project import throwaway_config

        assert self._folder is not None
        config = throwaway_config(self._project, self._folder, llm_url=llm_url)
        return Kernel(config if llm_url is not None else replace(config, llm=None))

    def use_llm(self) -> FakeLLMServer:
        """Start the scripted server (once) and point the kernel's `llm:` at it."""
        if self.server is None:
            from agentkernel.testing.openai_server import FakeLLMServer

            self.server = self._stack.enter_context(FakeLLMServer())
            old, self._kernel = self._kernel, self._build(self.server.base_url)
            if old is not None:
                old.close()
        return self.server

    def case(self, case: ToolCase | HookCase) -> CaseOutcome:
        """Run one case in a fresh session (a tool's by its name, as an LLM calls it); its verdict."""
        server = self.use_llm() if case.llm else self.server
        unexpected = server.unexpected if server is not None else 0
        if server is not None:
            server.clear()
            server.add(*case.llm_turns())
        kind = "hook" if isinstance(case, HookCase) else "tool"
        caller = self.kernel.caller(user_id=case.user, session_id=f"{kind}-test-{next(self._sessions)}")
        started = time.perf_counter()
        result: ToolResult | None = None
        if isinstance(case, HookCase):
            failures = hook_mismatches(case, self.kernel.run_hook_event(case.hook, case.given, caller))
        else:
            result = self.kernel.run_tool(case.tool, case.args, caller, approved=True)
            failures = mismatches(case.expect, result)
        secs = time.perf_counter() - started
        if server is not None:
            failures += _llm_failures(len(case.llm), server.clear(), server.unexpected - unexpected, kind)
        return CaseOutcome(case, tuple(failures), secs, result)


def _llm_failures(scripted: int, unused: int, extra: int, asker: str) -> list[str]:
    found = []
    if unused:
        found.append(
            f"llm: {unused} of {scripted} scripted replies not used (the {asker} asked the LLM less)"
        )
    if extra:
        found.append(f"llm: the {asker} asked the LLM {extra} more time(s) than the {scripted} scripted")
    return found


def run_cases(config: KernelConfig, cases: Iterable[ToolCase | HookCase]) -> Iterator[CaseOutcome]:
    """Each case's outcome, in order, as it finishes: one run; the server started if a case scripts it."""
    todo = list(cases)
    with ToolTestRun(config) as run:
        if any(case.llm for case in todo):
            run.use_llm()
        for case in todo:
            yield run.case(case)


__all__ = ["CaseOutcome", "ToolTestRun", "mismatches", "run_cases"]
