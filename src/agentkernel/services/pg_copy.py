"""Copying an embedded project's SQLite tables into the store database (`agentkernel store migrate`).

Each PostgreSQL store's `copy_from_sqlite(config, target)` is made of these
steps, in the caller's transaction (never committed here):

- **Read-only source**: the SQLite file is opened `mode=ro`, never
  created, changed or migrated; a missing file copies nothing.
- **Same schema version**: a table set is copied only from a file at the
  version this kernel writes (`source_version`), since the columns are
  named as in that version; an older file is opened once by this kernel
  (which upgrades it) first, a newer one refused.
- **Into empty tables**: a target table that holds rows already is refused,
  naming it, so a second migration never mixes two projects' rows.
- **Ids kept**: rows keep their ids, and the table's identity sequence is
  moved past the highest one (`move_sequence`), so ids only increase.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import psycopg

from agentkernel.errors import AgentKernelError
from agentkernel.services.sqlite_db import Schema

Row = tuple[Any, ...]


class CopyRefused(AgentKernelError):
    """The store database already holds rows of a table being copied into it."""


@contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection | None]:
    """The SQLite file at `path` opened read-only, or None when there is no such file."""
    if not path.is_file():
        yield None
        return
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        yield conn


def source_version(source: sqlite3.Connection, schema: Schema, what: str, path: Path) -> int:
    """The file's version of `schema` (0: it has none of its tables); AgentKernelError unless 0 or current."""
    found = schema.read_version(source)
    if found not in (0, schema.version):
        then = "open the project once with this agentkernel first" if found < schema.version else "upgrade it"
        raise AgentKernelError(
            f"{path}: {what} have schema version {found}, this agentkernel copies version {schema.version}; "
            + then
        )
    return found


def copy_table(
    source: sqlite3.Connection,
    target: psycopg.Connection[Row],
    table: str,
    columns: Sequence[str],
    convert: Callable[[Row], Row] | None = None,
    *,
    source_table: str | None = None,
) -> int:
    """Copy every row of `table` (those `columns`) from `source` to the empty table of `target`; how many.

    `source_table` is the file's name for the table when it differs. Rows
    stream through PostgreSQL's COPY, a row at a time on either side, so a
    table of any size takes bounded memory.
    """
    refuse_unless_empty(target, table)
    names = ", ".join(columns)
    copied = 0
    with target.cursor() as cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in source.execute(f"SELECT {names} FROM {source_table or table}"):
            copy.write_row(row if convert is None else convert(row))
            copied += 1
    return copied


def copy_tables(path: Path, target: psycopg.Connection[Row], tables: Mapping[str, str]) -> dict[str, int]:
    """Each `tables` key (a table of the file at `path`, when it holds it) copied into its value (a
    PostgreSQL table), in the columns both have (an older file lacks a later column: the target's
    default fills it); rows copied per PostgreSQL table."""
    with read_only(path) as source:
        if source is None:
            return {}
        return {
            dst: copy_table(source, target, dst, shared_columns(source, src, target, dst), source_table=src)
            for src, dst in tables.items()
            if holds(source, src)
        }


def holds(source: sqlite3.Connection, table: str) -> bool:
    """Whether the SQLite file has `table` (a store never opened has none of its tables)."""
    found = source.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    return found.fetchone() is not None


def shared_columns(
    source: sqlite3.Connection, src: str, target: psycopg.Connection[Row], dst: str
) -> list[str]:
    """The target table's columns the source table has too, in the target's order."""
    theirs = {row[1] for row in source.execute(f"PRAGMA table_info({src})")}
    ours = target.execute(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_name = %s AND table_schema = current_schema() ORDER BY ordinal_position",
        (dst,),
    )
    return [str(row[0]) for row in ours if row[0] in theirs]


def refuse_unless_empty(target: psycopg.Connection[Row], table: str) -> None:
    """CopyRefused when the store database's `table` already holds rows (a second copy would double them)."""
    if target.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone() != (False,):
        raise CopyRefused(
            f"the store database's table {table} already holds rows: "
            "`agentkernel store migrate` copies into empty tables only (a fresh database)"
        )


def move_sequence(
    target: psycopg.Connection[Row], table: str, column: str, source: sqlite3.Connection | None = None
) -> None:
    """Move the identity sequence of `table.column` past its highest value — and past every id the
    SQLite `source` ever gave (an AUTOINCREMENT table's counter: its newest rows may have been
    deleted) — so the ids written afterwards keep increasing as they did in the file."""
    given = 0
    if source is not None and holds(source, "sqlite_sequence"):
        found = source.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        given = int(found[0]) if found is not None and found[0] is not None else 0
    target.execute(
        f"SELECT setval(pg_get_serial_sequence(%s, %s), greatest(coalesce(max({column}), 0), %s) + 1, false) "
        f"FROM {table}",
        (table, column, given),
    )


__all__ = [
    "CopyRefused",
    "copy_table",
    "copy_tables",
    "holds",
    "move_sequence",
    "read_only",
    "refuse_unless_empty",
    "shared_columns",
    "source_version",
]
