"""The message store: a session's transcript, one record per event (S18, S23.5).

Every event of a session -- user and agent messages, tool calls and results,
hook verdicts, notices, warnings, errors -- is appended as one record
``{id, role, kind, content, meta, created_at}``, with the user it was written
for. The transcript helpers (`memory_history`, `memory_search`, `memory_count`)
read it back scoped to the caller's user *and* session (an `Owner`): a session
id is not a secret (a client may choose one: ``agentkernel tool run --session``),
so user B naming user A's session id reads B's records, never A's.

`MessageStore` is the small interface the kernel and helpers depend on
(DESIGN rule 8); `SqliteMessageStore` is the embedded default. Decisions:

- **Concurrency.** One connection per store guarded by a lock (threads), WAL
  journal plus ``busy_timeout`` and ``BEGIN IMMEDIATE`` writes (processes):
  writers queue instead of failing, readers never block writers, and taking
  the write lock up front avoids the read-to-write upgrade that SQLite cannot
  retry. ``synchronous=NORMAL``: a crash of the application loses nothing; a
  power loss may lose the last transactions, acceptable for a transcript.
- **Ids** come from ``AUTOINCREMENT``, so they keep increasing even after the
  newest records are deleted; chronological order is id order (clocks of two
  processes may disagree, the commit order cannot).
- **Size.** `content` is capped at `MAX_CONTENT_BYTES` (1 MiB of UTF-8); longer
  text is cut at a character boundary, ends with a visible marker, and
  ``meta["truncated_from_bytes"]`` keeps the original size. `meta` must be a
  JSON object of at most `MAX_META_BYTES`; a bigger or non-JSON meta is a
  kernel bug and raises `ValueError` rather than being silently altered.
- **Search** is FTS5 with ``unicode61 remove_diacritics 2`` (case- and
  accent-insensitive in Latin script, case-insensitive in any script; ``ё``
  is read as ``е`` by the index and the query alike; no stemming, so
  ``поступления`` does not find ``поступление``) ranked by bm25. User text is
  never FTS5 syntax: each whitespace-separated word becomes a quoted phrase,
  so ``"``, ``*``, ``-``, ``:``, ``NEAR(``, ``AND`` are plain text. Words are
  OR-ed, and the whole query as one phrase is OR-ed in too, so records with
  more of the words, and with them adjacent, rank first. The index is
  written in batches, not a record at a time (an FTS5 insert of one record
  costs about as much as the rest of its write): it holds the records up to
  an id (``messages_indexed.upto``); a step that leaves `INDEX_BATCH` records
  after it indexes them in its own transaction, and a search first indexes
  whatever waits, so it finds every record written before it. A deleted
  record leaves the index (a trigger) when the index holds it.
- **Schema** is created on open inside a write transaction (two processes
  may open a fresh file at once) and versioned with ``PRAGMA user_version``;
  `_MIGRATIONS` lists the steps to each version. Version 2 added the user of
  each record: records written before it have none (NULL) and are read only
  by the kernel's own reads of a whole session (`Kernel.transcript`), never
  by a script, whose user they cannot be shown to belong to. Version 4 put
  the search index's writes in batches (a file of version 3 holds every
  record in it already).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol

from agentkernel.errors import AgentKernelError
from agentkernel.llm.base import ChatMessage, ToolCall
from agentkernel.ports import Entry, MessageStore, Owner, Record
from agentkernel.services.sqlite_db import Schema, SqliteStore, StoreBusy
from agentkernel.services.turn_leases import ENDED, RUNS, LeaseLost
from agentkernel.services.turn_leases import TABLE as LEASES
from agentkernel.util.valid_unicode import repair_text

KIND_USER = "user"
KIND_AGENT = "agent"
KIND_TOOL_CALL = "tool_call"
KIND_TOOL_RESULT = "tool_result"
KIND_HOOK = "hook"
KIND_NOTICE = "notice"
KIND_WARNING = "warning"
KIND_ERROR = "error"
KIND_END = "end"
KINDS = frozenset(
    {
        KIND_USER,
        KIND_AGENT,
        KIND_TOOL_CALL,
        KIND_TOOL_RESULT,
        KIND_HOOK,
        KIND_NOTICE,
        KIND_WARNING,
        KIND_ERROR,
        KIND_END,
    }
)
"""The kinds the kernel writes; any other short string is accepted too, for extensions."""

MAX_CONTENT_BYTES = 1024 * 1024
MAX_META_BYTES = 256 * 1024
MAX_LABEL_CHARS = 64
"""Longest role or kind: they are labels to filter on, not text."""
MAX_QUERY_WORDS = 32
"""Longer queries keep their first words: a bounded MATCH expression, a bounded cost."""

BUSY_TIMEOUT_SECS = 10.0
SCHEMA_VERSION = 4
RUN_RECORDS_CHANNEL = "agentkernel_run_records"
"""Where the PostgreSQL store (memory_pg.py) announces a run's new step: a NOTIFY of the run's id, sent at
the step's commit; server/run_wakeups.py listens."""

