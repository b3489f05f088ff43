"""Turn leases: one turn per session at a time, across every process on one store.

A session's running turn holds a lease: a row of `turn_leases` in the
message store's SQLite file (kernel.yaml's `logging.messages_db_path`,
versioned in its own `turn_leases_schema` table), so every process serving
that file sees it. Decisions:

- **The row**: the session, its user, the holder's token (process id and
  16 random bytes, one per turn) and when it expires, in wall-clock seconds
  (processes share no monotonic clock; the lease is seconds long, so a
  clock step of seconds is what it does not survive).
- **Taking** (`take`) is one short write transaction (BEGIN IMMEDIATE, WAL):
  refused with `SessionLeased` while another token's row is live; refused
  with `UserAtCap` when the user already holds `most_per_user` live leases
  (every process's, counted in the same transaction, so two processes
  cannot both pass the cap). A row past its expiry is a dead holder's
  (killed, frozen): it is replaced, so a session is usable again at most
  the lease's length after its holder stopped renewing.
- **Renewing** (`renew`) moves the expiry on while the turn runs (the
  server does it every third of the lease), as long as the row is still
  the holder's token; False means the lease was lost (it expired and
  another process took it). **Releasing** deletes the holder's own row only.
- **Writes are fenced**: a leased turn's transcript records are written
  only while the row is still the writer's, checked inside the record's own
  insert (services/memory.py, `append(lease=…)`), so a holder frozen past its
  lease (SIGSTOP, swap) that wakes up cannot write into the turn that
  replaced it: its write fails with `LeaseLost`, whatever its timers say.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

from agentkernel.errors import AgentKernelError
from agentkernel.services.sqlite_db import Schema, SqliteStore

TABLE = "turn_leases"
RUNS = "runs"
BUSY_TIMEOUT_SECS = 10.0
RUNNING, ENDED = "running", "ended"

_SCHEMA = Schema(
    version=4,
    upgrades={
        1: (
            f"""CREATE TABLE {TABLE} (
                session_id TEXT PRIMARY KEY,
                user_id TEXT NOT NULL,
                token TEXT NOT NULL,
                expires_at REAL NOT NULL
            )""",
            f"CREATE INDEX {TABLE}_user ON {TABLE} (user_id, expires_at)",
        ),
        # a turn is a run (S25.1): its row, started with its lease; its steps are the transcript's
        # records with its id (services/memory.py), written before they are used
        2: (
            f"""CREATE TABLE {RUNS} (
                id TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                status TEXT NOT NULL,
                reason TEXT,
                text TEXT,
                prompt TEXT,
                started_call TEXT,
                one_off INTEGER NOT NULL DEFAULT 0,
                idem_key TEXT,
                body_hash TEXT,
                created_at REAL NOT NULL,
                ended_at REAL,
                taken_over INTEGER NOT NULL DEFAULT 0,
                template TEXT NOT NULL DEFAULT ''
            )""",
            f"CREATE UNIQUE INDEX {RUNS}_key ON {RUNS} (user_id, idem_key) WHERE idem_key IS NOT NULL",
            f"CREATE INDEX {RUNS}_open ON {RUNS} (session_id) WHERE status = '{RUNNING}'",
            f"CREATE INDEX {RUNS}_session ON {RUNS} (session_id, created_at)",
            f"CREATE INDEX {RUNS}_body ON {RUNS} (user_id, body_hash, created_at) WHERE one_off = 1",
            # a stop asked on any process: the holder sees it and stops its turn
            f"ALTER TABLE {TABLE} ADD COLUMN stop_asked INTEGER NOT NULL DEFAULT 0",
        ),
        # a run waiting for a person's decision on a call (S24.4): still its session's, not counted
        # as one of its user's running turns
        3: (f"ALTER TABLE {RUNS} ADD COLUMN waiting_call TEXT",),
        # the run's span as it began (W3C traceparent, S26.1): a run resumed elsewhere joins its trace
        4: (f"ALTER TABLE {RUNS} ADD COLUMN traceparent TEXT",),
    },
    too_new=lambda found: AgentKernelError(
        f"the turn leases in the message store have schema version {found}, "
        "newer than this agentkernel knows (4)"
    ),
    version_table=f"{TABLE}_schema",
)


@dataclass(frozen=True)
class NewRun:
    """The run a turn starts with its lease: its id, the user's message, and how a retry finds it.

    `one_off`: a stateless client's turn (its conversation is the client's),
    ended rather than resumed when its process dies. `idem_key` and
    `body_hash`: the request's `Idempotency-Key` and a hash of its body.
    """

    id: str
    text: str | None
    one_off: bool = False
    idem_key: str | None = None
    body_hash: str | None = None
    template: str = ""  # the template its session talks to (a chat completion's has no session row)


@dataclass(frozen=True)
class Run:
    """A run's row: whose, where it is (`running` or `ended`, and why), and what it was asked."""

    id: str
    session_id: str
    user_id: str
    status: str
    reason: str | None
    text: str | None
    prompt: dict[str, Any] | None  # the message as the hooks left it, once they ran (agent/journal.py)
    started_call: str | None  # the tool call started last (its result may be missing: S25.3)
    one_off: bool
    idem_key: str | None
    body_hash: str | None
    created_at: float
    ended_at: float | None
    damaged: str | None = None  # why the row cannot be resumed as it is (a column not as written)
    taken_over: int = 0  # how many times a process took it over from a dead one (this time included)
    template: str = ""
    waiting_call: str | None = None  # the call it waits on a person's decision for (S24.4)
    traceparent: str | None = None  # its span as it began (S26.1), when traced

    @property
    def running(self) -> bool:
        return self.status == RUNNING

    def to_json(self) -> dict[str, Any]:
        """What `GET /v1/runs/{id}` says of it (the answer and events are read from its records)."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "status": "waiting_approval" if self.running and self.waiting_call else self.status,
            "reason": self.reason,
            "created_at": self.created_at,
            "ended_at": self.ended_at,
        }


@dataclass
class Lease:
    """One turn's hold on its session: whose, the holder's token, its length and its current expiry.

    `resumes`: the session's run that its dead holder left unfinished, taken
    over with the lease (it must be resumed or ended before a new one starts).
    """

    session_id: str
    user_id: str
    token: str
    secs: float
    expires_at: float  # wall-clock seconds, as last taken or renewed
    resumes: Run | None = None


class RunExists(AgentKernelError):
    """The request's Idempotency-Key names a run of the user already: the same run, or a refusal."""

    def __init__(self, run: Run, same_body: bool) -> None:
        super().__init__(f"Idempotency-Key {run.idem_key!r} is run {run.id}")
        self.run = run
        self.same_body = same_body


