"""Copying an embedded project's SQLite tables into the store database (`agentkernel store migrate`).

Each PostgreSQL store knows its own tables (its `copy_from_sqlite`); what
they share is here: the SQLite file opened read-only (a copy never writes
to what it copies, and a missing file is nothing to copy), a table copied
in batches inside the caller's transaction, refused when the target
already holds rows (a second run would double them or clash on ids), and
a serial column's sequence moved past the ids copied, so the ids written
afterwards keep increasing as they did in the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from agentkernel.errors import AgentKernelError

BATCH_ROWS = 1000

Convert = Callable[[tuple[Any, ...]], tuple[Any, ...]]


class CopyRefused(AgentKernelError):
    """The store database already holds rows of a table being copied into it."""


def open_readonly(path: Path) -> sqlite3.Connection | None:
    """The SQLite file at `path` opened read-only; None when there is no such file."""
    if not path.is_file():
        return None
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def has_table(source: sqlite3.Connection, table: str) -> bool:
    """Whether the SQLite file has `table` (a store never opened has none of its tables)."""
    found = source.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    return found.fetchone() is not None


def copy_table(
    source: sqlite3.Connection,
    target: psycopg.Connection[tuple[Any, ...]],
    table: str,
    columns: Sequence[str],
    *,
    serial: str | None = None,
    convert: Convert | None = None,
) -> int:
    """Copy `columns` of every row of `table` (same name on both sides); how many rows were copied.

    `serial` is the target's identity column whose sequence must pass the
    copied ids; `convert` turns a SQLite row into the target's values.
    """
    if not has_table(source, table):
        return 0
    name = sql.Identifier(table)
    if target.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(name)).fetchone() == (True,):
        raise CopyRefused(
            f"the store database's table {table!r} already holds rows: `agentkernel store migrate` copies "
            "into empty tables only (a second copy would double them)"
        )
    listed = sql.SQL(", ").join(map(sql.Identifier, columns))
    insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        name, listed, sql.SQL(", ").join(sql.Placeholder() * len(columns))
    )
    copied = 0
    selected = ", ".join(f'"{column}"' for column in columns)
    with closing(source.execute(f'SELECT {selected} FROM "{table}"')) as rows:
        while batch := rows.fetchmany(BATCH_ROWS):
            values = [convert(row) for row in batch] if convert else batch
            with target.cursor() as cursor:
                cursor.executemany(insert, values)
            copied += len(batch)
    if serial is not None and copied:
        move_sequence(source, target, table, serial)
    return copied


def move_sequence(
    source: sqlite3.Connection, target: psycopg.Connection[tuple[Any, ...]], table: str, serial: str
) -> None:
    """Move the target's sequence of `table.serial` past its ids and past every id the SQLite file ever
    gave (an AUTOINCREMENT table's counter, in `sqlite_sequence`: its newest rows may have been deleted),
    so the ids written afterwards keep increasing as they did in the file."""
    given = 0
    if has_table(source, "sqlite_sequence"):
        found = source.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        given = int(found[0]) if found is not None and found[0] is not None else 0
    found = target.execute(
        sql.SQL("SELECT max({}) FROM {}").format(sql.Identifier(serial), sql.Identifier(table))
    ).fetchone()
    top = max(int(found[0]) if found is not None and found[0] is not None else 0, given)
    if top > 0:
        target.execute("SELECT setval(pg_get_serial_sequence(%s, %s), %s)", (table, serial, top))


__all__ = ["BATCH_ROWS", "CopyRefused", "copy_table", "has_table", "move_sequence", "open_readonly"]
