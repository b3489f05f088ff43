"""Approvals: tool calls waiting for a person's decision, kept in the message store's file.

A call that needs a person's yes is a row of `approvals` beside the runs
(kernel.yaml's `logging.messages_db_path`, versioned in `approvals_schema`),
so every server process sees it, and a run resumed after a restart finds it
as it was. Decisions:

- **Asked once**: `ask` for a (run, call) already asked returns that row
  unchanged (same expiry, and the decision if one was made meanwhile).
- **Decided once**: `decide` is one write transaction whose update only
  touches a row still `pending` and not expired, so of two deciders (any
  processes) exactly one wins; the other gets `ApprovalClosed`, saying
  decided by whom and when, or expired when.
- **Who**: the session's owner (`user_id`) or a user the tool's YAML names
  in `approvers`. Anyone else gets `ApprovalNotFound`, worded as for a call
  that does not exist, so nothing leaks.
- **Rules**: an `approve` with `remember` adds a rule (that user, tool and
  template) in the same transaction; the caller asks `allowed_by_rule`
  before asking a person.
- **Decision URLs**: `decision_token` signs one decision of one call
  (services/approval_tokens.py); `redeem` checks it, and records its nonce as
  used in the decision's own transaction, so a token decides at most once.
  Its decision is made by `link`.
- **Bounded work**: every list and every clean-up takes a limit.

The queries are written once (`ApprovalMethods`, over a dialect:
services/sql_dialect.py) for this file and for the PostgreSQL store
(services/approvals_pg.py, kernel.yaml `store.url`); users are typed by
`ApprovalStore`, which both fit. The values both return, the errors and
that Protocol are in approval_values.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

from agentkernel.errors import AgentKernelError
from agentkernel.services import approval_tokens as tokens
from agentkernel.services.approval_tokens import DecisionToken, TokenRefused
from agentkernel.services.approval_values import (
    APPROVE,
    APPROVED,
    DENIED,
    DENY,
    EDIT,
    EXPIRED,
    LINK,
    PENDING,
    Approval,
    ApprovalClosed,
    ApprovalNotFound,
    ApprovalRule,
    BadDecision,
    PendingApproval,
    iso_seconds,
)
from agentkernel.services.install_secret import install_secret
from agentkernel.services.sql_dialect import SQLITE, Connection, Dialect, Statements
from agentkernel.services.sqlite_db import MEMORY, Schema, SqliteStore
from agentkernel.util.valid_unicode import repair_text

TABLE = "approvals"
APPROVERS = "approval_approvers"
RULES = "approval_rules"
TOKENS = "approval_tokens"
BUSY_TIMEOUT_SECS = 10.0
MANY_AT_ONCE = 500  # runs named in one `get_many` read (SQLite's bound on parameters is 32,766)

SCHEMA = Schema(
    version=1,
    upgrades={
        1: (
            f"""CREATE TABLE {TABLE} (
                run_id TEXT NOT NULL,
                call_id TEXT NOT NULL,
                session_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                template TEXT NOT NULL,
                tool TEXT NOT NULL,
                args TEXT NOT NULL,
                question TEXT NOT NULL,
                origin TEXT NOT NULL,
                approvers TEXT,
                status TEXT NOT NULL,
                decision TEXT,
                reason TEXT,
                new_args TEXT,
                decided_by TEXT,
                remember INTEGER NOT NULL DEFAULT 0,
                created_at REAL NOT NULL,
                expires_at REAL NOT NULL,
                decided_at REAL,
                PRIMARY KEY (run_id, call_id)
            )""",
            f"CREATE INDEX {TABLE}_user ON {TABLE} (user_id, created_at) WHERE status = '{PENDING}'",
            f"CREATE INDEX {TABLE}_due ON {TABLE} (expires_at) WHERE status = '{PENDING}'",
            f"CREATE INDEX {TABLE}_closed ON {TABLE} (decided_at) WHERE status != '{PENDING}'",
            # the approvers named, one row each, so a user's pending approvals are an index lookup
            f"""CREATE TABLE {APPROVERS} (
                user_id TEXT NOT NULL,
                run_id TEXT NOT NULL,
                call_id TEXT NOT NULL,
                PRIMARY KEY (user_id, run_id, call_id),
                FOREIGN KEY (run_id, call_id) REFERENCES {TABLE} (run_id, call_id) ON DELETE CASCADE
            )""",
            f"CREATE INDEX {APPROVERS}_call ON {APPROVERS} (run_id, call_id)",
            f"""CREATE TABLE {RULES} (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                user_id TEXT NOT NULL,
                tool TEXT NOT NULL,
                template TEXT NOT NULL,
                created_at REAL NOT NULL,
                created_by TEXT,
                run_id TEXT,
                call_id TEXT
            )""",
            f"CREATE UNIQUE INDEX {RULES}_key ON {RULES} (user_id, tool, template)",
            f"""CREATE TABLE {TOKENS} (
                nonce TEXT PRIMARY KEY,
                run_id TEXT NOT NULL,
                call_id TEXT NOT NULL,
                used_at REAL NOT NULL,
                expires_at REAL NOT NULL
            )""",
            f"CREATE INDEX {TOKENS}_used ON {TOKENS} (used_at)",
        ),
    },
    too_new=lambda found: AgentKernelError(
        f"the approvals in the message store have schema version {found}, "
        "newer than this agentkernel knows (1)"
    ),
    version_table=f"{TABLE}_schema",
)


class _Store(Protocol):
    """What `ApprovalMethods` needs of the class it is mixed into: a dialect, a store and a secret."""

    dialect: ClassVar[Dialect]

    def _write(self) -> AbstractContextManager[Connection]: ...

    def _reading(self) -> AbstractContextManager[Connection]: ...

    def _key(self) -> bytes: ...

    def get(self, run_id: str, call_id: str) -> Approval | None: ...

    def _verified(self, token: str) -> DecisionToken: ...


class ApprovalMethods:
    """What both approvals stores do, written once: SQLite's (`Approvals`) and PostgreSQL's
    (approvals_pg.py) differ in their `dialect`, their connections (`_write`, a transaction;
    `_reading`) and where the secret of decision URLs lives (`_key`).

    Decided once on both: `decide` and `redeem` read the row `FOR UPDATE` on
    PostgreSQL (under SQLite's BEGIN IMMEDIATE, the one writer, a plain read)
    and change it by an UPDATE that only touches a row still pending and
    unexpired; a token's nonce and an asked call are inserted `ON CONFLICT DO
    NOTHING`, so a second one at once finds the first.
    """

    dialect: ClassVar[Dialect]

    # -- asking and deciding -------------------------------------------------------------------------

    def ask(self: _Store, pending: PendingApproval) -> Approval:
        """Record `pending`, waiting until now + its timeout; asked before, the row as it is now."""
        args = json.dumps(pending.args)
        approvers = None if pending.approvers is None else json.dumps(list(pending.approvers))
        with self._write() as conn:
            q = Statements(conn, self.dialect)
            found = _one(q, pending.run_id, pending.call_id)
            if found is not None:
                return found
            now = time.time()
            inserted = q.execute(
                f"INSERT INTO {TABLE} (run_id, call_id, session_id, user_id, template, tool, args, "
                "question, origin, approvers, status, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, call_id) DO NOTHING",
                (
                    pending.run_id,
                    pending.call_id,
                    pending.session_id,
                    pending.user_id,
                    pending.template,
                    pending.tool,
                    args,
                    self.dialect.text(
                        repair_text(pending.question)
                    ),  # free text: valid UTF-8 whatever it held
                    pending.origin,
                    approvers,
                    PENDING,
                    now,
                    now + pending.timeout_secs,
                ),
            ).rowcount
            named = pending.approvers or () if inserted else ()  # none when another asked it at once
            for user in named:
                q.execute(
                    f"INSERT INTO {APPROVERS} (user_id, run_id, call_id) VALUES (?, ?, ?) "
                    "ON CONFLICT DO NOTHING",
                    (user, pending.run_id, pending.call_id),
                )
            created = _one(q, pending.run_id, pending.call_id)
        assert created is not None  # written in this transaction, or by the one it waited for
        return created

    def decide(
        self: _Store,
        run_id: str,
        call_id: str,
        by_user: str,
        decision: str,
        reason: str | None = None,
        args: dict[str, Any] | None = None,
        remember: bool = False,
    ) -> Approval:
        """`by_user`'s decision, if theirs to make and the approval still pending; the row as decided.

        ApprovalNotFound: no such approval, or not `by_user`'s to decide.
        ApprovalClosed: decided or expired already (another decider won).
        BadDecision: `edit` without `args` (a JSON object), `args` with
        another decision, `remember` with anything but `approve`.
        """
        _check_decision(decision, args, remember)
        with self._write() as conn:
            q = Statements(conn, self.dialect)
            found = _one(q, run_id, call_id, lock=True)
            if found is None or not found.may_decide(by_user):
                raise ApprovalNotFound(run_id, call_id)
            return _close(q, found, by_user, decision, reason, args, remember)

    def expire_due(self: _Store, now: float | None = None, most: int = 100) -> list[Approval]:
        """Mark up to `most` pending approvals past their expiry `expired` (the caller denies their calls).

        Two processes at once mark different rows (PostgreSQL: SKIP LOCKED), each row once."""
        now = time.time() if now is None else now
        with self._write() as conn:
            rows = (
                Statements(conn, self.dialect)
                .execute(
                    f"UPDATE {TABLE} SET status = '{EXPIRED}', decided_at = ? "
                    f"WHERE status = '{PENDING}' AND (run_id, call_id) IN "
                    f"(SELECT run_id, call_id FROM {TABLE} WHERE status = '{PENDING}' AND expires_at <= ? "
                    f"ORDER BY expires_at LIMIT ?{self.dialect.skip_locked}) RETURNING {FIELDS}",
                    (now, now, most),
                )
                .fetchall()
            )
        return sorted((_approval(row) for row in rows), key=lambda a: a.expires_at)

    # -- reading -------------------------------------------------------------------------------------

    def get(self: _Store, run_id: str, call_id: str) -> Approval | None:
        """The approval of call `call_id` in run `run_id`, whatever its status, or None."""
        with self._reading() as conn:
            return _one(Statements(conn, self.dialect), run_id, call_id)

    def get_many(self: _Store, keys: Sequence[tuple[str, str]]) -> list[Approval]:
        """The approvals of these (run id, call id) pairs that exist, in one read per MANY_AT_ONCE runs
        (a process looks for the decisions of all the calls waiting in it at once)."""
        wanted = set(keys)
        runs = sorted({run_id for run_id, _ in wanted})
        found: list[Approval] = []
        with self._reading() as conn:
            q = Statements(conn, self.dialect)
            for start in range(0, len(runs), MANY_AT_ONCE):
                chunk = runs[start : start + MANY_AT_ONCE]
                marks = ", ".join("?" * len(chunk))
                rows = q.execute(f"SELECT {FIELDS} FROM {TABLE} WHERE run_id IN ({marks})", chunk)
                found.extend(a for a in map(_approval, rows) if (a.run_id, a.call_id) in wanted)
        return found

    def pending_for(self: _Store, user_id: str, most: int = 50) -> list[Approval]:
        """The pending, unexpired approvals `user_id` may decide (owner or approver), newest first."""
        fields = ", ".join(f"a.{field}" for field in FIELDS.split(", "))
        live = f"a.status = '{PENDING}' AND a.expires_at > ?"
        now = time.time()
        with self._reading() as conn:
            rows = (
                Statements(conn, self.dialect)
                .execute(
                    f"SELECT {fields} FROM {TABLE} a WHERE a.user_id = ? AND {live} UNION "
                    f"SELECT {fields} FROM {APPROVERS} p JOIN {TABLE} a "
                    f"ON a.run_id = p.run_id AND a.call_id = p.call_id WHERE p.user_id = ? AND {live} "
                    "ORDER BY created_at DESC, run_id, call_id LIMIT ?",
                    (user_id, now, user_id, now, most),
                )
                .fetchall()
            )
        return [_approval(row) for row in rows]

    def count_pending(self: _Store) -> int:
        """How many approvals wait for a decision now, every user's (the `/metrics` gauge, S26.2)."""
        with self._reading() as conn:
            row = (
                Statements(conn, self.dialect)
                .execute(
                    f"SELECT count(*) FROM {TABLE} WHERE status = '{PENDING}' AND expires_at > ?",
                    (time.time(),),
                )
                .fetchone()
            )
        return int(row[0])

    def pending_of_run(self: _Store, run_id: str) -> list[Approval]:
        """The run's approvals still `pending` (past their expiry too, until `expire_due` marks them)."""
        with self._reading() as conn:
            rows = (
                Statements(conn, self.dialect)
                .execute(
                    f"SELECT {FIELDS} FROM {TABLE} WHERE run_id = ? AND status = '{PENDING}' "
                    "ORDER BY created_at, call_id",
                    (run_id,),
                )
                .fetchall()
            )
        return [_approval(row) for row in rows]

    # -- rules ---------------------------------------------------------------------------------------

    def add_rule(
        self: _Store,
        user_id: str,
        tool: str,
        template: str,
        created_by: str | None = None,
        run_id: str | None = None,
        call_id: str | None = None,
    ) -> ApprovalRule:
        """A rule that `tool` needs no approval in `user_id`'s runs on `template`; the one there already
        if there is one."""
        with self._write() as conn:
            q = Statements(conn, self.dialect)
            return _add_rule(q, user_id, tool, template, created_by, run_id, call_id)

    def rules_of(self: _Store, user_id: str, most: int = 500) -> list[ApprovalRule]:
        """`user_id`'s rules, newest first."""
        with self._reading() as conn:
            rows = (
                Statements(conn, self.dialect)
                .execute(
                    f"SELECT {RULE_FIELDS} FROM {RULES} WHERE user_id = ? ORDER BY id DESC LIMIT ?",
                    (user_id, most),
                )
                .fetchall()
            )
        return [_rule(row) for row in rows]

    def delete_rule(self: _Store, user_id: str, rule_id: int) -> bool:
        """Remove rule `rule_id` if it is `user_id`'s; False when there is no such rule of theirs."""
        with self._write() as conn:
            cursor = Statements(conn, self.dialect).execute(
                f"DELETE FROM {RULES} WHERE id = ? AND user_id = ?", (rule_id, user_id)
            )
        return int(cursor.rowcount) == 1

    def allowed_by_rule(self: _Store, user_id: str, tool: str, template: str) -> bool:
        """Whether a rule of `user_id` lets `tool` run on `template` without asking."""
        with self._reading() as conn:
            row = (
                Statements(conn, self.dialect)
                .execute(
                    f"SELECT 1 FROM {RULES} WHERE user_id = ? AND tool = ? AND template = ?",
                    (user_id, tool, template),
                )
                .fetchone()
            )
        return row is not None

    # -- decision URLs -------------------------------------------------------------------------------

    def decision_token(self: _Store, run_id: str, call_id: str, decision: str) -> str:
        """A single-use token deciding `decision` (`approve` or `deny`) of the pending approval, until its
        expiry. ApprovalNotFound / ApprovalClosed as for `decide`."""
        if decision not in (APPROVE, DENY):
            raise BadDecision(f"a decision URL approves or denies; not {decision!r}")
        found = self.get(run_id, call_id)
        if found is None:
            raise ApprovalNotFound(run_id, call_id)
        if not found.pending or found.expires_at <= time.time():
            raise ApprovalClosed(found)
        return tokens.sign(DecisionToken.new(run_id, call_id, decision, found.expires_at), self._key())

    def redeem(
        self: _Store,
        token: str,
        run_id: str | None = None,
        call_id: str | None = None,
        reason: str | None = None,
    ) -> Approval:
        """Decide by `token`, once; the row as decided (by LINK), with `reason` (what the LLM is told).

        `run_id` / `call_id`: the approval the URL names, when it names one (a
        token for another is refused). TokenRefused: forged, for another
        approval, expired or used; ApprovalNotFound or ApprovalClosed as for
        `decide`. The nonce is marked used in the decision's transaction.
        """
        granted = self._verified(token)
        if run_id not in (None, granted.run_id) or call_id not in (None, granted.call_id):
            raise TokenRefused(tokens.ELSEWHERE, f"it decides call {granted.call_id} of run {granted.run_id}")
        with self._write() as conn:
            q = Statements(conn, self.dialect)
            _check_unused(q, granted)
            used = q.execute(
                f"INSERT INTO {TOKENS} (nonce, run_id, call_id, used_at, expires_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (nonce) DO NOTHING",
                (granted.nonce, granted.run_id, granted.call_id, time.time(), granted.expires_at),
            ).rowcount
            if used != 1:  # redeemed at once elsewhere: that transaction has committed by now
                _check_unused(q, granted)
                raise TokenRefused(tokens.USED, "it was used at once elsewhere; a decision URL works once")
            found = _one(q, granted.run_id, granted.call_id, lock=True)
            if found is None:
                raise ApprovalNotFound(granted.run_id, granted.call_id)
            return _close(q, found, LINK, granted.decision, reason, None, False)

    def granted(self: _Store, token: str) -> tuple[DecisionToken, Approval]:
        """What `token` would decide and its approval as it is now, deciding nothing (a decision URL's
        page). TokenRefused: forged, expired or used; ApprovalNotFound: its approval is gone."""
        granted = self._verified(token)
        with self._reading() as conn:
            q = Statements(conn, self.dialect)
            _check_unused(q, granted)
            found = _one(q, granted.run_id, granted.call_id)
        if found is None:
            raise ApprovalNotFound(granted.run_id, granted.call_id)
        return granted, found

    def _verified(self: _Store, token: str) -> DecisionToken:
        """The token's grant if this install signed it and it has not expired; else TokenRefused."""
        granted = tokens.verify(token, self._key())
        if time.time() >= granted.expires_at:
            raise TokenRefused(tokens.EXPIRED, f"it was valid until {iso_seconds(granted.expires_at)}")
        return granted

    # -- clean-up ------------------------------------------------------------------------------------

    def sweep(self: _Store, older_than: float, most: int = 1000) -> int:
        """Delete up to `most` approvals decided or expired before `older_than` (with their approvers),
        and up to `most` used tokens used before then and past their expiry; how many rows went."""
        with self._write() as conn:
            q = Statements(conn, self.dialect)
            approvals = q.execute(
                f"DELETE FROM {TABLE} WHERE (run_id, call_id) IN (SELECT run_id, call_id FROM {TABLE} "
                f"WHERE status != '{PENDING}' AND decided_at < ? LIMIT ?)",
                (older_than, most),
            ).rowcount
            tokens = q.execute(
                f"DELETE FROM {TOKENS} WHERE nonce IN (SELECT nonce FROM {TOKENS} "
                "WHERE used_at < ? AND expires_at < ? LIMIT ?)",
                (older_than, time.time(), most),
            ).rowcount
        return int(approvals) + int(tokens)


class Approvals(ApprovalMethods, SqliteStore):
    """Approvals, their rules and used decision tokens, in the message store's file; any thread, any process.

    `secret_dir`: where the install's secret for decision URLs lives
    (services/install_secret.py); by default the store file's folder.
    """

    dialect = SQLITE

    def __init__(
        self,
        path: Path | str,
        secret_dir: Path | None = None,
        busy_timeout_secs: float = BUSY_TIMEOUT_SECS,
    ) -> None:
        super().__init__(path, SCHEMA, busy_timeout_secs)
        self._secret_dir = secret_dir if secret_dir is not None or str(path) == MEMORY else Path(path).parent
        self._secret: bytes | None = None

    def _key(self) -> bytes:
        if self._secret is None:
            if self._secret_dir is None:
                raise AgentKernelError(f"{self.path}: an in-memory store makes tokens with a secret_dir only")
            self._secret = install_secret(self._secret_dir)
        return self._secret


FIELDS = (
    "run_id, call_id, session_id, user_id, template, tool, args, question, origin, approvers, status, "
    "decision, reason, new_args, decided_by, remember, created_at, expires_at, decided_at"
)
RULE_FIELDS = "id, user_id, tool, template, created_at, created_by, run_id, call_id"


def _check_decision(decision: str, args: dict[str, Any] | None, remember: bool) -> None:
    if decision not in (APPROVE, DENY, EDIT):
        raise BadDecision(f"decision must be approve, deny or edit; not {decision!r}")
    if decision == EDIT and not isinstance(args, dict):
        raise BadDecision("an edit needs args: the call's new arguments, a JSON object")
    if decision != EDIT and args is not None:
        raise BadDecision(f"args go with an edit only, not with {decision!r}")
    if remember and decision != APPROVE:
        raise BadDecision(f"remember goes with approve only, not with {decision!r}")


def _close(
    q: Statements,
    found: Approval,
    by: str,
    decision: str,
    reason: str | None,
    args: dict[str, Any] | None,
    remember: bool,
) -> Approval:
    """Decide `found` in the caller's transaction, if still pending and unexpired; else ApprovalClosed."""
    now = time.time()
    reason = (
        None if reason is None else q.dialect.text(repair_text(reason))
    )  # a person's: a lone surrogate too
    status = DENIED if decision == DENY else APPROVED
    new_args = None if args is None else json.dumps(args)
    cursor = q.execute(
        f"UPDATE {TABLE} SET status = ?, decision = ?, reason = ?, new_args = ?, decided_by = ?, "
        "remember = ?, decided_at = ? "
        f"WHERE run_id = ? AND call_id = ? AND status = '{PENDING}' AND expires_at > ?",
        (status, decision, reason, new_args, by, remember, now, found.run_id, found.call_id, now),
    )
    if cursor.rowcount != 1:
        raise ApprovalClosed(found)
    if remember:
        _add_rule(q, found.user_id, found.tool, found.template, by, found.run_id, found.call_id)
    return replace(
        found,
        status=status,
        decision=decision,
        reason=reason,
        new_args=args,
        decided_by=by,
        remember=remember,
        decided_at=now,
    )


def _add_rule(
    q: Statements,
    user_id: str,
    tool: str,
    template: str,
    created_by: str | None,
    run_id: str | None,
    call_id: str | None,
) -> ApprovalRule:
    q.execute(
        f"INSERT INTO {RULES} (user_id, tool, template, created_at, created_by, run_id, call_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (user_id, tool, template) DO NOTHING",
        (user_id, tool, template, time.time(), created_by, run_id, call_id),
    )
    row = q.execute(
        f"SELECT {RULE_FIELDS} FROM {RULES} WHERE user_id = ? AND tool = ? AND template = ?",
        (user_id, tool, template),
    ).fetchone()
    return _rule(row)


def _check_unused(q: Statements, granted: DecisionToken) -> None:
    used = q.execute(f"SELECT used_at FROM {TOKENS} WHERE nonce = ?", (granted.nonce,)).fetchone()
    if used is not None:
        raise TokenRefused(tokens.USED, f"it was used at {iso_seconds(used[0])}; a decision URL works once")


def _one(q: Statements, run_id: str, call_id: str, *, lock: bool = False) -> Approval | None:
    """The row, read `FOR UPDATE` with `lock` on PostgreSQL (the transaction is about to change it)."""
    locked = q.dialect.for_update if lock else ""
    row = q.execute(
        f"SELECT {FIELDS} FROM {TABLE} WHERE run_id = ? AND call_id = ?{locked}", (run_id, call_id)
    ).fetchone()
    return None if row is None else _approval(row)


def _approval(row: tuple[Any, ...]) -> Approval:
    approvers = None if row[9] is None else tuple(json.loads(row[9]))
    return Approval(
        run_id=row[0],
        call_id=row[1],
        session_id=row[2],
        user_id=row[3],
        template=row[4],
        tool=row[5],
        args=json.loads(row[6]),
        question=row[7],
        origin=row[8],
        approvers=approvers,
        status=row[10],
        decision=row[11],
        reason=row[12],
        new_args=None if row[13] is None else json.loads(row[13]),
        decided_by=row[14],
        remember=bool(row[15]),
        created_at=float(row[16]),
        expires_at=float(row[17]),
        decided_at=None if row[18] is None else float(row[18]),
    )


def _rule(row: tuple[Any, ...]) -> ApprovalRule:
    return ApprovalRule(int(row[0]), row[1], row[2], row[3], float(row[4]), row[5], row[6], row[7])


__all__ = ["ApprovalMethods", "Approvals", "TokenRefused"]
