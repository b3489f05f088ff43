"""The message store (S18, S23.5): order, search, isolation, limits, concurrency, durability.

Every test but those about the SQLite file runs on both stores: the SQLite
file and the PostgreSQL database (S27.2, tests/pg.py); `where` is either.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkernel.errors import AgentKernelError
from agentkernel.ports import Entry
from agentkernel.services.memory import (
    _MIGRATIONS,
    INDEX_BATCH,
    KIND_AGENT,
    KIND_ERROR,
    KIND_TOOL_CALL,
    KIND_USER,
    KINDS,
    MAX_CONTENT_BYTES,
    SCHEMA_VERSION,
    MessageStore,
    Owner,
    Record,
    SqliteMessageStore,
    fts_query,
)
from agentkernel.services.memory_pg import PostgresMessageStore
from agentkernel.services.sqlite_db import StoreBusy

ISO_MS_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


Store = SqliteMessageStore | PostgresMessageStore


def open_store(where: Path | str) -> Store:
    """The PostgreSQL store for a postgresql:// URL, else the SQLite one on that file."""
    if str(where).startswith("postgresql://"):
        return PostgresMessageStore(str(where))
    return SqliteMessageStore(where)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "messages.sqlite"


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, db: Path) -> str:
    """Where a store lives: a message store file, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(db)
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(where: str) -> Iterator[Store]:
    with open_store(where) as opened:
        yield opened


def fill(store: Store, session: str, *texts: str) -> list[int]:
    return [store.append(session, "user", KIND_USER, text) for text in texts]


# --- append, history, records -------------------------------------------------


def test_it_is_a_message_store(store: Store) -> None:
    assert isinstance(store, MessageStore)
    assert {"user", "agent", "tool_call", "tool_result", "hook", "notice", "warning", "error", "end"} == KINDS


def test_ids_increase(store: Store) -> None:
    ids = fill(store, "s1", "a", "b", "c")
    assert ids == sorted(ids) and len(set(ids)) == 3


def test_history_is_the_last_n_oldest_first(store: Store) -> None:
    fill(store, "s1", *[f"message {i}" for i in range(10)])
    assert [r.content for r in store.history("s1", 3)] == ["message 7", "message 8", "message 9"]
    assert [r.content for r in store.history("s1", 100)] == [f"message {i}" for i in range(10)]
    assert store.history("s1", 0) == [] and store.history("s1", -5) == []
    assert store.history("nobody", 5) == []


def test_record_shape_is_s18(store: Store) -> None:
    record_id = store.append("s1", "agent", KIND_AGENT, "hello", {"model": "m"})
    (record,) = store.history("s1", 1)
    assert record == Record(record_id, "agent", "agent", "hello", {"model": "m"}, record.created_at, None)
    assert ISO_MS_UTC.match(record.created_at), record.created_at
    as_json = record.to_json()
    assert list(as_json) == ["id", "role", "kind", "content", "meta", "created_at", "score"]
    assert as_json["score"] is None
    json.dumps(as_json)  # plain JSON all the way down


def test_meta_round_trips(store: Store) -> None:
    meta = {"tool": "lookup", "args": {"q": "счёт", "n": [1, 2.5, None, True]}, "empty": {}}
    store.append("s1", "tool", KIND_TOOL_CALL, "lookup(...)", meta)
    store.append("s1", "user", KIND_USER, "no meta")
    first, second = store.history("s1", 2)
    assert first.meta == meta
    assert second.meta == {}


def test_any_short_kind_is_accepted(store: Store) -> None:
    store.append("s1", "kernel", "budget_exceeded", "over budget")
    assert store.history("s1", 1)[0].kind == "budget_exceeded"


@pytest.mark.parametrize(
    ("session", "role", "kind", "content", "meta"),
    [
        ("", "user", "user", "x", None),
        ("s", "", "user", "x", None),
        ("s", "user", "", "x", None),
        ("s", "user", "k" * 65, "x", None),
        ("s", "user", "user", 42, None),
        ("s", "user", "user", "x", {"bad": {1, 2}}),
        ("s", "user", "user", "x", {"nan": float("nan")}),
        ("s", "user", "user", "x", {1: "non-string key"}),
        ("s", "user", "user", "x", {"huge": "x" * (300 * 1024)}),
    ],
)
def test_bad_appends_raise_value_error(
    store: Store, session: str, role: str, kind: str, content: object, meta: object
) -> None:
    with pytest.raises(ValueError):
        store.append(session, role, kind, content, meta)  # type: ignore[arg-type]
    assert store.count("s") == 0


def test_count(store: Store) -> None:
    assert store.count("s1") == 0
    fill(store, "s1", "a", "b")
    fill(store, "s2", "c")
    assert (store.count("s1"), store.count("s2")) == (2, 1)


def test_sessions_never_see_each_other(store: Store) -> None:
    fill(store, "alice", "the secret password is swordfish")
    fill(store, "bob", "what is the password")
    assert [r.content for r in store.history("bob", 10)] == ["what is the password"]
    assert store.search("bob", "swordfish", 10) == []
    assert [r.content for r in store.search("bob", "password", 10)] == ["what is the password"]
    assert store.count("bob") == 1


def test_s18_an_owner_reads_only_its_users_records_of_the_session(store: Store) -> None:
    """A session id is not a secret: user B naming user A's session reads B's records only."""
    store.append("shared", "user", KIND_USER, "alice: the password is swordfish", user_id="alice")
    store.append("shared", "user", KIND_USER, "bob: what is the password", user_id="bob")
    store.append("shared", "user", KIND_USER, "nobody: password?")  # no user
    bob, nobody = Owner("bob"), Owner(None)
    assert [r.content for r in store.history("shared", 10, owner=bob)] == ["bob: what is the password"]
    assert store.search("shared", "swordfish", 10, owner=bob) == []
    assert [r.content for r in store.search("shared", "password", 10, owner=bob)] == [
        "bob: what is the password"
    ]
    assert store.count("shared", owner=bob) == 1
    assert [r.content for r in store.history("shared", 10, owner=nobody)] == ["nobody: password?"]
    assert store.count("shared", owner=Owner("")) == 1  # "" is no user, as None
    assert store.count("shared") == 3  # no owner: the kernel's read of the whole session
    with pytest.raises(ValueError, match="user_id must be a string"):
        store.append("shared", "user", KIND_USER, "x", user_id=5)  # type: ignore[arg-type]


def test_a_version_1_file_is_upgraded_and_its_records_keep_no_user(db: Path) -> None:
    """Records from before users were recorded: every reader of the whole session, or `unrecorded`."""
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    try:
        for statement in _MIGRATIONS[1]:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO messages (session_id, role, kind, content, meta, created_at) "
            "VALUES ('s1', 'user', 'user', 'старое поступление', '{}', '2026-01-01T00:00:00.000Z')"
        )
        conn.execute("PRAGMA user_version = 1")
        conn.commit()
    finally:
        conn.close()
    with SqliteMessageStore(db) as store:
        store.append("s1", "user", KIND_USER, "новое поступление", user_id="alice")
        assert [r.content for r in store.search("s1", "поступление", 5)] == [
            "новое поступление",
            "старое поступление",
        ]
        assert [r.content for r in store.history("s1", 5, owner=Owner("alice"))] == ["новое поступление"]
        assert store.count("s1", owner=Owner(None)) == 0
        assert [r.content for r in store.history("s1", 5, owner=Owner("alice", unrecorded=True))] == [
            "старое поступление",
            "новое поступление",
        ]
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
        assert conn.execute("SELECT user_id FROM messages ORDER BY id").fetchall() == [(None,), ("alice",)]
    finally:
        conn.close()


def test_a_window_ranks_only_the_latest_matches(store: Store) -> None:
    """`window` bounds the ranking's cost: the latest N matches of the session (and owner) are ranked."""
    store.append("s1", "user", KIND_USER, "apple apple apple apple", user_id="alice")  # the best, but old
    for i in range(5):
        store.append("s1", "user", KIND_USER, f"apple {i}", user_id="alice")
        store.append("s1", "user", KIND_USER, "apple apple apple apple apple", user_id="bob")  # not alice's
        store.append("s2", "user", KIND_USER, "apple apple apple apple apple", user_id="alice")
    alice = Owner("alice")
    exact = store.search("s1", "apple", 3, owner=alice)
    assert exact[0].content == "apple apple apple apple"
    assert store.search("s1", "apple", 3, owner=alice, window=6) == exact  # every match fits the window
    recent = store.search("s1", "apple", 3, owner=alice, window=3)
    assert sorted(r.content for r in recent) == ["apple 2", "apple 3", "apple 4"]
    assert all(r.score is not None and r.score > 0 for r in recent)
    assert store.search("s1", "pear", 3, owner=alice, window=3) == []
    assert len(store.search("s1", "apple", 5, owner=alice, window=2)) == 5  # the window is at least k


