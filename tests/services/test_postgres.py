"""What the PostgreSQL stores share (S27.2): a lazy pool, schemas upgraded in place, newer ones refused."""

from __future__ import annotations

import os
import pwd
import socket
import threading
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

import tests.pg
from agentkernel.services.postgres import (
    VERSIONS_TABLE,
    PgPool,
    PgSchema,
    PgStore,
    SchemaTooNew,
    StoreUnavailable,
    read_version,
)
from tests.pg import Cluster, cluster_owner, postgres_bin

V1: dict[int, tuple[str, ...]] = {1: ("CREATE TABLE notes (id INT PRIMARY KEY, body TEXT NOT NULL)",)}
V2: dict[int, tuple[str, ...]] = {**V1, 2: ("ALTER TABLE notes ADD COLUMN author TEXT NOT NULL DEFAULT ''",)}
RACERS = 8


def schema(version: int, upgrades: dict[int, tuple[str, ...]]) -> PgSchema:
    return PgSchema(store="notes", what="the notes", version=version, upgrades=upgrades)


def version_in(url: str) -> int:
    with psycopg.connect(url) as conn:
        return read_version(conn, "notes")


def with_password(url: str, password: str) -> str:
    """`url` with a password (the test cluster trusts 127.0.0.1, so any password connects)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{password}@{parts.hostname}:{parts.port}"))


def test_a_fresh_database_gets_the_tables_and_the_version_and_opening_again_changes_nothing(
    pg_url: str,
) -> None:
    with PgStore(pg_url, schema(1, V1)):
        pass
    assert version_in(pg_url) == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO notes VALUES (1, 'kept')")
    with PgStore(pg_url, schema(1, V1)):  # a second CREATE TABLE would fail: nothing runs again
        pass
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT body FROM notes").fetchall() == [("kept",)]
        assert conn.execute(f"SELECT store, version FROM {VERSIONS_TABLE}").fetchall() == [("notes", 1)]


def test_an_older_database_is_upgraded_in_place_keeping_its_rows(pg_url: str) -> None:
    with PgStore(pg_url, schema(1, V1)), psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO notes VALUES (1, 'kept')")
    with PgStore(pg_url, schema(2, V2)):
        pass
    assert version_in(pg_url) == 2
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT id, body, author FROM notes").fetchall() == [(1, "kept", "")]


def test_a_failing_step_leaves_the_database_at_its_old_version(pg_url: str) -> None:
    with PgStore(pg_url, schema(1, V1)):
        pass
    broken = {
        **V1,
        2: ("ALTER TABLE notes ADD COLUMN author TEXT", "ALTER TABLE no_such_table ADD COLUMN x INT"),
    }
    with pytest.raises(psycopg.errors.UndefinedTable):
        PgStore(pg_url, schema(2, broken))
    assert version_in(pg_url) == 1
    with psycopg.connect(pg_url) as conn:  # the first step was rolled back with the second
        assert [c.name for c in conn.execute("SELECT * FROM notes LIMIT 0").description or ()] == [
            "id",
            "body",
        ]


def test_a_newer_database_is_refused_naming_the_store_both_versions_and_never_the_password(
    pg_url: str,
) -> None:
    with PgStore(pg_url, schema(2, V2)):
        pass
    url = with_password(pg_url, "hunter2-secret")
    with pytest.raises(SchemaTooNew) as caught:
        PgStore(url, schema(1, V1))
    message = str(caught.value)
    assert "the notes" in message and "'notes'" in message
    assert "schema version 2" in message and "knows (1)" in message
    assert "hunter2" not in message and ":***@127.0.0.1" in message
    assert version_in(pg_url) == 2


def test_stores_of_several_processes_opening_at_once_migrate_once(pg_url: str) -> None:
    """Each opener has its own pool (its own server sessions, as separate processes would)."""
    start = threading.Barrier(RACERS)
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            start.wait()
            with PgStore(pg_url, schema(2, V2)):
                pass
        except BaseException as exc:
            errors.append(exc)

    racers = [threading.Thread(target=open_one) for _ in range(RACERS)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    assert errors == []
    assert version_in(pg_url) == 2


def test_the_pool_connects_on_first_use_and_an_unreachable_database_is_named_without_its_password() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pool = PgPool(
        f"postgresql://kernel:hunter2-secret@127.0.0.1:{port}/none", timeout_secs=1.0
    )  # no error yet
    try:
        with pytest.raises(StoreUnavailable) as caught, pool.connection():
            pass
        assert f"kernel:***@127.0.0.1:{port}/none" in str(caught.value)
        assert "hunter2" not in str(caught.value)
    finally:
        pool.close()
    with pytest.raises(StoreUnavailable, match="closed"), pool.connection():
        pass


def test_a_schema_without_every_step_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match=r"notes: schema version 3 has no upgrade to version\(s\) \[3\]"):
        schema(3, V2)


def test_the_test_cluster_is_a_real_server_run_by_an_unprivileged_user(
    pg_cluster: Cluster, pg_url: str
) -> None:
    """tests/pg.py: Debian's PostgreSQL in a temp folder, as `nobody` when the tests run as root (CI)."""
    with psycopg.connect(pg_url) as conn:
        assert conn.info.server_version >= 130000
        assert (conn.info.host, conn.info.port) == ("127.0.0.1", pg_cluster.port)
    owner = (pg_cluster.folder / "data").stat().st_uid
    assert owner == (os.geteuid() if cluster_owner() is None else pwd.getpwnam("nobody").pw_uid)
    assert owner != 0


def test_without_postgresql_installed_the_tests_fail_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CI must never pass by skipping every PostgreSQL test."""
    monkeypatch.setattr(tests.pg, "BIN_GLOB", "/nonexistent/postgresql/*/bin")
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install postgresql"):
        postgres_bin()


def test_a_callers_time_left_bounds_the_wait_for_a_connection(pg_url: str) -> None:
    """A script with half a second left is not kept waiting the pool's 10 s for a connection (and the
    state store's helpers pass their time left down to it)."""
    from agentkernel.services.state import Namespace, StateError
    from agentkernel.services.state_pg import PostgresStateStore

    pool = PgPool(pg_url, max_size=1)
    state = PostgresStateStore(pool)
    alice = Namespace("user", "alice", user="alice")
    try:
        state.set(alice, "k", 0)  # its tables made
        with pool.connection():  # the pool's only connection, held
            with pytest.raises(StoreUnavailable) as caught, pool.connection(0.2):
                pass
            assert "gave no connection within 0.2 s (the time left to the caller)" in str(caught.value)
            with pytest.raises(StateError, match=r"within 0\.3 s \(the time left to the caller\)"):
                state.set(alice, "k", 1, timeout=0.3)
        with pool.connection(0.2) as conn:  # given back: lent at once
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()


def test_a_pool_whose_every_connection_is_lent_says_so_and_opens_no_other(pg_url: str) -> None:
    """Load is not an outage: a busy pool is not replaced by a fresh one (which would open max_size more
    connections each time the load outlasts the wait)."""
    pool = PgPool(pg_url, max_size=1, timeout_secs=0.5)
    try:
        with pool.connection() as held:
            pid = held.info.backend_pid
            with (
                pytest.raises(StoreUnavailable, match="every connection of the pool is lent"),
                pool.connection(),
            ):
                pass
        with pool.connection() as again:
            assert again.info.backend_pid == pid  # the same pool, the same connection
    finally:
        pool.close()
