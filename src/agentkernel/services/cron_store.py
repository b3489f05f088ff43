"""The cron store (S10.2): jobs, their statuses, and the claims that make each due time run once.

One SQLite file (WAL; `cron.db_path`, `logs/cron.db` by default) shared by
every kernel that runs a scheduler on it. A job is keyed by its owner (the
user who scheduled it) and its name. Its row keeps the definition (JSON),
`next_run` (UTC epoch seconds; NULL once a oneshot has fired) and the
status `list_cron` shows. With kernel.yaml `store.url` the same rows are in
PostgreSQL (`PostgresCronStore`, cron_store_pg.py, which says how its locks
stand in for BEGIN IMMEDIATE); `CronMethods` is both stores' code.

**Exactly once.** A scheduler takes due times with `claim_due`: in one
write transaction (BEGIN IMMEDIATE, so two kernels queue) it picks the jobs
whose `next_run` has come, records the claim (`claimed_due`, by whom, until
when) and moves `next_run` past now. Another kernel's transaction then sees
the job not due, so one due time is claimed once. Due times missed while no
scheduler ran are coalesced: the job runs once for them, then its next due
time is the first after now (`misfire: skip` skips that one run when it is
later than the grace). A clock that jumps forward does the same: one run,
not a burst.

**One user's runs at once.** `claim_due` counts each owner's live claims
(every kernel's) and claims no more of an owner's due times than
`most_per_owner` allows: the rest stay due, marked `waiting` with the
reason, and are claimed by the first pass after one of that owner's runs
ends, earliest due first, each run once for what it missed (as after
downtime). A wait past `cron.misfire_grace_secs` of a `misfire: skip` job
skips that due time, recorded with why it waited. The cap is counted in
the store, so it holds across every kernel sharing it.

**A kernel that dies mid-run.** Its claim holds until `claim_until` (the
longest a run may take, plus a minute). A claim past that is a dead
kernel's: the next scheduler to look runs that due time again, under a
claim of its own. So a due time is run once among live kernels, and once
more after a crash that interrupted it; the run's `scheduled_at` tells a
webhook receiver which due time it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from agentkernel.errors import AgentKernelError
from agentkernel.services.cron_jobs import JobSpec, rfc3339, spec_from_json
from agentkernel.services.sqlite_db import Schema, SqliteStore
from agentkernel.services.user_work import Cap
from agentkernel.types import JSONObject

SCHEMA_VERSION = 3
BUSY_TIMEOUT_SECS = 10.0

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE jobs (
            owner TEXT NOT NULL,
            name TEXT NOT NULL,
            definition TEXT NOT NULL,
            scheduled_by TEXT NOT NULL DEFAULT '',
            static INTEGER NOT NULL DEFAULT 0,
            generation INTEGER NOT NULL DEFAULT 1,
            created_at REAL NOT NULL,
            next_run REAL,
            claimed_by TEXT,
            claimed_due REAL,
            claim_until REAL,
            last_run REAL,
            last_ok INTEGER,
            last_error TEXT,
            runs INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (owner, name)
        )""",
        "CREATE INDEX jobs_next_run ON jobs (next_run)",
        "CREATE INDEX jobs_claim_until ON jobs (claim_until)",
    ),
    2: ("ALTER TABLE jobs ADD COLUMN waiting TEXT",),  # why a due time waits (the owner's cap), or NULL
    3: ("ALTER TABLE jobs ADD COLUMN last_firing TEXT",),  # who ended the last claim: a retry sees its own
}


def cron_cap(limit: int) -> Cap:
    """cron.max_running_per_user as a cap: what a waiting job's status says."""
    return Cap("cron runs", "cron.max_running_per_user", limit, "it starts when one of them ends")


class TooManyJobs(AgentKernelError):
    """The owner already has `cron.max_jobs_per_user` jobs."""


@dataclass(frozen=True)
class Claim:
    """One due time of one job, claimed by a scheduler: run it, then `finish` it."""

    owner: str
    name: str
    generation: int
    spec: JobSpec
    scheduled_at: float
    misfired: bool  # later than the grace and `misfire: skip`: recorded as skipped, not run
    next_run: float | None = None  # the job's next due time once this claim ends (None: no more)
    waited: str | None = None  # why the due time waited before this claim (its owner's cap), if it did
    held_back: bool = False  # not claimed: its owner is at the cap; it waits, due, for one of theirs to end


