"""Continuations and downloads on PostgreSQL (S27.2): what differs from the file — sweeps that never wait
for another replica's — and `copy_from_sqlite`, which moves a project's rows over.

Their behaviour shared with the SQLite stores is tested on both databases
in tests/server/test_continuations.py and test_downloads.py.
"""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from agentkernel.config import KernelConfig, load_kernel_config
from agentkernel.errors import AgentKernelError
from agentkernel.server.continuations import ContinuationStore
from agentkernel.server.downloads import DownloadStore
from agentkernel.server.sealed_ids_pg import (
    PostgresContinuationStore,
    PostgresDownloadStore,
    copy_from_sqlite,
)

WAIT_SECS = 120.0  # an upper bound for a sweep that does not wait, never a measured time


@pytest.fixture
def config(project: Path) -> KernelConfig:
    return load_kernel_config(project / "config" / "kernel.yaml")


def test_a_sweep_skips_the_rows_another_replica_is_deleting_instead_of_waiting(pg_url: str) -> None:
    """Each insert sweeps the expired rows: a replica whose sweep found rows locked by another's (still
    deleting them) goes on with the rest, so two replicas never queue behind each other's sweeps."""
    with PostgresContinuationStore(pg_url, ttl_secs=60) as store:
        for n in range(10):
            store.put(owner="ann", tool="t", args={"n": n}, now=float(n))  # expired by now=100
        with psycopg.connect(pg_url) as other:  # another replica, mid-sweep (a transaction is open)
            held = other.execute(
                "SELECT key FROM continuations ORDER BY created_at LIMIT 4 FOR UPDATE"
            ).fetchall()
            assert len(held) == 4
            done = threading.Event()
            swept: list[int] = []

            def sweep() -> None:
                swept.append(store.purge(now=100.0))
                done.set()

            sweeper = threading.Thread(target=sweep)
            sweeper.start()
            finished = done.wait(WAIT_SECS)
            other.rollback()  # let a waiting sweep go, whatever happened
            sweeper.join()
            assert finished and swept == [6]  # it did not wait: the other's 4 were left to it
        assert store.count() == 4 and store.purge(now=100.0) == 4


def test_copy_from_sqlite_moves_every_row_with_its_id(config: KernelConfig, pg_url: str) -> None:
    with ContinuationStore(config.messages_db) as pages, DownloadStore(config.messages_db) as files:
        page = pages.put(owner="ann", tool="t", args={"page": 2}, session_id="s1", pid="p1", template="x")
        old = pages.put(owner="bob", tool="t", args={}, now=0.0)  # long expired: copied all the same
        folder = config.temp_root.resolve() / "ann-s1"
        report = files.put(owner="ann", session_id="s1", folder=folder, names=["a", "r.csv"], name="r.csv")
    with PostgresContinuationStore(pg_url) as pg_pages, PostgresDownloadStore(pg_url) as pg_files:
        with psycopg.connect(pg_url) as target, target.transaction():
            assert copy_from_sqlite(config, target) == {"continuations": 2, "downloads": 1}
        found = pg_pages.get(page, "ann")
        assert found is not None and (found.args, found.session_id, found.pid, found.template) == (
            {"page": 2},
            "s1",
            "p1",
            "x",
        )
        assert pg_pages.get(old, "bob") is None and pg_pages.count() == 2  # expired, as in the file
        download = pg_files.get(report, "ann")
        assert download is not None and (download.folder, download.names) == (folder, ("a", "r.csv"))
        assert pg_files.get(report, "bob") is None
        refused = pytest.raises(AgentKernelError, match="table continuations already holds rows")
        with psycopg.connect(pg_url) as target, target.transaction(), refused:
            copy_from_sqlite(config, target)


def test_copy_from_sqlite_of_a_project_without_the_file_or_the_tables(
    config: KernelConfig, pg_url: str
) -> None:
    with PostgresContinuationStore(pg_url), PostgresDownloadStore(pg_url), psycopg.connect(pg_url) as target:
        assert copy_from_sqlite(config, target) == {}  # no message store yet
        with ContinuationStore(config.messages_db) as pages:
            pages.put(owner="ann", tool="t", args={})
        assert copy_from_sqlite(config, target) == {"continuations": 1}  # no downloads table in it
        target.rollback()
