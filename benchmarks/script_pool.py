"""What the kernel's fair script pool (fair_pool.py) costs against a plain thread pool (issue 24).

    .venv/bin/python benchmarks/script_pool.py [--calls 2000] [--rounds 5] [--smoke]

A trivial JavaScript tool (upper-case a word) is called from an event loop
`--calls` times, one after another, as a server's route calls it: through
`Kernel.arun_tool`, which runs it on the kernel's fair pool in the caller's
user's queue; and the same `Kernel.run_tool` handed to a plain
`ThreadPoolExecutor` with `run_in_executor`, as the kernel did before, the
two ways alternated call by call, each going first every other time. The hand-off alone, a no-op function, is
timed both ways too (p50 a call), and once more as the throughput of eight
users calling at once (each waiting for its call before the next).

Times are wall-clock (a hand-off between threads is waiting, not CPU);
each figure is the median of `--rounds` rounds, so the ratio of the two,
measured in the same run, says more than either on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agentkernel import Kernel  # noqa: E402
from agentkernel.config import load_kernel_config  # noqa: E402
from agentkernel.types import JSONObject  # noqa: E402
from agentkernel.util.fair_pool import FairPool  # noqa: E402

ARGS: JSONObject = {"text": "привет"}
USERS = 8


def make_project(root: Path) -> Path:
    tools = root / "config" / "scripts" / "tools"
    tools.mkdir(parents=True)
    (tools / "upper.js").write_text(
        "function run(args) { return args.text.toUpperCase(); }", encoding="utf-8"
    )
    (tools / "upper.yaml").write_text("kind: script_tool\nname: upper\nscript: upper.js\n", encoding="utf-8")
    kernel_yaml = root / "config" / "kernel.yaml"
    kernel_yaml.write_text("scripts:\n  tools: [config/scripts/tools]\n  builtins: false\n", encoding="utf-8")
    return kernel_yaml


async def alternated(
    fair: Callable[[], Awaitable[object]], plain: Callable[[], Awaitable[object]], calls: int
) -> tuple[float, float]:
    """p50 seconds of a call each way, alternated call by call and each going first every other time
    (so drift, and whatever the first of a pair pays, hits both alike)."""
    times: tuple[list[float], list[float]] = ([], [])
    for n in range(calls):
        for way, call in ((0, fair), (1, plain))[:: 1 if n % 2 else -1]:
            started = time.perf_counter()
            await call()
            times[way].append(time.perf_counter() - started)
    return statistics.median(times[0]), statistics.median(times[1])


async def by_users(call: Callable[[str], Awaitable[object]], calls: int) -> float:
    """Seconds per call with USERS users calling at once, each its calls one after another."""
    each = max(1, calls // USERS)

    async def user(name: str) -> None:
        for _ in range(each):
            await call(name)

    started = time.perf_counter()
    await asyncio.gather(*(user(f"user{n}") for n in range(USERS)))
    return (time.perf_counter() - started) / (each * USERS)


def noop() -> None:
    return None


async def one_round(kernel: Kernel, calls: int) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    pool = FairPool(kernel.config.script_workers, kernel.config.script_workers_per_user, name="bench")
    plain = ThreadPoolExecutor(kernel.config.script_workers)
    caller = kernel.caller(user_id="bench")
    run_tool = functools.partial(kernel.run_tool, "upper", ARGS, caller)
    try:
        figures: dict[str, float] = {}
        figures["tool, fair pool"], figures["tool, plain executor"] = await alternated(
            lambda: kernel.arun_tool("upper", ARGS, caller),
            lambda: loop.run_in_executor(plain, run_tool),
            calls,
        )
        figures["no-op, fair pool"], figures["no-op, plain executor"] = await alternated(
            lambda: pool.run("bench", noop), lambda: loop.run_in_executor(plain, noop), calls
        )
        figures["no-op, fair pool, 8 users"] = await by_users(lambda who: pool.run(who, noop), calls)
        figures["no-op, plain executor, 8 users"] = await by_users(
            lambda who: loop.run_in_executor(plain, noop), calls
        )
    finally:
        pool.shutdown()
        plain.shutdown()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args()
    if options.smoke:
        options.calls, options.rounds = 16, 1
    with tempfile.TemporaryDirectory() as folder:
        kernel = Kernel(load_kernel_config(make_project(Path(folder))))

        async def run() -> list[dict[str, float]]:
            await one_round(kernel, 16)  # compile, start the threads
            rounds = [await one_round(kernel, options.calls) for _ in range(options.rounds)]
            await kernel.aclose()
            return rounds

        rounds = asyncio.run(run())
    median = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
    print(f"one call from an event loop, {options.calls:,} calls a round, median of {options.rounds} rounds:")
    print("  (p50 of a call; with 8 users, wall time over the calls)")
    for name, seconds in median.items():
        print(f"  {name:<32} {seconds * 1e3:8.4f} ms a call")
    for what in ("tool", "no-op", "no-op, 8 users"):
        head, _, tail = what.partition(", ")
        fair, plain = (
            median[", ".join(filter(None, (head, kind, tail)))] for kind in ("fair pool", "plain executor")
        )
        print(
            f"fair pool / plain executor, {what}: {fair / plain:.2f}x ({(fair - plain) * 1e6:+.0f} µs a call)"
        )


if __name__ == "__main__":
    main()
