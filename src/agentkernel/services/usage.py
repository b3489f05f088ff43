"""The usage ledger (S26.3): every LLM call's tokens, per user, template, model, provider and UTC day.

A table of the message store's SQLite file (kernel.yaml's
`logging.messages_db_path`, versioned in its own `usage_schema` table,
beside the runs and approvals), so every server process (`serve --workers
N`), a cron run and `agentkernel usage` see the same figures. Decisions:

- **Aggregated rows**: one row per (user, template, model, provider, day),
  not one per call: a user's month is at most templates x models x 31 rows,
  so a quota check (`totals`) reads a bounded range of the primary key.
  `calls`, `input_tokens`, `output_tokens`, and `estimated_calls` (how many
  of the calls were counted with the kernel's bound, the server having
  reported no usage).
- **One upsert a call** (`record`): `INSERT … ON CONFLICT DO UPDATE` adding
  to the row, in one write transaction (BEGIN IMMEDIATE), so calls recorded
  at once by several processes are all counted.
- **No value is NULL in the key**: a call without a user, a template or a
  named provider is stored under "" (SQLite's NULLs never conflict, which
  would split a row) and read back as None.
- **Days are UTC** (`date` values, ISO text in the file, so a range is a
  key range).

Reached by the key `USAGE` (ports.py `UsageStore`, which the PostgreSQL
ledger, services/usage_pg.py, fits too: kernel.yaml `store.url`, S27.2), and filled by `MeteredProvider`
(services/metering.py) around the kernel's provider. For quotas (issue 29
item 4): `totals(user=…, since=first day of the period)` is what a user has
spent this day / month, `template=` narrows it to one template; the ledger
is the truth, shared by every process, so read it before each call rather
than keeping a count.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol

from agentkernel.errors import AgentKernelError
from agentkernel.ports import UsageRow, UsageTotals
from agentkernel.services.sqlite_db import Schema, SqliteStore

TABLE = "usage"
BUSY_TIMEOUT_SECS = 10.0

SQLITE_SCHEMA = Schema(
    version=1,
    upgrades={
        1: (
            f"""CREATE TABLE {TABLE} (
                user_id TEXT NOT NULL,
                day TEXT NOT NULL,
                template TEXT NOT NULL,
                model TEXT NOT NULL,
                provider TEXT NOT NULL,
                calls INTEGER NOT NULL,
                input_tokens INTEGER NOT NULL,
                output_tokens INTEGER NOT NULL,
                estimated_calls INTEGER NOT NULL,
                PRIMARY KEY (user_id, day, template, model, provider)
            ) WITHOUT ROWID""",
            f"CREATE INDEX {TABLE}_day ON {TABLE} (day)",
        ),
    },
    too_new=lambda found: AgentKernelError(
        f"the usage ledger in the message store has schema version {found}, "
        "newer than this agentkernel knows (1)"
    ),
    version_table=f"{TABLE}_schema",
)

_UPSERT = f"""INSERT INTO {TABLE}
    (user_id, day, template, model, provider, calls, input_tokens, output_tokens, estimated_calls)
    VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?)
    ON CONFLICT (user_id, day, template, model, provider) DO UPDATE SET
        calls = calls + 1,
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        estimated_calls = estimated_calls + excluded.estimated_calls"""

COLUMNS = "day, user_id, template, model, provider, calls, input_tokens, output_tokens, estimated_calls"


def utc_day(at: datetime | None = None) -> date:
    """The UTC day of `at` (a naive datetime is taken as UTC), or today's."""
    if at is None:
        return datetime.now(UTC).date()
    if at.tzinfo is None:
        return at.date()
    return at.astimezone(UTC).date()


def key_of(value: str | None) -> str:
    """A key column's value: None is stored as "" (a NULL would never conflict, splitting a row)."""
    return value or ""


def _value(text: str) -> str | None:
    return text or None


def row_of(
    day: str | date,
    user: str,
    template: str,
    model: str,
    provider: str,
    calls: int,
    inputs: int,
    outputs: int,
    estimated: int,
) -> UsageRow:
    """A row as the ledger's SELECT gives it (`day` ISO text in SQLite, a date in PostgreSQL)."""
    return UsageRow(
        day=day if isinstance(day, date) else date.fromisoformat(day),
        user=_value(user),
        template=_value(template),
        model=model,
        provider=_value(provider),
        calls=int(calls),
        input_tokens=int(inputs),
        output_tokens=int(outputs),
        estimated_calls=int(estimated),
    )


@dataclass(frozen=True)
class Dialect:
    """How one database spells a query parameter, a day and the rows' order (SQLite here, PostgreSQL in
    usage_pg.py): the two ledgers build the same queries with it."""

    mark: str  # the parameter placeholder: `?` or `%s`
    day: Callable[[date], object]  # a day as the driver takes it
    order: str  # the columns to sort by, oldest day first (byte order for texts)


SQLITE = Dialect("?", date.isoformat, "day, user_id, template, model, provider")
_SUMS = "coalesce(sum(calls), 0), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0)"


