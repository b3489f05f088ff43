"""Per-user caps counted in the store (work_leases.py): every holder on a store counts; a dead one expires.

Every test runs on the message store's file and on the PostgreSQL database
(S27.2, tests/pg.py); then the PostgreSQL store's own: two processes
starting at once under one cap, a bounded wait, the copy from a file.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.errors import AgentKernelError
from agentkernel.services.sqlite_db import StoreBusy
from agentkernel.services.user_work import Cap, TooMuchWork
from agentkernel.services.work_leases import TABLE, SharedUserWork, WorkLeases, WorkLeaseStore
from agentkernel.services.work_leases_pg import COUNT_LOCK, PostgresWorkLeases, copy_from_sqlite
from tests.conftest import write_kernel_yaml

RUNS = Cap("tool runs", "server.max_running_tool_runs_per_user", 2, "wait for one to end")


Leases = WorkLeases | PostgresWorkLeases


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the leases live: a message store file, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "messages.db")
    return str(request.getfixturevalue("pg_url"))


def open_leases(where: str, **options: Any) -> Leases:
    """The PostgreSQL leases for a postgresql:// URL, else the SQLite ones on that file."""
    if where.startswith("postgresql://"):
        return PostgresWorkLeases(where, **options)
    return WorkLeases(where, **options)


def shared(where: str) -> SharedUserWork:
    """`SharedUserWork` as the server makes it: on the file, or opening the PostgreSQL store."""
    if where.startswith("postgresql://"):
        return SharedUserWork(lambda secs: PostgresWorkLeases(where, lease_secs=secs))
    return SharedUserWork(Path(where))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_two_holders_on_one_store_share_a_users_cap(where: str) -> None:
    """As two server processes: one start in each, the third (in either) is refused; an end frees it."""
    with open_leases(where) as a, open_leases(where) as b:
        assert isinstance(a, WorkLeaseStore)
        first = a.start("alice", RUNS)
        b.start("alice", RUNS)
        with pytest.raises(TooMuchWork) as refused:
            a.start("alice", RUNS)
        assert "user 'alice' has 2 tool runs running" in str(refused.value)
        assert (a.running("alice", RUNS), b.running("alice", RUNS), b.running("bob", RUNS)) == (2, 2, 0)
        b.start("bob", RUNS)  # another user's count is their own
        a.end(first)
        b.start("alice", RUNS)
        assert a.running("alice", RUNS) == 2


def test_a_dead_holders_work_stops_counting_once_its_lease_expires(where: str) -> None:
    """A holder that never ends its work nor renews (kill -9) holds the slots `lease_secs`, then not."""
    clock = Clock()
    with (
        open_leases(where, lease_secs=30, clock=clock) as dead,
        open_leases(where, lease_secs=30, clock=clock) as live,
    ):
        dead.start("alice", RUNS)
        dead.start("alice", RUNS)
        clock.now += 20
        live.renew()  # the live one renews its own, not the dead one's
        with pytest.raises(TooMuchWork):
            live.start("alice", RUNS)
        clock.now += 11
        assert live.running("alice", RUNS) == 0
        live.start("alice", RUNS)
        clock.now += 20
        assert live.renew() == 1  # renewed: still counted past its first lease
        clock.now += 20
        assert live.running("alice", RUNS) == 1


def test_held_and_aheld_free_their_slot_however_the_block_ends_and_close_gives_back_the_rest(
    where: str,
) -> None:
    work = shared(where)
    try:
        with pytest.raises(ValueError), work.held("alice", RUNS):
            raise ValueError("the work failed")

        async def in_a_loop() -> None:
            with pytest.raises(ValueError):
                async with work.aheld("alice", RUNS):
                    assert work.running("alice", RUNS) == 1
                    raise ValueError("the work failed")

        asyncio.run(in_a_loop())
        assert work.running("alice", RUNS) == 0
        work.store().start("alice", RUNS)
    finally:
        work.close()
    with open_leases(where) as other:
        assert other.running("alice", RUNS) == 0  # the closing process gave its rows back


