"""Cron jobs as Temporal Schedules (S10, S27.2): each timing fires when the store says, and the Schedules
follow the store.

Against the CLI's dev server (tests/temporal.py), never a mock: a job's
Schedule is created there and Temporal's own next action times are compared
with the store's `Timing` (croniter for schedules, the job's grid for
intervals, the moment of a oneshot). Reconciling is checked by what the
namespace then holds. No worker polls these task queues: nothing fires.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import Client

from agentkernel.config.cron import CronSettings
from agentkernel.config.runs import RunSettings
from agentkernel.services.cron_jobs import parse_job
from agentkernel.services.cron_store import CronStore, StoredJob
from agentkernel.services.temporal_cron import RUN_ONCE_WINDOW, CronSchedules, catchup_window

T = TypeVar("T")


def job(**fields: Any) -> dict[str, Any]:
    return {"name": "watch", "template": "watcher", "prompt": "Проверь цену", **fields}


LISTING_SECS = 60.0  # an upper bound for Temporal's visibility to catch up, never a measured time


async def listed(schedules: CronSchedules, *names: str) -> None:
    """Wait until Temporal lists exactly the Schedules of `names` (anna's jobs) for this task queue:
    its list is eventually consistent, and `reconcile` reads it."""
    wanted = {schedules.schedule_id("anna", name) for name in names}
    deadline = time.monotonic() + LISTING_SECS
    while set(await schedules._placed()) != wanted:
        assert time.monotonic() < deadline, f"Temporal never listed exactly {sorted(wanted)}"
        await asyncio.sleep(0.1)


def on_temporal(address: str, queue: str, work: Callable[[CronSchedules], Awaitable[T]]) -> T:
    async def run() -> T:
        client = await Client.connect(address)
        return await work(
            CronSchedules(client, RunSettings("temporal", address, task_queue=queue), CronSettings())
        )

    return asyncio.run(run())


async def next_times(schedules: CronSchedules, stored: StoredJob, count: int) -> list[float]:
    """Temporal's next action times of the job's Schedule (created for this, then deleted)."""
    schedule_id = schedules.schedule_id(stored.owner, stored.spec.name)
    await schedules.client.create_schedule(schedule_id, schedules.schedule(stored))
    try:
        described = await schedules.client.get_schedule_handle(schedule_id).describe()
        return [moment.timestamp() for moment in described.info.next_action_times[:count]]
    finally:
        await schedules.client.get_schedule_handle(schedule_id).delete()


def ours(stored: StoredJob, now: float, count: int) -> list[float]:
    """The store's due times of the job after `now` (its Timing)."""
    times: list[float] = []
    moment = stored.next_run
    while moment is not None and len(times) < count:
        if moment > now:
            times.append(moment)
        moment = stored.spec.timing.due_after(moment)
    return times


def test_every_timing_fires_when_the_store_says(
    tmp_path: Path, temporal_address: str, temporal_task_queue: str
) -> None:
    """Schedules (six fields, a time zone, steps and lists), an interval on its odd grid, a oneshot."""
    store = CronStore(tmp_path / "cron.db")
    now = time.time()
    given = {
        "weekdays-moscow": job(schedule="0 30 9 * * 1-5", timezone="Europe/Moscow"),
        "steps": job(schedule="*/20 5,35 */2 * * *"),
        "grid": job(interval_secs=7_777),
        "once": job(oneshot_at="2030-01-02T03:04:05Z"),
    }
    for name, options in given.items():
        store.put("anna", parse_job({**options, "name": name}, 0, now), None, by="", now=now, most=10)
    # the first due time as the service computes it at `put`
    for stored in store.scheduled_jobs():
        store.put("anna", stored.spec, stored.spec.timing.first_due(now), by="", now=now, most=10)

    async def compare(schedules: CronSchedules) -> dict[str, tuple[list[float], list[float]]]:
        found = {}
        for stored in store.scheduled_jobs():
            count = 1 if stored.spec.timing.kind == "oneshot" else 4
            theirs = await next_times(schedules, stored, count)
            found[stored.spec.name] = (theirs, ours(stored, time.time(), count))
        return found

    found = on_temporal(temporal_address, temporal_task_queue, compare)
    for name, (theirs, mine) in found.items():  # Temporal fires on whole seconds
        assert theirs == [float(math.floor(moment)) for moment in mine], (name, theirs, mine)
    store.close()


def test_misfire_maps_to_the_catch_up_window() -> None:
    assert catchup_window(parse_job(job(interval_secs=60), 0, 0), 60) == RUN_ONCE_WINDOW
    assert catchup_window(parse_job(job(interval_secs=60, misfire="skip"), 0, 0), 60) == timedelta(seconds=60)
    assert catchup_window(parse_job(job(interval_secs=60, misfire="skip"), 0, 0), 1) == timedelta(seconds=10)


def test_the_schedules_follow_the_store(
    tmp_path: Path, temporal_address: str, temporal_task_queue: str
) -> None:
    """Created for new jobs, kept, replaced when a job is, removed when it is gone — and put back when a
    Schedule was removed by hand; another task queue's are never touched."""
    store = CronStore(tmp_path / "cron.db")
    now = time.time()
    for name in ("a", "b"):
        store.put(
            "anna", parse_job(job(name=name, interval_secs=3600), 0, 0), now + 3600, by="", now=now, most=10
        )

    async def steps(schedules: CronSchedules) -> list[Any]:
        other = CronSchedules(
            schedules.client,
            RunSettings("temporal", task_queue=f"{temporal_task_queue}-other"),
            CronSettings(),
        )
        seen: list[Any] = [await other.reconcile(store.scheduled_jobs())]
        seen.append(await schedules.reconcile(store.scheduled_jobs()))
        await listed(schedules, "a", "b")
        seen.append(await schedules.reconcile(store.scheduled_jobs()))  # nothing changed
        store.put(
            "anna", parse_job(job(name="a", interval_secs=7200), 0, 0), now + 7200, by="", now=now, most=10
        )
        store.delete("anna", "b")
        seen.append(await schedules.reconcile(store.scheduled_jobs()))
        await schedules.client.get_schedule_handle(schedules.schedule_id("anna", "a")).delete()
        await listed(schedules)
        seen.append(await schedules.reconcile(store.scheduled_jobs()))
        described = await schedules.client.get_schedule_handle(schedules.schedule_id("anna", "a")).describe()
        seen.append(described.schedule.spec.intervals[0].every)
        await listed(schedules, "a")
        store.delete("anna", "a")
        seen.append(await schedules.reconcile(store.scheduled_jobs()))
        await listed(other, "a", "b")
        seen.append(await other.reconcile([]))  # the other queue's own, cleaned up
        return seen

    seen = on_temporal(temporal_address, temporal_task_queue, steps)
    counts = [(r.created, r.replaced, r.deleted) if hasattr(r, "created") else r for r in seen]
    assert counts == [
        (2, 0, 0),  # the other task queue's
        (2, 0, 0),  # this one's: the other's are not this queue's
        (0, 0, 0),
        (0, 1, 1),  # `a` replaced (a new generation), `b` removed
        (1, 0, 0),  # `a` removed by hand: placed again
        timedelta(hours=2),
        (0, 0, 1),
        (0, 0, 2),
    ]
    store.close()
