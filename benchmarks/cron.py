"""The cron scheduler (S10) with 1,000 jobs: how late firings are, what an idle one costs (issue 13).

    .venv/bin/python benchmarks/cron.py [--jobs 1000] [--interval 20] [--rounds 3] [--idle-secs 10] [--smoke]

Why: a job is a promise to run at a moment; a scheduler that falls behind
when it has many jobs, or that burns CPU while nothing is due, is not one
to leave running. Targets from the issue: lateness p99 <= 100 ms with 1,000
jobs, and an idle scheduler costing about nothing.

1. **Lateness.** `--jobs` interval jobs (every `--interval` s, their first
   due times spread evenly over one interval, 10 owners), each a run of a
   one-turn agent against an instant LLM (a `Provider` in this process that
   answers at once: no HTTP, so the figures are the scheduler's and the
   kernel's, not a server's), the `log` sink. A scheduler of the kernel
   (`kernel.cron_scheduler()`, as `agentkernel serve` runs it) fires them
   for `--rounds` intervals. The lateness of a firing is `fired_at −
   scheduled_at`, exactly the two fields of a webhook's payload, taken from
   the scheduler's `deliver` (wrapped here to note them) at full precision:
   p50, p99 and the worst, and the runs per second the load amounts to.
2. **Idle.** `--jobs` jobs due in an hour; the scheduler started, given a
   second to settle, then the process's CPU time (`time.process_time`, every
   thread) over `--idle-secs` s, and how often it looked at the store.

The jobs are written into the store directly (`CronStore.put`), not through
1,000 script calls, so that their first due times can be spread evenly.
The exit status is 0 when every firing ran and succeeded.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agentkernel import Kernel  # noqa: E402
from agentkernel.config import load_kernel_config  # noqa: E402
from agentkernel.llm import Completion, CompletionRequest, StreamDone, TextDelta, Usage  # noqa: E402
from agentkernel.services.cron import RunOutcome  # noqa: E402
from agentkernel.services.cron_jobs import Sink, parse_job  # noqa: E402
from agentkernel.services.cron_scheduler import CronScheduler  # noqa: E402
from agentkernel.services.cron_store import Claim, CronStore  # noqa: E402
from agentkernel.types import JSONObject  # noqa: E402

OWNERS = 10
TEMPLATE = "name: bench\ninstructions: Answer in one word.\n"


class InstantLLM:
    """A model that answers every request at once with one word."""

    async def complete(self, request: CompletionRequest) -> Completion:
        return Completion("ok", (), Usage(10, 1), "stop", "instant")

    async def stream(self, request: CompletionRequest) -> AsyncIterator[TextDelta | StreamDone]:
        completion = await self.complete(request)
        yield TextDelta(completion.text or "")
        yield StreamDone(completion)

    async def aclose(self) -> None:
        return None


def make_project(root: Path, max_jobs: int) -> Kernel:
    (root / "config" / "templates").mkdir(parents=True)
    (root / "config" / "templates" / "bench.yaml").write_text(TEMPLATE, encoding="utf-8")
    kernel_yaml = root / "config" / "kernel.yaml"
    # no owner's runs wait for each other (cron.max_running_per_user): the figures are the scheduler's
    settings = f"cron:\n  max_jobs_per_user: {max_jobs}\n  max_running_per_user: {max_jobs}\n"
    kernel_yaml.write_text(settings, encoding="utf-8")
    return Kernel(load_kernel_config(kernel_yaml), provider=InstantLLM())


def put_jobs(store: CronStore, jobs: int, interval: float, first: float, spread: float) -> None:
    """`jobs` interval jobs of `OWNERS` owners, their first due times spread evenly over `spread` s."""
    now = time.time()
    for index in range(jobs):
        options: JSONObject = {"name": f"j{index}", "template": "bench", "interval_secs": interval}
        spec = parse_job({**options, "prompt": "?"}, 0.001, now)
        due = first + spread * index / jobs
        store.put(f"user{index % OWNERS}", spec, due, by="bench", now=now, most=jobs)


class Firings:
    """The scheduler's deliveries noted: lateness of each firing, and when the wanted count is reached."""

    def __init__(self, scheduler: CronScheduler, wanted: int) -> None:
        self.lateness: list[float] = []
        self.failed: list[str] = []
        self.wanted = wanted
        self.done = asyncio.Event()
        self._deliver = scheduler.deliver
        scheduler.deliver = self.deliver

    async def deliver(self, claim: Claim, sink: Sink, outcome: RunOutcome, fired_at: float) -> None:
        self.lateness.append(fired_at - claim.scheduled_at)
        if not outcome.ok:
            self.failed.append(f"{claim.owner}/{claim.name}: {outcome.error}")
        if len(self.lateness) >= self.wanted:
            self.done.set()
        await self._deliver(claim, sink, outcome, fired_at)


