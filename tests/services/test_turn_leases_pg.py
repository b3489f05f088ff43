"""Turn leases and runs on PostgreSQL (S27.2): many takers at once, each with its own connections.

The behaviour shared with the SQLite store is tested on both in
test_turn_leases.py; here, what the SQLite file's one writer gave for free
and PostgreSQL must get from its locks: takers racing for one session, for
a user's last turn, and servers racing to take over one run. Threads start
together at a barrier, each with its own store (its own pool).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from agentkernel.config import load_kernel_config
from agentkernel.errors import AgentKernelError
from agentkernel.services.turn_leases import Lease, NewRun, TurnLeases
from agentkernel.services.turn_leases_pg import PostgresTurnLeases, copy_from_sqlite
from tests.conftest import wait_until, write_kernel_yaml

RACERS = 8
LONG = 600.0
SHORT = 0.05


def race(
    url: str, attempt: Callable[[PostgresTurnLeases, int], Lease | None]
) -> list[Lease | BaseException | None]:
    """What each of RACERS threads got from `attempt` on its own store, all started at once."""
    stores = [PostgresTurnLeases(url) for _ in range(RACERS)]
    barrier = threading.Barrier(RACERS)
    got: list[Lease | BaseException | None] = [None] * RACERS

    def run(number: int) -> None:
        barrier.wait()
        try:
            got[number] = attempt(stores[number], number)
        except BaseException as exc:
            got[number] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(RACERS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for store in stores:
            store.close()
    return got


def test_takers_racing_for_one_session_one_gets_it(pg_url: str) -> None:
    PostgresTurnLeases(pg_url).close()
    got = race(pg_url, lambda leases, n: leases.take("s1", "ann", LONG, run=NewRun(f"r{n}", "hi")))
    assert sum(isinstance(g, Lease) for g in got) == 1
    assert {type(g).__name__ for g in got if not isinstance(g, Lease)} == {"SessionLeased"}
    with PostgresTurnLeases(pg_url) as leases:
        assert len(leases.runs_of("s1")) == 1


def test_takers_racing_for_a_users_last_turns_never_pass_the_cap(pg_url: str) -> None:
    PostgresTurnLeases(pg_url).close()
    got = race(pg_url, lambda leases, n: leases.take(f"s{n}", "ann", LONG, most_per_user=2))
    assert sum(isinstance(g, Lease) for g in got) == 2
    assert {type(g).__name__ for g in got if not isinstance(g, Lease)} == {"UserAtCap"}


def test_servers_racing_to_take_over_one_run_one_gets_it(pg_url: str) -> None:
    with PostgresTurnLeases(pg_url) as leases:
        leases.take("s1", "ann", SHORT, run=NewRun("r1", "hi"))
        wait_until(lambda: leases.orphans() == ["r1"], "the holder's lease to lapse")
    got = race(pg_url, lambda leases, n: leases.take_over("r1", LONG))
    taken = [g for g in got if isinstance(g, Lease)]
    assert len(taken) == 1 and got.count(None) == RACERS - 1
    assert taken[0].resumes is not None and taken[0].resumes.taken_over == 1
    with PostgresTurnLeases(pg_url) as leases:
        run = leases.run("r1")
        assert run is not None and run.taken_over == 1
        assert leases.orphans() == []


def test_a_takeover_skips_a_run_another_server_is_taking(pg_url: str) -> None:
    with PostgresTurnLeases(pg_url) as leases:
        leases.take("s1", "ann", SHORT, run=NewRun("r1", "hi"))
        wait_until(lambda: leases.orphans() == ["r1"], "the holder's lease to lapse")
        answers: list[Lease | None] = []
        with psycopg.connect(pg_url) as other:  # another server, mid-claim: the run's row locked
            other.execute("SELECT 1 FROM runs WHERE id = 'r1' FOR UPDATE")
            asking = threading.Thread(target=lambda: answers.append(leases.take_over("r1", LONG)))
            asking.start()
            try:  # skipped, not waited for: the answer comes while the row is still locked
                wait_until(lambda: answers == [None], "the takeover to skip the locked run")
            finally:
                other.rollback()
                asking.join()
        assert leases.take_over("r1", LONG) is not None


def test_copy_from_sqlite_keeps_the_runs_and_leases(tmp_path: Path, pg_url: str) -> None:
    config = load_kernel_config(write_kernel_yaml(tmp_path))
    with TurnLeases(config.messages_db) as old:
        held = old.take("s1", "ann", LONG, run=NewRun("r1", "hi", idem_key="k", body_hash="h"))
        done = old.take("s2", "bob", LONG, run=NewRun("r2", "bye"))
        old.end_run("r2", "job_done", done.token)
        old.release(done)
        old.ask_stop("s1")
    PostgresTurnLeases(pg_url).close()
    with psycopg.connect(pg_url) as target:
        assert copy_from_sqlite(config, target) == {"runs": 2, "turn_leases": 1}
        target.commit()
    with PostgresTurnLeases(pg_url) as leases:
        assert leases.running("ann") == 1 and leases.stops_asked([held]) == [held]
        assert leases.renew(held)
        first, second = leases.run("r1"), leases.run("r2")
        assert first is not None and (first.status, first.text, first.idem_key) == ("running", "hi", "k")
        assert second is not None and (second.status, second.reason) == ("ended", "job_done")
    with (
        psycopg.connect(pg_url) as target,
        pytest.raises(AgentKernelError, match="table runs already holds rows"),
    ):
        copy_from_sqlite(config, target)


def test_a_lease_is_never_taken_or_given_back_at_once_a_network_away(pg_url: str) -> None:
    """The event loop takes a SQLite lease itself when the file is free; a PostgreSQL one is a round trip
    the loop must not wait on: `take_at_once` and `release_at_once` write nothing and say so, and the
    caller goes to a worker thread."""
    with PostgresTurnLeases(pg_url) as leases:
        assert leases.take_at_once("s-once", "ann", LONG, run=NewRun("r-once", "hi")) is None
        assert not leases.held("s-once") and leases.run("r-once") is None
        lease = leases.take("s-once", "ann", LONG, run=NewRun("r-once", "hi"))
        assert not leases.release_at_once(lease) and leases.held("s-once")
        leases.release(lease)
        assert not leases.held("s-once")
