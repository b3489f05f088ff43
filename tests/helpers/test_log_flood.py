"""Issue 9 item 8: a script cannot flood the kernel log (S21.1, docs/scripts.md 8.3).

`max_log_lines` alone once let ten 4 MiB prints write 40 MiB per call. Now
a line longer than `limits.max_log_line_chars` is cut and says how much was
cut, one call keeps at most `limits.max_log_chars` characters, and one
notice says when a budget is spent. Every way a script writes to the log
goes through `ScriptCall.log_line`: `console.log/info/warn/error/debug` and
`print` in JavaScript, `print` and `debug` in Rhai.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentkernel.helpers.table import ScriptCall
from agentkernel.identity import Caller
from tests.conftest import ToolFactory, write_kernel_yaml

BIN = Path(sys.executable).parent
MiB = 1 << 20

FLOOD = {
    ".js": """
        function run(args) {
            const s = "x".repeat(4 << 20);
            for (let i = 0; i < 10; i++) (i % 2 ? console.debug : print)(s);
            return "done";
        }
    """,
    ".rhai": """
        fn run(args) {
            let s = "x";
            s.pad(4194304, "x");
            for i in 0..10 { if i % 2 == 0 { print(s) } else { debug(s) } }
            "done"
        }
    """,
}


def run_cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "agentkernel"), "-vv", "tool", "run", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("ext", [".js", ".rhai"])
def test_ten_huge_prints_write_a_bounded_log(project: Path, make_tool: ToolFactory, ext: str) -> None:
    """The attack: ten prints of 4 MiB each. The log gets 10 cut lines of 10,000 characters (defaults)."""
    make_tool("flood", FLOOD[ext], ext=ext)
    done = run_cli(project, "flood")
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"content": "done"' in done.stdout
    assert len(done.stderr) < 150_000, len(done.stderr)  # was 40 MiB
    lines = [line for line in done.stderr.splitlines() if "[tool flood]" in line]
    assert len(lines) == 10
    # Rhai's debug() puts the position first (`5:57 | xxx…`): a few characters more are cut
    assert all(re.search(r"x…\[4,184,3\d\d more characters cut\]$", line) for line in lines), lines


@pytest.mark.parametrize("ext", [".js", ".rhai"])
def test_the_per_call_budget_ends_with_one_notice(project: Path, make_tool: ToolFactory, ext: str) -> None:
    write_kernel_yaml(project, "limits:\n  max_log_line_chars: 3000\n  max_log_chars: 7000\n")
    make_tool("flood", FLOOD[ext], ext=ext)
    done = run_cli(project, "flood")
    lines = [line for line in done.stderr.splitlines() if "[tool flood]" in line]
    assert len(lines) == 4, lines
    cut = [re.search(r"x…\[(4,19\d,3\d\d) more characters cut\]$", line) for line in lines[:3]]
    assert all(cut), lines
    assert [int(m[1].replace(",", "")) // 1000 for m in cut if m] == [
        4191,
        4191,
        4193,
    ]  # 3,000 + 3,000 + 1,000
    assert (
        lines[3] == "WARNING agentkernel.script: [tool flood] more output suppressed (limit 7,000 characters)"
    )
    assert len(done.stderr) < 10_000


def test_a_cut_line_says_how_much_was_cut() -> None:
    call = ScriptCall(Caller(), "tool t", max_log_line_chars=100, max_log_chars=1000)
    records: list[str] = []
    handler = _Collect(records)
    logger = logging.getLogger("agentkernel.script")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        call.log_line("info", "é" * 250)
        call.log_line("debug", "short")
        for _ in range(20):
            call.log_line("warning", "y" * 100)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert records[0] == "[tool t] " + "é" * 100 + "…[150 more characters cut]"
    assert records[1] == "[tool t] short"
    assert len(records) == 2 + 9 + 1  # 100 + 5 + 9×100 = 1,005: the ninth y-line is cut to 895
    assert records[-2].endswith("y…[5 more characters cut]")
    assert records[-1] == "[tool t] more output suppressed (limit 1,000 characters)"
    assert call.log_chars == 1000


def test_the_line_limit_still_holds() -> None:
    call = ScriptCall(Caller(), "tool t", max_log_lines=2)
    records: list[str] = []
    logger = logging.getLogger("agentkernel.script")
    handler = _Collect(records)
    logger.addHandler(handler)
    try:
        for word in ("a", "b", "c", "d"):
            call.log_line("error", word)
    finally:
        logger.removeHandler(handler)
    assert records == ["[tool t] a", "[tool t] b", "[tool t] more output suppressed (limit 2 lines)"]


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())
