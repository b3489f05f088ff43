"""The usage ledger on PostgreSQL (S26.3, S27.2): `UsageLedger`'s behaviour, in the store database.

Chosen by the kernel when kernel.yaml sets `store.url`; the same rows as
the SQLite ledger (services/usage.py says why they are aggregated, keyed
without NULLs and by UTC day): one row per (user, template, model,
provider, day), one `INSERT … ON CONFLICT DO UPDATE` a call, which
PostgreSQL makes atomic across every process and machine. `day` is a DATE,
so a period is a key range as in the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from agentkernel.config import KernelConfig
from agentkernel.services.pg_copy import copy_table, read_only, source_version
from agentkernel.services.postgres import PgPool, PgSchema, PgStore
from agentkernel.services.usage import SQLITE_SCHEMA, TABLE, Dialect, LedgerMethods

COLUMNS = (
    "user_id",
    "day",
    "template",
    "model",
    "provider",
    "calls",
    "input_tokens",
    "output_tokens",
    "estimated_calls",
)

SCHEMA = PgSchema(
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


class PostgresUsageLedger(LedgerMethods, PgStore):
    """The usage ledger in the PostgreSQL database: see the module docstring and `UsageLedger`."""

    dialect = POSTGRES
    upsert = _UPSERT

    def __init__(self, pool: PgPool | str) -> None:
        super().__init__(pool, SCHEMA)

    @contextmanager
    def _write_at_once(self) -> Iterator[None]:
        """Never at once: a write is a round trip to the database, for a worker thread to wait on."""
        yield None


def copy_from_sqlite(config: KernelConfig, target: psycopg.Connection[tuple[Any, ...]]) -> dict[str, int]:
    """The SQLite ledger's rows (in the message store's file) copied into the store database's."""
    with read_only(config.messages_db) as source:
        if source is None or not source_version(
            source, SQLITE_SCHEMA, "the usage ledger", config.messages_db
        ):
            return {}
        return {TABLE: copy_table(source, target, TABLE, COLUMNS)}


SCHEMAS = (SCHEMA,)

__all__ = ["COLUMNS", "SCHEMA", "SCHEMAS", "PostgresUsageLedger", "copy_from_sqlite"]