@dataclass(frozen=True)
class Firing:
    """One due time of one job, fired by an outside scheduler (a Temporal Schedule, S27.2), to be claimed.

    `by` names the firing, the same for every attempt at it (a retry after a
    worker died takes its own claim back); `most_per_owner` is
    `cron.max_running_per_user`.
    """

    by: str
    owner: str
    name: str
    generation: int
    due: float
    most_per_owner: int | None = None


@dataclass(frozen=True)
class StoredJob:
    """A job as an outside scheduler needs it: what it is, which version, and when it was set."""

    owner: str
    spec: JobSpec
    generation: int
    created_at: float
    next_run: float | None
    running: bool


@dataclass(frozen=True)
class JobStatus:
    """A job as `list_cron` shows it."""

    owner: str
    spec: JobSpec
    scheduled_by: str
    static: bool
    next_run: float | None
    last_run: float | None
    last_ok: bool | None
    last_error: str | None
    runs: int
    running: bool
    waiting: str | None = None  # why a due time has not started yet (its owner's cap)

    def to_json(self) -> JSONObject:
        return {
            "name": self.spec.name,
            "template": self.spec.template,
            "timing": self.spec.timing.to_json(),
            "prompt": self.spec.prompt,
            "notify": [sink.to_json() for sink in self.spec.notify],
            "misfire": self.spec.misfire,
            "static": self.static,
            "next_run": rfc3339(self.next_run),
            "last_run": rfc3339(self.last_run),
            "last_ok": self.last_ok,
            "last_error": self.last_error,
            "runs": self.runs,
            "running": self.running,
            "waiting": self.waiting,
            "done": self.next_run is None and not self.running,
        }


_STATUS = (
    "owner, definition, scheduled_by, static, next_run, last_run, last_ok, last_error, runs, claimed_by, "
    "waiting"
)


@dataclass(frozen=True)
class CronDialect:
    """How one database spells the cron store's queries (SQLite here, PostgreSQL in cron_store_pg.py), and
    the locks it needs that SQLite's one writer at a time (BEGIN IMMEDIATE) gives for free.

    Queries are written once, with `?` for a parameter and `{jobs}` for the table; `q` makes them this
    database's. `lock_jobs_of(conn, owner)` serialises the job count of `put`; `lock_runs_of(conn,
    owners)` serialises the count of those owners' live claims in `claim_due` (both no-ops in SQLite).
    """

    table: str
    mark: str
    least: str  # the scalar minimum of two values: SQLite's `min`, PostgreSQL's `least`
    skip_locked: str  # appended to the due rows' SELECT: "" or " FOR UPDATE SKIP LOCKED"
    lock_jobs_of: Callable[[Any, str], None]
    lock_runs_of: Callable[[Any, Iterable[str]], None]
    row_lock: str = ""  # appended to a SELECT of rows about to change: "" or " FOR UPDATE"

    def q(self, sql: str) -> str:
        return sql.format(jobs=self.table, least=self.least).replace("?", self.mark)


def _no_lock(conn: Any, owners: object) -> None:
    """SQLite: the write transaction (BEGIN IMMEDIATE) already holds the whole file."""


SQLITE = CronDialect("jobs", "?", "min", "", _no_lock, _no_lock)


@runtime_checkable
class CronJobStore(Protocol):
    """What the cron service and scheduler use of a cron store: `CronStore` (SQLite) and
    `PostgresCronStore` (cron_store_pg.py) both are one."""

    def put(
        self,
        owner: str,
        spec: JobSpec,
        first_due: float | None,
        *,
        by: str,
        now: float,
        most: int,
        static: bool = False,
    ) -> None: ...
    def delete(self, owner: str, name: str) -> bool: ...
    def statuses(self, owner: str | None = None) -> list[JobStatus]: ...
    def static_jobs(self) -> list[tuple[str, str]]: ...
    def definition(self, owner: str, name: str) -> str | None: ...
    def claim_due(
        self,
        scheduler: str,
        now: float,
        lease_secs: float,
        grace_secs: float,
        most_per_owner: int | None = None,
    ) -> list[Claim]: ...
    def claim_fired(
        self, firing: Firing, now: float, lease_secs: float, grace_secs: float
    ) -> Claim | None: ...
    def scheduled_jobs(self) -> list[StoredJob]: ...
    def changes_mark(self) -> tuple[float, ...]: ...
    def finish(self, claim: Claim, scheduler: str, *, ran_at: float, ok: bool, error: str | None) -> bool: ...
    def release(self, claim: Claim, scheduler: str) -> None: ...
    def abandon(self, claim: Claim, scheduler: str) -> None: ...
    def next_wake(self, now: float, most_per_owner: int | None = None) -> float | None: ...
    def rewind(self, now: float) -> int: ...
    def close(self) -> None: ...


