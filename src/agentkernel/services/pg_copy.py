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
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import psycopg

from agentkernel.errors import AgentKernelError
from agentkernel.services.sqlite_db import Schema

Row = tuple[Any, ...]


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
) -> int:
    """Copy every row of `table` (those `columns`) from `source` to the empty table of `target`; how many.

    Rows stream through PostgreSQL's COPY, a row at a time on either side,
    so a table of any size takes bounded memory.
    """
    if target.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone() != (False,):
        raise AgentKernelError(
            f"the store database's table {table} holds rows already: "
            "the migration copies into empty tables only (a fresh database)"
        )
    names = ", ".join(columns)
    copied = 0
    with target.cursor() as cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in source.execute(f"SELECT {names} FROM {table}"):
            copy.write_row(row if convert is None else convert(row))
            copied += 1
    return copied


def move_sequence(target: psycopg.Connection[Row], table: str, column: str) -> None:
    """Move the identity sequence of `table.column` past its highest value, so new ids come after."""
    target.execute(
        f"SELECT setval(pg_get_serial_sequence(%s, %s), coalesce(max({column}), 0) + 1, false) FROM {table}",
        (table, column),
    )


__all__ = ["copy_table", "move_sequence", "read_only", "source_version"]
