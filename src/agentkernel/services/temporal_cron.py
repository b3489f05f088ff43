"""Cron jobs as Temporal Schedules (S10, S27.2): with `runs.engine: temporal`, a Schedule fires each job.

The cron store stays the truth of the jobs — owners, definitions, statuses,
what `schedule_cron`, `list_cron` and `cancel_cron` see — so the helpers,
their fields and who owns what are the same in every deployment. Each job
has one Schedule in `runs.namespace`, named by `runs.task_queue` and the
job; `CronSchedules.reconcile` makes the namespace's Schedules of this task
queue those of the store's jobs: created for a job without one, replaced
when the job was (its `generation`, kept in the Schedule's memo), deleted
when the job is gone or a oneshot has fired. Workers reconcile
(server/cron_worker.py) at start, whenever the store's change mark moves,
and every minute. Each firing starts a `CronWorkflow`
(services/temporal_workflow.py) whose activity claims the due time in the
store and runs the job.

How a job's fields map:

- `interval_secs` → an interval on the job's own grid (its offset is when
  the job was set, modulo the interval), as the store's `following` keeps;
  Temporal keeps whole seconds, so the interval is rounded to one and the
  due times fall on the second;
- `schedule` (six fields, seconds first) → Temporal's seven-field cron
  form, the year `*` appended, read in the job's `timezone`;
- `oneshot_at` → a calendar at that second, with one action;
- overlap **skip**: a due time that comes while the job's last firing
  still runs — or still waits for a worker, or for its owner's
  `cron.max_running_per_user` — starts nothing, so a job's runs never
  overlap and due times missed while every worker was down run once, as the
  servers' scheduler coalesces them;
- `misfire` → the catch-up window, for due times Temporal itself missed
  (it was down): `run_once` a year (they run once when it is back),
  `skip` `cron.misfire_grace_secs` (at least Temporal's 10 s). A due time
  fired on time but taken late (every worker down) is judged against the
  same grace by the activity (`CronMethods.claim_fired`).

Imported only with `runs.engine: temporal` (the SDK's import costs start-up).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleCalendarSpec,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.service import RPCError, RPCStatusCode

from agentkernel.config.cron import CronSettings
from agentkernel.config.runs import RunSettings
from agentkernel.services.cron import job_session
from agentkernel.services.cron_jobs import JobSpec, Timing
from agentkernel.services.cron_store import StoredJob
from agentkernel.services.temporal_workflow import CRON_WORKFLOW, CronFire

log = logging.getLogger("agentkernel.cron")

RUN_ONCE_WINDOW = timedelta(days=365)
"""`misfire: run_once`: due times Temporal missed this long ago still run (once)."""
LEAST_WINDOW_SECS = 10.0
"""Temporal's shortest catch-up window."""
MEMO_GENERATION = "agentkernel_generation"


@dataclass(frozen=True)
class Reconciled:
    """What one reconcile changed: Schedules created, replaced (the job was), deleted (the job is gone)."""

    created: int = 0
    replaced: int = 0
    deleted: int = 0


def schedule_spec(timing: Timing, created_at: float) -> tuple[ScheduleSpec, ScheduleState]:
    """When Temporal fires a job: its timing as a Schedule's spec, and the state (a oneshot's one action)."""
    if timing.kind == "interval":
        assert timing.interval_secs is not None
        every = max(1, round(timing.interval_secs))  # Temporal keeps whole seconds
        offset = timedelta(seconds=math.floor(math.fmod(created_at, every)))
        return ScheduleSpec(
            intervals=[ScheduleIntervalSpec(timedelta(seconds=every), offset)]
        ), ScheduleState()
    if timing.kind == "schedule":
        assert timing.schedule is not None
        return ScheduleSpec(
            cron_expressions=[f"{timing.schedule} *"], time_zone_name=timing.timezone
        ), ScheduleState()
    assert timing.oneshot_at is not None
    at = datetime.fromtimestamp(math.ceil(timing.oneshot_at), UTC)
    calendar = ScheduleCalendarSpec(
        second=[ScheduleRange(at.second)],
        minute=[ScheduleRange(at.minute)],
        hour=[ScheduleRange(at.hour)],
        day_of_month=[ScheduleRange(at.day)],
        month=[ScheduleRange(at.month)],
        year=[ScheduleRange(at.year)],
    )
    return ScheduleSpec(calendars=[calendar]), ScheduleState(limited_actions=True, remaining_actions=1)


def catchup_window(spec: JobSpec, grace_secs: float) -> timedelta:
    """`misfire` as Temporal's catch-up window (the module docstring)."""
    if spec.misfire == "skip":
        return timedelta(seconds=max(LEAST_WINDOW_SECS, grace_secs))
    return RUN_ONCE_WINDOW


