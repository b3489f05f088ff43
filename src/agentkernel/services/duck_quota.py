"""`duckdb.max_file_bytes`: how much one database file may hold, checked before every write.

DuckDB has no setting that caps a file, and one `INSERT … SELECT` can write
gigabytes in seconds. So each statement that may grow the file first
measures what the file *uses*: the blocks DuckDB keeps data in
(`pragma_database_size`) plus its write-ahead log. At or over the quota the
statement is refused, unless it can only free space (DELETE, DROP, VACUUM,
CALL such as CHECKPOINT, transactions, SELECT), so a full database can
always be emptied. A checkpoint is tried before refusing: the blocks a
DROP freed count as free only after one.

A statement under way cannot be stopped at the quota: DuckDB writes a
transaction at its commit, which no interrupt reaches. What bounds it is
that the pool opens files with optimistic writing off, so an uncommitted
transaction stays in memory (`duckdb.memory_limit_mb`) and DuckDB's
temporary folder (capped at the same quota, `max_temp_directory_size`),
never in the file: one statement can pass the quota by at most that much,
a rolled-back one leaves nothing behind, and the next write is refused.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import duckdb

SECTION = "duckdb"  # kernel.yaml's section, as the errors name its settings

_FREEING_STATEMENTS = frozenset(
    getattr(duckdb.StatementType, name)
    for name in ("DELETE", "DROP", "VACUUM", "CALL", "TRANSACTION", "SELECT")  # not EXPLAIN ANALYZE INSERT
    if hasattr(duckdb.StatementType, name)
)

_USED_SQL = (
    "SELECT block_size * used_blocks FROM pragma_database_size() WHERE database_name = current_database()"
)


class QuotaExceeded(Exception):
    """The database is at its quota; the text says which setting and how to make room."""


def frees_only(kinds: list[duckdb.StatementType]) -> bool:
    """Whether every statement can only free space (or read), so it may run over the quota."""
    return all(kind in _FREEING_STATEMENTS for kind in kinds)


def used_bytes(cursor: duckdb.DuckDBPyConnection, file: Path) -> int:
    """The bytes of the blocks holding data, plus the write-ahead log on disk."""
    row = cursor.execute(_USED_SQL).fetchone()
    log = 0
    with contextlib.suppress(OSError):  # no log yet
        log = os.stat(file.with_name(file.name + ".wal")).st_size
    return (int(row[0]) if row and row[0] is not None else 0) + log


def check_room(cursor: duckdb.DuckDBPyConnection, file: Path, limit: int) -> int:
    """The used bytes before a write; QuotaExceeded when there is no room even after a checkpoint."""
    used = used_bytes(cursor, file)
    if used < limit:
        return used
    with contextlib.suppress(duckdb.Error):  # a transaction is open: the count stays as it was
        cursor.execute("CHECKPOINT")  # a DROP's blocks are free only after one
    used = used_bytes(cursor, file)
    if used >= limit:
        raise QuotaExceeded(
            f"the database uses {used:,} bytes, at or over its {limit:,}-byte quota "
            f"({SECTION}.max_file_bytes); make room with DELETE or DROP TABLE"
        )
    return used


__all__ = ["QuotaExceeded", "check_room", "frees_only", "used_bytes"]
