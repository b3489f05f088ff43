"""A run as a Temporal workflow (S27.2): one activity that drives the run from its journal, retried elsewhere.

The workflow's id is the run's id. Its code is one activity, `DRIVE_RUN`,
which a worker (`agentkernel worker`, server/run_worker.py) runs by taking
the run's session lease and going on with the run from its records
(agent/resume.py): a fresh run from the user's message, a run whose worker
died from its last recorded step. So the run's journal in the message
store stays the record of its steps, and Temporal schedules, places,
retries and cancels runs:

- the activity heartbeats every third of `heartbeat_secs`; a worker killed
  (-9, a lost machine) misses its heartbeats, and the activity is retried on
  another worker after `heartbeat_secs`, which goes on from the journal
  (finished steps are not repeated; a started call of a tool that is not
  `idempotent: true` is told to the LLM as interrupted);
- cancelling the workflow cancels the activity (delivered with a
  heartbeat's answer), which stops the run as a stop does (`terminated`)
  and waits for it to record its end (WAIT_CANCELLATION_COMPLETED); a run
  cancelled before any worker took it is ended `terminated` by a second
  activity, `END_STOPPED` (a no-op for a run that has ended).

Why one activity and not one per LLM and tool call: that would make the
agent loop itself workflow code; the journal already makes a run
resumable step by step, so the loop stays one and the same in both engines.
A cron job's due time fired by its Temporal Schedule (services/temporal_cron.py)
is a workflow too, `CronWorkflow`: one activity, `FIRE_CRON`, that claims the
due time in the cron store, runs the job and delivers its answer, retried on
another worker when one dies (the claim is the firing's own, so the retry
takes it back), as the servers' scheduler runs it once more after a crash.

This module imports only the standard library and temporalio: the
workflow sandbox imports it again for each workflow.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, CancelledError

WORKFLOW = "agentkernel.run"
DRIVE_RUN = "agentkernel.drive_run"
END_STOPPED = "agentkernel.end_stopped_run"
CRON_WORKFLOW = "agentkernel.cron"
FIRE_CRON = "agentkernel.fire_cron"
HELD = "held"
"""A firing's activity answer while its owner is at the cap: ask again later."""
HELD_FIRST_PAUSE_SECS = 1.0
HELD_MOST_PAUSE_SECS = 30.0
SCHEDULED_AT = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
"""Set by Temporal on a workflow its Schedule started: the due time it was started for."""
RUN_MOST_SECS = 7 * 24 * 3600.0
"""The longest a run may be driven (one waiting for a person's approval included), per attempt."""
END_MOST_SECS = 300.0
"""The longest ending a stopped run may take (opening its chat, a dead holder's lease lapsing), per attempt:
it does not heartbeat, so a worker dying there has it retried after this."""
MOST_ATTEMPTS = 10
"""Attempts of the activity (workers dying, a store down); a run also ends `error` after its journal says
it was taken over MOST_TAKEOVERS times (agent/resume.py)."""
RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=MOST_ATTEMPTS,
)


@dataclass(frozen=True)
class RunInput:
    """What the activity is given: the run, and the lease its server took when it recorded it.

    `lease_token`: the token of the session lease the serving process took
    with the run (services/turn_leases.py), adopted by the first attempt so
    the session stays held from the message to the answer; a later attempt
    (or none given) takes the lease over once its holder's has lapsed.
    """

    run_id: str
    lease_token: str | None = None
    heartbeat_secs: float = 10.0


@workflow.defn(name=WORKFLOW)
class RunWorkflow:
    """A run: its one activity, retried on another worker when one dies; its result the run's reason."""

    @workflow.run
    async def run(self, given: RunInput) -> str:
        try:
            result: str = await workflow.execute_activity(
                DRIVE_RUN,
                given,
                result_type=str,
                start_to_close_timeout=timedelta(seconds=RUN_MOST_SECS),
                heartbeat_timeout=timedelta(seconds=given.heartbeat_secs),
                retry_policy=RETRY,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
        except (asyncio.CancelledError, ActivityError) as exc:
            if isinstance(exc, ActivityError) and not isinstance(exc.cause, CancelledError):
                raise
            await workflow.execute_activity(  # the run may never have been taken: it ends `terminated`
                END_STOPPED,
                given,
                result_type=str,
                start_to_close_timeout=timedelta(seconds=END_MOST_SECS),
                retry_policy=RETRY,
            )
            raise
        return result


@dataclass(frozen=True)
class CronFire:
    """A job's firing as its Schedule starts it: which job, which version (`generation`) of it."""

    owner: str
    name: str
    generation: int
    heartbeat_secs: float = 10.0
    most_secs: float = RUN_MOST_SECS  # an attempt's longest: waiting for its owner's cap, the run, delivery


@dataclass(frozen=True)
class CronFiring:
    """What the activity is given: the firing, and the due time it is for (UTC epoch seconds)."""

    job: CronFire
    due: float


@workflow.defn(name=CRON_WORKFLOW)
class CronWorkflow:
    """A due time of a cron job: its one activity, retried elsewhere when a worker dies; its result the
    firing's outcome (`ok`, `failed`, `skipped`, `gone`). While its owner is at
    `cron.max_running_per_user` the activity answers HELD at once and the workflow waits on a timer
    (growing from HELD_FIRST_PAUSE_SECS to HELD_MOST_PAUSE_SECS) before it asks again: a user's waiting
    firings hold no worker's activity slot another user's runs need."""

    @workflow.run
    async def run(self, job: CronFire) -> str:
        started = workflow.info().typed_search_attributes.get(SCHEDULED_AT)
        due = (started or workflow.now()).timestamp()  # none: started by hand, due now
        pause = HELD_FIRST_PAUSE_SECS
        while True:
            result: str = await workflow.execute_activity(
                FIRE_CRON,
                CronFiring(job, due),
                result_type=str,
                start_to_close_timeout=timedelta(seconds=job.most_secs),
                heartbeat_timeout=timedelta(seconds=job.heartbeat_secs),
                retry_policy=RETRY,
            )
            if result != HELD:
                return result
            await workflow.sleep(pause)  # a timer, not a worker's slot: the owner's cap holds it back
            pause = min(pause * 2, HELD_MOST_PAUSE_SECS)


__all__ = [
    "CRON_WORKFLOW",
    "DRIVE_RUN",
    "END_MOST_SECS",
    "END_STOPPED",
    "FIRE_CRON",
    "HELD",
    "MOST_ATTEMPTS",
    "RETRY",
    "RUN_MOST_SECS",
    "SCHEDULED_AT",
    "WORKFLOW",
    "CronFire",
    "CronFiring",
    "CronWorkflow",
    "RunInput",
    "RunWorkflow",
]
