"""Cron jobs on a Temporal worker (S10, S27.2): the Schedules kept equal to the store, and each firing run.

With `runs.engine: temporal` no server runs the cron scheduler: each job
has a Temporal Schedule (services/temporal_cron.py) and `agentkernel
worker` processes do both halves of cron.

- `CronSync` keeps the Schedules those of the store's jobs: it writes
  kernel.yaml's static jobs into the store, then reconciles at start, when
  the store's change mark moves (looked at every SYNC_POLL_SECS: a job a
  script schedules anywhere is placed within that) and every RESYNC_SECS
  (a Schedule removed by hand comes back). Every worker does it; the
  reconcile is idempotent.
- `CronFirer.fire` is the firing's activity: it claims the due time in the
  store under the firing's own name (so a retry after a worker died takes
  its claim back), answers HELD while the owner is at
  `cron.max_running_per_user` (the workflow asks again after a timer, so a
  waiting firing holds no worker's slot), skips a `misfire: skip` due time taken later
  than `cron.misfire_grace_secs`, runs the job as the servers' scheduler
  does (services/cron_scheduler.py `run_claim`), records the outcome and
  delivers it to every sink before it returns. A firing whose job is gone
  removes the job's Schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError

from agentkernel.agent.cron_runs import CronRuns
from agentkernel.errors import AgentKernelError, HelperError, StoreUnavailable
from agentkernel.kernel import Kernel
from agentkernel.services.cron import CronService
from agentkernel.services.cron_scheduler import run_claim
from agentkernel.services.cron_store import Claim, Firing
from agentkernel.services.sqlite_db import StoreBusy
from agentkernel.services.temporal_cron import CronSchedules
from agentkernel.services.temporal_workflow import FIRE_CRON, HELD, CronFiring
from agentkernel.telemetry import metrics

log = logging.getLogger("agentkernel.cron")

SYNC_POLL_SECS = 2.0
"""How often a worker looks at the store's change mark: a new job's Schedule is placed within this."""
RESYNC_SECS = 60.0
"""How often a worker reconciles even when nothing changed in the store."""

T = TypeVar("T")


class CronFirer:
    """The firing activity: one due time of one job claimed, run and delivered on this worker."""

    def __init__(self, kernel: Kernel, schedules: CronSchedules) -> None:
        self.kernel = kernel
        self.schedules = schedules
        self._runs: CronRuns | None = None

    @property
    def service(self) -> CronService:
        return self.kernel.cron

    @activity.defn(name=FIRE_CRON)
    async def fire(self, firing: CronFiring) -> str:
        """Claim, run, record, deliver; the firing's outcome (`ok`, `failed`, `skipped`, `gone`)."""
        settings = self.service.settings
        job = firing.job
        by = activity.info().workflow_id or f"{job.owner}/{job.name}@{firing.due}"  # the same each attempt
        given = Firing(
            by,
            job.owner,
            job.name,
            job.generation,
            firing.due,
            settings.max_running_per_user,
        )
        claim = await self._claim(given)
        if claim is None:
            return "gone"
        if claim.held_back:  # the workflow asks again after a timer, holding no slot meanwhile
            return HELD
        store = self.service.store
        if claim.misfired:
            metrics.cron_ran("skipped")
            await asyncio.to_thread(store.release, claim, given.by)
            log.info("cron %s/%s: skipped the run due at %s (misfire: skip)", job.owner, job.name, firing.due)
            return "skipped"
        runs = self._cron_runs()
        outcome, fired_at = await _beating(
            run_claim(runs.run, claim, settings.run_timeout_secs), job.heartbeat_secs
        )
        await asyncio.to_thread(
            store.finish, claim, given.by, ran_at=fired_at, ok=outcome.ok, error=outcome.error
        )
        deliveries = [runs.deliver(claim, sink, outcome, fired_at) for sink in claim.spec.notify]
        await _beating(asyncio.gather(*deliveries), job.heartbeat_secs)
        return "ok" if outcome.ok else "failed"

    async def _claim(self, given: Firing) -> Claim | None:
        """The due time claimed (`held_back` when its owner is at the cap); None when there is nothing to
        run (the job gone: its Schedule too)."""
        settings = self.service.settings
        claim = await asyncio.to_thread(
            self.service.store.claim_fired,
            given,
            time.time(),
            settings.lease_secs,
            settings.misfire_grace_secs,
        )
        if claim is None:
            await self._forget_if_gone(given)
        return claim

    async def _forget_if_gone(self, given: Firing) -> None:
        """A firing of a job no longer in the store (or replaced): its Schedule goes when the job did."""
        stored = await asyncio.to_thread(self.service.store.definition, given.owner, given.name)
        if stored is None and await self.schedules.remove(given.owner, given.name):
            log.info("cron %s/%s: the job is gone; its Schedule removed", given.owner, given.name)

    def _cron_runs(self) -> CronRuns:
        if self._runs is None:
            self._runs = self.kernel.cron_runs()
        return self._runs


async def _beating(work: Awaitable[T], heartbeat_secs: float) -> T:
    """`work`'s result, the activity heartbeating every third of `heartbeat_secs` meanwhile."""
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            activity.heartbeat()
            await asyncio.wait({task}, timeout=heartbeat_secs / 3)
    except asyncio.CancelledError:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise
    return task.result()


class CronSync:
    """Keeps the Schedules of this task queue those of the store's jobs (the module docstring)."""

    def __init__(self, kernel: Kernel, schedules: CronSchedules) -> None:
        self.kernel = kernel
        self.schedules = schedules

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile until `stop`: at start, on each change of the store's mark, and every RESYNC_SECS."""
        service = self.kernel.cron
        static_written = False
        mark: tuple[float, ...] | None = None
        last = -float("inf")
        while not stop.is_set():
            try:
                if not static_written:  # a store that is down: the next pass tries again
                    try:
                        await asyncio.to_thread(service.sync_static)
                    except HelperError as exc:  # a static job of kernel.yaml: `cron.jobs[0].schedule: …`
                        log.error("cron: kernel.yaml's jobs were not scheduled: %s", exc)
                    static_written = True
                now_mark = await asyncio.to_thread(service.store.changes_mark)
                if now_mark != mark or time.monotonic() - last >= RESYNC_SECS:
                    await self.reconcile()
                    mark, last = now_mark, time.monotonic()
            except (StoreUnavailable, StoreBusy, AgentKernelError, OSError) as exc:
                log.warning("cron: the Schedules were not brought up to date: %s", exc)
            except RPCError as exc:  # Temporal down or refusing: the next pass tries again
                log.warning("cron: Temporal did not take the Schedules: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SYNC_POLL_SECS)

    async def reconcile(self) -> None:
        jobs = await asyncio.to_thread(self.kernel.cron.store.scheduled_jobs)
        done = await self.schedules.reconcile(jobs)
        if done.created or done.replaced or done.deleted:
            log.info(
                "cron: Schedules brought up to date (%d placed, %d replaced, %d removed)",
                done.created,
                done.replaced,
                done.deleted,
            )


def cron_parts(kernel: Kernel, client: Client) -> tuple[CronFirer, CronSync]:
    """The firing activity and the Schedules' keeper of a worker on `client`."""
    schedules = CronSchedules(client, kernel.config.runs, kernel.config.cron)
    return CronFirer(kernel, schedules), CronSync(kernel, schedules)


__all__ = ["RESYNC_SECS", "SYNC_POLL_SECS", "CronFirer", "CronSync", "cron_parts"]
