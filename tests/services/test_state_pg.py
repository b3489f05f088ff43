"""The state store on PostgreSQL (S11 on S27.2): the kernel's choice with `store.url`, and a file copied over.

The store's behaviour is tested on both stores by tests/helpers/test_state.py
(every test that opens a store directly); here what only the PostgreSQL
form has: its place in the kernel and `copy_from_sqlite`.
"""

from __future__ import annotations

import socket
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from agentkernel import Kernel
from agentkernel.config import KernelConfig, load_kernel_config
from agentkernel.errors import AgentKernelError
from agentkernel.helpers import default_helper_table
from agentkernel.helpers import state as state_helpers
from agentkernel.helpers.table import HelperTable
from agentkernel.ports import STATE, Namespace
from agentkernel.services.memory import SqliteMessageStore
from agentkernel.services.postgres import PgPool
from agentkernel.services.state import ITEM_ROW_BYTES, SqliteStateStore, StateError
from agentkernel.services.state_pg import PostgresStateStore, copy_from_sqlite
from agentkernel.testing.parts import kernel_parts
from tests.conftest import ToolFactory

STATE_YAML = "logging:\n  state_db_path: data/state.db\n"


def configured(project: Path, yaml_text: str) -> KernelConfig:
    path = project / "config" / "kernel.yaml"
    path.write_text(path.read_text(encoding="utf-8") + yaml_text, encoding="utf-8")
    return load_kernel_config(path)


def helpers() -> HelperTable:
    table = default_helper_table()
    if "state_get" not in table:
        state_helpers.register(table)
    return table


# -- the kernel's store --------------------------------------------------------------------------


def test_with_a_store_url_the_state_helpers_write_to_postgresql(
    project: Path, pg_url: str, make_tool: ToolFactory
) -> None:
    config = configured(project, STATE_YAML + f"store: {{url: '{pg_url}'}}\nstate: {{max_user_bytes: 200}}\n")
    make_tool(
        "counter",
        """
        function run(args) {
            state_push("user", "seen", args.n);
            let over = "";
            try { state_set("user", "big", "x".repeat(200)); } catch (e) { over = e.message; }
            return { content: "ok", data: { seen: state_range("user", "seen", 0, -1), over } };
        }
        """,
    )
    with Kernel(config, helpers=helpers()) as kernel:
        store = kernel_parts(kernel).services.get(STATE)
        assert isinstance(store, PostgresStateStore) and store.max_user_bytes == 200
        results = [kernel.run_tool("counter", {"n": n}, kernel.caller(user_id="ann")) for n in (1, 2)]
    item = len("seen") + 1 + ITEM_ROW_BYTES
    assert [result.data for result in results] == [
        {
            "seen": list(range(1, n + 1)),
            "over": f"state_set: this user's keys would take {4 + n * item + 3 + 202} bytes, over the "
            "200-byte quota (state.max_user_bytes); delete keys to make room",
        }
        for n in (1, 2)
    ], [result.content for result in results]
    assert not (project / "data" / "state.db").exists()  # nothing went to the SQLite file
    with PostgresStateStore(pg_url) as again:  # another process's view
        assert again.range(Namespace("user", "ann"), "seen", 0, -1) == [1, 2]


def test_without_state_db_path_the_store_stays_off_with_a_store_url(project: Path, pg_url: str) -> None:
    """S11.3 holds in every deployment: `state.db_path` (or `logging.state_db_path`) turns the store on."""
    config = configured(project, f"store: {{url: '{pg_url}'}}\n")
    with Kernel(config, helpers=helpers()) as kernel:
        assert kernel_parts(kernel).services.get(STATE) is None


# -- copy_from_sqlite --------------------------------------------------------------------------------


def copy(config: KernelConfig, url: str) -> dict[str, int]:
    """`copy_from_sqlite` into the (migrated) database, in one transaction committed here."""
    with PostgresStateStore(url) as store:
        store.keys(Namespace("global", ""))  # the tables
    with psycopg.connect(url) as target, target.transaction():
        return copy_from_sqlite(config, target)


def test_a_state_file_is_copied_with_its_order_types_and_quota(project: Path, pg_url: str) -> None:
    config = configured(project, STATE_YAML)
    ann, bob = Namespace("user", "ann", user="ann"), Namespace("global", "", user="bob")
    with SqliteStateStore(project / "data" / "state.db") as source:
        source.set(ann, "v", {"a": [1, 2.5]})
        source.set(ann, "nul\x00key", "ключ")
        for item in ("a", "b", "c"):
            source.push(bob, "log", item)
        for member in (3, 1, 2):
            source.sadd(bob, "set", member)
        source.srem(bob, "set", 3)  # a gap in the ids: the order is by id, kept
        source.sadd(Namespace("global", "", user="ann"), "set", 0)
    with sqlite3.connect(project / "data" / "state.db") as raw:
        usage = dict(raw.execute("SELECT payer, bytes FROM state_usage").fetchall())
    assert copy(config, pg_url) == {"state_keys": 4, "state_list_items": 3, "state_set_members": 3}
    with PostgresStateStore(pg_url, max_user_bytes=10_000) as store:
        assert store.get(ann, "v") == {"a": [1, 2.5]} and store.get(ann, "nul\x00key") == "ключ"
        assert store.keys(ann) == ["nul\x00key", "v"]
        assert store.range(bob, "log", 0, -1) == ["a", "b", "c"]
        assert store.push(bob, "log", "d") == 4
        assert store.sadd(bob, "set", 9)  # its id after the copied ones: last
        assert store.smembers(bob, "set") == [1, 2, 0, 9]
        with psycopg.connect(pg_url) as conn:
            counted = {
                str(p): int(b) for p, b in conn.execute("SELECT payer, bytes FROM state_usage").fetchall()
            }
    since = (3 + len('"d"') + ITEM_ROW_BYTES) + (3 + len("9") + ITEM_ROW_BYTES)  # the push and the sadd
    assert counted == {"ann": usage["ann"], "bob": usage["bob"] + since}


