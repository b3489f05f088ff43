"""`agentkernel worker`: a Temporal worker that drives the project's runs (S27.2, `runs.engine: temporal`).

It also fires the project's cron jobs, each from its Temporal Schedule, and
keeps those Schedules equal to the cron store (server/cron_worker.py).

A worker process has the project's kernel (scripts, helpers, the LLM
provider) and polls `runs.task_queue` for runs' workflows and their one
activity (services/temporal_workflow.py). The activity (`RunDriver.drive`)
drives one run as a server resuming it does (server/resumer.py): it takes
the run's session lease — the first attempt adopts the lease the serving
process took with the run, a later one takes it over once the dead
holder's has lapsed — and goes on from the run's journal through the
TurnRunner's resume path (agent/resume.py: a fresh run from the user's
message, a run whose worker died from its last recorded step, nothing
recorded done again). While the run goes on it heartbeats; the lease is
renewed and stops asked in the store are watched as in a server. A
cancelled activity (its workflow cancelled) stops the run, which ends
`terminated`, and waits for its end to be recorded. A run handed off (the
worker stopping) fails the attempt, so Temporal retries it on another
worker, which goes on from the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentkernel.agent.session import ChatSession
from agentkernel.kernel import Kernel
from agentkernel.llm.base import ChatMessage
from agentkernel.server.app import session_directory
from agentkernel.server.cron_worker import cron_parts
from agentkernel.server.sessions import SessionInfo, SessionStore
from agentkernel.server.turns import Turn, TurnRunner
from agentkernel.services.temporal_runs import TemporalRuns
from agentkernel.services.temporal_workflow import DRIVE_RUN, END_STOPPED, CronWorkflow, RunInput, RunWorkflow
from agentkernel.services.turn_leases import Lease

log = logging.getLogger("agentkernel.worker")
STOP_RETRY_SECS = 0.5
"""How often a cancelled run is told to stop again while its chat is still opening (nothing to stop yet)."""


class RunDriver:
    """The activity: one run driven here from its journal, under its session's lease."""

    def __init__(self, kernel: Kernel, sessions: SessionStore, turns: TurnRunner, lease_secs: float):
        self.kernel = kernel
        self.sessions = sessions
        self.turns = turns
        self.lease_secs = lease_secs

    @activity.defn(name=DRIVE_RUN)
    async def drive(self, given: RunInput) -> str:
        """Drive the run to its end; its end's reason ("gone" when it had ended or does not exist)."""
        lease = await self._lease(given)
        if lease is None or lease.resumes is None:
            now = await asyncio.to_thread(self.kernel.run, given.run_id)
            return "gone" if now is None else (now.reason or now.status)
        run = lease.resumes
        log.info("run %s: driven on this worker (attempt %d)", run.id, activity.info().attempt)
        leases = self.kernel.turn_leases()
        info = (
            None if run.one_off else await asyncio.to_thread(self.sessions.owned, run.session_id, run.user_id)
        )
        if info is None:  # a session deleted meanwhile (a chat completion's run is never sent here)
            log.warning("run %s: its session is gone; the run ends", run.id)
            await asyncio.to_thread(leases.end_run, run.id, "error", lease.token)
            await asyncio.to_thread(leases.release, lease)
            return "error"
        fresh = lease.token == given.lease_token  # adopted from its server: not left by a dead worker
        turn = self.turns.resume(info, lease, f"worker-{run.id}", fresh=fresh)
        if turn is None or turn.task is None:
            raise ApplicationError(f"run {run.id}: its session runs a turn on this worker already")
        await self._until_done(turn, info, given.heartbeat_secs)
        if turn.handed_off:  # this worker is stopping: another goes on from the journal
            raise ApplicationError(f"run {run.id}: left for another worker (this one is stopping)")
        now = await asyncio.to_thread(self.kernel.run, run.id)
        if now is not None and now.running:
            raise ApplicationError(f"run {run.id}: its turn ended here without recording its end")
        return "gone" if now is None else (now.reason or now.status)

    @activity.defn(name=END_STOPPED)
    async def end_stopped(self, given: RunInput) -> str:
        """End a run whose workflow was cancelled, `terminated`, if it is still running (it was never
        taken by a worker, or the one driving it died); its reason."""
        lease = await self._lease(given)
        if lease is None or lease.resumes is None:
            now = await asyncio.to_thread(self.kernel.run, given.run_id)
            return "gone" if now is None else (now.reason or now.status)
        run = lease.resumes
        leases = self.kernel.turn_leases()
        try:
            chat = await asyncio.to_thread(
                self.kernel.chat, run.template, user_id=run.user_id, session_id=run.session_id, resume=True
            )
            try:
                await asyncio.to_thread(chat.record_stop, run.id, lease.token)
            finally:
                self.kernel.end_chat(chat)
        except Exception:  # a template gone: the run still ends
            log.exception("run %s: could not record its stop", run.id)
            await asyncio.to_thread(leases.end_run, run.id, "terminated", lease.token)
        finally:
            await asyncio.to_thread(leases.release, lease)
        return "terminated"

    async def _until_done(self, turn: Turn, info: SessionInfo, heartbeat_secs: float) -> None:
        """Heartbeat until the turn's task is over; a cancelled activity stops the run and waits for it."""
        assert turn.task is not None
        try:
            while not turn.task.done():
                activity.heartbeat()
                await asyncio.wait({turn.task}, timeout=heartbeat_secs / 3)
        except asyncio.CancelledError:
            log.warning("run %s: its workflow was cancelled; the run stops", turn.run_id)
            while not turn.task.done():  # its end is recorded before the cancellation is answered
                self.turns.stop(info.id)  # again until it takes: the chat may still be opening
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({turn.task}, timeout=STOP_RETRY_SECS)
            raise

    async def _lease(self, given: RunInput) -> Lease | None:
        """The run's session lease: the serving process's adopted (first attempt), else taken over once
        its holder's has lapsed (heartbeating meanwhile); None when the run has ended or is unknown."""
        leases = self.kernel.turn_leases()
        if activity.info().attempt == 1 and given.lease_token is not None:
            run = await asyncio.to_thread(leases.run, given.run_id)
            if run is None or not run.running:
                return None
            adopted = Lease(run.session_id, run.user_id, given.lease_token, self.lease_secs, 0.0, run)
            if await asyncio.to_thread(leases.renew, adopted):
                return adopted
        while True:
            lease = await asyncio.to_thread(leases.take_over, given.run_id, self.lease_secs)
            if lease is not None:
                return lease
            run = await asyncio.to_thread(leases.run, given.run_id)
            if run is None or not run.running:
                return None
            activity.heartbeat()  # still here: waiting for the dead holder's lease to lapse
            await asyncio.sleep(min(self.lease_secs, given.heartbeat_secs) / 4)


