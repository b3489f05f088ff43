"""Turn leases in the message store's file: one turn per session, per-user caps, the write fence.

Every test runs on both stores, the SQLite file and the PostgreSQL database
(S27.2, tests/pg.py): `path` is either. Two stores on one file stand for two
processes (each its own connections);
`tests/server/test_turns_across_processes.py` runs real ones. A lapsed lease is
made by taking it for a fraction of a second and waiting for the store to
say it lapsed, never by timing it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel.ports import Entry
from agentkernel.services.memory import SqliteMessageStore
from agentkernel.services.memory_pg import PostgresMessageStore
from agentkernel.services.turn_leases import (
    LeaseLost,
    NewRun,
    RunExists,
    SessionLeased,
    TurnLeases,
    UserAtCap,
)
from agentkernel.services.turn_leases_pg import PostgresTurnLeases
from tests.conftest import wait_until

LONG = 600.0
SHORT = 0.05


Leases = TurnLeases | PostgresTurnLeases
Store = SqliteMessageStore | PostgresMessageStore


@pytest.fixture(params=["sqlite", "postgres"])
def path(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the leases live: the message store's file, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "messages.db")
    return str(request.getfixturevalue("pg_url"))


def leases_at(where: str) -> Leases:
    """The PostgreSQL leases for a postgresql:// URL, else the SQLite ones on that file."""
    return PostgresTurnLeases(where) if where.startswith("postgresql://") else TurnLeases(where)


def store_at(where: str) -> Store:
    """The PostgreSQL message store for a postgresql:// URL, else the SQLite one on that file."""
    return PostgresMessageStore(where) if where.startswith("postgresql://") else SqliteMessageStore(where)


def test_a_live_lease_refuses_another_taker_and_a_released_one_does_not(path: str) -> None:
    with leases_at(path) as here, leases_at(path) as there:
        held = here.take("s1", "alice", LONG)
        with pytest.raises(SessionLeased, match="session s1 has a turn running"):
            there.take("s1", "alice", LONG)
        there.take("s2", "alice", LONG)  # another session is free
        here.release(held)
        there.take("s1", "alice", LONG)


def test_the_cap_counts_a_users_live_leases_of_every_store_and_no_other_users(path: str) -> None:
    with leases_at(path) as here, leases_at(path) as there:
        here.take("s1", "alice", LONG, most_per_user=2)
        there.take("s2", "alice", LONG, most_per_user=2)
        with pytest.raises(UserAtCap) as refused:
            here.take("s3", "alice", LONG, most_per_user=2)
        assert refused.value.running == 2
        there.take("s4", "bob", LONG, most_per_user=2)
        assert here.running("alice") == 2 and there.running("bob") == 1


def test_a_lapsed_lease_is_taken_over_and_its_holder_can_neither_renew_nor_write(path: str) -> None:
    with leases_at(path) as dead, leases_at(path) as alive, store_at(path) as store:
        old = dead.take("s1", "alice", SHORT, most_per_user=1)
        store.append("s1", "user", "user", "one", user_id="alice", lease=old.token)
        wait_until(lambda: dead.running("alice") == 0, "the short lease to lapse")
        new = alive.take("s1", "alice", LONG, most_per_user=1)  # a lapsed lease counts for no cap either
        assert not dead.renew(old)
        with pytest.raises(LeaseLost, match="another turn holds the session now"):
            store.append("s1", "assistant", "agent", "late", user_id="alice", lease=old.token)
        store.append("s1", "assistant", "agent", "on time", user_id="alice", lease=new.token)
        dead.release(old)  # releases nothing of the new holder's
        assert alive.renew(new)
        assert [r.content for r in store.history("s1", 10)] == ["one", "on time"]


def test_a_run_ended_under_its_lease_gives_the_lease_back_in_the_same_step(path: str) -> None:
    with leases_at(path) as leases, store_at(path) as store:
        lease = leases.take("s1", "alice", LONG, run=NewRun("r1", "hi"))
        step = [Entry("assistant", "agent", "an answer")]
        store.append_step(
            "s1", step, user_id="alice", lease=lease.token, run_id="r1", run_update={"prompt": {}}
        )
        assert leases.held("s1")  # a step that does not end the run keeps the lease
        ended = {"status": "ended", "reason": "job_done", "ended_at": 1.0}
        end = [Entry("system", "end", "job_done")]
        store.append_step("s1", end, user_id="alice", lease=lease.token, run_id="r1", run_update=ended)
        assert not leases.held("s1") and leases.running("alice") == 0
        run = leases.run("r1")
        assert run is not None and run.status == "ended"
        leases.take("s1", "alice", LONG)  # free for the next turn at once


def test_a_lost_lease_ends_no_run_and_gives_back_none_of_the_new_holders(path: str) -> None:
    with leases_at(path) as dead, leases_at(path) as alive, store_at(path) as store:
        old = dead.take("s1", "alice", SHORT, run=NewRun("r1", "hi"))
        wait_until(lambda: not dead.held("s1"), "the short lease to lapse")
        new = alive.take("s1", "alice", LONG)
        assert new.resumes is not None and new.resumes.id == "r1"
        ended = {"status": "ended", "reason": "job_done", "ended_at": 1.0}
        with pytest.raises(LeaseLost):
            store.append_step("s1", [], user_id="alice", lease=old.token, run_id="r1", run_update=ended)
        assert alive.held("s1") and alive.renew(new)
        run = alive.run("r1")
        assert run is not None and run.running


