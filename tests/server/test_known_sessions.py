"""The sessions a server has seen, remembered (server/sessions.py `KnownSessions`): a message to a known
session looks nothing up in the store, yet a session another process made is found, another user's is
still no one's, and titles stay true.

"Looked nothing up" is shown by removing the row behind the store's back
(the server itself never deletes a session): a remembered one still answers.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agentkernel.server.sessions import KnownSessions, OpenedOnFirstUse, SessionDirectory


def directory(tmp_path: Path, most: int = 4096) -> KnownSessions:
    return KnownSessions(SessionDirectory(tmp_path / "sessions.db"), most)


def remove_behind_its_back(tmp_path: Path, session_id: str) -> None:
    with sqlite3.connect(tmp_path / "sessions.db") as conn:
        conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))


def test_a_known_session_is_answered_without_a_lookup(tmp_path: Path) -> None:
    known = directory(tmp_path)
    made = known.create("ann", "bench")
    remove_behind_its_back(tmp_path, made.id)
    assert known.owned(made.id, "ann") == made


def test_a_session_another_process_made_is_looked_up_then_known(tmp_path: Path) -> None:
    known = directory(tmp_path)
    made = SessionDirectory(tmp_path / "sessions.db").create("ann", "bench")  # another server's
    assert known.owned(made.id, "ann") == made
    remove_behind_its_back(tmp_path, made.id)
    assert known.owned(made.id, "ann") == made
    assert known.owned("no-such-session", "ann") is None


def test_another_user_s_session_is_no_one_s_known_or_not(tmp_path: Path) -> None:
    known = directory(tmp_path)
    made = known.create("ann", "bench")
    assert known.owned(made.id, "bob") is None
    assert known.owned(made.id, "ann") == made


def test_a_title_given_here_or_by_another_process_is_the_one_shown(tmp_path: Path) -> None:
    known = directory(tmp_path)
    mine = known.create("ann", "bench")
    known.name(mine.id, "What is the weather?")
    assert known.owned(mine.id, "ann").title == "What is the weather?"  # type: ignore[union-attr]

    theirs = known.create("ann", "bench")
    SessionDirectory(tmp_path / "sessions.db").name(theirs.id, "named over there")
    # this process still believes it untitled, so its first message names it: the store keeps the first
    assert known.name(theirs.id, "named here") == "named over there"
    assert known.owned(theirs.id, "ann").title == "named over there"  # type: ignore[union-attr]


def test_a_title_given_at_once_is_remembered_and_none_is_given_before_the_store_opens(
    tmp_path: Path,
) -> None:
    """Opening the store reads (and may migrate) its file: never on the event loop, so not at once."""
    known = KnownSessions(OpenedOnFirstUse(lambda: SessionDirectory(tmp_path / "sessions.db")))
    assert known.name_at_once("no-session-yet", "hello") is None
    made = known.create("ann", "bench")  # opens the store
    assert known.name_at_once(made.id, "What is the weather?") == "What is the weather?"
    remove_behind_its_back(tmp_path, made.id)
    assert known.owned(made.id, "ann").title == "What is the weather?"  # type: ignore[union-attr]


def test_a_session_made_at_once_is_remembered_and_none_is_made_before_the_store_opens(
    tmp_path: Path,
) -> None:
    known = KnownSessions(OpenedOnFirstUse(lambda: SessionDirectory(tmp_path / "sessions.db")))
    assert known.create_at_once("ann", "bench") is None  # opening reads the file: not on the loop
    known.create("ann", "bench")  # opens the store
    made = known.create_at_once("ann", "bench")
    assert made is not None
    remove_behind_its_back(tmp_path, made.id)
    assert known.owned(made.id, "ann") == made  # remembered: no lookup in the store


def test_the_least_recently_asked_for_is_forgotten_past_the_bound(tmp_path: Path) -> None:
    known = directory(tmp_path, most=2)
    first, second = known.create("ann", "bench"), known.create("ann", "bench")
    known.owned(first.id, "ann")  # now `second` is the least recently asked for
    third = known.create("ann", "bench")
    for made in (first, second, third):
        remove_behind_its_back(tmp_path, made.id)
    assert known.owned(first.id, "ann") == first
    assert known.owned(third.id, "ann") == third
    assert known.owned(second.id, "ann") is None  # forgotten, so looked up: gone from the store