FIELDS = "m.id, m.role, m.kind, m.content, m.meta, m.created_at"
_HAS_WORD = re.compile(r"\w")

_FOLD_SQL = "replace(replace({}, 'ё', 'е'), 'Ё', 'Е')"
"""What FTS5 indexes: the content with ё read as е (unicode61 folds Latin diacritics only)."""

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            role TEXT NOT NULL,
            kind TEXT NOT NULL,
            content TEXT NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX messages_session ON messages (session_id, id)",
        # the index reads a view, so FTS5's 'rebuild' re-derives exactly what the triggers index
        f"CREATE VIEW messages_search AS SELECT id, {_FOLD_SQL.format('content')} AS content FROM messages",
        """CREATE VIRTUAL TABLE messages_fts USING fts5(
            content, content='messages_search', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        )""",
        f"""CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts (rowid, content) VALUES (new.id, {_FOLD_SQL.format("new.content")});
        END""",
        f"""CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content)
            VALUES ('delete', old.id, {_FOLD_SQL.format("old.content")});
        END""",
    ),
    2: (
        # the user each record was written for; '' is no user, NULL a record from before version 2
        "ALTER TABLE messages ADD COLUMN user_id TEXT",
        "CREATE INDEX messages_owner ON messages (session_id, user_id, id)",
    ),
    3: (
        # the run each record is a step of (S25.1): a run's events are its records (GET /v1/runs/{id})
        "ALTER TABLE messages ADD COLUMN run_id TEXT",
        "CREATE INDEX messages_run ON messages (run_id, id) WHERE run_id IS NOT NULL",
    ),
    4: (
        # the search index is written in batches (`_index_pending`), not by a trigger a record: it holds
        # the records up to `upto`, every one of them, which the view says, so FTS5's 'rebuild' and
        # 'integrity-check' read what it holds; a file from before holds every record already
        "DROP TRIGGER messages_ai",
        "DROP TRIGGER messages_ad",
        "CREATE TABLE messages_indexed (upto INTEGER NOT NULL)",
        "INSERT INTO messages_indexed (upto) SELECT coalesce(max(id), 0) FROM messages",
        "DROP VIEW messages_search",
        f"""CREATE VIEW messages_search AS SELECT id, {_FOLD_SQL.format("content")} AS content
            FROM messages WHERE id <= (SELECT upto FROM messages_indexed)""",
        f"""CREATE TRIGGER messages_ad AFTER DELETE ON messages
            WHEN old.id <= (SELECT upto FROM messages_indexed) BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content)
            VALUES ('delete', old.id, {_FOLD_SQL.format("old.content")});
        END""",
    ),
}
"""Version N's statements take a file from version N-1 to N; append, never edit."""

