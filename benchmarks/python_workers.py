"""What a python_tool's worker process costs a call (issue 24, tools/isolated.py).

Why: a built-in Python tool (make_docx, fill_contract) hands its heavy part
to a worker process the call's deadline can kill, instead of running it on
a thread that holds the GIL. That must cost a call little: workers are
started once, with python-docx imported, and reused.

What it measures, each after a warm-up:

- the round trip of a trivial call (`operator.add(2, 3)`) through
  `WorkerPool.run`, against the same call in this process;
- make_docx of a one-page document with its work in a worker, against
  the same function with its work in this process (its peer), both
  writing the file to a session's scratch folder: the difference is what
  the worker adds (the Markdown sent, the .docx bytes sent back, the other
  process scheduled);
- a worker's start, from nothing to its first answer (a fresh
  `python -I` importing python-docx and markdown-it-py);
- the next call after a call was killed at its deadline: the pool starts
  a replacement at once, so the next call waits only for what is left of
  that start.

Run it by hand:

    .venv/bin/python benchmarks/python_workers.py
    .venv/bin/python benchmarks/python_workers.py --runs 200
    .venv/bin/python benchmarks/python_workers.py --smoke   # a few runs: does it run?
"""

from __future__ import annotations

import argparse
import contextlib
import operator
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from agentkernel import Kernel
from agentkernel.builtins import WORKER_PRELOAD
from agentkernel.builtins.office import make_docx
from agentkernel.config import CallBudget, ScriptLimits, load_kernel_config
from agentkernel.errors import ScriptLimitError
from agentkernel.helpers.table import ScriptCall
from agentkernel.tools.isolated import WorkerPool
from agentkernel.tools.python_tools import pool_worker
from agentkernel.types import JSONObject

T = TypeVar("T")
PAGE = (
    "# Отчёт\n\nВступление с **жирным**, *курсивом* и `кодом`.\n\n- один\n- два\n  - вложенный\n\n"
    "1. первый\n2. второй\n\n| Статья | Сумма |\n|---|---:|\n| выручка | 100 |\n| расходы | 40 |\n"
)


def budget(timeout_secs: float = 30.0) -> CallBudget:
    return CallBudget.starting_now(ScriptLimits(1, timeout_secs, 64 << 20, 1 << 20))


def in_process(function: Callable[..., T], /, *args: Any) -> T:
    """A worker that is this process: the peer every figure is set against."""
    return function(*args)


def timed(function: Callable[[], object], runs: int) -> list[float]:
    """Milliseconds of each run, after one warm-up run."""
    function()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return times


def show(label: str, times: list[float]) -> float:
    """Print p50 and p95; the p50."""
    ordered = sorted(times)
    p50, p95 = statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(f"  {label:<44} p50 {p50:8.3f} ms  p95 {p95:8.3f} ms")
    return p50


def starts(runs: int) -> list[float]:
    """Milliseconds from a new pool to its first answer: a worker started, its modules imported."""
    times = []
    for _ in range(runs):
        pool = WorkerPool(1, preload=WORKER_PRELOAD)
        started = time.perf_counter()
        pool.run("bench", budget(), operator.add, 2, 3)
        times.append((time.perf_counter() - started) * 1000)
        pool.close()
    return times


def after_kills(pool: WorkerPool, runs: int) -> list[float]:
    """Milliseconds from a call killed at its deadline to the next call's answer."""
    times = []
    for _ in range(runs):
        pool.run("bench", budget(), operator.add, 2, 3)  # a ready worker to kill
        with contextlib.suppress(ScriptLimitError):
            pool.run("bench", budget(0.2), time.sleep, 10)
        started = time.perf_counter()
        pool.run("bench", budget(), operator.add, 2, 3)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help="a few runs: check that it runs")
    options = parser.parse_args(argv)
    runs = 3 if options.smoke else options.runs
    slow_runs = 2 if options.smoke else max(5, runs // 10)
    print(f"a python_tool's worker process, {runs} runs ({slow_runs} for starts and kills):")
    pool = WorkerPool(1, preload=WORKER_PRELOAD)
    try:
        show("trivial call, in this process", timed(lambda: operator.add(2, 3), runs))
        show(
            "trivial call, through a worker",
            timed(lambda: pool.run("bench", budget(), operator.add, 2, 3), runs),
        )
        with tempfile.TemporaryDirectory() as folder:
            config = Path(folder) / "kernel.yaml"
            config.write_text("{}\n", encoding="utf-8")
            with Kernel(load_kernel_config(config)) as kernel:
                call = ScriptCall(kernel.caller(session_id="bench", user_id="bench"), "make_docx")
                args: JSONObject = {"name": "page.docx", "content": PAGE}
                worker = pool_worker(pool, "make_docx", budget(), "bench")
                here = show(
                    "make_docx of a page, work in this process",
                    timed(lambda: make_docx(args, {}, call, in_process), runs),
                )
                there = show(
                    "make_docx of a page, work in a worker",
                    timed(lambda: make_docx(args, {}, call, worker), runs),
                )
        print(f"what the worker adds to make_docx of a page (p50 difference): {there - here:+.2f} ms")
        show("worker start, to its first answer", starts(slow_runs))
        show("next call after a kill at the deadline", after_kills(pool, slow_runs))
    finally:
        pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