def run_driver(kernel: Kernel) -> RunDriver:
    """A driver over the project's sessions and a TurnRunner of this process (no stream: no reader)."""

    def open_chat(info: SessionInfo, history: list[ChatMessage] | None) -> ChatSession:
        return kernel.chat(info.template, user_id=info.user_id, session_id=info.id, resume=history is None)

    settings = kernel.config.server
    turns = TurnRunner(
        open_chat,
        kernel.end_chat,
        settings.max_open_chats,
        max_running_per_user=settings.max_running_turns_per_user,
        leases=kernel.turn_leases,
        lease_secs=settings.turn_lease_secs,
    )
    return RunDriver(kernel, session_directory(kernel), turns, settings.turn_lease_secs)


async def work(kernel: Kernel, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
    """Poll `runs.task_queue` for runs and drive them until `stop`; then the running ones get
    `server.shutdown_grace_secs` to end, and the rest are handed off to another worker."""
    client: Client = await TemporalRuns(kernel.config.runs).client()
    driver = run_driver(kernel)
    firer, cron_sync = cron_parts(kernel, client)
    restrictions = SandboxRestrictions.default.with_passthrough_modules("agentkernel")
    worker = Worker(
        client,
        task_queue=kernel.config.runs.task_queue,
        workflows=[RunWorkflow, CronWorkflow],
        activities=[driver.drive, driver.end_stopped, firer.fire],
        workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
        max_concurrent_activities=kernel.config.server.max_open_chats,
    )
    async with worker:
        syncing = asyncio.create_task(cron_sync.run(stop))  # the cron jobs' Schedules (S10 on Temporal)
        if ready is not None:
            ready.set()
        await stop.wait()
        await driver.turns.drain(kernel.config.server.shutdown_grace_secs)
        await syncing
    driver.sessions.close()


__all__ = ["RunDriver", "run_driver", "work"]