INDEX_BATCH = 64
"""Records written but not yet in the search index that make the next step index them (see
`SqliteMessageStore`); a search indexes those left first."""

_INDEX_PENDING = (
    f"INSERT INTO messages_fts (rowid, content) SELECT id, {_FOLD_SQL.format('content')} FROM messages "
    "WHERE id > ? ORDER BY id"
)


def _owner_condition(owner: Owner, mark: str) -> tuple[str, tuple[str, ...]]:
    """The SQL condition on ``m.user_id`` of `owner`'s records, and its parameter."""
    if owner.unrecorded:
        return f"(m.user_id = {mark} OR m.user_id IS NULL)", (owner.user_id or "",)
    return f"m.user_id = {mark}", (owner.user_id or "",)


def scope(session_id: str, owner: Owner | None, mark: str = "?") -> tuple[str, tuple[str, ...]]:
    """The WHERE condition of a read: the session, and the owner's records only when one is given.

    `mark` is the database's parameter placeholder (`?` here, `%s` in memory_pg.py).
    """
    check_session(session_id)
    if owner is None:
        return f"m.session_id = {mark}", (session_id,)
    condition, params = _owner_condition(owner, mark)
    return f"m.session_id = {mark} AND {condition}", (session_id, *params)


class _Store(Protocol):
    """What `TranscriptMethods` needs of the class it is mixed into (see there)."""

    mark: ClassVar[str]
    lease_check: ClassVar[str]
    step_lock: ClassVar[str | None]
    reads_at_once: ClassVar[bool]

    def _read(
        self, sql: str, params: tuple[Any, ...], timeout: float | None = None
    ) -> list[tuple[Any, ...]]: ...

    def _write(self) -> AbstractContextManager[Any]: ...

    def _insert(self, conn: Any, row: tuple[Any, ...]) -> int: ...

    def _note(self, conn: Any, session_id: str, record_id: int, note: Mapping[str, Any]) -> None: ...

    def _stepped(self, conn: Any, run_id: str) -> None: ...

    def _indexed(self, conn: Any, last_id: int) -> None: ...