# -- PostgreSQL: across processes (as across machines) ------------------------------------------------

STARTER = """
import sys
from agentkernel.services.user_work import Cap, TooMuchWork
from agentkernel.services.work_leases_pg import COUNT_LOCK, PostgresWorkLeases, copy_from_sqlite
from tests.conftest import write_kernel_yaml
url, users = sys.argv[1], int(sys.argv[2])
cap = Cap("tool runs", "server.max_running_tool_runs_per_user", 1, "wait for one to end")
with PostgresWorkLeases(url) as leases:
    leases.running("nobody", cap)  # connected
    print("ready", flush=True)
    sys.stdin.readline()
    for user in range(users):
        try:
            leases.start(f"u{user}", cap)
            print(f"u{user}", flush=True)
        except TooMuchWork:
            pass
"""
USERS = 300
WAIT_SECS = 120.0


def test_two_processes_starting_at_once_keep_each_users_cap(pg_url: str) -> None:
    """A cap of 1, two server processes (as on two machines) starting work for 300 users at once: one
    each (without the advisory lock, some user got two)."""
    started = [
        subprocess.Popen(
            [sys.executable, "-c", STARTER, pg_url, str(USERS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for process in started:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        for process in started:  # both go at once
            assert process.stdin is not None
            process.stdin.write("\n")
            process.stdin.flush()
        users: list[str] = []
        for process in started:
            out, err = process.communicate(timeout=WAIT_SECS)
            assert process.returncode == 0, err
            users += out.split()
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert sorted(Counter(users).values()) == [1] * USERS


def test_a_start_waits_for_another_processs_lock_no_longer_than_its_bound(pg_url: str) -> None:
    with PostgresWorkLeases(pg_url, busy_timeout_secs=0.2) as leases, psycopg.connect(pg_url) as other:
        with other.transaction():
            other.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (COUNT_LOCK, "alice"))
            with pytest.raises(StoreBusy, match="running-work leases in the store database was busy"):
                leases.start("alice", RUNS)
        leases.start("alice", RUNS)  # the lock given back: it goes on
        assert leases.running("alice", RUNS) == 1


def test_copy_from_sqlite_moves_the_running_work(tmp_path: Path, pg_url: str) -> None:
    project = tmp_path / "project"
    config = load_kernel_config(write_kernel_yaml(project, ""))
    with WorkLeases(config.messages_db) as embedded:
        embedded.start("alice", RUNS)
        embedded.start("bob", RUNS)
    with psycopg.connect(pg_url) as target, PostgresWorkLeases(pg_url) as leases:
        with target.transaction():
            assert copy_from_sqlite(config, target) == {TABLE: 2}
        assert (leases.running("alice", RUNS), leases.running("bob", RUNS)) == (1, 1)
        with pytest.raises(AgentKernelError, match=f"{TABLE} already holds rows"):
            copy_from_sqlite(config, target)
    with psycopg.connect(pg_url) as target:
        assert copy_from_sqlite(load_kernel_config(write_kernel_yaml(tmp_path / "empty", "")), target) == {}


def test_a_kernel_with_a_store_url_counts_the_servers_work_in_postgresql(tmp_path: Path, pg_url: str) -> None:
    """What the server makes (`SharedUserWork(kernel.work_leases)`): with `store.url`, rows every
    machine on the database counts; without, the message store's file as before."""
    config = load_kernel_config(write_kernel_yaml(tmp_path, f"store: {{url: '{pg_url}'}}\n"))
    with Kernel(config) as kernel:
        work = SharedUserWork(kernel.work_leases, lease_secs=12)
        try:
            with work.held("alice", RUNS), PostgresWorkLeases(pg_url) as seen:
                assert seen.running("alice", RUNS) == 1
                assert work.store().lease_secs == 12
        finally:
            work.close()
    plain = load_kernel_config(write_kernel_yaml(tmp_path / "embedded", ""))
    with Kernel(plain) as kernel:
        leases = kernel.work_leases(30)
        try:
            assert isinstance(leases, WorkLeases) and leases.path == str(plain.messages_db)
        finally:
            leases.close()
