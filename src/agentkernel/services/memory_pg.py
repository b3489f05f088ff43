"""The message store on PostgreSQL (S18, S23.5, S27.2): `SqliteMessageStore`'s behaviour, in the store DB.

Chosen by the kernel when kernel.yaml sets `store.url`. The same records,
ids, scopes, caps and step transactions as the SQLite store (memory.py,
whose `TranscriptMethods` both stores share); the run journal and turn
leases live in the same database (turn_leases_pg.py), so a step still checks
its lease and moves its run in the records' own transaction. Decisions:

- **Concurrency**: READ COMMITTED transactions; a step's lease check is
  `SELECT … FOR SHARE` of the lease row, so a takeover replacing the lease
  (an UPDATE of that row) waits for the step to commit, and a step after the
  takeover finds another token (LeaseLost): the fence of the SQLite store's
  one-writer lock, without one. Ids come from a BIGSERIAL: they only increase;
  a step holds an advisory lock of its session until it commits, so a
  session's ids are also in commit order (a reader that saw id N never
  finds a smaller one of that session later: `changes`, run streams).
- **Search** is PostgreSQL full-text search, with the text folded by this
  module, not by the database: NFC, Latin diacritics removed, ё read as е,
  lower case (`fold`), then split into runs of letters and digits (`words`)
  and indexed as `to_tsvector('simple', …)` (no stemming, no stop words) in
  a GIN-indexed column. So it is case- and accent-insensitive as the SQLite
  store is, whatever the database's locale, and needs no extension (`unaccent`
  ships with Debian's postgresql, but an application's role may not create
  it). The query is built the same way from the user's words with
  `phraseto_tsquery`, which reads plain text: user text is never query
  syntax. Words are OR-ed (each word a phrase of its parts, as FTS5 reads
  ``a:b``), ranked by `ts_rank` of those words (more of them, more often,
  rank higher) plus `ts_rank` of the whole query as one phrase (closer
  together rank higher); ties newest first; `window` bounds the ranking as
  in the SQLite store.
- **What differs**: PostgreSQL text cannot hold NUL, so a NUL in content is
  stored as U+FFFD; the words of a record past `INDEX_BYTES` of index (a
  tsvector holds at most 1 MiB) are not searchable (the record is still
  stored and read whole).
- **A run's step is announced**: `NOTIFY` on `RUN_RECORDS_CHANNEL` with the
  run's id, in the step's transaction (so delivered at its commit), for the
  servers streaming that run's events (server/run_wakeups.py).
- **Bounded reads**: with `timeout`, the read's transaction sets a local
  `statement_timeout`; past it the read fails with `StoreBusy`, as the
  SQLite store's. `max_bytes` is applied in the query (a running sum), so
  no more rows than fit reach the process.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg
from psycopg import errors

from agentkernel.ports import Owner, Record
from agentkernel.services.memory import (
    FIELDS,
    MAX_QUERY_WORDS,
    RUN_RECORDS_CHANNEL,
    TranscriptMethods,
    record_of,
    scope,
)
from agentkernel.services.pg_copy import holds, move_sequence, read_only, refuse_unless_empty
from agentkernel.services.postgres import PgPool, PgSchema, PgStore, migrate
from agentkernel.services.sqlite_db import StoreBusy
from agentkernel.services.turn_leases import TABLE as LEASES
from agentkernel.services.turn_leases_pg import SCHEMA as LEASES_SCHEMA

if TYPE_CHECKING:
    from agentkernel.config import KernelConfig

INDEX_BYTES = 768 * 1024
"""The most a record's search entry may take (PostgreSQL refuses a tsvector of 1 MiB or more)."""

SCHEMA = PgSchema(
    store="messages",
    what="the message store",
    version=1,
    upgrades={
        1: (
            """CREATE TABLE messages (
                id BIGSERIAL PRIMARY KEY,
                session_id TEXT NOT NULL,
                user_id TEXT,
                run_id TEXT,
                role TEXT NOT NULL,
                kind TEXT NOT NULL,
                content TEXT NOT NULL,
                meta TEXT NOT NULL DEFAULT '{}',
                created_at TEXT NOT NULL,
                search TSVECTOR NOT NULL
            )""",
            "CREATE INDEX messages_session ON messages (session_id, id)",
            "CREATE INDEX messages_owner ON messages (session_id, user_id, id)",
            "CREATE INDEX messages_run ON messages (run_id, id) WHERE run_id IS NOT NULL",
            "CREATE INDEX messages_search ON messages USING GIN (search)",
        ),
    },
)

_INSERT = (
    "INSERT INTO messages (session_id, user_id, run_id, role, kind, content, meta, created_at, search) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, to_tsvector('simple', %s)) RETURNING id"
)
_WORD = re.compile(r"[^\W_]+")
_HAS_WORD = re.compile(r"\w")
_LATIN = (range(0x00C0, 0x0250), range(0x1E00, 0x1F00))


