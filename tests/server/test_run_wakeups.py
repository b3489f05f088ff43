"""How a run's event stream learns of new records (S27.2): PostgreSQL's notices, on a real cluster."""

from __future__ import annotations

import asyncio

import psycopg

from agentkernel.server.run_wakeups import RUN_RECORDS_CHANNEL, PgRunWakeups, PollingWakeups

WAIT_SECS = 60.0  # an upper bound, never a measured time


async def notify(url: str, run_id: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SELECT pg_notify(%s, %s)", (RUN_RECORDS_CHANNEL, run_id))


def test_a_notice_wakes_the_streams_of_its_run_and_only_those(pg_url: str) -> None:
    async def scenario() -> tuple[bool, bool]:
        wakeups = PgRunWakeups(pg_url, safety_secs=WAIT_SECS)
        try:
            assert (
                await asyncio.wait_for(wakeups.wait("warm-up"), WAIT_SECS) is False
            )  # polls, listening starts
            await asyncio.wait_for(wakeups._listening.wait(), WAIT_SECS)
            mine = asyncio.create_task(wakeups.wait("run-1"))
            other = asyncio.create_task(wakeups.wait("run-2"))
            await asyncio.sleep(0)  # both registered
            await notify(pg_url, "run-1")
            woken = await asyncio.wait_for(mine, WAIT_SECS)
            still_waiting = not other.done()
            other.cancel()
            return woken, still_waiting
        finally:
            await wakeups.close()

    assert asyncio.run(scenario()) == (True, True)


def test_without_a_database_streams_poll() -> None:
    assert asyncio.run(PollingWakeups().wait("any")) is False
