"""The message store on PostgreSQL (S27.2): what only it has — its folding, its limits, its schema, the copy.

Its behaviour shared with the SQLite store is tested on both in test_memory.py.
"""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from agentkernel.config import load_kernel_config
from agentkernel.errors import AgentKernelError
from agentkernel.ports import Entry, Owner
from agentkernel.services.memory import MAX_CONTENT_BYTES, RUN_RECORDS_CHANNEL, SqliteMessageStore
from agentkernel.services.memory_pg import (
    PostgresMessageStore,
    copy_from_sqlite,
    fold,
    index_text,
    query_phrases,
    words,
)
from agentkernel.services.postgres import SchemaTooNew
from agentkernel.services.sqlite_db import StoreBusy
from tests.conftest import wait_until, write_kernel_yaml


def test_words_are_folded_as_fts5_reads_them_whatever_the_databases_locale() -> None:
    assert words("Crème BRÛLÉE, Счёт: a:b_c x86") == ["creme", "brulee", "счет", "a", "b", "c", "x86"]
    assert words("cafe\u0301") == ["cafe"]  # a decomposed accent too
    assert words("йод Ёлка") == ["йод", "елка"]  # only ё is read otherwise in Cyrillic, as in SQLite
    assert fold("ÅNGSTRÖM") == "angstrom"


def test_a_querys_words_are_plain_phrases_never_syntax() -> None:
    assert query_phrases("invoice payment") == ["invoice", "payment"]
    assert query_phrases("a:b & !c | 'd' <-> e") == ["a b", "c", "d", "e"]
    assert query_phrases("_ - * ( )") == []
    assert query_phrases("pay pay PAY") == ["pay"]
    assert len(query_phrases(" ".join(f"w{i}" for i in range(1000)))) == 32


def test_a_record_too_big_for_one_search_entry_is_stored_whole_and_its_first_words_found(pg_url: str) -> None:
    content = " ".join(str(n) for n in range(200_000))  # over the content cap, every word different
    with PostgresMessageStore(pg_url) as store:
        store.append("s1", "tool", "tool_result", content)
        (record,) = store.history("s1", 1)
        assert len(record.content.encode()) > MAX_CONTENT_BYTES  # cut at the cap, with its marker
        assert [r.id for r in store.search("s1", "12345", 5)] == [record.id]
    assert len(index_text(content).encode()) < len(content.encode())


def test_a_nul_in_content_is_stored_as_the_replacement_character(pg_url: str) -> None:
    with PostgresMessageStore(pg_url) as store:
        store.append("s1", "tool", "tool_result", "before\x00after", {"raw": "\x00"})
        (record,) = store.history("s1", 1)
        assert (record.content, record.meta) == ("before\ufffdafter", {"raw": "\x00"})
        assert [r.content for r in store.search("s1", "after", 5)] == ["before\ufffdafter"]


def test_a_read_past_its_timeout_is_store_busy(pg_url: str) -> None:
    with PostgresMessageStore(pg_url) as store, psycopg.connect(pg_url) as locker:
        store.append("s1", "user", "user", "hello", user_id="ann")
        locker.execute("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")  # held until its transaction ends
        for read in (
            lambda: store.count("s1", timeout=0.05),
            lambda: store.history("s1", 5, owner=Owner("ann"), timeout=0.05),
            lambda: store.search("s1", "hello", 5, timeout=0.05),
        ):
            with pytest.raises(StoreBusy, match=r"did not answer within 0\.05 s"):
                read()
        locker.rollback()
        assert store.count("s1", timeout=5) == 1


def test_a_database_of_a_newer_message_store_is_refused(pg_url: str) -> None:
    PostgresMessageStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE schema_versions SET version = 99 WHERE store = 'messages'")
    with pytest.raises(SchemaTooNew, match=r"the message store .* schema version 99"):
        PostgresMessageStore(pg_url)


def test_a_takeover_waits_for_a_step_in_flight_and_the_step_is_kept(pg_url: str) -> None:
    """The lease row is read FOR SHARE by a step: the takeover's replacing it waits for the step to commit."""
    from agentkernel.services.turn_leases_pg import PostgresTurnLeases

    with PostgresTurnLeases(pg_url) as leases, PostgresMessageStore(pg_url) as store:
        held = leases.take("s1", "ann", 0.05)
        wait_until(lambda: leases.running("ann") == 0, "the short lease to lapse")
        with psycopg.connect(pg_url) as step:  # a step in flight: its lease checked, not committed yet
            assert step.execute(store.lease_check, ("s1", held.token)).fetchone() == (1,)
            taken: list[object] = []
            taker = threading.Thread(target=lambda: taken.append(leases.take("s1", "ann", 600.0)))
            taker.start()
            wait_until(lambda: waiting_for_a_lock(pg_url), "the taker to wait for the step's lock")
            assert taken == []
            step.commit()
        taker.join()
        assert len(taken) == 1


def waiting_for_a_lock(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return row is not None and row[0] > 0


def test_copy_from_sqlite_keeps_ids_users_runs_and_search_and_ids_go_on_increasing(
    tmp_path: Path, pg_url: str
) -> None:
    config = load_kernel_config(write_kernel_yaml(tmp_path))
    with SqliteMessageStore(config.messages_db) as old:
        first = old.append("s1", "user", "user", "Поступление на счёт", {"turn": 1}, user_id="ann")
        [second] = old.append_step("s1", [Entry("agent", "agent", "noted")], user_id="ann", run_id="r1")
        dropped = old.append("gone", "user", "user", "deleted later")
        old.delete_session("gone")  # the newest id is gone: the copy must not give it again
    PostgresMessageStore(pg_url).close()  # the tables, migrated and empty
    with psycopg.connect(pg_url) as target:
        assert copy_from_sqlite(config, target) == {"messages": 2}
        target.commit()
    with PostgresMessageStore(pg_url) as store:
        assert [(r.id, r.content, r.meta) for r in store.history("s1", 5, owner=Owner("ann"))] == [
            (first, "Поступление на счёт", {"turn": 1}),
            (second, "noted", {}),
        ]
        assert [r.id for r in store.search("s1", "счет", 5)] == [first]
        assert [r.id for r in store.run_records("r1")] == [second]
        assert store.append("s1", "user", "user", "after the copy") > dropped
    with (
        psycopg.connect(pg_url) as target,
        pytest.raises(AgentKernelError, match="table messages already holds rows"),
    ):
        copy_from_sqlite(config, target)


def test_copy_from_sqlite_without_a_file_copies_nothing(tmp_path: Path, pg_url: str) -> None:
    config = load_kernel_config(write_kernel_yaml(tmp_path))
    PostgresMessageStore(pg_url).close()
    with psycopg.connect(pg_url) as target:
        assert copy_from_sqlite(config, target) == {}
    assert not config.messages_db.exists()


def test_a_runs_step_is_announced_to_the_servers_listening(pg_url: str) -> None:
    with PostgresMessageStore(pg_url) as store, psycopg.connect(pg_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {RUN_RECORDS_CHANNEL}")
        store.append("s1", "user", "user", "no run: no notice")
        store.append_step("s1", [Entry("agent", "agent", "a step")], run_id="r1")
        heard = [(n.channel, n.payload) for n in listener.notifies(timeout=60, stop_after=1)]
        assert heard == [(RUN_RECORDS_CHANNEL, "r1")]