class SessionLeased(AgentKernelError):
    """Another turn (of this process or another) holds the session's lease."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} has a turn running")
        self.session_id = session_id


class UserAtCap(AgentKernelError):
    """The user holds as many live leases as allowed (every process's turns)."""

    def __init__(self, user_id: str, running: int) -> None:
        super().__init__(f"user {user_id!r} has {running} turns running")
        self.user_id = user_id
        self.running = running


class LeaseLost(AgentKernelError):
    """A write of a turn whose lease expired and was taken by another: refused, nothing written."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id}: this turn's lease expired (not renewed within server.turn_lease_secs) "
            "and another turn holds the session now; this turn's record was not written"
        )
        self.session_id = session_id


def new_token() -> str:
    """A holder's token: its process id (for a person reading the table) and 16 random bytes."""
    import secrets  # with hashlib: for a lease taken only

    return f"{os.getpid()}:{secrets.token_hex(16)}"


class _Leases(Protocol):
    """What `LeaseMethods` needs of the class it is mixed into (see there)."""

    mark: ClassVar[str]
    hold_sql: ClassVar[str]

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...

    def _write(self) -> AbstractContextManager[Any]: ...

    def _write_at_once(self) -> AbstractContextManager[Any | None]: ...

    def _claim(self, conn: Any, session_id: str, user_id: str) -> None: ...


class LeaseMethods:
    """What both lease stores do, written once: SQLite's (`TurnLeases`) and PostgreSQL's
    (turn_leases_pg.py) differ in their placeholder (`mark`), the statement that sets a session's
    lease row (`hold_sql`), how a taker keeps others off the session and its user's count until it
    commits (`_claim`: the SQLite store's write lock does it already), their `take_over` and the
    store underneath (`_read`, `_write`)."""

    mark: ClassVar[str]
    hold_sql: ClassVar[str]  # the row (session_id, user_id, token, expires_at), stop_asked cleared

    def take(
        self: _Leases,
        session_id: str,
        user_id: str,
        secs: float,
        most_per_user: int | None = None,
        run: NewRun | None = None,
    ) -> Lease:
        """The session's lease for `secs` seconds, and `run` started with it, in one transaction.

        RunExists when `run`'s Idempotency-Key is a run of the user already
        (checked first: a retry while the run goes on finds it), SessionLeased
        or UserAtCap when the lease may not be taken. When the session has a
        run its dead holder left unfinished, that run is taken over instead
        (`Lease.resumes`) and `run` is not started.
        """
        with self._write() as conn:
            return _take(self, conn, session_id, user_id, secs, most_per_user, run)

    def take_at_once(
        self: _Leases,
        session_id: str,
        user_id: str,
        secs: float,
        most_per_user: int | None = None,
        run: NewRun | None = None,
    ) -> Lease | None:
        """`take`, only if the store takes the write without waiting for anyone (no other writer of
        this process or another, a local file): None, nothing written, when it would wait. For the
        event loop, which must not wait on a store: the caller takes it on a worker thread instead."""
        with self._write_at_once() as conn:
            if conn is None:
                return None
            return _take(self, conn, session_id, user_id, secs, most_per_user, run)

    def end_run(self: _Leases, run_id: str, reason: str, lease: str | None = None) -> bool:
        """End a run the loop did not end (its turn failed); with `lease`, only while that is the session's.
        False when it had ended already, or another holds its session now (it is theirs to resume)."""
        m = self.mark
        fence = (
            f" AND EXISTS (SELECT 1 FROM {TABLE} l WHERE l.session_id = {RUNS}.session_id AND l.token = {m})"
        )
        with self._write() as conn:
            cursor = conn.execute(
                f"UPDATE {RUNS} SET status = '{ENDED}', reason = {m}, ended_at = {m} "
                f"WHERE id = {m} AND status = '{RUNNING}'" + (fence if lease is not None else ""),
                (reason, time.time(), run_id, *([lease] if lease is not None else [])),
            )
        return int(cursor.rowcount) == 1

    def orphans(self: _Leases, most: int = 16) -> list[str]:
        """Runs still `running` whose session nobody holds: their process died (or stopped renewing)."""
        m = self.mark
        rows = self._read(
            f"SELECT r.id FROM {RUNS} r WHERE r.status = '{RUNNING}' AND NOT EXISTS "
            f"(SELECT 1 FROM {TABLE} l WHERE l.session_id = r.session_id AND l.expires_at > {m}) "
            f"ORDER BY r.created_at LIMIT {m}",
            (time.time(), most),
        )
        return [str(row[0]) for row in rows]

    def run(self: _Leases, run_id: str) -> Run | None:
        """The run `run_id`, or None."""
        rows = self._read(f"SELECT {RUN_FIELDS} FROM {RUNS} WHERE id = {self.mark}", (run_id,))
        return _run(rows[0]) if rows else None

    def latest_of_body(self: _Leases, user_id: str, body_hash: str, since: float) -> Run | None:
        """The user's latest stateless run (a chat completion) of a request body, started after `since`."""
        m = self.mark
        rows = self._read(
            f"SELECT {RUN_FIELDS} FROM {RUNS} WHERE user_id = {m} AND body_hash = {m} AND one_off = 1 "
            f"AND created_at > {m} ORDER BY created_at DESC LIMIT 1",
            (user_id, body_hash, since),
        )
        return _run(rows[0]) if rows else None

    def runs_of(self: _Leases, session_id: str, most: int = 50) -> list[Run]:
        """The session's latest runs, newest first."""
        m = self.mark
        rows = self._read(
            f"SELECT {RUN_FIELDS} FROM {RUNS} WHERE session_id = {m} ORDER BY created_at DESC LIMIT {m}",
            (session_id, most),
        )
        return [_run(row) for row in rows]

    def renew(self: _Leases, lease: Lease) -> bool:
        """Move the expiry `lease.secs` on; False when the row is no longer this holder's (lost)."""
        m = self.mark
        with self._write() as conn:
            expires_at = time.time() + lease.secs
            cursor = conn.execute(
                f"UPDATE {TABLE} SET expires_at = {m} WHERE session_id = {m} AND token = {m}",
                (expires_at, lease.session_id, lease.token),
            )
        if cursor.rowcount != 1:
            return False
        lease.expires_at = expires_at
        return True

    def ask_stop(self: _Leases, session_id: str) -> bool:
        """Ask the session's running turn to stop, whichever process holds it; False when none runs."""
        m = self.mark
        with self._write() as conn:
            cursor = conn.execute(
                f"UPDATE {TABLE} SET stop_asked = 1 WHERE session_id = {m} AND expires_at > {m}",
                (session_id, time.time()),
            )
        return int(cursor.rowcount) == 1

    def stops_asked(self: _Leases, leases: Sequence[Lease]) -> list[Lease]:
        """Those of `leases` whose turn was asked to stop: one read for every turn a process runs
        (rows asked to stop are few; the process looks every second)."""
        rows = self._read(f"SELECT session_id, token FROM {TABLE} WHERE stop_asked = 1", ())
        asked = {(row[0], row[1]) for row in rows}
        return [lease for lease in leases if (lease.session_id, lease.token) in asked]

    def release(self: _Leases, lease: Lease) -> None:
        """The turn is over: its row goes (another holder's row, if it lost the lease, stays)."""
        with self._write() as conn:
            _delete(self, conn, lease)

    def release_at_once(self: _Leases, lease: Lease) -> bool:
        """`release`, only if the store takes the write without waiting for anyone (see `take_at_once`);
        False, nothing written, when it would wait."""
        with self._write_at_once() as conn:
            if conn is None:
                return False
            _delete(self, conn, lease)
        return True

    def held(self: _Leases, session_id: str) -> bool:
        """Whether a live lease holds the session (a turn runs in it, on any process)."""
        m = self.mark
        rows = self._read(
            f"SELECT 1 FROM {TABLE} WHERE session_id = {m} AND expires_at > {m}", (session_id, time.time())
        )
        return bool(rows)

    def running(self: _Leases, user_id: str) -> int:
        """How many live leases `user_id` holds, every process's."""
        rows = self._read(counted(self.mark), (user_id, time.time()))
        return int(rows[0][0])


class TurnLeases(LeaseMethods, SqliteStore):
    """The `turn_leases` table, in the message store's file; safe from any thread and process."""

    mark = "?"
    hold_sql = f"INSERT OR REPLACE INTO {TABLE} (session_id, user_id, token, expires_at) VALUES (?, ?, ?, ?)"

    def __init__(self, path: Path | str, busy_timeout_secs: float = BUSY_TIMEOUT_SECS) -> None:
        super().__init__(path, _SCHEMA, busy_timeout_secs)

    @staticmethod
    def _claim(conn: sqlite3.Connection, session_id: str, user_id: str) -> None:
        """Nothing: the write transaction (BEGIN IMMEDIATE) holds the file's one write lock."""

    def take_over(self, run_id: str, secs: float) -> Lease | None:
        """The lease of an unfinished run's session, when its holder is gone (None: it is held, or the
        run has ended meanwhile). Two processes asking at once: one gets it (the write lock)."""
        with self._write() as conn:
            now = time.time()
            run = one_run(conn, "?", f"id = ? AND status = '{RUNNING}'", (run_id,))
            if run is None:
                return None
            row = conn.execute(
                f"SELECT expires_at FROM {TABLE} WHERE session_id = ?", (run.session_id,)
            ).fetchone()
            if row is not None and row[0] > now:
                return None
            taken = taken_over(conn, "?", "id = ?", (run_id,))
            lease = Lease(run.session_id, run.user_id, new_token(), secs, 0.0, resumes=taken)
            hold(conn, self.hold_sql, lease, now)
        return lease


class LeaseStore(Protocol):
    """What the kernel and the server need of the turn leases and run journal (`TurnLeases` in the
    message store's file, `PostgresTurnLeases` in the store database)."""

    def take(
        self,
        session_id: str,
        user_id: str,
        secs: float,
        most_per_user: int | None = None,
        run: NewRun | None = None,
    ) -> Lease: ...

    def take_at_once(
        self,
        session_id: str,
        user_id: str,
        secs: float,
        most_per_user: int | None = None,
        run: NewRun | None = None,
    ) -> Lease | None: ...

    def take_over(self, run_id: str, secs: float) -> Lease | None: ...

    def end_run(self, run_id: str, reason: str, lease: str | None = None) -> bool: ...

    def orphans(self, most: int = 16) -> list[str]: ...

    def run(self, run_id: str) -> Run | None: ...

    def latest_of_body(self, user_id: str, body_hash: str, since: float) -> Run | None: ...

    def runs_of(self, session_id: str, most: int = 50) -> list[Run]: ...

    def renew(self, lease: Lease) -> bool: ...

    def ask_stop(self, session_id: str) -> bool: ...

    def stops_asked(self, leases: Sequence[Lease]) -> list[Lease]: ...

    def release(self, lease: Lease) -> None: ...

    def release_at_once(self, lease: Lease) -> bool: ...

    def held(self, session_id: str) -> bool: ...

    def running(self, user_id: str) -> int: ...

    def close(self) -> None: ...


def _take(
    leases: _Leases,
    conn: Any,
    session_id: str,
    user_id: str,
    secs: float,
    most_per_user: int | None,
    run: NewRun | None,
) -> Lease:
    """`take`'s work, in the write transaction on `conn`."""
    m = leases.mark
    lease = Lease(session_id, user_id, new_token(), secs, 0.0)
    leases._claim(conn, session_id, user_id)
    now = time.time()
    if run is not None and run.idem_key is not None:
        known = one_run(conn, m, f"user_id = {m} AND idem_key = {m}", (user_id, run.idem_key))
        if known is not None:
            raise RunExists(known, known.body_hash == run.body_hash)
    row = conn.execute(f"SELECT expires_at FROM {TABLE} WHERE session_id = {m}", (session_id,)).fetchone()
    if row is not None and row[0] > now:
        raise SessionLeased(session_id)
    if most_per_user is not None:
        (running,) = conn.execute(counted(m), (user_id, now)).fetchone()
        if running >= most_per_user:
            raise UserAtCap(user_id, running)
    hold(conn, leases.hold_sql, lease, now)
    lease.resumes = taken_over(conn, m, f"session_id = {m} AND status = '{RUNNING}'", (session_id,))
    if lease.resumes is None and run is not None:
        conn.execute(
            f"INSERT INTO {RUNS} (id, session_id, user_id, status, text, one_off, idem_key, "
            f"body_hash, created_at, template) VALUES ({', '.join([m] * 10)})",
            (
                run.id,
                session_id,
                user_id,
                RUNNING,
                run.text,
                int(run.one_off),
                run.idem_key,
                run.body_hash,
                now,
                run.template,
            ),
        )
    return lease


def _delete(leases: _Leases, conn: Any, lease: Lease) -> None:
    """Delete `lease`'s row if it is still the holder's (in the caller's write transaction)."""
    m = leases.mark
    sql = f"DELETE FROM {TABLE} WHERE session_id = {m} AND token = {m}"
    conn.execute(sql, (lease.session_id, lease.token))


def hold(conn: Any, sql: str, lease: Lease, now: float) -> None:
    """Set the session's lease row to `lease`, expiring `lease.secs` from `now` (in the caller's
    transaction)."""
    lease.expires_at = now + lease.secs
    conn.execute(sql, (lease.session_id, lease.user_id, lease.token, lease.expires_at))


RUN_FIELDS = (
    "id, session_id, user_id, status, reason, text, prompt, started_call, one_off, idem_key, body_hash, "
    "created_at, ended_at, taken_over, template, waiting_call, traceparent"
)


def counted(mark: str) -> str:
    """A user's running turns: live leases, less the runs waiting for a person (S24.4)."""
    return (
        f"SELECT count(*) FROM {TABLE} AS lease WHERE user_id = {mark} AND expires_at > {mark} "
        f"AND NOT EXISTS (SELECT 1 FROM {RUNS} WHERE session_id = lease.session_id "
        f"AND status = '{RUNNING}' AND waiting_call IS NOT NULL)"
    )


def taken_over(conn: Any, mark: str, where: str, params: tuple[Any, ...]) -> Run | None:
    """The unfinished run `where` picks, counted as taken over once more (in the caller's transaction)."""
    run = one_run(conn, mark, where, params)
    if run is None:
        return None
    conn.execute(f"UPDATE {RUNS} SET taken_over = taken_over + 1 WHERE id = {mark}", (run.id,))
    return replace(run, taken_over=run.taken_over + 1)


def one_run(conn: Any, mark: str, where: str, params: tuple[Any, ...]) -> Run | None:
    """The first run `where` picks (its parameters marked by `mark`), or None."""
    row = conn.execute(f"SELECT {RUN_FIELDS} FROM {RUNS} WHERE {where} LIMIT 1", params).fetchone()
    return None if row is None else _run(row)


def _run(row: tuple[Any, ...]) -> Run:
    prompt, damaged = None, None
    try:
        prompt = json.loads(row[6]) if row[6] is not None else None
    except ValueError as exc:
        damaged = f"run {row[0]}: its recorded prompt (runs.prompt) is not JSON: {exc}"
    if prompt is not None and not isinstance(prompt, dict):
        prompt, damaged = None, f"run {row[0]}: its recorded prompt (runs.prompt) is not a JSON object"
    return Run(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        row[5],
        prompt,
        row[7],
        bool(row[8]),
        row[9],
        row[10],
        float(row[11]),
        None if row[12] is None else float(row[12]),
        damaged,
        int(row[13]),
        str(row[14]),
        row[15],
        row[16],
    )


__all__ = [
    "ENDED",
    "RUNNING",
    "RUNS",
    "TABLE",
    "Lease",
    "LeaseLost",
    "LeaseMethods",
    "LeaseStore",
    "NewRun",
    "Run",
    "RunExists",
    "SessionLeased",
    "TurnLeases",
    "UserAtCap",
    "new_token",
]
