"""The same queries on SQLite and PostgreSQL: a store writes its SQL once, with `?` marks, for either.

A store with a PostgreSQL form (S27.2) keeps its query code in one place
(its SQLite module), as a mixin over `dialect` (`SQLITE` or `POSTGRES`)
and the store's connections; what differs is spelled here:

- **Parameters**: `?` in the text, `%s` on PostgreSQL (`Dialect.sql`); the
  text never holds a `?` or `%` of its own, and never a value.
- **Free text**: PostgreSQL's text holds no NUL character; `Dialect.text`
  puts U+FFFD in its place there (as for a lone surrogate), never a failed
  write, and leaves SQLite's text as it is.
- **Row locks**: a row read to be changed in the same transaction is read
  `FOR UPDATE` on PostgreSQL (`for_update`), and rows picked to be claimed
  `FOR UPDATE SKIP LOCKED` (`skip_locked`); SQLite needs neither, its write
  transaction (BEGIN IMMEDIATE) being the only writer of the file.

`Statements` is a connection of either database taking that text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class Connection(Protocol):
    """What both drivers' connections offer: `execute(sql, params)` giving a cursor (`rowcount`,
    `fetchone`, `fetchall`)."""

    def execute(self, sql: str, params: Any = ..., /) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    """How one database spells a parameter and a row lock (see the module docstring)."""

    name: str
    mark: str
    for_update: str
    skip_locked: str
    holds_nul: bool

    def text(self, value: str) -> str:
        """Free text as this database can hold it (see the module docstring)."""
        return value if self.holds_nul or "\x00" not in value else value.replace("\x00", "\ufffd")

    def sql(self, text: str) -> str:
        """`text`, written with `?` marks, in this dialect."""
        return text if self.mark == "?" else text.replace("?", self.mark)


SQLITE = Dialect("sqlite", "?", "", "", holds_nul=True)
POSTGRES = Dialect("postgres", "%s", " FOR UPDATE", " FOR UPDATE SKIP LOCKED", holds_nul=False)


class Statements:
    """A connection (in the caller's transaction, if any) that takes SQL written with `?` marks."""

    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    def execute(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
        """The cursor of `sql` (`?` marks) run with `params`."""
        return self.conn.execute(self.dialect.sql(sql), params)


__all__ = ["POSTGRES", "SQLITE", "Connection", "Dialect", "Statements"]
