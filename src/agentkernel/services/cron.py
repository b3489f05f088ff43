"""The cron service (S10): what `schedule_cron`, `cancel_cron` and `list_cron` reach, and the scheduler.

`CronService` is the live service `cron`: it checks a job against what only
the kernel knows (the templates, the `http:` rules, who owns a session),
and keeps it in the cron store (services/cron_store.py), owned by the
calling user. Any live kernel has it — a tool run from the terminal can
schedule a job — but jobs *fire* only where a `CronScheduler` runs:
`agentkernel serve`, or `agentkernel cron run`.

The scheduler that fires them is services/cron_scheduler.py (asyncio is
imported there, not by a kernel that only runs a tool).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from agentkernel.config.cron import CronSettings
from agentkernel.config.server import LOCAL_USER
from agentkernel.errors import HelperError
from agentkernel.identity import Caller
from agentkernel.services.cron_jobs import JobInvalid, JobSpec, Sink, parse_job
from agentkernel.services.cron_store import CronJobStore, CronStore, TooManyJobs
from agentkernel.types import JSONObject, JSONValue

log = logging.getLogger("agentkernel.cron")


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
    tools_of: Callable[[str], frozenset[str]]  # a (known) template's tools
    webhook: Callable[[str], str | None]
    session: Callable[[str | None, str], str | None]  # (owner, session id)


def owner_of(caller: Caller) -> str:
    """The user a caller schedules for: its user, or the server's `local` user when it has none."""
    return caller.user_id or LOCAL_USER


def job_session(owner: str, name: str) -> str:
    """The session a job's runs share (so `memory_*` in its tools see earlier runs), one per job."""
    digest = hashlib.sha256(f"{owner}\0{name}".encode()).hexdigest()[:24]
    return f"cron-{digest}"


class CronService:
    """Jobs as scripts see them: scheduled, listed and cancelled by their owner only."""

    def __init__(
        self, settings: CronSettings, checks: CronChecks, open_store: Callable[[], CronJobStore] | None = None
    ) -> None:
        self.settings = settings
        self.checks = checks
        self._open_store = open_store  # the kernel's choice (PostgreSQL with store.url); else the file
        self._store: CronJobStore | None = None
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    @property
    def store(self) -> CronJobStore:
        """The store, opened on first use: a kernel that never schedules leaves no file. The SQLite
        file (`cron.db_path`), or what `open_store` opens (the kernel's PostgreSQL store with
        `store.url`, S27.2)."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    opening = self._open_store or (lambda: CronStore(self.settings.db_path))
                    self._store = opening()
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
        self._no_wider(prefix, spec.template, caller)
        sinks = []
        for index, sink in enumerate(spec.notify):
            sinks.append(self._sink(prefix, f"notify[{index}]", sink, caller, owner))
        return JobSpec(spec.name, spec.template, spec.timing, spec.prompt, tuple(sinks), spec.misfire)

    def _no_wider(self, prefix: str, template: str, caller: Caller | None) -> None:
        """A job may not use a tool its scheduling agent may not: a hostile tool plants no stronger agent.

        As `run_subagent`'s `tools` only narrow (S17). A caller outside any
        agent (a person at the terminal, kernel.yaml) may use every tool.
        """
        if caller is None or caller.allowed_tools is None:
            return
        wider = sorted(self.checks.tools_of(template) - caller.allowed_tools)
        if wider:
            raise HelperError(
                f"{prefix}template: {template!r} may use tools the calling agent may not "
                f"({', '.join(wider)}); a job can do no more than the agent that schedules it"
            )

    def _sink(self, prefix: str, where: str, sink: Sink, caller: Caller | None, owner: str) -> Sink:
        """A sink checked: a webhook's URL against the `http:` rules; a session sink's chat is the
        caller's own (always, even before it holds a message) or one holding messages of `owner`."""
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
            own = caller is not None and session == caller.session_id
            problem = None if own else self.checks.session(owner, session)
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
        wanted = self.check_static()
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
        for was_owner, name in self.store.static_jobs():
            if was_owner != owner or name not in wanted:  # gone from kernel.yaml, or `cron.user` changed
                self.store.delete(was_owner, name)

    def check_static(self) -> dict[str, JobSpec]:
        """kernel.yaml's `cron.jobs`, checked, by name; HelperError naming `cron.jobs[i].field`."""
        wanted: dict[str, JobSpec] = {}
        for index, options in enumerate(self.settings.jobs):
            spec = self._checked(options, None, self.settings.user, f"cron.jobs[{index}].")
            wanted[spec.name] = spec
        return wanted

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


__all__ = [
    "CronChecks",
    "CronService",
    "RunOutcome",
    "job_session",
    "owner_of",
]