class TranscriptMethods:
    """What both message stores do, written once: SQLite's (`SqliteMessageStore`) and PostgreSQL's
    (memory_pg.py) differ in their placeholder (`mark`), how a step keeps the session's ids in commit
    order (`step_lock`: SQLite's one writer does it already), how the lease is checked (`lease_check`, one
    row of `session_id, token`), how a record is inserted (`_insert`, its id back) and a note added to
    a record's meta (`_note`), what a run's step tells others (`_stepped`), what the search index needs
    of a step's records (`_indexed`), their searches and the store underneath (`_read`, `_write`)."""

    mark: ClassVar[str]
    lease_check: ClassVar[str]
    step_lock: ClassVar[str | None]  # run first in a step's transaction, given the session id

    def append(
        self: _Store,
        session_id: str,
        role: str,
        kind: str,
        content: str,
        meta: dict[str, Any] | None = None,
        *,
        user_id: str | None = None,
        lease: str | None = None,
    ) -> int:
        """Record one event; content over the cap is truncated, bad labels or meta raise ValueError.

        With `lease` (a turn lease's token, services/turn_leases.py) the record
        is written only while that lease is still the session's, checked in
        the record's own transaction; LeaseLost when it is not, and nothing is written.
        """
        return TranscriptMethods.append_step(
            self, session_id, [Entry(role, kind, content, meta)], user_id=user_id, lease=lease
        )[0]

    def append_step(
        self: _Store,
        session_id: str,
        entries: Sequence[Entry],
        *,
        user_id: str | None = None,
        lease: str | None = None,
        run_id: str | None = None,
        run_update: Mapping[str, Any] | None = None,
        notes: Mapping[int, Mapping[str, Any]] | None = None,
    ) -> list[int]:
        """Record one step of a run: its entries and its run's new state, in one transaction.

        Every record is checked before anything is written (ValueError), so a
        step is written whole or not at all; with `lease`, only while it is
        the session's (LeaseLost). `run_update` sets columns of the run's row
        (`RUN_COLUMNS`): where the run is, for a process that resumes it.
        `notes` add keys to the meta of earlier records of the same session
        (what a hook made of the user's message). A step that ends its run
        (`ends_run`) under `lease` gives the lease back in the same transaction:
        the session is free once its run's end is written, and a process
        killed just after leaves no lease behind to expire.
        """
        check_session(session_id)
        if user_id is not None and not isinstance(user_id, str):
            raise ValueError(f"user_id must be a string or None, not {type(user_id).__name__}")
        rows = [row_of(session_id, user_id, run_id, entry) for entry in entries]
        update = run_update_sql(run_update, self.mark) if run_update and run_id is not None else None
        if not rows and not notes and update is None:
            return []
        with self._write() as conn:
            if self.step_lock is not None:
                conn.execute(self.step_lock, (session_id,))
            if lease is not None and conn.execute(self.lease_check, (session_id, lease)).fetchone() is None:
                raise LeaseLost(session_id)
            ids = [self._insert(conn, row) for row in rows]
            if ids:
                self._indexed(conn, ids[-1])
            for record_id, note in (notes or {}).items():
                self._note(conn, session_id, record_id, note)
            if update is not None and run_id is not None:
                sql, params = update
                conn.execute(f"UPDATE {RUNS} SET {sql} WHERE id = {self.mark}", (*params, run_id))
                if lease is not None and ends_run(run_update):
                    m = self.mark
                    conn.execute(
                        f"DELETE FROM {LEASES} WHERE session_id = {m} AND token = {m}", (session_id, lease)
                    )
            if run_id is not None:
                self._stepped(conn, run_id)
        return ids

    def run_records(self: _Store, run_id: str, after: int = 0, most: int = 500) -> list[Record]:
        """A run's records after id `after`, oldest first, up to `most` (its events, read again)."""
        m = self.mark
        rows = self._read(
            f"SELECT {FIELDS} FROM messages m WHERE m.run_id = {m} AND m.id > {m} ORDER BY m.id LIMIT {m}",
            (run_id, after, most),
        )
        return [record_of(row) for row in rows]

    def changes(self: _Store, session_id: str, after: int, *, owner: Owner | None = None) -> tuple[int, int]:
        """How many records the session has after record id `after`, and its last id (`after` if none).

        The cheap check that a history read before is still the store's: a
        range of the session's index, the records since then only.
        """
        return _changes(self, session_id, after, owner, None)

    def changes_at_once(
        self: _Store, session_id: str, after: int, *, owner: Owner | None = None
    ) -> tuple[int, int] | None:
        """`changes`, only if the store answers without waiting (a local file whose reading connection
        is free): None when it would wait (another thread reading, a database a network away). For the
        event loop, which must not wait on a store."""
        if not self.reads_at_once:
            return None
        try:
            return _changes(self, session_id, after, owner, 0)
        except StoreBusy:
            return None

    def count(
        self: _Store, session_id: str, *, owner: Owner | None = None, timeout: float | None = None
    ) -> int:
        """How many records the session has (served by the session's indexes)."""
        where, params = scope(session_id, owner, self.mark)
        rows = self._read(f"SELECT count(*) FROM messages m WHERE {where}", params, timeout)
        return int(rows[0][0])

    def delete_session(self: _Store, session_id: str) -> int:
        """Delete the session's records (and their entries in the search index) in one transaction."""
        check_session(session_id)
        with self._write() as conn:
            cursor = conn.execute(f"DELETE FROM messages WHERE session_id = {self.mark}", (session_id,))
        return int(cursor.rowcount)


