"""Bounded lock waits for the PostgreSQL stores (S27.2): what SQLite's busy timeout is for the files.

A write transaction of a PostgreSQL store may wait for a row lock or an
advisory lock another process holds; `bounded` sets the transaction's
`lock_timeout`, and turns the timeout into the error the SQLite stores
raise when they wait too long (`StoreBusy`), naming the store.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from agentkernel.services.sqlite_db import StoreBusy


@contextmanager
def bounded(
    conn: psycopg.Connection[tuple[Any, ...]], what: str, secs: float
) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    """The transaction's lock waits bounded by `secs` (`lock_timeout`); StoreBusy naming `what` past it."""
    conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{max(1, int(secs * 1000))}ms",))
    try:
        yield conn
    except psycopg.errors.LockNotAvailable as exc:
        raise StoreBusy(f"{what} in the store database was busy for more than {secs:g} s") from exc


__all__ = ["bounded"]
