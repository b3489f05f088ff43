"""The cron scheduler (S10): fires the store's due times, each once, on the running event loop.

`CronScheduler` sleeps until the store's next due time (or a change made
in this process, or a minute at most, for other kernels' changes), claims
what is due, and fires each claim as a task of its own: the kernel's
`run` (a process of the job's template, the agent loop on the prompt, with
the owner's identity and the run's own budget) and then the `deliver` of
each sink. A run that fails is recorded in the job's status and never
stops its schedule; a webhook that keeps failing never holds up another
job. The store is read and written on worker threads, never on the event
loop (S21.3).

A user has at most `cron.max_running_per_user` runs going at once, in every
kernel on the store together: the store claims no more (cron_store.py), and
their other due times wait, due, until one of theirs ends. Waiting rather
than skipping: jobs that share a schedule (nine every morning) then run one
after another instead of some of them never; a flood of jobs still never
runs more than the cap, and waits cost nothing (a row, no task). When a run
ends here the scheduler looks again at once if its owner had jobs waiting;
a run ending in another kernel is noticed by that kernel, or here within a
minute (RESCAN_SECS).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable

from agentkernel.errors import StoreUnavailable
from agentkernel.services.cron import CronService, RunOutcome
from agentkernel.services.cron_jobs import Sink
from agentkernel.services.cron_store import Claim
from agentkernel.services.sqlite_db import StoreBusy
from agentkernel.telemetry import metrics

log = logging.getLogger("agentkernel.cron")

RESCAN_SECS = 60.0
STORE_RETRY_SECS = 5.0  # a store that is down or busy is tried again this often
"""The longest the scheduler sleeps: jobs other kernels add are noticed within it."""
CLOCK_JUMP_SECS = 2.0
"""A wall clock that moved back more than this against the monotonic one was set back."""


Run = Callable[[Claim], Awaitable[RunOutcome]]
Deliver = Callable[[Claim, Sink, RunOutcome, float], Awaitable[None]]


async def run_claim(run_job: Run, claim: Claim, timeout_secs: float) -> tuple[RunOutcome, float]:
    """Run a claimed due time's job under `timeout_secs` (cron.run_timeout_secs): its outcome — a
    timeout or a bug of the run is a failed one, never an exception — and when it started; counted in
    the metrics (S26.2). Shared by this scheduler and a Temporal worker's firing (server/cron_worker.py)."""
    fired_at = time.time()
    counted = "failed"
    try:
        outcome = await asyncio.wait_for(run_job(claim), timeout_secs)
        counted = "ok" if outcome.ok else counted
    except TimeoutError:
        counted = "timeout"
        outcome = RunOutcome(
            False,
            error=f"the run took longer than cron.run_timeout_secs ({timeout_secs:g} s) and was stopped",
        )
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a bug of the run must not end the scheduler
        log.exception("cron %s/%s: the run failed", claim.owner, claim.name)
        outcome = RunOutcome(False, error=f"the run failed: {exc}")
    metrics.cron_ran(counted, fired_at - claim.scheduled_at)
    return outcome, fired_at