class SqliteMessageStore(TranscriptMethods, SqliteStore):
    """The embedded message store: one SQLite file (or ":memory:"), safe across threads and processes.

    See the module docstring for the concurrency, size and search decisions.
    """

    mark = "?"
    step_lock: ClassVar[str | None] = None
    lease_check = f"SELECT 1 FROM {LEASES} WHERE session_id = ? AND token = ?"
    reads_at_once: ClassVar[bool] = True  # a read of the file in WAL mode never waits for a writer

    def __init__(self, path: Path | str) -> None:
        super().__init__(path, Schema(SCHEMA_VERSION, _MIGRATIONS, too_new=self._too_new), BUSY_TIMEOUT_SECS)
        self._upto_seen = 0  # the search index's end, as last read from the file (`_indexed`)

    def _too_new(self, version: int) -> AgentKernelError:
        return AgentKernelError(
            f"{self.path}: message store schema version {version} is newer than "
            f"this kernel's {SCHEMA_VERSION}"
        )

    @staticmethod
    def _insert(conn: sqlite3.Connection, row: tuple[Any, ...]) -> int:
        cursor = conn.execute(
            "INSERT INTO messages (session_id, user_id, run_id, role, kind, content, meta, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    @staticmethod
    def _note(conn: sqlite3.Connection, session_id: str, record_id: int, note: Mapping[str, Any]) -> None:
        conn.execute(
            "UPDATE messages SET meta = json_patch(meta, ?) WHERE id = ? AND session_id = ?",
            (json.dumps(note, ensure_ascii=False), record_id, session_id),
        )

    @staticmethod
    def _stepped(conn: sqlite3.Connection, run_id: str) -> None:
        """Nothing: a run's readers on the file read it again every little while (server/run_wakeups.py)."""

    def _indexed(self, conn: sqlite3.Connection, last_id: int) -> None:
        """Index the records waiting for the search once INDEX_BATCH of them do (ids up to `last_id`, the
        step's last), in the step's transaction: a batch costs a few µs a record, a record alone 30-50.

        The index's end is read from the file only when the last one seen
        (`_upto_seen`: never past the file's, which only grows) says a batch
        may be due; it is the file's that is indexed from.
        """
        if last_id - self._upto_seen < INDEX_BATCH:
            return
        (upto,) = conn.execute("SELECT upto FROM messages_indexed").fetchone()
        if last_id - upto >= INDEX_BATCH:
            _index_pending(conn, upto)
            upto = last_id
        self._upto_seen = upto

    def _index_before_search(self, timeout: float | None) -> None:
        """Index every record written before now that waits for it: a search sees all of them.

        A read tells whether any waits; only then is the write lock taken
        (within `timeout`, else StoreBusy), and the records after the index's
        end indexed in one transaction.
        """
        with self._reading(timeout) as conn:
            upto, last = conn.execute(
                "SELECT upto, (SELECT coalesce(max(id), 0) FROM messages) FROM messages_indexed"
            ).fetchone()
        if last > upto:
            with self._write(timeout) as conn:
                (upto,) = conn.execute("SELECT upto FROM messages_indexed").fetchone()
                _index_pending(conn, upto)

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
        where, params = scope(session_id, owner)
        if n <= 0:
            return []
        with self._reading(timeout) as conn:
            rows = _rows_within(
                conn,
                f"SELECT {FIELDS} FROM messages m WHERE {where} ORDER BY m.id DESC LIMIT ?",
                (*params, n),
                max_bytes,
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
        """Best first by bm25 (ties: newest first); a query without words finds nothing, never raises.

        Ranking costs about a microsecond per matching record, so a word in
        most of a long session's records costs a lot; `window` bounds it:
        the latest `window` matching records are found first (cheap: rowid
        order, no ranking), and only those are ranked. Without it, every
        match is ranked.
        """
        where, params = scope(session_id, owner)
        match = fts_query(query)
        if match is None or k <= 0:
            return []
        self._index_before_search(timeout)
        with self._reading(timeout) as conn:
            since = 0
            if window is not None:
                (found,) = conn.execute(
                    "SELECT min(id) FROM (SELECT m.id FROM messages_fts "
                    "CROSS JOIN messages m ON m.id = messages_fts.rowid "
                    f"WHERE messages_fts MATCH ? AND {where} ORDER BY messages_fts.rowid DESC LIMIT ?)",
                    (match, *params, max(window, k)),
                ).fetchone()
                if found is None:
                    return []
                since = found
            # bm25() is lower-is-better; S18's score is higher-is-better. CROSS JOIN: the index drives
            rows = _rows_within(
                conn,
                f"SELECT {FIELDS}, -bm25(messages_fts) FROM messages_fts "
                "CROSS JOIN messages m ON m.id = messages_fts.rowid "
                f"WHERE messages_fts MATCH ? AND messages_fts.rowid >= ? AND {where} "
                "ORDER BY bm25(messages_fts), m.id DESC LIMIT ?",
                (match, since, *params, k),
                max_bytes,
            )
        return [record_of(row) for row in rows]


def _changes(
    store: _Store, session_id: str, after: int, owner: Owner | None, timeout: float | None
) -> tuple[int, int]:
    """`changes`' read, waiting at most `timeout` seconds for the store (StoreBusy past it)."""
    where, params = scope(session_id, owner, store.mark)
    rows = store._read(
        f"SELECT count(*), coalesce(max(m.id), {store.mark}) FROM messages m "
        f"WHERE {where} AND m.id > {store.mark}",
        (after, *params, after),
        timeout,
    )
    return int(rows[0][0]), int(rows[0][1])


def _index_pending(conn: sqlite3.Connection, upto: int) -> None:
    """Index the records after id `upto` (those the index does not hold) and move its end past them, in
    the caller's write transaction: ids only grow (AUTOINCREMENT), so a record is indexed exactly once."""
    conn.execute(_INDEX_PENDING, (upto,))
    conn.execute("UPDATE messages_indexed SET upto = max(upto, (SELECT coalesce(max(id), 0) FROM messages))")


def _rows_within(
    conn: sqlite3.Connection, sql: str, params: tuple[Any, ...], max_bytes: int | None
) -> list[tuple[Any, ...]]:
    """The rows in order, stopping before one whose content and meta would pass `max_bytes`.

    Rows are fetched one at a time, so a read never holds more than the
    bound (plus one record) however big the records are; the first row is
    always kept, so a bound below one record's size still returns one.
    """
    cursor = conn.execute(sql, params)
    if max_bytes is None:
        return cursor.fetchall()
    rows: list[tuple[Any, ...]] = []
    total = 0
    for row in cursor:
        total += len(row[3].encode("utf-8")) + len(row[4].encode("utf-8"))
        if rows and total > max_bytes:
            break
        rows.append(row)
    return rows


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression for user text, or None when it has no words.

    Each whitespace-separated chunk is a quoted phrase (inner quotes doubled), so
    nothing the user types is FTS5 syntax; FTS5 then tokenizes inside the quotes
    (``a:b`` is the phrase "a b"). The whole query as one phrase comes first,
    rewarding records where the words stand together.
    """
    text = text.replace("ё", "е").replace("Ё", "Е")  # as _FOLD_SQL does to the content
    words = [chunk for chunk in text.split() if _HAS_WORD.search(chunk)][:MAX_QUERY_WORDS]
    if not words:
        return None
    phrases = [_quote(word) for word in dict.fromkeys(words)]
    if len(words) > 1:
        phrases.insert(0, _quote(" ".join(words)))
    return " OR ".join(phrases)


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _fit(content: str, meta: dict[str, Any] | None) -> tuple[str, str]:
    """Content within MAX_CONTENT_BYTES and meta as JSON text; see the module docstring."""
    meta = dict(meta or {})
    # lone surrogates (a JS string may carry them) cannot be stored as UTF-8: they become U+FFFD
    data = repair_text(content).encode("utf-8")
    content = data[:MAX_CONTENT_BYTES].decode("utf-8", errors="ignore")
    if len(data) > MAX_CONTENT_BYTES:
        content += f"\n[… truncated: {len(data)} bytes in total]"
        meta["truncated_from_bytes"] = len(data)
    return content, _meta_text(meta)


def _meta_text(meta: dict[str, Any]) -> str:
    if not all(isinstance(key, str) for key in meta):
        raise ValueError("meta keys must be strings")
    try:
        # as text, lone surrogates become U+FFFD: read back, the record has only valid Unicode
        text = repair_text(json.dumps(meta, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"meta must be JSON-serializable: {exc}") from exc
    size = len(text.encode("utf-8"))
    if size > MAX_META_BYTES:
        raise ValueError(f"meta is larger than {MAX_META_BYTES} bytes of JSON")
    return text


def check_session(session_id: str) -> None:
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("session_id must be a non-empty string")


RUN_COLUMNS = frozenset(
    {"status", "reason", "prompt", "started_call", "ended_at", "waiting_call", "traceparent"}
)
"""The run's columns a step may set (`append_step`'s `run_update`)."""


def row_of(session_id: str, user_id: str | None, run_id: str | None, entry: Entry) -> tuple[Any, ...]:
    """One record's row, checked: bad labels or meta raise ValueError, long content is cut."""
    _check_label("role", entry.role)
    _check_label("kind", entry.kind)
    if not isinstance(entry.content, str):
        raise ValueError(f"content must be a string, not {type(entry.content).__name__}")
    content, meta_text = _fit(entry.content, entry.meta)
    return (session_id, user_id or "", run_id, entry.role, entry.kind, content, meta_text, _now())


def ends_run(run_update: Mapping[str, Any] | None) -> bool:
    """Whether a step's `run_update` ends its run (its lease then goes with it: `append_step`)."""
    return run_update is not None and run_update.get("status") == ENDED


def run_update_sql(update: Mapping[str, Any], mark: str = "?") -> tuple[str, tuple[Any, ...]]:
    """`SET` clauses of a run's row; a column other than RUN_COLUMNS is a kernel bug (ValueError)."""
    unknown = set(update) - RUN_COLUMNS
    if unknown:
        raise ValueError(f"not a run column a step may set: {sorted(unknown)}")
    values = tuple(json.dumps(v, ensure_ascii=False) if k == "prompt" else v for k, v in update.items())
    return ", ".join(f"{column} = {mark}" for column in update), values


def _check_label(name: str, value: str) -> None:
    if not isinstance(value, str) or not value or len(value) > MAX_LABEL_CHARS:
        raise ValueError(f"{name} must be a non-empty string of at most {MAX_LABEL_CHARS} characters")


def _now() -> str:
    """ISO 8601 UTC with milliseconds, e.g. 2026-05-09T07:35:25.123Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record_of(row: tuple[Any, ...]) -> Record:
    """A row as a Record; a meta that is not a JSON object (the file damaged) reads as {DAMAGED: true}."""
    score = float(row[6]) if len(row) > 6 else None
    try:
        meta = json.loads(row[4])
    except ValueError:
        meta = None
    return Record(
        row[0], row[1], row[2], row[3], meta if isinstance(meta, dict) else {DAMAGED: True}, row[5], score
    )


DAMAGED = "damaged"
"""The meta key of a record whose stored meta could not be read (services/memory.py `record_of`)."""


__all__ = [
    "KINDS",
    "KIND_AGENT",
    "KIND_ERROR",
    "KIND_HOOK",
    "KIND_NOTICE",
    "KIND_TOOL_CALL",
    "KIND_TOOL_RESULT",
    "KIND_USER",
    "KIND_WARNING",
    "MAX_CONTENT_BYTES",
    "MAX_META_BYTES",
    "MessageStore",
    "Owner",
    "Record",
    "SqliteMessageStore",
    "chat_messages",
    "conversation",
    "ends_run",
    "fts_query",
    "session_problem",
    "transcript",
]


# -- the kernel's own reads of a transcript ------------------------------------------------------------


def conversation(store: MessageStore, session_id: str, user_id: str | None, limit: int) -> list[ChatMessage]:
    """The user's messages and the answers of `user_id`'s session, as an agent loop's history.

    Only that user's records (and those from before the store recorded
    users): naming another user's session id resumes nothing of theirs.
    """
    return chat_messages(store.history(session_id, limit, owner=Owner(user_id, unrecorded=True)))


RUN_RECORDS_MOST = 10_000
"""The most records of one run read back whole (a run is bounded by its template's max_turns)."""


def run_journal(store: MessageStore, run_id: str, most: int = RUN_RECORDS_MOST) -> list[Record]:
    """Every record of a run, oldest first (up to `most`), read a page at a time."""
    found: list[Record] = []
    while len(found) < most:
        page = store.run_records(run_id, found[-1].id if found else 0, min(500, most - len(found)))
        if not page:
            break
        found.extend(page)
    return found


def chat_messages(records: list[Record]) -> list[ChatMessage]:
    """The conversation among `records` as the LLM saw it: the user's messages (as the hooks left
    them: `meta.asked`), the answers, and each response's tool calls with their results.

    A call without a result (cut off at the window's start, a client's, a run
    cut short) and a result without its call are left out, as is the text of
    a response left without calls: the LLM refuses a conversation with either.
    """
    messages: list[ChatMessage] = []
    calls: list[tuple[ToolCall, str | None]] = []  # the response being read: its calls and its text
    results: dict[str, ChatMessage] = {}
    for record in records:
        if record.kind == KIND_TOOL_CALL:
            if results:  # a new response: the last one is complete
                _close(messages, calls, results)
            calls.append((_tool_call(record), record.meta.get("text")))
        elif record.kind == KIND_TOOL_RESULT and calls:
            call_id = str(record.meta.get("id", ""))
            results[call_id] = ChatMessage.tool(call_id, record.content, record.meta.get("tool"))
        elif record.kind in (KIND_USER, KIND_AGENT):
            _close(messages, calls, results)
            if record.kind == KIND_USER:
                messages.append(ChatMessage.user(str(record.meta.get("asked", record.content))))
            else:
                messages.append(ChatMessage.assistant(record.content))
    _close(messages, calls, results)
    return messages


def _tool_call(record: Record) -> ToolCall:
    return ToolCall(str(record.meta.get("id", "")), str(record.meta.get("tool", "")), record.content)


def _close(
    messages: list[ChatMessage], calls: list[tuple[ToolCall, str | None]], results: dict[str, ChatMessage]
) -> None:
    """The response read so far, with the results its calls got, onto `messages`; both are emptied."""
    answered = tuple(call for call, _ in calls if call.id in results)
    if answered:
        text = next((t for _, t in calls if t), None)
        messages.append(ChatMessage.assistant(text, answered))
        messages.extend(results[call.id] for call in answered)
    calls.clear()
    results.clear()


def transcript(store: MessageStore, session_id: str, limit: int, user_id: str | None) -> list[Record]:
    """The last `limit` records of a session, oldest first: every one, or only `user_id`'s when given
    (and those from before the store recorded users)."""
    owner = Owner(user_id, unrecorded=True) if user_id is not None else None
    return store.history(session_id, limit, owner=owner)


def session_problem(store: MessageStore, owner: str | None, session_id: str) -> str | None:
    """Why `owner` may not post into `session_id` (a cron job's delivery): it holds none of their messages."""
    if store.count(session_id, owner=Owner(owner)) == 0:
        return f"{session_id!r} is not a session of {owner!r} (it holds none of their messages)"
    return None