def test_max_bytes_keeps_the_newest_or_best_records_that_fit(store: Store) -> None:
    for i in range(4):
        store.append("s1", "tool", "tool_result", f"part {i} " + "x" * 1000)
    assert [r.content[:6] for r in store.history("s1", 4, max_bytes=2100)] == ["part 2", "part 3"]
    assert len(store.search("s1", "part", 4, max_bytes=2100)) == 2
    assert len(store.history("s1", 4, max_bytes=10)) == 1  # one record at least


def test_delete_session(store: Store) -> None:
    fill(store, "gone", "apples and pears", "more apples")
    last = fill(store, "kept", "apples too")[0]
    assert store.delete_session("gone") == 2
    assert store.count("gone") == 0 and store.history("gone", 10) == []
    assert store.search("gone", "apples", 10) == []
    assert [r.content for r in store.search("kept", "apples", 10)] == ["apples too"]
    store.delete_session("kept")
    assert fill(store, "kept", "again")[0] > last  # ids are never reused
    assert store.delete_session("never-existed") == 0


# --- content cap --------------------------------------------------------------


def test_long_content_is_truncated_with_a_marker(store: Store) -> None:
    content = "я" * (MAX_CONTENT_BYTES // 2 + 7)  # two bytes per letter: just over the cap
    store.append("s1", "tool", "tool_result", content, {"tool": "dump"})
    (record,) = store.history("s1", 1)
    kept, marker = record.content.rsplit("\n", 1)
    assert set(kept) == {"я"} and len(kept.encode()) == MAX_CONTENT_BYTES
    assert marker == f"[… truncated: {len(content.encode())} bytes in total]"
    assert record.meta == {"tool": "dump", "truncated_from_bytes": len(content.encode())}


def test_content_at_the_cap_is_kept_whole(store: Store) -> None:
    content = "x" * MAX_CONTENT_BYTES
    store.append("s1", "tool", "tool_result", content)
    (record,) = store.history("s1", 1)
    assert record.content == content and record.meta == {}


def test_lone_surrogates_do_not_break_appends(store: Store) -> None:
    """Issue 9: stored as U+FFFD, so what is read back is valid Unicode, in meta too."""
    store.append("s1", "agent", KIND_AGENT, "half \ud83d a pair", {"raw": "\ud83d", "\udc00": 1})
    (record,) = store.history("s1", 1)
    assert record.content == "half \ufffd a pair"
    assert record.meta == {"raw": "\ufffd", "\ufffd": 1}


# --- search -------------------------------------------------------------------


def test_search_ranks_more_of_the_words_first(store: Store) -> None:
    fill(
        store,
        "s1",
        "the invoice arrived on monday morning",
        "the invoice payment arrived on monday",
        "nothing relevant here at all today",
        "a payment arrived on monday morning",
    )
    found = store.search("s1", "invoice payment", 10)
    assert found[0].content == "the invoice payment arrived on monday"
    assert len(found) == 3
    scores = [r.score for r in found]
    assert all(s is not None and s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


def test_search_ranks_words_standing_together_first(store: Store) -> None:
    fill(
        store,
        "s1",
        "invoice sent and later the payment came",
        "later the invoice payment came and sent",
    )
    found = store.search("s1", "invoice payment", 10)
    assert found[0].content == "later the invoice payment came and sent"
    assert found[0].score is not None and found[1].score is not None
    assert found[0].score > found[1].score


def test_search_ranks_more_mentions_first(store: Store) -> None:
    fill(store, "s1", "deploy once then rest", "deploy deploy deploy again")
    assert store.search("s1", "deploy", 10)[0].content == "deploy deploy deploy again"


def test_search_limits_to_k(store: Store) -> None:
    fill(store, "s1", *[f"log line {i}" for i in range(20)])
    assert len(store.search("s1", "log", 5)) == 5
    assert store.search("s1", "log", 0) == []


def test_search_fills_record_fields(store: Store) -> None:
    store.append("s1", "tool", "tool_result", "weather: sunny", {"tool": "weather"})
    (record,) = store.search("s1", "sunny", 3)
    assert (record.role, record.kind, record.meta) == ("tool", "tool_result", {"tool": "weather"})
    assert isinstance(record.to_json()["score"], float)


def test_russian_is_searchable(store: Store) -> None:
    fill(store, "s1", "Поступление денег на счёт 5 мая", "Списание за связь", "Hello world")
    assert [r.content for r in store.search("s1", "поступление", 5)] == ["Поступление денег на счёт 5 мая"]
    assert [r.content for r in store.search("s1", "ПОСТУПЛЕНИЕ", 5)] == ["Поступление денег на счёт 5 мая"]
    assert [r.content for r in store.search("s1", "счет", 5)] == ["Поступление денег на счёт 5 мая"]
    assert [r.content for r in store.search("s1", "списание связь", 5)] == ["Списание за связь"]


def test_diacritics_do_not_matter(store: Store) -> None:
    fill(store, "s1", "Un café crème, s'il vous plaît")
    assert len(store.search("s1", "cafe creme", 5)) == 1
    assert len(store.search("s1", "CRÈME", 5)) == 1


HOSTILE = [
    '"',
    '""',
    '"unbalanced',
    "*",
    "pay*",
    "-",
    "-payment",
    "NEAR(",
    "NEAR(a b, 2)",
    "a:b",
    "content:payment",
    "(",
    ")",
    "^payment",
    "AND",
    "OR OR",
    "NOT payment",
    "payment AND",
    "{content}: x",
    "'; DROP TABLE messages; --",
    "\\",
    "\x00",
    "+ ++ +",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(store: Store, query: str) -> None:
    fill(store, "s1", "payment received a:b", "NEAR the end", "AND OR NOT")
    found = store.search("s1", query, 5)
    assert isinstance(found, list)
    assert store.count("s1") == 3


@pytest.mark.parametrize("query", ["", "   ", "\t\n", '" * - : ( )'])
def test_queries_without_words_find_nothing(store: Store, query: str) -> None:
    fill(store, "s1", "anything at all")
    assert store.search("s1", query, 5) == []


def test_syntax_characters_are_plain_text(store: Store) -> None:
    fill(store, "s1", "ratio a:b is fine", "nothing here", "NEAR the station")
    assert [r.content for r in store.search("s1", "a:b", 5)] == ["ratio a:b is fine"]
    assert [r.content for r in store.search("s1", "NEAR(", 5)] == ["NEAR the station"]
    assert [r.content for r in store.search("s1", '"fine"', 5)] == ["ratio a:b is fine"]


def test_fts_query_quotes_every_word() -> None:
    assert fts_query("hello") == '"hello"'
    assert fts_query('say "hi" now') == '"say ""hi"" now" OR "say" OR """hi""" OR "now"'
    assert fts_query("a a") == '"a a" OR "a"'
    assert fts_query(" * - ") is None
    assert fts_query("") is None


def test_very_long_queries_are_bounded(store: Store) -> None:
    fill(store, "s1", "word0 appears here")
    found = store.search("s1", " ".join(f"word{i}" for i in range(1000)), 5)
    assert [r.content for r in found] == ["word0 appears here"]


# --- files, schema, durability ------------------------------------------------


def test_reopened_file_keeps_everything(where: str) -> None:
    with open_store(where) as first:
        fill(first, "s1", "remember the milk")
        first.append("s1", "agent", KIND_AGENT, "noted", {"turn": 1})
    with open_store(where) as again:
        assert [(r.content, r.meta) for r in again.history("s1", 5)] == [
            ("remember the milk", {}),
            ("noted", {"turn": 1}),
        ]
        assert [r.content for r in again.search("s1", "milk", 5)] == ["remember the milk"]


def test_schema_is_versioned_and_wal(db: Path) -> None:
    SqliteMessageStore(db).close()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.commit()
    finally:
        conn.close()
    with pytest.raises(AgentKernelError, match="newer"):
        SqliteMessageStore(db)


def test_memory_database_works() -> None:
    with SqliteMessageStore(":memory:") as store:
        fill(store, "s1", "in memory only")
        assert store.count("s1") == 1
        assert store.search("s1", "memory", 1)[0].content == "in memory only"


# --- concurrency ----------------------------------------------------------------

THREADS, PER_THREAD = 8, 200


def run_threads(target: object) -> None:
    threads = [threading.Thread(target=target, args=(t,)) for t in range(THREADS)]  # type: ignore[arg-type]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def check_interleaved(store: Store, session: str, writers: int, per_writer: int) -> None:
    records = store.history(session, writers * per_writer + 10)
    assert len(records) == writers * per_writer == store.count(session)
    ids = [r.id for r in records]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    by_writer: dict[str, list[int]] = {}
    for record in records:
        writer, index = record.content.split()
        by_writer.setdefault(writer, []).append(int(index))
    assert all(seq == list(range(per_writer)) for seq in by_writer.values()) and len(by_writer) == writers


def test_threads_sharing_one_store_lose_nothing(store: Store) -> None:
    errors: list[BaseException] = []

    def write(t: int) -> None:
        try:
            for i in range(PER_THREAD):
                store.append("shared", "user", KIND_USER, f"t{t} {i}")
                if i % 50 == 0:
                    store.search("shared", f"t{t}", 3)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    run_threads(write)
    assert errors == []
    check_interleaved(store, "shared", THREADS, PER_THREAD)


def test_threads_with_their_own_stores_on_one_file_lose_nothing(where: str) -> None:
    open_store(where).close()
    errors: list[BaseException] = []

    def write(t: int) -> None:
        try:
            with open_store(where) as own:
                for i in range(PER_THREAD):
                    own.append("shared", "user", KIND_USER, f"t{t} {i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    run_threads(write)
    assert errors == []
    with open_store(where) as store:
        check_interleaved(store, "shared", THREADS, PER_THREAD)


WRITER = textwrap.dedent(
    """
    import sys
    from agentkernel.services.memory import SqliteMessageStore

    path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if path.startswith("postgresql://"):
        from agentkernel.services.memory_pg import PostgresMessageStore as SqliteMessageStore
    store = SqliteMessageStore(path)
    print("ready", flush=True)
    sys.stdin.readline()  # "go": both start together
    for i in range(n):
        store.append("shared", "user", "user", f"{tag} {i}")
    store.close()
    """
)


def test_two_processes_appending_at_once_lose_nothing(where: str) -> None:
    per_process, tags = 300, ("p0", "p1")
    open_store(where).close()  # created up front, so both writers race on appends only
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, where, tag, str(per_process)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for tag in tags
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        assert [proc.wait(timeout=60) for proc in procs] == [0, 0]
    finally:
        for proc in procs:
            if proc.poll() is None:  # pragma: no cover - only on failure
                proc.kill()
    with open_store(where) as store:
        check_interleaved(store, "shared", len(tags), per_process)


def test_error_kind_is_recorded(store: Store) -> None:
    store.append("s1", "hook", KIND_ERROR, "audit.yaml: TypeError: x is null", {"hook": "audit"})
    assert store.search("s1", "TypeError", 1)[0].kind == "error"


def test_yo_is_read_as_ye_and_deleted_sessions_leave_the_search(store: Store) -> None:
    fill(store, "s1", "Ёжик в тумане", "ещё одна запись")
    fill(store, "s2", "другая сессия")
    store.delete_session("s2")
    assert store.search("s2", "сессия", 5) == []
    assert [r.content for r in store.search("s1", "ежик", 5)] == ["Ёжик в тумане"]
    assert [r.content for r in store.search("s1", "ещё", 5)] == ["ещё одна запись"]


def test_search_index_stays_consistent(db: Path) -> None:
    with SqliteMessageStore(db) as store:
        fill(store, "s1", "Ёжик в тумане", "ещё одна запись")
        fill(store, "s2", "другая сессия")
        store.delete_session("s2")
        conn = sqlite3.connect(db)
        try:
            conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
            conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')")
            conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
            conn.commit()
        finally:
            conn.close()
        assert [r.content for r in store.search("s1", "ежик", 5)] == ["Ёжик в тумане"]
        assert [r.content for r in store.search("s1", "ещё", 5)] == ["ещё одна запись"]


def _indexed(db: Path) -> tuple[int, int]:
    """The search index's end (`messages_indexed.upto`) and how many records it holds."""
    conn = sqlite3.connect(db)
    try:
        (upto,) = conn.execute("SELECT upto FROM messages_indexed").fetchone()
        (held,) = conn.execute("SELECT count(*) FROM messages_fts_docsize").fetchone()
        return int(upto), int(held)
    finally:
        conn.close()


def _integrity_check(db: Path) -> None:
    """FTS5's own check that the index holds exactly what its view shows (raises when it does not)."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
        conn.commit()
    finally:
        conn.close()


def test_records_wait_for_the_index_until_a_batch_does(db: Path) -> None:
    """A record is not indexed by its own write (an FTS5 insert of one record costs as much as the rest
    of it): the step that leaves INDEX_BATCH records waiting indexes them all, in its transaction."""
    with SqliteMessageStore(db) as store:
        ids = fill(store, "s1", *(f"note {n}" for n in range(INDEX_BATCH - 1)))
        assert _indexed(db) == (0, 0)
        _integrity_check(db)  # the index holds what its view shows: nothing yet
        [last] = fill(store, "s1", "the batch's last")
        assert last - ids[0] + 1 == INDEX_BATCH
        assert _indexed(db) == (last, INDEX_BATCH)
        _integrity_check(db)


def test_a_step_reads_the_index_end_only_when_a_batch_may_be_due(db: Path) -> None:
    """The end last seen is never past the file's: below a batch from it, a step reads nothing more."""
    with SqliteMessageStore(db) as store:
        read: list[str] = []
        store._conn.set_trace_callback(lambda sql: read.append(sql) if "messages_indexed" in sql else None)
        fill(store, "s1", *(f"note {n}" for n in range(INDEX_BATCH - 1)))
        assert read == []
        fill(store, "s1", "the batch's last")
        assert read[0] == "SELECT upto FROM messages_indexed" and _indexed(db)[1] == INDEX_BATCH
        read.clear()
        fill(store, "s1", "after the batch")
        assert read == []


def test_a_search_finds_every_record_written_before_it(db: Path) -> None:
    """Records waiting for the index, written by this store or another on the file, are indexed first."""
    with SqliteMessageStore(db) as store, SqliteMessageStore(db) as other:
        fill(store, "s1", "the first kiwi")
        [second] = fill(other, "s1", "a second kiwi")
        assert _indexed(db) == (0, 0)
        assert sorted(r.content for r in store.search("s1", "kiwi", 5)) == ["a second kiwi", "the first kiwi"]
        assert _indexed(db) == (second, 2)
        _integrity_check(db)
        assert [r.content for r in other.search("s1", "second", 5)] == ["a second kiwi"]
        assert _indexed(db) == (second, 2)  # nothing waited: no write


def test_deleting_records_indexed_or_not_leaves_the_index_whole(db: Path) -> None:
    with SqliteMessageStore(db) as store:
        fill(store, "s1", "kept kiwi")
        fill(store, "gone", "indexed kiwi")
        store.search("s1", "kiwi", 5)  # both indexed now
        fill(store, "gone", "waiting kiwi")
        store.delete_session("gone")  # one record the index holds, one it does not
        _integrity_check(db)
        assert [r.content for r in store.search("s1", "kiwi", 5)] == ["kept kiwi"]
        assert store.search("gone", "kiwi", 5) == []
        _integrity_check(db)
        assert _indexed(db)[1] == 1


def test_a_search_that_must_index_waits_for_the_writer_only_its_time(db: Path) -> None:
    """Indexing takes the write lock: held past the search's `timeout`, the search says StoreBusy."""
    with SqliteMessageStore(db) as store:
        fill(store, "s1", "kiwi")
        holding, done = threading.Event(), threading.Event()

        def hold() -> None:
            with store._write():
                holding.set()
                done.wait(30)

        writer = threading.Thread(target=hold)
        writer.start()
        try:
            assert holding.wait(30)
            with pytest.raises(StoreBusy, match="busy with other writes"):
                store.search("s1", "kiwi", 5, timeout=0.01)
        finally:
            done.set()
            writer.join()
        assert [r.content for r in store.search("s1", "kiwi", 5, timeout=5)] == ["kiwi"]


def test_a_version_3_file_keeps_its_index_and_indexes_in_batches_after(db: Path) -> None:
    """A file from before batches (every record indexed by a trigger) is taken to version 4 as it is."""
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    try:
        for version in (1, 2, 3):
            for statement in _MIGRATIONS[version]:
                conn.execute(statement)
        for content in ("old kiwi", "gone kiwi"):
            conn.execute(
                "INSERT INTO messages (session_id, user_id, role, kind, content, meta, created_at) "
                "VALUES (?, 'u', 'user', 'user', ?, '{}', '2026-01-01T00:00:00.000Z')",
                (content.split()[0], content),
            )
        conn.execute("PRAGMA user_version = 3")
        conn.commit()
    finally:
        conn.close()
    with SqliteMessageStore(db) as store:
        assert _indexed(db) == (2, 2)
        _integrity_check(db)
        store.delete_session("gone")
        fill(store, "old", "new kiwi")
        assert _indexed(db) == (2, 1)
        assert [r.content for r in store.search("old", "kiwi", 5)] == ["new kiwi", "old kiwi"]
        _integrity_check(db)
        assert _indexed(db) == (3, 2)


def test_a_steps_notes_patch_earlier_records_meta_of_its_session_only(store: Store) -> None:
    """As JSON merge patch (RFC 7396): keys added or replaced, objects merged, null removes a key."""
    [first] = store.append_step(
        "s1", [Entry("user", KIND_USER, "hi", {"a": 1, "nested": {"x": 1}, "gone": 2})]
    )
    [other] = store.append_step("s2", [Entry("user", KIND_USER, "elsewhere", {"a": 1})])
    note = {"asked": "hi!", "nested": {"y": 2}, "gone": None}
    store.append_step("s1", [], notes={first: note, other: {"asked": "not here"}})
    (record,) = store.history("s1", 1)
    assert record.meta == {"a": 1, "nested": {"x": 1, "y": 2}, "asked": "hi!"}
    assert list(record.meta) == ["a", "nested", "asked"]  # kept keys stay where they were
    assert store.history("s2", 1)[0].meta == {"a": 1}  # another session's record is never patched
