"""The usage ledger on PostgreSQL (S26.3, S27.2): `UsageLedger`'s behaviour, in the store database.

Chosen by the kernel when kernel.yaml sets `store.url`; the same rows as
the SQLite ledger (services/usage.py says why they are aggregated, keyed
without NULLs and by UTC day): one row per (user, template, model,
provider, day), one `INSERT … ON CONFLICT DO UPDATE` a call, which
PostgreSQL makes atomic across every process and machine. `day` is a DATE,
so a period is a key range as in the file.
"""

from __future__ import annotations

from datetime import date, datetime

from agentkernel.ports import UsageRow, UsageTotals
from agentkernel.services.postgres import PgPool, PgSchema, PgStore
from agentkernel.services.usage import (
    TABLE,
    Dialect,
    key_of,
    row_of,
    rows_query,
    totals_of,
    totals_query,
    utc_day,
)

_SCHEMA = PgSchema(
    store="usage",
    what="the usage ledger",
    version=1,
    upgrades={
        1: (
            f"""CREATE TABLE {TABLE} (
                user_id TEXT NOT NULL,
                day DATE NOT NULL,
                template TEXT NOT NULL,
                model TEXT NOT NULL,
                provider TEXT NOT NULL,
                calls BIGINT NOT NULL,
                input_tokens BIGINT NOT NULL,
                output_tokens BIGINT NOT NULL,
                estimated_calls BIGINT NOT NULL,
                PRIMARY KEY (user_id, day, template, model, provider)
            )""",
            f"CREATE INDEX {TABLE}_day ON {TABLE} (day)",
        ),
    },
)

_UPSERT = f"""INSERT INTO {TABLE} AS u
    (user_id, day, template, model, provider, calls, input_tokens, output_tokens, estimated_calls)
    VALUES (%s, %s, %s, %s, %s, 1, %s, %s, %s)
    ON CONFLICT (user_id, day, template, model, provider) DO UPDATE SET
        calls = u.calls + 1,
        input_tokens = u.input_tokens + excluded.input_tokens,
        output_tokens = u.output_tokens + excluded.output_tokens,
        estimated_calls = u.estimated_calls + excluded.estimated_calls"""

# days as dates; texts in byte order, as SQLite sorts them (a database's own collation may put "B" before "a")
POSTGRES = Dialect(
    "%s",
    lambda day: day,
    ", ".join(("day", *(f'{c} COLLATE "C"' for c in ("user_id", "template", "model", "provider")))),
)


class PostgresUsageLedger(PgStore):
    """The usage ledger in the PostgreSQL database: see the module docstring and `UsageLedger`."""

    def __init__(self, pool: PgPool | str) -> None:
        super().__init__(pool, _SCHEMA)

    def record(
        self,
        *,
        user: str | None,
        template: str | None,
        model: str,
        provider: str | None,
        input_tokens: int,
        output_tokens: int,
        estimated: bool = False,
        at: datetime | None = None,
    ) -> None:
        """Count one LLM call in its day's row (one atomic upsert; negative figures count as 0)."""
        params = (
            key_of(user),
            utc_day(at),
            key_of(template),
            model,
            key_of(provider),
            max(0, int(input_tokens)),
            max(0, int(output_tokens)),
            1 if estimated else 0,
        )
        with self._write() as conn:
            conn.execute(_UPSERT, params)

    def totals(
        self, *, user: str | None, since: date, until: date | None = None, template: str | None = None
    ) -> UsageTotals:
        """`user`'s calls and tokens from `since` to `until` inclusive (None: today, UTC)."""
        return totals_of(self._read(*totals_query(POSTGRES, user, since, until, template)))

    def rows(
        self,
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
            POSTGRES,
            user=user,
            every_user=every_user,
            since=since,
            until=until,
            template=template,
            model=model,
            limit=limit,
        )
        return [row_of(*found) for found in self._read(sql, params)]


__all__ = ["PostgresUsageLedger"]