def test_changes_counts_the_records_after_a_mark_and_gives_the_last_id(path: str) -> None:
    with store_at(path) as store:
        first = store.append("s1", "user", "user", "one", user_id="alice")
        assert store.changes("s1", first) == (0, first)
        second = store.append("s1", "assistant", "agent", "two", user_id="alice")
        store.append("s2", "user", "user", "elsewhere", user_id="alice")
        assert store.changes("s1", first) == (1, second)
        assert store.changes("s1", 0) == (2, second)


# -- runs (S25) ------------------------------------------------------------------------------------


def run_once(leases: Leases, store: Store, session: str, number: int) -> str:
    """One whole run as the server makes it: lease and row, the message, the end, the lease back."""
    run = NewRun(f"run-{number}", f"message {number}")
    lease = leases.take(session, "alice", LONG, run=run)
    assert lease.resumes is None
    asked = [Entry("user", "user", run.text or "")]
    store.append_step(session, asked, user_id="alice", lease=lease.token, run_id=run.id)
    ended = {"status": "ended", "reason": "job_done", "ended_at": 1.0}
    answered = [Entry("assistant", "agent", f"answer {number}"), Entry("system", "end", "job_done")]
    store.append_step(session, answered, user_id="alice", lease=lease.token, run_id=run.id, run_update=ended)
    leases.release(lease)
    return run.id


def test_ten_thousand_runs_in_a_session_leave_nothing_to_resume_and_the_next_reads_as_the_first(
    path: str,
) -> None:
    with leases_at(path) as leases, store_at(path) as store:
        ids = [run_once(leases, store, "s1", n) for n in range(10_000)]
        assert leases.orphans() == []
        assert [r.id for r in leases.runs_of("s1", 3)] == ids[:-4:-1]
        last = leases.run(ids[-1])
        assert last is not None and (last.status, last.reason) == ("ended", "job_done")
        records = store.run_records(ids[-1])
        assert [(r.kind, r.content) for r in records] == [
            ("user", "message 9999"),
            ("agent", "answer 9999"),
            ("end", "job_done"),
        ]
        unfinished = leases.take("s1", "alice", SHORT, run=NewRun("run-last", "one more"))
        wait_until(lambda: leases.orphans() == ["run-last"], "the unfinished run's lease to lapse")
        taken = leases.take_over("run-last", LONG)
        assert taken is not None and taken.resumes is not None and taken.resumes.text == "one more"
        assert leases.take_over("run-last", LONG) is None  # one taker only
        assert unfinished.token != taken.token


def test_a_key_is_one_run_of_its_user_and_another_body_is_told_apart(path: str) -> None:
    with leases_at(path) as leases:
        lease = leases.take("s1", "alice", LONG, run=NewRun("r1", "pay", idem_key="k", body_hash="h1"))
        leases.release(lease)
        with pytest.raises(RunExists) as same:
            leases.take("s1", "alice", LONG, run=NewRun("r2", "pay", idem_key="k", body_hash="h1"))
        assert same.value.same_body and same.value.run.id == "r1"
        with pytest.raises(RunExists) as other:
            leases.take("s1", "alice", LONG, run=NewRun("r3", "pay twice", idem_key="k", body_hash="h2"))
        assert not other.value.same_body
        leases.take("s2", "bob", LONG, run=NewRun("r4", "pay", idem_key="k", body_hash="h1"))  # bob's own key


def test_each_takeover_of_an_unfinished_run_is_counted(path: str) -> None:
    with leases_at(path) as leases:
        leases.take("s1", "alice", SHORT, run=NewRun("r1", "hi"))
        counts = []
        for _ in range(3):
            wait_until(lambda: leases.orphans() == ["r1"], "the holder's lease to lapse")
            taken = leases.take_over("r1", SHORT)
            assert taken is not None and taken.resumes is not None
            counts.append(taken.resumes.taken_over)
        wait_until(lambda: leases.orphans() == ["r1"], "the holder's lease to lapse")
        by_message = leases.take(
            "s1", "alice", LONG, run=NewRun("r2", "again")
        )  # a message takes it over too
        assert by_message.resumes is not None and by_message.resumes.id == "r1"
        counts.append(by_message.resumes.taken_over)
        assert counts == [1, 2, 3, 4]


def test_a_stop_asked_of_a_lapsed_holder_is_not_the_next_holders(path: str) -> None:
    with leases_at(path) as leases:
        old = leases.take("s1", "alice", SHORT)
        assert leases.ask_stop("s1") and leases.stops_asked([old]) == [old]
        wait_until(lambda: leases.running("alice") == 0, "the short lease to lapse")
        assert not leases.ask_stop("s1")  # nobody runs a turn there now
        new = leases.take("s1", "alice", LONG)
        assert leases.stops_asked([old, new]) == []


def test_a_lease_taken_at_once_on_a_free_file_and_never_while_another_writer_holds_it(tmp_path: Path) -> None:
    """`take_at_once` / `release_at_once` (the event loop's, turns.py): the same transaction as `take` /
    `release` when nothing holds the file, its refusals included; nothing written, and no wait, while
    another connection (another process) writes it."""
    path = tmp_path / "messages.db"
    with TurnLeases(path) as leases, TurnLeases(path) as other:
        lease = leases.take_at_once("s1", "alice", LONG, 1, NewRun("r1", "hi"))
        assert lease is not None and other.held("s1") and other.run("r1") is not None
        with pytest.raises(UserAtCap):  # refused as `take` refuses, in the same transaction
            leases.take_at_once("s2", "alice", LONG, 1, NewRun("r2", "hi"))
        with other._write():  # another writer holds the file
            assert leases.release_at_once(lease) is False
            assert leases.take_at_once("s3", "bob", LONG, run=NewRun("r3", "hi")) is None
        assert other.held("s1") and not other.held("s3") and other.run("r3") is None
        assert leases.release_at_once(lease) is True
        assert not other.held("s1")