def totals_query(
    dialect: Dialect, user: str | None, since: date, until: date | None, template: str | None
) -> tuple[str, tuple[object, ...]]:
    """The query of `UsageStore.totals` and its parameters."""
    m = dialect.mark
    sql = f"SELECT {_SUMS} FROM {TABLE} WHERE user_id = {m} AND day >= {m} AND day <= {m}"
    params: list[object] = [key_of(user), dialect.day(since), dialect.day(until or utc_day())]
    if template is not None:
        sql += f" AND template = {m}"
        params.append(template)
    return sql, tuple(params)


def rows_query(
    dialect: Dialect,
    *,
    user: str | None,
    every_user: bool,
    since: date | None,
    until: date | None,
    template: str | None,
    model: str | None,
    limit: int | None,
) -> tuple[str, tuple[object, ...]]:
    """The query of `UsageStore.rows` and its parameters."""
    m = dialect.mark
    where: list[str] = [] if every_user else [f"user_id = {m}"]
    params: list[object] = [] if every_user else [key_of(user)]
    for clause, value in (
        (f"day >= {m}", None if since is None else dialect.day(since)),
        (f"day <= {m}", None if until is None else dialect.day(until)),
        (f"template = {m}", template),
        (f"model = {m}", model),
    ):
        if value is not None:
            where.append(clause)
            params.append(value)
    sql = f"SELECT {COLUMNS} FROM {TABLE}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {dialect.order}"
    if limit is not None:
        sql += f" LIMIT {m}"
        params.append(max(0, int(limit)))
    return sql, tuple(params)


def totals_of(found: list[tuple[Any, ...]]) -> UsageTotals:
    """The one row `totals_query` reads, as totals."""
    calls, inputs, outputs = found[0]
    return UsageTotals(calls=int(calls), input_tokens=int(inputs), output_tokens=int(outputs))


class _Ledger(Protocol):
    """What `LedgerMethods` needs of the class it is mixed into: a dialect and a store."""

    dialect: ClassVar[Dialect]
    upsert: ClassVar[str]

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]: ...

    def _write(self) -> AbstractContextManager[Any]: ...

    def _write_at_once(self) -> AbstractContextManager[Any | None]: ...


class LedgerMethods:
    """What both ledgers do, written once: SQLite's (`UsageLedger`) and PostgreSQL's (usage_pg.py) differ
    only in their `dialect`, their `upsert` statement and the store underneath (`_read`, `_write`,
    `_write_at_once`)."""

    dialect: ClassVar[Dialect]
    upsert: ClassVar[str]  # one call counted: its parameters are `record`'s, in that order

    def record(
        self: _Ledger,
        *,
        user: str | None,
        template: str | None,
        model: str,
        provider: str | None,
        input_tokens: int,
        output_tokens: int,
        estimated: bool = False,
        at: datetime | None = None,
        at_once: bool = False,
    ) -> bool:
        """Count one LLM call in its day's row (one atomic upsert; negative figures count as 0); True.

        `at_once`: only if the ledger takes it without waiting for anyone;
        when it would wait (another writer, or a store a network away)
        nothing is written and False returned, for the caller to record it
        where waiting is harmless (the event loop's metering does).
        """
        params = (
            key_of(user),
            self.dialect.day(utc_day(at)),
            key_of(template),
            model,
            key_of(provider),
            max(0, int(input_tokens)),
            max(0, int(output_tokens)),
            1 if estimated else 0,
        )
        with self._write_at_once() if at_once else self._write() as conn:
            if conn is None:
                return False
            conn.execute(self.upsert, params)
        return True

    def totals(
        self: _Ledger,
        *,
        user: str | None,
        since: date,
        until: date | None = None,
        template: str | None = None,
    ) -> UsageTotals:
        """`user`'s calls and tokens from `since` to `until` inclusive (None: today, UTC)."""
        return totals_of(self._read(*totals_query(self.dialect, user, since, until, template)))

    def rows(
        self: _Ledger,
        *,
        user: str | None = None,
        every_user: bool = False,
        since: date | None = None,
        until: date | None = None,
        template: str | None = None,
        model: str | None = None,
        limit: int | None = None,
    ) -> list[UsageRow]:
        """The rows of `user` (None: the kernel's own calls) or, with `every_user`, of everyone's.

        Oldest day first, then by user, template, model and provider;
        `since`/`until` inclusive (None: no bound), `template`/`model` exact;
        the first `limit` rows when given.
        """
        sql, params = rows_query(
            self.dialect,
            user=user,
            every_user=every_user,
            since=since,
            until=until,
            template=template,
            model=model,
            limit=limit,
        )
        return [row_of(*found) for found in self._read(sql, params)]


class UsageLedger(LedgerMethods, SqliteStore):
    """The usage ledger on one SQLite file: see the module docstring."""

    dialect = SQLITE
    upsert = _UPSERT

    def __init__(self, path: Path | str, busy_timeout_secs: float = BUSY_TIMEOUT_SECS) -> None:
        super().__init__(path, SQLITE_SCHEMA, busy_timeout_secs)


__all__ = [
    "COLUMNS",
    "SQLITE",
    "TABLE",
    "Dialect",
    "LedgerMethods",
    "UsageLedger",
    "UsageRow",
    "UsageTotals",
    "key_of",
    "row_of",
    "rows_query",
    "totals_of",
    "totals_query",
    "utc_day",
]
