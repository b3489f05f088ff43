"""Taking over the runs a dead server left unfinished (S25.3), from any live server on the store.

A run whose server died (kill -9, a crash, a power cut) stays `running` in
the store, its session's lease unrenewed. Every server looks for such runs
when it starts and then every half lease (`server.turn_lease_secs`): for
each, it takes the session's lease in one transaction (two servers asking
at once: one gets it) and resumes the run in the background, its events
recorded for `GET /v1/runs/{id}/events`. A run of a session that was
deleted meanwhile, or whose owner no longer has it, is ended `error`; a
chat completion's run is ended `terminated` (its conversation was its
client's, and left with it: the SDK's retry finds the run, completion_retries.py).
(A message sent to the session first takes the run over the same way:
turns.py.)

With a run engine (`runs.engine: temporal`) a session's run left
unfinished is not taken over here: its workflow is started again if none
runs (a no-op when one does: its activity is between attempts), and a
worker takes the lease over.

The same pass keeps the approvals store tidy (S24.4): approvals past their
timeout are marked `expired` (the run waiting on one sees the denial by
itself), and decided ones older than APPROVALS_KEPT_SECS are deleted, a
bounded number each time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from agentkernel.errors import StoreUnavailable
from agentkernel.kernel import Kernel
from agentkernel.server.sessions import SessionStore
from agentkernel.server.turns import TurnRunner
from agentkernel.services.run_engine import RunEngine

log = logging.getLogger("agentkernel.server")
APPROVALS_KEPT_SECS = 30 * 86400.0
"""How long a decided (or expired) approval stays in the store, listed and auditable."""


class RunResumer:
    """Finds the store's unfinished runs whose holder is gone and resumes them here."""

    def __init__(
        self,
        kernel: Kernel,
        sessions: SessionStore,
        turns: TurnRunner,
        lease_secs: float,
        engine: RunEngine | None = None,
    ) -> None:
        self.kernel = kernel
        self.engine = engine
        self.sessions = sessions
        self.turns = turns
        self.lease_secs = lease_secs

    async def run(self, stop: asyncio.Event) -> None:
        """Look now, then every half lease, until `stop`; a failed look is logged and tried again."""
        while not stop.is_set():
            try:
                await self.sweep()
            except StoreUnavailable as exc:  # said in a line: the next look finds it back
                log.warning("could not look for runs to resume: %s", exc)
            except Exception:
                log.exception("could not look for runs to resume")
            try:
                await asyncio.to_thread(self.tidy_approvals)
            except StoreUnavailable as exc:
                log.warning("could not tidy the approvals store: %s", exc)
            except Exception:
                log.exception("could not tidy the approvals store")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.lease_secs / 2)

    def tidy_approvals(self) -> None:
        """Mark the approvals past their timeout expired; delete old decided ones (blocking)."""
        store = self.kernel.approvals()
        store.expire_due()
        store.sweep(time.time() - APPROVALS_KEPT_SECS)

    async def sweep(self) -> int:
        """Take over and resume the runs left unfinished now; how many were taken."""
        leases = self.kernel.turn_leases()
        taken = 0
        for run_id in await asyncio.to_thread(leases.orphans):
            if self.engine is not None:
                run = await asyncio.to_thread(leases.run, run_id)
                if run is not None and not run.one_off:
                    await self.engine.start(run_id)  # its workers take it over
                    continue
            lease = await asyncio.to_thread(leases.take_over, run_id, self.lease_secs)
            if lease is None or lease.resumes is None:  # another server took it, or it ended meanwhile
                continue
            taken += 1
            run = lease.resumes
            info = (
                None
                if run.one_off
                else await asyncio.to_thread(self.sessions.owned, run.session_id, run.user_id)
            )
            if (
                info is None
            ):  # a chat completion's (its conversation left with its client), or a session deleted
                why = "a chat completion's, whose client has gone" if run.one_off else "its session is gone"
                log.warning("run %s: %s; the run ends", run.id, why)
                await asyncio.to_thread(
                    leases.end_run, run.id, "terminated" if run.one_off else "error", lease.token
                )
                await asyncio.to_thread(leases.release, lease)
            else:
                self.turns.resume(info, lease, f"resume-{run.id}")
        return taken


__all__ = ["RunResumer"]