def _folding() -> dict[int, str]:
    """Latin letters with diacritics → their base letter; ё → е (what FTS5's unicode61 folds, and ё)."""
    table = {ord("ё"): "е", ord("Ё"): "Е"}
    for block in _LATIN:
        for code in block:
            parts = unicodedata.normalize("NFD", chr(code))
            if len(parts) > 1 and all(unicodedata.combining(mark) for mark in parts[1:]):
                table[code] = parts[0]
    return table


_FOLD = _folding()


def fold(text: str) -> str:
    """`text` as the search reads it: NFC, Latin diacritics removed, ё as е, lower case."""
    return unicodedata.normalize("NFC", text).translate(_FOLD).lower()


def words(text: str) -> list[str]:
    """The searchable words of `text`, folded: its runs of letters and digits."""
    return _WORD.findall(fold(text))


def index_text(content: str) -> str:
    """What a record's search entry is made of: its words, up to about `INDEX_BYTES` of entry.

    A word's first occurrence costs its bytes and a header, a repeat its position: an estimate
    above what PostgreSQL stores, so the entry stays under its limit.
    """
    kept: list[str] = []
    seen: set[str] = set()
    size = 0
    for word in words(content):
        size += 2 if word in seen else len(word.encode()) + 10
        if size > INDEX_BYTES:
            break
        seen.add(word)
        kept.append(word)
    return " ".join(kept)


