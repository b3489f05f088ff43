"""The stores a test's kernels and servers use, wherever its deployment put them (S27.3).

Embedded: the project's message store file. Under `--deployment postgres`
(tests/pg.py), the database of `$AGENTKERNEL_STORE_URL`, which the servers
and commands a test starts inherit. A test that reads or changes a run, a
lease or a record behind the kernel's back goes through these.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkernel.config.store import STORE_URL_ENV
from agentkernel.services.lazy_messages import ClosableMessageStore
from agentkernel.services.memory import SqliteMessageStore
from agentkernel.services.state import SqliteStateStore
from agentkernel.services.usage import UsageLedger

if TYPE_CHECKING:
    from agentkernel.services.state_pg import PostgresStateStore
    from agentkernel.services.usage_pg import PostgresUsageLedger as PostgresUsageLedgerType


def message_store(messages_db: Path) -> ClosableMessageStore:
    """The project's message store: its file, or the store database under the postgres deployment."""
    url = os.environ.get(STORE_URL_ENV)
    if not url:
        return SqliteMessageStore(messages_db)
    from agentkernel.services.memory_pg import PostgresMessageStore

    return PostgresMessageStore(url)


def usage_ledger(messages_db: Path) -> UsageLedger | PostgresUsageLedgerType:
    """The project's usage ledger: in its message store file, or in the store database."""
    url = os.environ.get(STORE_URL_ENV)
    if not url:
        return UsageLedger(messages_db)
    from agentkernel.services.usage_pg import PostgresUsageLedger

    return PostgresUsageLedger(url)


def state_store(state_db: Path) -> SqliteStateStore | PostgresStateStore:
    """The project's state store: its file, or the store database under the postgres deployment."""
    url = os.environ.get(STORE_URL_ENV)
    if not url:
        return SqliteStateStore(state_db)
    from agentkernel.services.state_pg import PostgresStateStore

    return PostgresStateStore(url)


def store_sql(messages_db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """One statement (`?` placeholders) on the message store's tables, committed; its rows."""
    url = os.environ.get(STORE_URL_ENV)
    if not url:
        import contextlib
        import sqlite3

        with contextlib.closing(sqlite3.connect(messages_db)) as db, db:
            return db.execute(sql, params).fetchall()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql.replace("?", "%s"), params)
        return cursor.fetchall() if cursor.description is not None else []


__all__ = ["message_store", "state_store", "store_sql", "usage_ledger"]
