"""Tables of an embedded SQLite file copied into their PostgreSQL forms (`agentkernel store migrate`).

A store's `copy_from_sqlite` names its file and tables; `copy_tables`
reads the file read-only (a missing file, or a table it does not hold yet,
copies nothing), refuses a target table that already holds rows (naming
it: a second migration must not mix two projects' rows), and streams the
rows with COPY into the columns both tables have (an older file lacks a
later column: the target's default fills it), inside the caller's
transaction, which it never commits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg

from agentkernel.errors import AgentKernelError

BATCH_ROWS = 1000


def copy_tables(
    path: Path, target: psycopg.Connection[tuple[Any, ...]], tables: Mapping[str, str]
) -> dict[str, int]:
    """Rows of each `tables` key (a table of the file at `path`) copied into its value (a PostgreSQL
    table); rows copied per PostgreSQL table."""
    if not path.is_file():
        return {}
    source = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return {
            dst: _copy(source, path, src, target, dst) for src, dst in tables.items() if _holds(source, src)
        }
    finally:
        source.close()


def _holds(source: sqlite3.Connection, table: str) -> bool:
    found = source.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    return found.fetchone() is not None


def _copy(
    source: sqlite3.Connection, path: Path, src: str, target: psycopg.Connection[tuple[Any, ...]], dst: str
) -> int:
    if target.execute(f"SELECT EXISTS (SELECT 1 FROM {dst})").fetchone() != (False,):
        raise AgentKernelError(
            f"the store database's table {dst} already holds rows: copying {path} ({src}) would mix them"
        )
    theirs = {row[1] for row in source.execute(f"PRAGMA table_info({src})")}
    ours = [
        str(row[0])
        for row in target.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = %s AND table_schema = current_schema() ORDER BY ordinal_position",
            (dst,),
        )
    ]
    columns = ", ".join(column for column in ours if column in theirs)
    rows = source.execute(f"SELECT {columns} FROM {src}")
    copied = 0
    with target.cursor().copy(f"COPY {dst} ({columns}) FROM STDIN") as copy:
        while batch := rows.fetchmany(BATCH_ROWS):
            for row in batch:
                copy.write_row(row)
            copied += len(batch)
    return copied


__all__ = ["copy_tables"]
