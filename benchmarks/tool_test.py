"""How long `agentkernel tool test` of the shipped tools takes (issue 15 §2, "Speed").

    .venv/bin/python benchmarks/tool_test.py [--runs 10] [--cases 50] [--smoke]

Why: `tool test` is meant for CI on every commit, so its cost should be
start-up plus a little per case. What it measures:

1. the whole command, `agentkernel tool test` in a copy of the shipped
   `config/` (14 cases of 4 tools), as a subprocess: the median of the
   rounds; beside it `agentkernel tool list` in the same copy (start-up and
   loading the tools, no case run), so the difference is what the cases and
   their throw-away folder cost;
2. in process, one case at a time through `ToolTestRun.case` (the runner
   the command uses, one dispatch per case): p50 and max per case over
   `--cases` passes of every shipped case.

Bytecode is allowed (PYTHONDONTWRITEBYTECODE is removed) and an untimed
round warms it up, as a CI machine's second run would find it. The exit
status is 0 when every run passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentkernel.config import load_kernel_config
from agentkernel.testing.cases import ToolCase, read_cases
from agentkernel.testing.runner import ToolTestRun

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, bool]:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
    return time.perf_counter() - start, done.returncode == 0


def command_figures(project: Path, runs: int) -> tuple[float, float, bool]:
    """Median seconds of `tool test` and of `tool list` (alternating rounds), and whether all passed."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "AGENTKERNEL_CONFIG")}
    test, listing = [str(BIN / "agentkernel"), "tool", "test"], [str(BIN / "agentkernel"), "tool", "list"]
    timed(test, project, env)  # warm-up: bytecode written, files in the page cache
    tests, lists, ok = [], [], True
    for _ in range(runs):
        secs, passed = timed(test, project, env)
        tests.append(secs)
        ok = ok and passed
        lists.append(timed(listing, project, env)[0])
    return statistics.median(tests), statistics.median(lists), ok


def case_figures(project: Path, passes: int) -> tuple[list[float], int, bool]:
    """Seconds per case over `passes` of every shipped case, in one run; the case count; all passed."""
    config = load_kernel_config(project / "config" / "kernel.yaml")
    seconds: list[float] = []
    ok = True
    with ToolTestRun(config) as run:
        cases: list[ToolCase] = [c for spec in run.kernel.list_tools() for c in read_cases(spec).cases]
        for case in cases:  # warm-up: scripts compiled once
            run.case(case)
        for _ in range(passes):
            for case in cases:
                outcome = run.case(case)
                seconds.append(outcome.secs)
                ok = ok and outcome.passed
    return seconds, len(cases), ok


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="rounds of the whole command")
    parser.add_argument("--cases", type=int, default=50, help="in-process passes over every case")
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks that it runs (CI)")
    options = parser.parse_args()
    runs, passes = (1, 1) if options.smoke else (options.runs, options.cases)
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        shutil.copytree(REPO / "config", project / "config")
        whole, listing, command_ok = command_figures(project, runs)
        seconds, count, cases_ok = case_figures(project, passes)
    ms = sorted(s * 1000 for s in seconds)
    print(f"agentkernel tool test, the shipped tools ({count} cases), median of {runs} run(s):")
    print(f"  tool test (whole command)   {whole * 1000:8.1f} ms")
    print(f"  tool list (start-up, load)  {listing * 1000:8.1f} ms")
    print(f"  the difference: the cases   {(whole - listing) * 1000:8.1f} ms")
    print(f"in process, per case ({len(ms)} calls): p50 {statistics.median(ms):.2f} ms, max {ms[-1]:.2f} ms")
    if not (command_ok and cases_ok):
        print("some run failed: see `agentkernel tool test` in a copy of config/")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