class _Store(Protocol):
    """What `CronMethods` needs of the class it is mixed into: a dialect and a store underneath."""

    dialect: ClassVar[CronDialect]

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...

    def _write(self) -> AbstractContextManager[Any]: ...


class CronMethods:
    """The cron store's operations, written once: both stores differ only in their `dialect` and the
    store underneath (`_read`, `_write`). Every change is one transaction."""

    dialect: ClassVar[CronDialect]

    # -- definitions -------------------------------------------------------------------------------

    def put(
        self: _Store,
        owner: str,
        spec: JobSpec,
        first_due: float | None,
        *,
        by: str,
        now: float,
        most: int,
        static: bool = False,
    ) -> None:
        """Create the job, or replace the owner's job of that name (its status starts afresh).

        TooManyJobs when a new job would pass `most` jobs of this owner. A run
        of the replaced definition still under way finishes without touching
        the new one (`generation`).
        """
        q = self.dialect.q
        definition = json.dumps(spec.to_json(), ensure_ascii=False)
        with self._write() as conn:
            self.dialect.lock_jobs_of(conn, owner)
            (exists,) = conn.execute(
                q("SELECT count(*) FROM {jobs} WHERE owner = ? AND name = ?"), (owner, spec.name)
            ).fetchone()
            if not exists:
                (count,) = conn.execute(q("SELECT count(*) FROM {jobs} WHERE owner = ?"), (owner,)).fetchone()
                if count >= most:
                    raise TooManyJobs(
                        f"{owner!r} already has {count} jobs, the most cron.max_jobs_per_user allows"
                    )
            conn.execute(
                q(
                    """INSERT INTO {jobs} AS j
                       (owner, name, definition, scheduled_by, static, created_at, next_run)
                   VALUES (?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (owner, name) DO UPDATE SET
                     definition = excluded.definition, scheduled_by = excluded.scheduled_by,
                     static = excluded.static, generation = j.generation + 1,
                     created_at = excluded.created_at,
                     next_run = excluded.next_run, claimed_by = NULL, claimed_due = NULL, claim_until = NULL,
                     last_run = NULL, last_ok = NULL, last_error = NULL, runs = 0, waiting = NULL,
                     last_firing = NULL"""
                ),
                (owner, spec.name, definition, by, int(static), now, first_due),
            )

    def delete(self: _Store, owner: str, name: str) -> bool:
        """Remove the owner's job; whether there was one."""
        sql = self.dialect.q("DELETE FROM {jobs} WHERE owner = ? AND name = ?")
        with self._write() as conn:
            return bool(conn.execute(sql, (owner, name)).rowcount > 0)

    def statuses(self: _Store, owner: str | None = None) -> list[JobStatus]:
        """The jobs of `owner` (every owner's when None), by name."""
        q = self.dialect.q
        if owner is None:
            rows = self._read(q(f"SELECT {_STATUS} FROM {{jobs}} ORDER BY owner, name"), ())
        else:
            rows = self._read(q(f"SELECT {_STATUS} FROM {{jobs}} WHERE owner = ? ORDER BY name"), (owner,))
        return [_status(row) for row in rows]

    def static_jobs(self: _Store) -> list[tuple[str, str]]:
        """The (owner, name) of every job kernel.yaml declared, whichever user owned them then."""
        rows = self._read(self.dialect.q("SELECT owner, name FROM {jobs} WHERE static = 1"), ())
        return [(str(owner), str(name)) for owner, name in rows]

    def definition(self: _Store, owner: str, name: str) -> str | None:
        sql = self.dialect.q("SELECT definition FROM {jobs} WHERE owner = ? AND name = ?")
        rows = self._read(sql, (owner, name))
        return str(rows[0][0]) if rows else None

    # -- scheduling --------------------------------------------------------------------------------

    def claim_due(
        self: _Store,
        scheduler: str,
        now: float,
        lease_secs: float,
        grace_secs: float,
        most_per_owner: int | None = None,
    ) -> list[Claim]:
        """Claim every due time that has come (and every dead scheduler's claim), in one transaction.

        With `most_per_owner`, an owner's due times past that many live claims
        of theirs are not claimed: they come back `held_back`, and wait in
        the store, due and marked `waiting` (the module docstring). The due
        rows are taken first (in PostgreSQL locked, skipping rows another
        scheduler holds), then their owners' run counts (under the owners'
        lock, so two schedulers never both pass one owner's cap).
        """
        claims: list[Claim] = []
        dialect = self.dialect
        with self._write() as conn:
            rows = conn.execute(
                dialect.q(
                    "SELECT owner, name, generation, definition, next_run, claimed_due, claim_until, waiting "
                    "FROM {jobs} WHERE (next_run <= ? AND claimed_by IS NULL) OR claim_until < ? "
                    "ORDER BY CASE WHEN claim_until < ? THEN claimed_due ELSE next_run END, owner, name"
                )
                + dialect.skip_locked,
                (now, now, now),
            ).fetchall()
            if not rows:
                return claims
            dialect.lock_runs_of(conn, sorted({str(row[0]) for row in rows}))
            running = _running_by_owner(dialect, conn, now)
            for owner, name, generation, definition, next_run, claimed_due, claim_until, waiting in rows:
                spec = spec_from_json(definition)
                taken_over = claim_until is not None and claim_until < now
                due = float(claimed_due if taken_over else next_run)
                misfired = spec.misfire == "skip" and now - due > grace_secs
                busy = running.get(owner, 0)
                if not misfired and most_per_owner is not None and busy >= most_per_owner:
                    why = cron_cap(most_per_owner).refusal(owner, busy)
                    _hold_back(dialect, conn, (owner, name, generation), taken_over, why, waiting)
                    claims.append(Claim(owner, name, generation, spec, due, False, held_back=True))
                    continue
                following = next_run if taken_over else spec.timing.following(float(next_run), now)
                conn.execute(
                    dialect.q(
                        "UPDATE {jobs} SET claimed_by = ?, claimed_due = ?, claim_until = ?, next_run = ?, "
                        "waiting = NULL WHERE owner = ? AND name = ? AND generation = ?"
                    ),
                    (scheduler, due, now + lease_secs, following, owner, name, generation),
                )
                running[owner] = busy + (0 if misfired else 1)
                claims.append(Claim(owner, name, generation, spec, due, misfired, following, waiting))
        return claims

    def claim_fired(
        self: _Store, firing: Firing, now: float, lease_secs: float, grace_secs: float
    ) -> Claim | None:
        """Claim one due time an outside scheduler fired (a Temporal Schedule), in one transaction.

        None when there is nothing to run: the job is gone or was replaced
        (another `generation`), or another firing of it holds a live claim
        (its runs never overlap; this due time is coalesced into that run, as
        `claim_due` coalesces). A claim by `firing.by` itself (an attempt of
        this firing whose worker died) is taken back. Past its owner's cap
        the claim comes back `held_back` and the job says why it waits; ask
        again later. `misfired` as in `claim_due`.
        """
        dialect = self.dialect
        with self._write() as conn:
            dialect.lock_runs_of(conn, [firing.owner])
            row = conn.execute(
                dialect.q(
                    "SELECT definition, claimed_by, claim_until, waiting, last_firing FROM {jobs} "
                    "WHERE owner = ? AND name = ? AND generation = ?"
                )
                + dialect.row_lock,
                (firing.owner, firing.name, firing.generation),
            ).fetchone()
            if row is None:
                return None
            definition, claimed_by, claim_until, waiting, last_firing = row
            if last_firing == firing.by:  # this firing ran (or was skipped) already: its retry runs nothing
                return None
            if claimed_by is not None and claimed_by != firing.by and claim_until >= now:
                return None
            spec = spec_from_json(definition)
            misfired = spec.misfire == "skip" and now - firing.due > grace_secs
            job = (firing.owner, firing.name, firing.generation)
            mine = 1 if claimed_by is not None and claim_until >= now else 0  # counted among the owner's
            busy = _running_by_owner(dialect, conn, now).get(firing.owner, 0) - mine
            most = firing.most_per_owner
            if not misfired and most is not None and busy >= most:
                why = cron_cap(most).refusal(firing.owner, busy)
                if why != waiting:
                    conn.execute(
                        dialect.q(
                            "UPDATE {jobs} SET waiting = ? WHERE owner = ? AND name = ? AND generation = ?"
                        ),
                        (why, *job),
                    )
                return Claim(*job, spec, firing.due, False, held_back=True)
            following = spec.timing.following(firing.due, now)
            conn.execute(
                dialect.q(
                    "UPDATE {jobs} SET claimed_by = ?, claimed_due = ?, claim_until = ?, next_run = ?, "
                    "waiting = NULL WHERE owner = ? AND name = ? AND generation = ?"
                ),
                (firing.by, firing.due, now + lease_secs, following, *job),
            )
            return Claim(*job, spec, firing.due, misfired, following, waiting)

    def scheduled_jobs(self: _Store) -> list[StoredJob]:
        """Every owner's jobs, with their generation and when they were set (an outside scheduler's view)."""
        rows = self._read(
            self.dialect.q(
                "SELECT owner, definition, generation, created_at, next_run, claimed_by FROM {jobs} "
                "ORDER BY owner, name"
            ),
            (),
        )
        return [
            StoredJob(
                str(owner),
                spec_from_json(definition),
                int(generation),
                float(created),
                next_run,
                by is not None,
            )
            for owner, definition, generation, created, next_run, by in rows
        ]

    def changes_mark(self: _Store) -> tuple[float, ...]:
        """A mark that changes whenever a job is added, replaced, removed or has run its last: a cheap
        way for an outside scheduler to know whether to look at `scheduled_jobs` again."""
        rows = self._read(
            self.dialect.q(
                "SELECT count(*), coalesce(sum(generation), 0), coalesce(max(created_at), 0), "
                "count(next_run) FROM {jobs}"
            ),
            (),
        )
        return tuple(float(value) for value in rows[0])

    def finish(
        self: _Store, claim: Claim, scheduler: str, *, ran_at: float, ok: bool, error: str | None
    ) -> bool:
        """Record a claimed run's outcome and release the claim; False when the claim was lost meanwhile."""
        with self._write() as conn:
            cursor = conn.execute(
                self.dialect.q(
                    "UPDATE {jobs} SET claimed_by = NULL, claimed_due = NULL, claim_until = NULL, "
                    "last_firing = claimed_by, last_run = ?, last_ok = ?, last_error = ?, runs = runs + 1 "
                    "WHERE owner = ? AND name = ? AND generation = ? AND claimed_by = ? AND claimed_due = ?"
                ),
                (
                    ran_at,
                    int(ok),
                    error,
                    claim.owner,
                    claim.name,
                    claim.generation,
                    scheduler,
                    claim.scheduled_at,
                ),
            )
            return bool(cursor.rowcount > 0)

    def release(self: _Store, claim: Claim, scheduler: str) -> None:
        """Give a claim back unrun (a misfire skipped): the status shows the skip as the last error."""
        why = f"skipped the run due at {rfc3339(claim.scheduled_at)} (misfire: skip)"
        if claim.waited is not None:
            why += f": it waited past cron.misfire_grace_secs because {claim.waited}"
        with self._write() as conn:
            conn.execute(
                self.dialect.q(
                    "UPDATE {jobs} SET claimed_by = NULL, claimed_due = NULL, claim_until = NULL, "
                    "last_firing = claimed_by, last_error = ? "
                    "WHERE owner = ? AND name = ? AND generation = ? AND claimed_by = ?"
                ),
                (
                    why,
                    claim.owner,
                    claim.name,
                    claim.generation,
                    scheduler,
                ),
            )

    def abandon(self: _Store, claim: Claim, scheduler: str) -> None:
        """Give a claim back unfinished (the scheduler is stopping): its due time runs again next time."""
        with self._write() as conn:
            conn.execute(
                self.dialect.q(
                    "UPDATE {jobs} SET claimed_by = NULL, claimed_due = NULL, claim_until = NULL, "
                    "next_run = {least}(coalesce(next_run, claimed_due), claimed_due) "
                    "WHERE owner = ? AND name = ? AND generation = ? AND claimed_by = ?"
                ),
                (claim.owner, claim.name, claim.generation, scheduler),
            )

    def next_wake(self: _Store, now: float, most_per_owner: int | None = None) -> float | None:
        """The earliest moment anything is due: a next run, or a claim that may have been a dead kernel's.

        A job claimed (running, here or in another kernel) still counts with
        its next run when that is ahead of `now`, so every kernel on the store
        wakes for each due time and contends for it, not only the one that
        ran the last; a next run already passed under a claim waits for the
        claim to end (the runner's kernel is told; others look at the lease's
        end, or the rescan), never a busy loop. So does a due time held back
        by its owner's cap (`most_per_owner`): it waits for one of the
        owner's runs to end.
        """
        most = -1 if most_per_owner is None else most_per_owner  # -1: no owner is ever at the cap
        rows = self._read(
            self.dialect.q(
                "SELECT min(m) FROM (SELECT min(next_run) AS m FROM {jobs} "
                "WHERE (claimed_by IS NULL OR next_run > ?) AND NOT (claimed_by IS NULL AND next_run <= ? "
                "AND owner IN (SELECT owner FROM {jobs} WHERE claimed_by IS NOT NULL AND claim_until >= ? "
                "GROUP BY owner HAVING ? >= 0 AND count(*) >= ?)) "
                "UNION ALL SELECT min(claim_until) FROM {jobs}) AS due"
            ),
            (now, now, now, most, most),
        )
        value = rows[0][0]
        return None if value is None else float(value)

    def rewind(self: _Store, now: float) -> int:
        """After the clock went back: a next run further ahead than its job could ask is brought in.

        An interval job's next run is at most one interval after now, a
        schedule's at most its next due time after now; a stored one beyond
        that was computed from a clock that has since been set back.
        """
        changed = 0
        q = self.dialect.q
        with self._write() as conn:
            rows = conn.execute(
                q(
                    "SELECT owner, name, generation, definition, next_run FROM {jobs} "
                    "WHERE claimed_by IS NULL AND next_run > ?"
                )
                + self.dialect.skip_locked,
                (now,),
            ).fetchall()
            for owner, name, generation, definition, next_run in rows:
                spec = spec_from_json(definition)
                if spec.timing.kind == "oneshot":
                    continue
                soonest = spec.timing.due_after(now)
                if soonest is not None and soonest < next_run:
                    conn.execute(
                        q("UPDATE {jobs} SET next_run = ? WHERE owner = ? AND name = ? AND generation = ?"),
                        (soonest, owner, name, generation),
                    )
                    changed += 1
        return changed