class CronSchedules:
    """The Schedules of one task queue's cron jobs in a Temporal namespace (the module docstring)."""

    def __init__(self, client: Client, runs: RunSettings, cron: CronSettings) -> None:
        self.client = client
        self.runs = runs
        self.cron = cron
        self.prefix = f"{runs.task_queue}.cron-"

    def schedule_id(self, owner: str, name: str) -> str:
        """The job's Schedule: the task queue's, then the job's session id (a digest of owner and name)."""
        return f"{self.runs.task_queue}.{job_session(owner, name)}"

    def schedule(self, job: StoredJob) -> Schedule:
        """The Schedule that fires `job`: its timing, the overlap and catch-up policies, its workflow."""
        spec, state = schedule_spec(job.spec.timing, job.created_at)
        fire = CronFire(job.owner, job.spec.name, job.generation, self.runs.heartbeat_secs)
        action = ScheduleActionStartWorkflow(
            CRON_WORKFLOW,
            fire,
            id=self.schedule_id(job.owner, job.spec.name),
            task_queue=self.runs.task_queue,
        )
        policy = SchedulePolicy(
            overlap=ScheduleOverlapPolicy.SKIP,
            catchup_window=catchup_window(job.spec, self.cron.misfire_grace_secs),
        )
        return Schedule(action=action, spec=spec, policy=policy, state=state)

    async def reconcile(self, jobs: list[StoredJob]) -> Reconciled:
        """Make this task queue's Schedules those of `jobs` (the store's); what changed.

        Idempotent, and safe with other workers doing the same at once: a
        Schedule another made meanwhile is kept (or replaced when it is of
        another generation), one already deleted is gone.
        """
        wanted = {self.schedule_id(job.owner, job.spec.name): job for job in jobs if _still_due(job)}
        placed = await self._placed()
        created = replaced = deleted = 0
        for schedule_id, job in wanted.items():
            had = placed.get(schedule_id, -1)
            if had == job.generation:
                continue
            if had != -1:
                await self._delete(schedule_id)
            outcome = await self._create(schedule_id, job)
            created += outcome == "created" and had == -1
            replaced += outcome == "created" and had != -1
        for schedule_id in placed.keys() - wanted.keys():
            deleted += await self._delete(schedule_id)
        return Reconciled(created, replaced, deleted)

    async def remove(self, owner: str, name: str) -> bool:
        """Delete the job's Schedule (its job is gone); whether there was one."""
        return await self._delete(self.schedule_id(owner, name))

    async def _placed(self) -> dict[str, int]:
        """The Schedules of this task queue's jobs, by id, with the generation each fires (-2: unknown)."""
        placed: dict[str, int] = {}
        async for entry in await self.client.list_schedules():
            if entry.id.startswith(self.prefix):
                memo = await entry.memo()
                placed[entry.id] = int(memo.get(MEMO_GENERATION, -2))
        return placed

    async def _create(self, schedule_id: str, job: StoredJob) -> str:
        """Create the job's Schedule: "created", "exists" (another worker's, of this generation, is kept
        — or replaced when of another), or "refused" (Temporal refused its spec: logged)."""
        memo = {MEMO_GENERATION: job.generation}
        late = job.spec.timing.kind == "oneshot" and job.next_run is not None and job.next_run <= time.time()
        try:  # a oneshot whose moment passed before its Schedule was placed fires now, once
            await self.client.create_schedule(
                schedule_id, self.schedule(job), memo=memo, trigger_immediately=late
            )
        except ScheduleAlreadyRunningError:
            found = await self.client.get_schedule_handle(schedule_id).describe()
            if int((await found.memo()).get(MEMO_GENERATION, -2)) == job.generation:
                return "exists"
            await self._delete(schedule_id)
            return await self._create(schedule_id, job)
        except RPCError as exc:
            if exc.status != RPCStatusCode.INVALID_ARGUMENT:
                raise
            log.error("cron %s/%s: Temporal refused its schedule: %s", job.owner, job.spec.name, exc.message)
            return "refused"
        log.info("cron %s/%s: Temporal Schedule %s placed", job.owner, job.spec.name, schedule_id)
        return "created"

    async def _delete(self, schedule_id: str) -> bool:
        try:
            await self.client.get_schedule_handle(schedule_id).delete()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            return False
        return True


def _still_due(job: StoredJob) -> bool:
    """Whether the job still wants firing: every job but a oneshot that has fired and ended."""
    return job.next_run is not None or job.running or job.spec.timing.kind != "oneshot"


__all__ = [
    "LEAST_WINDOW_SECS",
    "RUN_ONCE_WINDOW",
    "CronSchedules",
    "Reconciled",
    "catchup_window",
    "schedule_spec",
]