class Looks:
    """How often the scheduler looked for due times (its passes: one `claim_due` transaction each)."""

    def __init__(self, scheduler: CronScheduler) -> None:
        self.count = 0
        store = scheduler.service.store
        self._claim_due = store.claim_due
        store.claim_due = self.claim_due  # type: ignore[method-assign]

    def claim_due(
        self,
        scheduler: str,
        now: float,
        lease_secs: float,
        grace_secs: float,
        most_per_owner: int | None = None,
    ) -> list[Claim]:
        self.count += 1
        return self._claim_due(scheduler, now, lease_secs, grace_secs, most_per_owner)


async def lateness(kernel: Kernel, options: argparse.Namespace) -> Firings:
    store = CronStore(kernel.config.cron.db_path)
    lead = 2.0  # the scheduler is up before the first due time
    try:
        put_jobs(store, options.jobs, options.interval, time.time() + lead, options.interval)
    finally:
        store.close()
    scheduler = kernel.cron_scheduler()
    firings = Firings(scheduler, options.jobs * options.rounds)
    looks = Looks(scheduler)
    stop = asyncio.Event()
    running = asyncio.create_task(scheduler.run(stop, grace=10.0))
    cpu, started = time.process_time(), time.monotonic()
    limit = lead + options.interval * (options.rounds + 2) + 60
    try:
        await asyncio.wait_for(firings.done.wait(), limit)
    except TimeoutError:
        print(f"only {len(firings.lateness):,} of {firings.wanted:,} firings within {limit:g} s")
    elapsed, spent = time.monotonic() - started, time.process_time() - cpu
    stop.set()
    await running
    late = sorted(firings.lateness)
    print(
        f"lateness of firings (fired_at - scheduled_at), {options.jobs:,} jobs every {options.interval:g} s, "
        f"{len(late):,} firings ({options.jobs / options.interval:.0f} runs/s):"
    )
    if late:
        p50, p99 = statistics.median(late), late[min(len(late) - 1, int(len(late) * 0.99))]
        print(f"  p50 {p50 * 1e3:8.2f} ms   p99 {p99 * 1e3:8.2f} ms   max {late[-1] * 1e3:8.2f} ms")
        verdict = "PASS" if p99 <= 0.1 else "MISS"
        print(f"  target p99 <= 100 ms: {verdict}")
    print(f"  CPU {spent:.1f} s over {elapsed:.1f} s ({spent / elapsed * 100:.0f} % of one core)")
    print(f"  looks at the store {looks.count:,}")
    return firings


async def idle(kernel: Kernel, options: argparse.Namespace) -> None:
    store = CronStore(kernel.config.cron.db_path)
    try:
        for status in store.statuses():
            store.delete(status.owner, status.spec.name)
        put_jobs(store, options.jobs, 3600.0, time.time() + 3600.0, 60.0)
    finally:
        store.close()
    scheduler = kernel.cron_scheduler()
    looks = Looks(scheduler)
    stop = asyncio.Event()
    running = asyncio.create_task(scheduler.run(stop))
    await asyncio.sleep(1.0)  # start-up: the static jobs synced, the first look at the store
    looks_before, cpu = looks.count, time.process_time()
    await asyncio.sleep(options.idle_secs)  # the idle window itself: nothing to wait for but time
    spent = time.process_time() - cpu
    stop.set()
    await running
    print(f"idle scheduler, {options.jobs:,} jobs due in an hour, over {options.idle_secs:g} s:")
    print(f"  CPU {spent * 1e3:.1f} ms ({spent / options.idle_secs * 100:.3f} % of one core)")
    print(f"  looks at the store {looks.count - looks_before} (and {looks_before} at start-up)")


async def main_async(options: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as folder:
        kernel = make_project(Path(folder), options.jobs)
        async with kernel:
            firings = await lateness(kernel, options)
            await idle(kernel, options)
    for failure in firings.failed[:5]:
        print(f"failed: {failure}")
    return 0 if not firings.failed and firings.done.is_set() else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=20.0, help="seconds between a job's runs")
    parser.add_argument("--rounds", type=int, default=3, help="firings of each job to time")
    parser.add_argument("--idle-secs", type=float, default=10.0)
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args()
    if options.smoke:
        options.jobs, options.interval, options.rounds, options.idle_secs = 20, 1.0, 1, 0.5
    logging.basicConfig(level=logging.WARNING)  # the log sink's INFO lines are not shown
    print(f"{platform.python_version()} on {os.cpu_count()} cores ({platform.machine()})")
    raise SystemExit(asyncio.run(main_async(options)))


if __name__ == "__main__":
    main()