class CronScheduler:
    """Fires the store's due times, each once, on the running event loop (see the module docstring)."""

    def __init__(self, service: CronService, run: Run, deliver: Deliver) -> None:
        self.service = service
        self.settings = service.settings
        self.run_job = run
        self.deliver = deliver
        self.id = f"{uuid.uuid4()}"
        self._wake: asyncio.Event | None = None
        self._asleep_until = math.inf  # while it sleeps, when it wakes; inf while it looks at the store
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._waiting: set[str] = set()  # owners with due times held back by their cap, as last looked
        service.on_change(self._poke)

    def _poke(self) -> None:
        """A job changed in this process: look again now (from any thread)."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)

    async def run(self, stop: asyncio.Event, grace: float | None = None) -> None:
        """Schedule until `stop` is set; then runs under way get `grace` s to finish (default: their timeout).

        Runs still going after that are stopped, and their due times given
        back to the store, to run again at the next start.
        """
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        synced = False
        wall, mono = time.time(), time.monotonic()
        try:
            while not stop.is_set():
                self._wake.clear()  # before looking: a change made while it looks wakes the sleep after
                self._asleep_until = math.inf
                try:
                    if not synced:
                        await asyncio.to_thread(self.service.sync_static)
                        synced = True
                    now = time.time()
                    if (now - wall) - (time.monotonic() - mono) < -CLOCK_JUMP_SECS:  # the clock was set back
                        await asyncio.to_thread(self.service.store.rewind, now)
                    wall, mono = now, time.monotonic()
                    await self._claim(now)
                    await self._sleep(stop)
                except (StoreUnavailable, StoreBusy) as exc:  # the store comes back: so do the jobs
                    log.warning("cron: %s; trying again in %g s", exc, STORE_RETRY_SECS)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), STORE_RETRY_SECS)
        finally:
            await self._drain(self.settings.run_timeout_secs if grace is None else grace)

    async def _claim(self, now: float) -> None:
        store, settings = self.service.store, self.settings
        claims = await asyncio.to_thread(
            store.claim_due,
            self.id,
            now,
            settings.lease_secs,
            settings.misfire_grace_secs,
            settings.max_running_per_user,
        )
        self._waiting = {claim.owner for claim in claims if claim.held_back}
        for claim in claims:
            if claim.held_back:
                continue
            task = asyncio.create_task(self._fire(claim), name=f"cron {claim.owner}/{claim.name}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _sleep(self, stop: asyncio.Event) -> None:
        assert self._wake is not None
        most = self.settings.max_running_per_user
        wake_at = await asyncio.to_thread(self.service.store.next_wake, time.time(), most)
        now = time.time()
        delay = RESCAN_SECS if wake_at is None else min(max(wake_at - now, 0.0), RESCAN_SECS)
        self._asleep_until = now + delay
        waits = [asyncio.ensure_future(self._wake.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def _fire(self, claim: Claim) -> None:
        """One due time: run it (or skip a misfire), record the outcome, deliver it to every sink."""
        store = self.service.store
        if claim.misfired:
            metrics.cron_ran("skipped")
            await asyncio.to_thread(store.release, claim, self.id)
            self._free_again(claim)
            log.info(
                "cron %s/%s: skipped the run due at %s (misfire: skip)",
                claim.owner,
                claim.name,
                claim.scheduled_at,
            )
            return
        try:
            outcome, fired_at = await run_claim(self.run_job, claim, self.settings.run_timeout_secs)
        except asyncio.CancelledError:
            await asyncio.shield(asyncio.to_thread(store.abandon, claim, self.id))
            raise
        await asyncio.to_thread(
            store.finish, claim, self.id, ran_at=fired_at, ok=outcome.ok, error=outcome.error
        )
        self._free_again(claim)
        for sink in claim.spec.notify:
            task: asyncio.Task[None] = asyncio.ensure_future(self.deliver(claim, sink, outcome, fired_at))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _free_again(self, claim: Claim) -> None:
        """A claim ended: wake the scheduler if the job's next due time comes before its sleep ends, or
        if its owner has due times waiting for one of their runs to end.

        A claimed job's next run may not be among those the sleep was planned
        on; one due later than the sleep's end is found by the look after it,
        so the wake (a pass: two store calls) is spared. With many jobs that
        is one pass per firing less.
        """
        sooner = claim.next_run is not None and claim.next_run < self._asleep_until
        if self._wake is not None and (sooner or claim.owner in self._waiting):
            self._wake.set()

    async def _drain(self, grace: float) -> None:
        """Wait for runs and deliveries under way up to `grace` seconds; cancel the rest."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)


__all__ = ["CronScheduler", "run_claim"]
