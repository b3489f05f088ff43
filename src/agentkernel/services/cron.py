"""The cron service (S10): what `schedule_cron`, `cancel_cron` and `list_cron` reach, and the scheduler.

`CronService` is the live service `cron`: it checks a job against what only
the kernel knows (the templates, the `http:` rules, who owns a session),
and keeps it in the cron store (services/cron_store.py), owned by the
calling user. Any live kernel has it — a tool run from the terminal can
schedule a job — but jobs *fire* only where a `CronScheduler` runs:
`agentkernel serve`, or `agentkernel cron run`.

`CronScheduler` sleeps until the store's next due time (or a change made
in this process, or a minute at most, for other kernels' changes), claims
what is due, and fires each claim as a task of its own: the kernel's
`run` (a process of the job's template, the agent loop on the prompt, with
the owner's identity and the run's own budget) and then the `deliver` of
each sink. A run that fails is recorded in the job's status and never
stops its schedule; a webhook that keeps failing never holds up another
job. The store is read and written on worker threads, never on the event
loop (S21.3).
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentkernel.config.cron import CronSettings
from agentkernel.errors import HelperError
from agentkernel.services.cron_jobs import JobInvalid, JobSpec, Sink, parse_job
from agentkernel.services.cron_store import Claim, CronStore, TooManyJobs
from agentkernel.types import JSONObject, JSONValue

if TYPE_CHECKING:
    import asyncio

    from agentkernel.process import Caller

log = logging.getLogger("agentkernel.cron")

RESCAN_SECS = 60.0
"""The longest the scheduler sleeps: jobs other kernels add are noticed within it."""
CLOCK_JUMP_SECS = 2.0
"""A wall clock that moved back more than this against the monotonic one was set back."""


@dataclass(frozen=True)
class RunOutcome:
    """What one run of a job's agent gave: its answer, or why it failed."""

    ok: bool
    answer: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class CronChecks:
    """What the kernel knows that a job's fields are checked against; each returns why not, or None."""

    template: Callable[[str], str | None]
    webhook: Callable[[str], str | None]
    session: Callable[[str | None, str], str | None]  # (owner, session id)


def owner_of(caller: Caller) -> str:
    """The user a caller schedules for: its user, or the server's `local` user when it has none."""
    from agentkernel.config.server import LOCAL_USER

    return caller.user_id or LOCAL_USER


def job_session(owner: str, name: str) -> str:
    """The session a job's runs share (so `memory_*` in its tools see earlier runs), one per job."""
    digest = hashlib.sha256(f"{owner}\0{name}".encode()).hexdigest()[:24]
    return f"cron-{digest}"


class CronService:
    """Jobs as scripts see them: scheduled, listed and cancelled by their owner only."""

    def __init__(self, settings: CronSettings, checks: CronChecks) -> None:
        self.settings = settings
        self.checks = checks
        self._store: CronStore | None = None
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    @property
    def store(self) -> CronStore:
        """The store, opened on first use: a kernel that never schedules leaves no file."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    self._store = CronStore(self.settings.db_path)
        return self._store

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call `listener` (from any thread) after each change made through this service."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    # -- the helpers' face -------------------------------------------------------------------------

    def schedule(self, caller: Caller, options: JSONValue) -> JSONObject:
        """`schedule_cron`: the job checked and stored for the caller's user → `{name, ok}`."""
        owner = owner_of(caller)
        spec = self._checked(options, caller, owner, "schedule_cron: ")
        now = time.time()
        try:
            self.store.put(
                owner,
                spec,
                spec.timing.first_due(now),
                by=caller.template or "",
                now=now,
                most=self.settings.max_jobs_per_user,
            )
        except TooManyJobs as exc:
            raise HelperError(f"schedule_cron: {exc}") from None
        self._changed()
        return {"name": spec.name, "ok": True}

    def cancel(self, caller: Caller, name: JSONValue) -> bool:
        """`cancel_cron`: whether the caller's user had a job of that name (now gone)."""
        if not isinstance(name, str) or not name:
            raise HelperError(f"cancel_cron: name must be a job's name (a non-empty string), got {name!r}")
        gone = self.store.delete(owner_of(caller), name)
        if gone:
            self._changed()
        return gone

    def list(self, caller: Caller) -> list[JSONObject]:
        """`list_cron`: the caller's user's jobs and their statuses, by name."""
        return [status.to_json() for status in self.store.statuses(owner_of(caller))]

    def _checked(self, options: JSONValue, caller: Caller | None, owner: str, prefix: str) -> JobSpec:
        try:
            spec = parse_job(options, self.settings.min_interval_secs, time.time())
        except JobInvalid as exc:
            raise HelperError(f"{prefix}{exc}") from None
        problem = self.checks.template(spec.template)
        if problem is not None:
            raise HelperError(f"{prefix}template: {problem}")
        sinks = []
        for index, sink in enumerate(spec.notify):
            sinks.append(self._sink(prefix, f"notify[{index}]", sink, caller, owner))
        return JobSpec(spec.name, spec.template, spec.timing, spec.prompt, tuple(sinks), spec.misfire)

    def _sink(self, prefix: str, where: str, sink: Sink, caller: Caller | None, owner: str) -> Sink:
        if sink.type == "webhook":
            assert sink.url is not None
            problem = self.checks.webhook(sink.url)
            if problem is not None:
                raise HelperError(f"{prefix}{where}.url: {problem}")
        if sink.type == "session":
            session = sink.session_id or (caller.session_id if caller is not None else None)
            if session is None:
                raise HelperError(
                    f"{prefix}{where}.session_id: this call runs outside any session; name the chat"
                )
            problem = self.checks.session(owner, session)
            if problem is not None:
                raise HelperError(f"{prefix}{where}.session_id: {problem}")
            return Sink("session", session_id=session)
        return sink

    # -- static jobs (kernel.yaml) -----------------------------------------------------------------

    def sync_static(self) -> None:
        """Write kernel.yaml's `cron.jobs` into the store as the `cron.user`'s, dropping static jobs gone.

        A static job whose definition did not change keeps its schedule and
        status; ConfigError-worthy mistakes come out as HelperError naming
        `cron.jobs[i].field`.
        """
        owner = self.settings.user
        now = time.time()
        wanted: dict[str, JobSpec] = {}
        for index, options in enumerate(self.settings.jobs):
            spec = self._checked(options, None, owner, f"cron.jobs[{index}].")
            wanted[spec.name] = spec
        import json

        for name, spec in wanted.items():
            stored = self.store.definition(owner, name)
            if stored is not None and json.loads(stored) == spec.to_json():
                continue
            self.store.put(
                owner,
                spec,
                spec.timing.first_due(now),
                by="kernel.yaml",
                now=now,
                most=max(self.settings.max_jobs_per_user, len(wanted)),
                static=True,
            )
        for name in self.store.static_names(owner):
            if name not in wanted:
                self.store.delete(owner, name)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


