"""How a stream of a run still going learns that the run has new records (S25, S27.2).

`GET /v1/runs/{id}/events` reads a run's records from the store, whichever
process writes them. Between two reads it waits here:

- **Embedded** (`PollingWakeups`): a fixed `POLL_SECS`, one indexed read of
  the SQLite file each time; the processes are on one machine.
- **PostgreSQL** (`PgRunWakeups`): the message store sends `NOTIFY` on
  `RUN_RECORDS_CHANNEL` with the run's id in the transaction that writes a
  step, delivered at its commit to every replica; each replica holds ONE
  listening connection and wakes the streams of that run. Chosen over
  Temporal's workflow queries because it is the same with or without
  Temporal, costs no read while nothing happens, and the journal stays the
  one truth (a notice only says "read again"). A notice can be lost while
  the listening connection is down, so a stream still reads at least every
  `SAFETY_SECS`, and every `POLL_SECS` while the connection is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from agentkernel.config.store import masked_url
from agentkernel.services.memory import RUN_RECORDS_CHANNEL  # the id of a run with new records

log = logging.getLogger("agentkernel.server")

POLL_SECS = 0.25
"""How often a stream reads a run still going when nothing tells it of new records."""
SAFETY_SECS = 5.0
"""How often a stream reads anyway when PostgreSQL's notices wake it."""
RECONNECT_SECS = 1.0


class RunWakeups(Protocol):
    async def wait(self, run_id: str) -> bool:
        """Until the run may have new records; True when a notice said so, False when time said so."""
        ...

    async def close(self) -> None: ...


class PollingWakeups:
    """Read again every `POLL_SECS` (the embedded stores)."""

    async def wait(self, run_id: str) -> bool:
        await asyncio.sleep(POLL_SECS)
        return False

    async def close(self) -> None:
        return None


class PgRunWakeups:
    """One LISTEN connection a replica, waking the streams of the runs named by PostgreSQL's notices."""

    def __init__(self, url: str, *, safety_secs: float = SAFETY_SECS) -> None:
        self._url = url
        self._safety_secs = safety_secs
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def wait(self, run_id: str) -> bool:
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name="run notices")
        woken = asyncio.Event()
        self._waiting.setdefault(run_id, set()).add(woken)
        bound = self._safety_secs if self._listening.is_set() else POLL_SECS
        try:
            await asyncio.wait_for(woken.wait(), bound)
        except TimeoutError:
            return False
        finally:
            waiters = self._waiting.get(run_id)
            if waiters is not None:
                waiters.discard(woken)
                if not waiters:
                    del self._waiting[run_id]
        return True

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _listen(self) -> None:
        """LISTEN until closed, connecting again after a failure (streams poll meanwhile)."""
        import psycopg

        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self._url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {RUN_RECORDS_CHANNEL}")
                    self._listening.set()
                    async for notice in conn.notifies():
                        self._wake(notice.payload)
            except (psycopg.Error, OSError) as exc:
                log.warning(
                    "run notices from %s stopped (%s); streams poll meanwhile", masked_url(self._url), exc
                )
            self._listening.clear()
            self._wake_all()  # whatever a lost notice said, they read again now
            await asyncio.sleep(RECONNECT_SECS)

    def _wake(self, run_id: str) -> None:
        for woken in self._waiting.get(run_id, ()):
            woken.set()

    def _wake_all(self) -> None:
        for waiters in self._waiting.values():
            for woken in waiters:
                woken.set()


__all__ = ["POLL_SECS", "RUN_RECORDS_CHANNEL", "PgRunWakeups", "PollingWakeups", "RunWakeups"]