def test_nothing_to_copy_and_a_full_target_refused(project: Path, pg_url: str) -> None:
    assert copy(configured(project, ""), pg_url) == {}  # no state.db_path
    config = configured(project, STATE_YAML)
    assert copy(config, pg_url) == {}  # no file
    (project / "data").mkdir()
    with SqliteMessageStore(project / "data" / "state.db") as messages:  # a file without state tables
        messages.append("s", "user", "user", "hello")
    assert copy(config, pg_url) == {}
    with SqliteStateStore(project / "data" / "state.db") as source:
        source.set(Namespace("global", ""), "k", 1)
    with PostgresStateStore(pg_url) as store:
        store.set(Namespace("global", ""), "there", 1)
    with pytest.raises(AgentKernelError, match="state_keys already holds rows"):
        copy(config, pg_url)


def test_a_file_of_an_older_schema_is_refused_naming_its_version(project: Path, pg_url: str) -> None:
    config = configured(project, STATE_YAML)
    with SqliteStateStore(project / "data" / "state.db") as source:
        source.set(Namespace("global", ""), "k", 1)
    with sqlite3.connect(project / "data" / "state.db") as raw:
        raw.execute("UPDATE state_schema SET version = 2")
    with pytest.raises(AgentKernelError, match="have schema version 2, this agentkernel copies version 3"):
        copy(config, pg_url)


def test_a_database_out_of_reach_is_a_state_error_a_script_can_catch() -> None:
    """Not an internal error: the helpers turn a StateError into the script's exception (S11, S27.2)."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pool = PgPool(f"postgresql://ann:secret@127.0.0.1:{port}/state", timeout_secs=0.5)
    with PostgresStateStore(pool) as store:
        with pytest.raises(StateError, match=r"ann:\*\*\*@127\.0\.0\.1") as caught:
            store.get(Namespace("global", ""), "k")
        assert "secret" not in str(caught.value)
    pool.close()


def test_writes_crossing_each_others_payers_all_land(pg_url: str) -> None:
    """Ann rewrites Bob's keys while Bob rewrites Ann's: each write locks its writer's quota, then the
    other's (whose bytes it frees), a deadlock PostgreSQL breaks by failing one; the store runs it again."""
    ann, bob = Namespace("global", "", user="ann"), Namespace("global", "", user="bob")
    rounds = 150
    with PostgresStateStore(pg_url) as store:
        store.set(ann, "ann's", 0)
        store.set(bob, "bob's", 0)
        barrier = threading.Barrier(2)

        def rewrite(writer: Namespace, key: str) -> int:
            barrier.wait(timeout=30)
            for n in range(rounds):  # each write takes the key (and its bytes) over from the other
                store.set(writer, key, n)
            return rounds

        with ThreadPoolExecutor(2) as pool:
            done = [pool.submit(rewrite, ann, "bob's"), pool.submit(rewrite, bob, "ann's")]
            assert [future.result(timeout=300) for future in done] == [rounds, rounds]
        assert store.get(ann, "ann's") == store.get(ann, "bob's") == rounds - 1


def test_a_deadlock_the_lock_order_cannot_foresee_is_run_again(pg_url: str) -> None:
    """Ann replaces lists Carol made and Bob filled while Bob replaces lists Dave made and Ann filled: each
    write frees the other's bytes (items), found only as it deletes them; PostgreSQL fails one of two
    crossing writes, and the store runs it again, so every write lands."""
    ann, bob = Namespace("global", "", user="ann"), Namespace("global", "", user="bob")
    carol, dave = Namespace("global", "", user="carol"), Namespace("global", "", user="dave")
    rounds = 20
    with PostgresStateStore(pg_url) as store:
        for n in range(rounds):
            store.push(carol, f"a{n}", 0)
            store.push(bob, f"a{n}", 1)
            store.push(dave, f"b{n}", 0)
            store.push(ann, f"b{n}", 1)
        barrier = threading.Barrier(2)

        def replace(writer: Namespace, prefix: str) -> int:
            barrier.wait(timeout=30)
            for n in range(rounds):
                # time enough for a crossing write's lock on a busy machine: what is tested is the
                # deadlock run again, not how long the other writer may hold the row (the lock timeout)
                store.set(writer, f"{prefix}{n}", n, timeout=60)
            return rounds

        with ThreadPoolExecutor(2) as pool:
            done = [pool.submit(replace, ann, "a"), pool.submit(replace, bob, "b")]
            assert [future.result(timeout=300) for future in done] == [rounds, rounds]
        assert [store.get(ann, f"{prefix}{n}") for prefix in "ab" for n in range(rounds)] == [
            *range(rounds)
        ] * 2