def _running_by_owner(dialect: CronDialect, conn: Any, now: float) -> dict[str, int]:
    """Each owner's runs under way in any kernel: their live claims."""
    rows = conn.execute(
        dialect.q(
            "SELECT owner, count(*) FROM {jobs} WHERE claimed_by IS NOT NULL AND claim_until >= ? "
            "GROUP BY owner"
        ),
        (now,),
    ).fetchall()
    return {str(owner): int(count) for owner, count in rows}


def _hold_back(
    dialect: CronDialect, conn: Any, job: tuple[str, str, int], taken_over: bool, why: str, was: str | None
) -> None:
    """A due time its owner's cap holds back: it stays due (a dead kernel's claim given back), and
    says why it waits."""
    where = "owner = ? AND name = ? AND generation = ?"
    if taken_over:
        conn.execute(
            dialect.q(
                "UPDATE {jobs} SET claimed_by = NULL, claim_until = NULL, next_run = claimed_due, "
                f"claimed_due = NULL WHERE {where}"
            ),
            job,
        )
    if why != was:
        conn.execute(dialect.q(f"UPDATE {{jobs}} SET waiting = ? WHERE {where}"), (why, *job))


class CronStore(CronMethods, SqliteStore):
    """The jobs of every user in one SQLite file: see the module docstring and `CronMethods`."""

    dialect = SQLITE

    def __init__(self, path: Path | str) -> None:
        super().__init__(path, Schema(SCHEMA_VERSION, _MIGRATIONS, too_new=self._too_new), BUSY_TIMEOUT_SECS)

    def _too_new(self, version: int) -> AgentKernelError:
        return AgentKernelError(
            f"{self.path}: cron store schema version {version} is newer than this kernel's {SCHEMA_VERSION}"
        )


def _status(row: tuple[Any, ...]) -> JobStatus:
    owner, definition, by, static, next_run, last_run, last_ok, last_error, runs, claimed_by, waiting = row
    return JobStatus(
        owner=str(owner),
        spec=spec_from_json(definition),
        scheduled_by=str(by),
        static=bool(static),
        next_run=None if next_run is None else float(next_run),
        last_run=None if last_run is None else float(last_run),
        last_ok=None if last_ok is None else bool(last_ok),
        last_error=last_error,
        runs=int(runs),
        running=claimed_by is not None,
        waiting=waiting,
    )


__all__ = [
    "SQLITE",
    "Claim",
    "CronDialect",
    "CronJobStore",
    "CronMethods",
    "CronStore",
    "Firing",
    "JobStatus",
    "StoredJob",
    "TooManyJobs",
    "cron_cap",
]