def query_phrases(query: str) -> list[str]:
    """The user's words as phrases to OR: each chunk's words (first the whole query's, when it has
    several chunks); [] when it has no words. As memory.py `fts_query`, bounded to MAX_QUERY_WORDS."""
    chunks = [chunk for chunk in query.split() if _HAS_WORD.search(chunk)][:MAX_QUERY_WORDS]
    phrases = [" ".join(found) for found in map(words, chunks) if found]
    return list(dict.fromkeys(phrases))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 (SQLite's json_patch): objects merged key by key, null removes a key, else replaced."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


class PostgresMessageStore(TranscriptMethods, PgStore):
    """The message store in the PostgreSQL database: see the module docstring and `SqliteMessageStore`."""

    mark = "%s"
    step_lock: ClassVar[str | None] = (
        "SELECT pg_advisory_xact_lock(hashtextextended('agentkernel.messages.session:' || %s, 0))"
    )
    lease_check = f"SELECT 1 FROM {LEASES} WHERE session_id = %s AND token = %s FOR SHARE"
    reads_at_once: ClassVar[bool] = False  # a read is a round trip to the database: a worker thread waits

    def __init__(self, pool: PgPool | str) -> None:
        super().__init__(pool, SCHEMA)
        try:
            migrate(self._pool, LEASES_SCHEMA)  # a step checks its lease and moves its run: their tables
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _insert(conn: psycopg.Connection[tuple[Any, ...]], row: tuple[Any, ...]) -> int:
        *head, content, meta, created_at = row
        content = content.replace("\x00", "\ufffd")
        found = conn.execute(_INSERT, (*head, content, meta, created_at, index_text(content))).fetchone()
        assert found is not None
        return int(found[0])

    @staticmethod
    def _note(
        conn: psycopg.Connection[tuple[Any, ...]], session_id: str, record_id: int, note: Mapping[str, Any]
    ) -> None:
        found = conn.execute(
            "SELECT meta FROM messages WHERE id = %s AND session_id = %s FOR UPDATE", (record_id, session_id)
        ).fetchone()
        if found is None:
            return
        try:
            meta = json.loads(found[0])
        except ValueError:
            meta = None  # json_patch reads a damaged meta as none
        patched = merge_patch(meta, json.loads(json.dumps(note, ensure_ascii=False)))
        conn.execute(
            "UPDATE messages SET meta = %s WHERE id = %s",
            (json.dumps(patched, ensure_ascii=False), record_id),
        )

    @staticmethod
    def _stepped(conn: psycopg.Connection[tuple[Any, ...]], run_id: str) -> None:
        """Tell every listener the run has a new step: sent at the step's commit, never before it."""
        conn.execute("SELECT pg_notify(%s, %s)", (RUN_RECORDS_CHANNEL, run_id))

    @staticmethod
    def _indexed(conn: psycopg.Connection[tuple[Any, ...]], last_id: int) -> None:
        """Nothing: each record's search column is written with it (`_insert`)."""

    @contextmanager
    def _reading(self, timeout: float | None = None) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A read-only transaction, bounded by `timeout` seconds when given (StoreBusy past it)."""
        with self._pool.connection() as conn:
            try:
                with conn.transaction():
                    if timeout is not None:
                        millis = max(1, int(timeout * 1000))
                        conn.execute("SELECT set_config('statement_timeout', %s, true)", (f"{millis}ms",))
                    yield conn
            except errors.QueryCanceled as exc:
                raise StoreBusy(
                    f"the message store in {self._pool.shown} did not answer within {timeout:g} s"
                ) from exc

    def _read(self, sql: str, params: tuple[Any, ...], timeout: float | None = None) -> list[tuple[Any, ...]]:
        with self._reading(timeout) as conn:
            return conn.execute(sql, params).fetchall()

    def history(
        self,
        session_id: str,
        n: int,
        *,
        owner: Owner | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> list[Record]:
        """The last `n` records, oldest first; ordered by id, which is commit order."""
        where, params = scope(session_id, owner, self.mark)
        if n <= 0:
            return []
        rows = self._read(
            *_within(f"SELECT {FIELDS} FROM messages m WHERE {where}", params, "id DESC", n, max_bytes),
            timeout,
        )
        return [record_of(row) for row in reversed(rows)]

    def search(
        self,
        session_id: str,
        query: str,
        k: int,
        *,
        owner: Owner | None = None,
        max_bytes: int | None = None,
        window: int | None = None,
        timeout: float | None = None,
    ) -> list[Record]:
        """Best first (ties: newest first); a query without words finds nothing, never raises.

        With `window`, the latest `window` matching records are found first
        (id order, no ranking) and only those are ranked, as the SQLite store does.
        """
        where, params = scope(session_id, owner, self.mark)
        phrases = query_phrases(query)
        if not phrases or k <= 0:
            return []
        matching = " || ".join(["phraseto_tsquery('simple', %s)"] * len(phrases))
        together = " ".join(phrases)
        with self._reading(timeout) as conn:
            since = 0
            if window is not None:
                (found,) = conn.execute(
                    f"SELECT min(id) FROM (SELECT m.id FROM messages m WHERE m.search @@ ({matching}) "
                    f"AND {where} ORDER BY m.id DESC LIMIT %s) latest",
                    (*phrases, *params, max(window, k)),
                ).fetchone() or (None,)
                if found is None:
                    return []
                since = found
            score = f"ts_rank(m.search, {matching}) + ts_rank(m.search, phraseto_tsquery('simple', %s))"
            sql, query_params = _within(
                f"SELECT {FIELDS}, {score} AS score FROM messages m "
                f"WHERE m.search @@ ({matching}) AND m.id >= %s AND {where}",
                (*phrases, together, *phrases, since, *params),
                "score DESC, id DESC",
                k,
                max_bytes,
            )
            rows = conn.execute(sql, query_params).fetchall()
        return [record_of(row) for row in rows]


def _within(
    select: str, params: tuple[Any, ...], order: str, most: int, max_bytes: int | None
) -> tuple[str, tuple[Any, ...]]:
    """`select`'s first `most` rows by `order` (its own column names), stopping before one whose content
    and meta would pass `max_bytes` (the first row always kept): a running sum in the query, so the
    rows past the bound never leave the database."""
    if max_bytes is None:
        return f"{select} ORDER BY {order} LIMIT %s", (*params, most)
    columns = "u.id, u.role, u.kind, u.content, u.meta, u.created_at" + (
        ", u.score" if "score" in order else ""
    )
    return (
        f"SELECT {columns} FROM (SELECT t.*, sum(octet_length(t.content) + octet_length(t.meta)) OVER w "
        f"AS total, row_number() OVER w AS n FROM ({select}) t "
        f"WINDOW w AS (ORDER BY {order} ROWS UNBOUNDED PRECEDING) ORDER BY {order} LIMIT %s) u "
        "WHERE u.n = 1 OR u.total <= %s ORDER BY u.n",
        (*params, most, max_bytes),
    )


def copy_from_sqlite(config: KernelConfig, target: psycopg.Connection[tuple[Any, ...]]) -> dict[str, int]:
    """Copy the project's transcript (`messages` of `logging.messages_db_path`) into the store database.

    As services/pg_copy.py copies a table (read-only source, refused into a
    table holding rows, the caller's transaction, the id sequence moved past
    every id the file gave), each record with its search entry made here.
    """
    with read_only(config.messages_db) as source:
        if source is None or not holds(source, "messages"):
            return {}
        refuse_unless_empty(target, "messages")
        columns = {row[1] for row in source.execute("PRAGMA table_info(messages)")}
        user = "user_id" if "user_id" in columns else "NULL"  # a file of version 1 has no users
        run = "run_id" if "run_id" in columns else "NULL"
        copied = 0
        with closing(
            source.execute(
                f"SELECT id, session_id, {user}, {run}, role, kind, content, meta, created_at FROM messages"
            )
        ) as rows:
            while batch := rows.fetchmany(BATCH_ROWS):
                with target.cursor() as cursor:
                    cursor.executemany(_COPY, [_copied(row) for row in batch])
                copied += len(batch)
        if copied:
            move_sequence(target, "messages", "id", source)
        return {"messages": copied}


BATCH_ROWS = 1000

_COPY = (
    "INSERT INTO messages (id, session_id, user_id, run_id, role, kind, content, meta, created_at, search) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, to_tsvector('simple', %s))"
)


def _copied(row: tuple[Any, ...]) -> tuple[Any, ...]:
    content = str(row[6]).replace("\x00", "\ufffd")
    return (*row[:6], content, row[7], row[8], index_text(content))


SCHEMAS = (SCHEMA,)

__all__ = [
    "INDEX_BYTES",
    "SCHEMA",
    "SCHEMAS",
    "PostgresMessageStore",
    "copy_from_sqlite",
    "fold",
    "index_text",
    "merge_patch",
    "query_phrases",
    "words",
]