Run = Callable[[Claim], Awaitable[RunOutcome]]
Deliver = Callable[[Claim, Sink, RunOutcome, float], Awaitable[None]]


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
        import asyncio  # here, not at the top: a kernel that never schedules never loads it (issue 8)

        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        await asyncio.to_thread(self.service.sync_static)
        wall, mono = time.time(), time.monotonic()
        try:
            while not stop.is_set():
                self._wake.clear()  # before looking: a change made while it looks wakes the sleep after
                self._asleep_until = math.inf
                now = time.time()
                if (now - wall) - (time.monotonic() - mono) < -CLOCK_JUMP_SECS:  # the clock was set back
                    await asyncio.to_thread(self.service.store.rewind, now)
                wall, mono = now, time.monotonic()
                await self._claim(now)
                await self._sleep(stop)
        finally:
            await self._drain(self.settings.run_timeout_secs if grace is None else grace)

    async def _claim(self, now: float) -> None:
        import asyncio

        store, settings = self.service.store, self.settings
        claims = await asyncio.to_thread(
            store.claim_due, self.id, now, settings.lease_secs, settings.misfire_grace_secs
        )
        for claim in claims:
            task = asyncio.create_task(self._fire(claim), name=f"cron {claim.owner}/{claim.name}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _sleep(self, stop: asyncio.Event) -> None:
        import asyncio

        assert self._wake is not None
        wake_at = await asyncio.to_thread(self.service.store.next_wake)
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
        import asyncio

        store = self.service.store
        if claim.misfired:
            await asyncio.to_thread(store.release, claim, self.id)
            self._free_again(claim)
            log.info(
                "cron %s/%s: skipped the run due at %s (misfire: skip)",
                claim.owner,
                claim.name,
                claim.scheduled_at,
            )
            return
        fired_at = time.time()
        try:
            outcome = await asyncio.wait_for(self.run_job(claim), self.settings.run_timeout_secs)
        except TimeoutError:
            outcome = RunOutcome(
                False,
                error=f"the run took longer than cron.run_timeout_secs "
                f"({self.settings.run_timeout_secs:g} s) and was stopped",
            )
        except asyncio.CancelledError:
            await asyncio.shield(asyncio.to_thread(store.abandon, claim, self.id))
            raise
        except Exception as exc:  # a bug of the run must not end the scheduler
            log.exception("cron %s/%s: the run failed", claim.owner, claim.name)
            outcome = RunOutcome(False, error=f"the run failed: {exc}")
        await asyncio.to_thread(
            store.finish, claim, self.id, ran_at=fired_at, ok=outcome.ok, error=outcome.error
        )
        self._free_again(claim)
        for sink in claim.spec.notify:
            task: asyncio.Task[None] = asyncio.ensure_future(self.deliver(claim, sink, outcome, fired_at))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _free_again(self, claim: Claim) -> None:
        """A claim ended: wake the scheduler if the job's next due time comes before its sleep ends.

        A claimed job's next run is not among those the sleep was planned on
        (`next_wake`); one due later than the sleep's end is found by the
        look after it, so the wake (a pass: two store calls) is spared. With
        many jobs that is one pass per firing less.
        """
        if self._wake is not None and claim.next_run is not None and claim.next_run < self._asleep_until:
            self._wake.set()

    async def _drain(self, grace: float) -> None:
        """Wait for runs and deliveries under way up to `grace` seconds; cancel the rest."""
        import asyncio

        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)


__all__ = [
    "CronChecks",
    "CronScheduler",
    "CronService",
    "RunOutcome",
    "job_session",
    "owner_of",
]
