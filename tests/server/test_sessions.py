"""Session titles (issue 26 §6): the first message, shortened, kept in the sessions file, listed by the API.

The title lives where the session does (sessions.db), so another server on
the same file, or the same one restarted, lists it too; a file written before
titles existed is brought up to date and lists its sessions untitled. The
directory's own tests run on both: the sessions file and the PostgreSQL
database (S27.2, tests/pg.py).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.server.app import sessions_path
from agentkernel.server.sessions import TITLE_CHARS, SessionDirectory, title_of
from agentkernel.server.sessions_pg import PostgresSessionDirectory
from tests.fakes import FakeLLMServer, Reply
from tests.server.conftest import LiveServer, on_postgres
from tests.server.test_api import new_session, send

pytestmark = pytest.mark.across_deployments  # S27.3: on the project's files and on PostgreSQL


@pytest.mark.parametrize(
    ("message", "title"),
    [
        ("What is the weather in Paris?", "What is the weather in Paris?"),
        ("  two\n\nlines\tand\u2028a separator \u200b ", "two lines and a separator"),
        ("a lone \ud800 surrogate", "a lone \ufffd surrogate"),
        ("", ""),
    ],
)
def test_a_title_is_the_message_on_one_line(message: str, title: str) -> None:
    assert title_of(message) == title


def test_a_long_message_is_cut_at_a_word_and_ends_with_an_ellipsis() -> None:
    words = "Please count the words of every chapter and chart them by length, then page through"
    title = title_of(words)
    assert len(title) <= TITLE_CHARS and title.endswith("…")
    assert words.startswith(title.removesuffix("…")) and words[len(title) - 1] == " "  # a whole word
    unbroken = title_of("x" * 10_000)
    assert unbroken == "x" * (TITLE_CHARS - 1) + "…"


Directory = SessionDirectory | PostgresSessionDirectory


def open_directory(where: str) -> Directory:
    """The PostgreSQL directory for a postgresql:// URL, else the sessions file beside that one."""
    if on_postgres(where):
        return PostgresSessionDirectory(where)
    return SessionDirectory(Path(where).with_name("sessions.db"))


def test_the_first_message_names_the_session_and_later_ones_do_not(store_where: str) -> None:
    """Written only when the title is empty, in the store: a second directory on the store sees the first."""
    one, other = open_directory(store_where), open_directory(store_where)
    try:
        made = one.create("alice", "tester")
        assert made.title == "" and made.to_json()["title"] == ""
        assert other.name(made.id, "Plan my week\nplease") == "Plan my week please"
        assert one.name(made.id, "something else") == "Plan my week please"
        listed = one.of_user("alice")
        assert [(s.id, s.title) for s in listed] == [(made.id, "Plan my week please")]
        assert one.owned(made.id, "alice") == listed[0]
    finally:
        one.close()
        other.close()


def test_a_title_is_written_at_once_only_when_nothing_holds_the_store(store_where: str) -> None:
    """The event loop names a session itself when the store takes the write without waiting: a sessions
    file no other connection holds; never PostgreSQL's (a round trip); while another holds the file,
    None and nothing written, and the caller names it on a worker thread."""
    with open_directory(store_where) as directory:
        made, held = directory.create("alice", "tester"), directory.create("alice", "tester")
        if on_postgres(store_where):
            assert directory.name_at_once(made.id, "Plan my week") is None
            assert directory.owned(made.id, "alice").title == ""  # type: ignore[union-attr]
            return
        assert directory.name_at_once(made.id, "Plan my week") == "Plan my week"
        assert directory.name_at_once(made.id, "something else") == "Plan my week"
        other = sqlite3.connect(Path(store_where).with_name("sessions.db"), isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process writing the file
            assert directory.name_at_once(held.id, "not now") is None
            other.execute("COMMIT")
        finally:
            other.close()
        assert directory.owned(held.id, "alice").title == ""  # type: ignore[union-attr]
        assert directory.name_at_once(held.id, "now") == "now"


def test_a_session_is_made_at_once_only_when_nothing_holds_the_store(store_where: str) -> None:
    """As a title: the event loop writes the row itself when the sessions file is free; never on
    PostgreSQL; while another process holds the file, None and nothing written."""
    with open_directory(store_where) as directory:
        if on_postgres(store_where):
            assert directory.create_at_once("alice", "tester") is None
            assert directory.of_user("alice") == []
            return
        made = directory.create_at_once("alice", "tester")
        assert made is not None and directory.owned(made.id, "alice") == made and made.title == ""
        other = sqlite3.connect(Path(store_where).with_name("sessions.db"), isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process writing the file
            assert directory.create_at_once("alice", "tester") is None
            other.execute("COMMIT")
        finally:
            other.close()
        assert directory.of_user("alice") == [made]


def test_a_user_s_sessions_are_theirs_alone_oldest_first(store_where: str) -> None:
    with open_directory(store_where) as directory:
        made = [directory.create("alice", "tester") for _ in range(5)]
        bobs = directory.create("bob", "tester")
        assert [s.id for s in directory.of_user("alice")] == [s.id for s in made]  # oldest first
        assert directory.of_user("bob") == [bobs] and directory.of_user("carol") == []
        assert directory.owned(bobs.id, "alice") is None and directory.owned(bobs.id, "bob") == bobs
        for odd in ("\ud800", "a\x00b", "", "x" * 10_000):  # no session has it: None, never an error
            assert directory.owned(odd, "alice") is None
        assert directory.name("no-such-session", "hello") == "hello"  # nothing to title


def test_a_sessions_file_from_before_titles_lists_its_sessions_untitled(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    with sqlite3.connect(path) as old:  # schema version 1, as the previous release wrote it
        old.execute(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, template TEXT NOT NULL, "
            "created_at TEXT NOT NULL)"
        )
        old.execute("INSERT INTO sessions VALUES ('s1', 'alice', 'tester', '2026-01-01T00:00:00+00:00')")
        old.execute("PRAGMA user_version = 1")
    old.close()
    directory = SessionDirectory(path)
    try:
        assert [s.to_json() for s in directory.of_user("alice")] == [
            {"id": "s1", "template": "tester", "created_at": "2026-01-01T00:00:00+00:00", "title": ""}
        ]
        assert directory.name("s1", "hello there") == "hello there"
    finally:
        directory.close()


@pytest.mark.embedded_only  # reads the sessions file the server wrote
def test_the_sessions_api_lists_each_session_with_its_title(
    kernel_yaml: Path, llm_server: FakeLLMServer
) -> None:
    """Through the server: titled by the first message sent, and still after a restart."""
    llm_server.add(Reply(text="one"), Reply(text="two"))
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live, live.client() as client:
        session = new_session(client)
        untouched = new_session(client)
        assert [s["title"] for s in client.get("/v1/sessions").json()] == ["", ""]
        send(client, session, "How many words are in War and Peace, roughly, in the English translation?")
        send(client, session, "And in the Russian original?")
        titles = {s["id"]: s["title"] for s in client.get("/v1/sessions").json()}
        assert titles == {session: "How many words are in War and Peace, roughly, in the…", untouched: ""}
        path = sessions_path(live.kernel)
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live, live.client() as client:
        assert {s["id"]: s["title"] for s in client.get("/v1/sessions").json()} == titles
    stored = sqlite3.connect(path)
    try:
        assert stored.execute("SELECT title FROM sessions WHERE id = ?", (session,)).fetchone() == (
            titles[session],
        )
    finally:
        stored.close()
