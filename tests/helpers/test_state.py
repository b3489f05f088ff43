"""The state helpers (S11) from JS and Rhai through the real dispatch path, and the store underneath.

Every helper runs from both engines as a script tool on a real SQLite file;
the attacks (another user's id, odd keys, huge values, racing writers in
threads and in processes, a store locked by someone else) are tested too.
The tests that open a store directly run on both stores: the SQLite file
and the PostgreSQL database (services/state_pg.py, S27.2, tests/pg.py).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentkernel import Kernel
from agentkernel.config import KernelConfig, load_kernel_config
from agentkernel.errors import ConfigError
from agentkernel.helpers import default_helper_table
from agentkernel.helpers import state as state_helpers
from agentkernel.ports import STATE
from agentkernel.services.memory import SqliteMessageStore
from agentkernel.services.state import (
    ITEM_ROW_BYTES,
    Namespace,
    SqliteStateStore,
    StateBusyError,
    StateError,
    StateStore,
    canonical_json,
    encode_value,
    from_config,
    lrange_bounds,
)
from agentkernel.services.state_pg import PostgresStateStore, key_lock
from agentkernel.testing.parts import kernel_parts
from tests.conftest import REPO, ToolFactory

pytestmark = pytest.mark.across_deployments  # S27.3: on the project's files and on PostgreSQL

STATE_YAML = "logging:\n  state_db_path: data/state.db\n"
ENGINES = [".js", ".rhai"]
HELPERS = list(state_helpers.HELPERS)


def build_kernel(project: Path, extra_yaml: str = STATE_YAML) -> Kernel:
    """A kernel with the state helpers registered and the store of its kernel.yaml attached."""
    config_path = project / "config" / "kernel.yaml"
    if extra_yaml:
        config_path.write_text(config_path.read_text(encoding="utf-8") + extra_yaml, encoding="utf-8")
    config = load_kernel_config(config_path)
    return kernel_for(config)


def kernel_for(config: KernelConfig) -> Kernel:
    """The state helpers registered (unless the default table has them) and `from_config`'s store attached."""
    table = default_helper_table()
    if "state_get" not in table:
        state_helpers.register(table)
    return Kernel(config, helpers=table, extra_services={"state": from_config(config)})


def close_store(kernel: Kernel) -> None:
    store = kernel_parts(kernel).services.get(STATE)
    if store is not None:
        store.close()


@pytest.fixture
def skernel(project: Path) -> Iterator[Kernel]:
    kernel = build_kernel(project)
    yield kernel
    close_store(kernel)


Store = SqliteStateStore | PostgresStateStore


def open_store(where: str, **limits: Any) -> Store:
    """The PostgreSQL store for a postgresql:// URL, else the SQLite one on that file."""
    if where.startswith("postgresql://"):
        return PostgresStateStore(where, **limits)
    return SqliteStateStore(where, **limits)


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store lives: a state file, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "state.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(where: str) -> Iterator[Store]:
    with open_store(where) as opened:
        yield opened


def usage_in(where: str) -> dict[str, int]:
    """Each payer's bytes as the store's `state_usage` table counts them (payers at 0 left out)."""
    sql = "SELECT payer, bytes FROM state_usage WHERE bytes != 0"
    if where.startswith("postgresql://"):
        with psycopg.connect(where) as conn:
            return {payer: int(count) for payer, count in conn.execute(sql).fetchall()}
    with sqlite3.connect(where) as raw:
        return dict(raw.execute(sql).fetchall())


def run_tool(kernel: Kernel, name: str, args: Any = None, **caller: Any) -> Any:
    """Call a tool as the LLM would; return its `data`, failing the test when the tool failed."""
    result = kernel.run_tool(name, {} if args is None else args, kernel.caller(**caller))
    assert result.success, f"{result.content}; not loaded: {[str(p) for p in kernel.problems()]}"
    return result.data


def source(ext: str, js: str, rhai: str) -> str:
    return js if ext == ".js" else rhai


USER = {"user_id": "alice", "session_id": "s-1", "template": "helper"}


# -- S11.1 values: state_get, state_set, state_delete, state_keys -------------------------------

VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -7,
    2.5,
    "",
    "текст 🙂",
    [1, [2, {"a": None}]],
    {"b": 1, "a": {"x": [True]}},
]


@pytest.mark.parametrize("ext", ENGINES)
def test_s11_1_any_json_value_round_trips(skernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    js = """
    function run(args) {
        const out = [];
        args.values.forEach((v, i) => {
            state_set("user", "k" + i, v);
            out.push(state_get("user", "k" + i));
        });
        out.push(state_get("user", "missing"), state_set("user", "x", 1));
        return { content: "ok", data: out };
    }
    """
    rhai = """
    fn run(args) {
        let out = [];
        let i = 0;
        for v in args.values { state_set("user", `k${i}`, v); out.push(state_get("user", `k${i}`)); i += 1; }
        out.push(state_get("user", "missing"));
        out.push(state_set("user", "x", 1));
        #{ content: "ok", data: out }
    }
    """
    make_tool("values", source(ext, js, rhai), ext=ext)
    data = run_tool(skernel, "values", {"values": VALUES}, **USER)
    assert data == [*VALUES, None, None]
    assert [type(v) for v in data[3:6]] == [int, int, float]  # ints stay ints, floats floats


@pytest.mark.parametrize("ext", ENGINES)
def test_s11_1_delete_and_keys(skernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    js = """
    function run(args) {
        state_set("session", "b", 1); state_set("session", "a", 2);
        state_push("session", "c", 3); state_sadd("session", "d", 4);
        const out = [state_keys("session")];
        out.push(state_delete("session", "c"), state_delete("session", "c"), state_delete("session", "d"));
        out.push(state_keys("session"), state_delete("session", "nope"));
        state_push("session", "list", 1);
        state_set("session", "list", "now a value");
        out.push(state_get("session", "list"), state_keys("session"));
        return { content: "ok", data: out };
    }
    """
    rhai = """
    fn run(args) {
        state_set("session", "b", 1); state_set("session", "a", 2);
        state_push("session", "c", 3); state_sadd("session", "d", 4);
        let out = [state_keys("session")];
        out.push(state_delete("session", "c")); out.push(state_delete("session", "c"));
        out.push(state_delete("session", "d"));
        out.push(state_keys("session")); out.push(state_delete("session", "nope"));
        state_push("session", "list", 1);
        state_set("session", "list", "now a value");
        out.push(state_get("session", "list")); out.push(state_keys("session"));
        #{ content: "ok", data: out }
    }
    """
    make_tool("keys", source(ext, js, rhai), ext=ext)
    assert run_tool(skernel, "keys", **USER) == [
        ["a", "b", "c", "d"],
        True,
        False,
        True,
        ["a", "b"],
        False,
        "now a value",
        ["a", "b", "list"],
    ]


# -- S11.2 lists: state_push, state_range (Redis LRANGE) ------------------------------------------


def redis_lrange(items: list[int], start: int, stop: int) -> list[int]:
    """An independent statement of LRANGE: Python slicing, stop made inclusive."""
    return items[start : (stop + 1) or None]


def test_lrange_bounds_match_redis() -> None:
    items = list(range(10))
    for start in range(-14, 14):
        for stop in range(-14, 14):
            bounds = lrange_bounds(len(items), start, stop)
            got = [] if bounds is None else items[bounds[0] : bounds[1] + 1]
            assert got == redis_lrange(items, start, stop), (start, stop)
    # the examples of the Redis manual: RPUSH mylist one two three
    three = ["one", "two", "three"]
    assert [lrange_bounds(3, *c) for c in [(0, 0), (-3, 2), (-100, 100), (5, 10)]] == [
        (0, 0),
        (0, 2),
        (0, 2),
        None,
    ]
    assert three[0:3] == ["one", "two", "three"]
    assert lrange_bounds(0, 0, -1) is None


@pytest.mark.parametrize("ext", ENGINES)
def test_s11_2_push_returns_lengths_and_range_slices_like_redis(
    skernel: Kernel, make_tool: ToolFactory, ext: str
) -> None:
    js = """
    function run(args) {
        const lengths = [];
        for (let i = 0; i < 10; i++) lengths.push(state_push("user", "l", i));
        const ranges = args.cases.map(([a, b]) => state_range("user", "l", a, b));
        return { content: "ok", data: { lengths, ranges, missing: state_range("user", "none", 0, -1) } };
    }
    """
    rhai = """
    fn run(args) {
        let lengths = [];
        for i in 0..10 { lengths.push(state_push("user", "l", i)); }
        let ranges = [];
        for c in args.cases { ranges.push(state_range("user", "l", c[0], c[1])); }
        let missing = state_range("user", "none", 0, -1);
        #{ content: "ok", data: #{ lengths: lengths, ranges: ranges, missing: missing } }
    }
    """
    make_tool("lists", source(ext, js, rhai), ext=ext)
    cases = [[a, b] for a in range(-12, 12) for b in range(-12, 12)]
    data = run_tool(skernel, "lists", {"cases": cases}, **USER)
    assert data["lengths"] == list(range(1, 11))
    assert data["ranges"] == [redis_lrange(list(range(10)), a, b) for a, b in cases]
    assert data["missing"] == []


@pytest.mark.parametrize("ext", ENGINES)
def test_s11_2_range_indexes_must_be_integers(skernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    js = """
    function run(args) {
        for (let i = 0; i < 5; i++) state_push("user", "l", i);
        const out = [state_range("user", "l", 2.0, 1e300), state_range("user", "l", -1e300, 0)];
        for (const bad of [[1.5, 2], ["1", 2], [0, true], [0, null], [0, [1]], [0, Infinity]]) {
            try { state_range("user", "l", bad[0], bad[1]); out.push("no error"); }
            catch (e) { out.push(e.message); }
        }
        return { content: "ok", data: out };
    }
    """
    rhai = """
    fn run(args) {
        for i in 0..5 { state_push("user", "l", i); }
        let out = [state_range("user", "l", 2.0, 9223372036854775807)];
        out.push(state_range("user", "l", -9223372036854775807, 0));
        for bad in [[1.5, 2], ["1", 2], [0, true], [0, ()], [0, [1]], [0, 1.0 / 0.0]] {
            try { state_range("user", "l", bad[0], bad[1]); out.push("no error"); } catch (e) { out.push(e); }
        }
        #{ content: "ok", data: out }
    }
    """
    make_tool("indexes", source(ext, js, rhai), ext=ext)
    data = run_tool(skernel, "indexes", **USER)
    assert data[:2] == [[2, 3, 4], [0]]
    infinity = (
        "null" if ext == ".js" else "'inf'"
    )  # JSON.stringify(Infinity) is null; Rhai's adapter says 'inf'
    assert data[2:] == [
        "state_range: start must be an integer, got 1.5",
        "state_range: start must be an integer, got '1'",
        "state_range: stop must be an integer, got true",
        "state_range: stop must be an integer, got null",
        "state_range: stop must be an integer, got [1]",
        f"state_range: stop must be an integer, got {infinity}",
    ]


# -- S11.2 sets: state_sadd, state_smembers, state_srem -------------------------------------------


@pytest.mark.parametrize("ext", ENGINES)
def test_s11_2_sets_hold_unique_json_values(skernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    js = """
    function run(args) {
        const add = (v) => state_sadd("global", "s", v);
        const out = [];
        out.push([add("a"), add("a"), add(1), add("1"), add(null), add(null)]);
        out.push([add({x: 1, y: [1, 2]}), add({y: [1, 2], x: 1}), add([1, 2]), add([2, 1]), add(2.5)]);
        out.push(state_smembers("global", "s"));
        out.push([state_srem("global", "s", {y: [1, 2], x: 1}), state_srem("global", "s", "zzz"),
                  state_srem("global", "none", 1), state_smembers("global", "none")]);
        for (const v of ["a", 1, "1", null, [1, 2], [2, 1]]) state_srem("global", "s", v);
        out.push(state_smembers("global", "s"), state_keys("global"));
        state_srem("global", "s", 2.5);
        out.push(state_keys("global"));
        return { content: "ok", data: out };
    }
    """
    rhai = """
    fn add(v) { state_sadd("global", "s", v) }
    fn run(args) {
        let out = [];
        out.push([add("a"), add("a"), add(1), add("1"), add(()), add(())]);
        out.push([add(#{x: 1, y: [1, 2]}), add(#{y: [1, 2], x: 1}), add([1, 2]), add([2, 1]), add(2.5)]);
        out.push(state_smembers("global", "s"));
        out.push([state_srem("global", "s", #{y: [1, 2], x: 1}), state_srem("global", "s", "zzz"),
                  state_srem("global", "none", 1), state_smembers("global", "none")]);
        for v in ["a", 1.0, "1", (), [1, 2], [2, 1]] { state_srem("global", "s", v); }
        out.push(state_smembers("global", "s")); out.push(state_keys("global"));
        state_srem("global", "s", 2.5);
        out.push(state_keys("global"));
        #{ content: "ok", data: out }
    }
    """
    make_tool("sets", source(ext, js, rhai), ext=ext)
    data = run_tool(skernel, "sets")
    assert data == [
        [True, False, True, True, True, False],
        [True, False, True, True, True],
        ["a", 1, "1", None, {"x": 1, "y": [1, 2]}, [1, 2], [2, 1], 2.5],
        [True, False, False, []],
        [2.5],
        ["s"],
        [],
    ]


def test_rhai_one_and_one_point_zero_are_one_member(skernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "numbers",
        """
        fn run(args) {
            #{ content: "ok", data: [state_sadd("global", "n", 1.0), state_sadd("global", "n", 1),
                                      state_smembers("global", "n"), state_srem("global", "n", 1)] }
        }
        """,
        ext=".rhai",
    )
    data = run_tool(skernel, "numbers")
    assert data == [True, False, [1.0], True] and isinstance(data[2][0], float)  # the first form is kept


def test_canonical_json() -> None:
    assert canonical_json('{"b":1.0,"a":[2.50,{"d":null,"c":-0.0}]}') == '{"a":[2.5,{"c":0,"d":null}],"b":1}'
    assert canonical_json('"ж"') == '"\\u0436"'


# -- WRONGTYPE: a key used as another kind than it holds ---------------------------------------


@pytest.mark.parametrize("ext", ENGINES)
def test_a_key_of_another_kind_is_an_error(skernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    js = """
    function run(args) {
        state_set("user", "v", 1); state_push("user", "l", 1); state_sadd("user", "s", 1);
        const attempts = [
            () => state_push("user", "v", 2), () => state_range("user", "v", 0, -1),
            () => state_sadd("user", "l", 2), () => state_get("user", "s"),
            () => state_range("user", "s", 0, 1), () => state_smembers("user", "l"),
            () => state_srem("user", "v", 1), () => state_get("user", "l"),
        ];
        const out = attempts.map((f) => { try { f(); return "no error"; } catch (e) { return e.message; } });
        out.push(state_get("user", "v"), state_range("user", "l", 0, -1), state_smembers("user", "s"));
        return { content: "ok", data: out };
    }
    """
    rhai = """
    fn run(args) {
        state_set("user", "v", 1); state_push("user", "l", 1); state_sadd("user", "s", 1);
        let out = [];
        try { state_push("user", "v", 2); } catch (e) { out.push(e); }
        try { state_range("user", "v", 0, -1); } catch (e) { out.push(e); }
        try { state_sadd("user", "l", 2); } catch (e) { out.push(e); }
        try { state_get("user", "s"); } catch (e) { out.push(e); }
        try { state_range("user", "s", 0, 1); } catch (e) { out.push(e); }
        try { state_smembers("user", "l"); } catch (e) { out.push(e); }
        try { state_srem("user", "v", 1); } catch (e) { out.push(e); }
        try { state_get("user", "l"); } catch (e) { out.push(e); }
        out.push(state_get("user", "v")); out.push(state_range("user", "l", 0, -1));
        out.push(state_smembers("user", "s"));
        #{ content: "ok", data: out }
    }
    """
    make_tool("kinds", source(ext, js, rhai), ext=ext)
    assert run_tool(skernel, "kinds", **USER) == [
        "state_push: key 'v' in scope 'user' holds a value, not a list",
        "state_range: key 'v' in scope 'user' holds a value, not a list",
        "state_sadd: key 'l' in scope 'user' holds a list, not a set",
        "state_get: key 's' in scope 'user' holds a set, not a value",
        "state_range: key 's' in scope 'user' holds a set, not a list",
        "state_smembers: key 'l' in scope 'user' holds a list, not a set",
        "state_srem: key 'v' in scope 'user' holds a value, not a set",
        "state_get: key 'l' in scope 'user' holds a list, not a value",
        1,
        [1],
        [1],
    ]


# -- S11.2 scopes: ids from the caller, never from the script -------------------------------------

SCOPES_JS = """
function run(args) {
    const scopes = ["session", "user", "agent", "global"];
    if (args.write) for (const scope of scopes) state_set(scope, "k", args.write + ":" + scope);
    return { content: "ok", data: scopes.map((scope) => state_get(scope, "k")) };
}
"""
SCOPES_RHAI = """
fn run(args) {
    let scopes = ["session", "user", "agent", "global"];
    if args.write != () { for scope in scopes { state_set(scope, "k", `${args.write}:${scope}`); } }
    let out = [];
    for scope in scopes { out.push(state_get(scope, "k")); }
    #{ content: "ok", data: out }
}
"""


@pytest.mark.parametrize("ext", ENGINES)
def test_s11_2_scopes_resolve_from_the_caller(skernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    make_tool("scopes", source(ext, SCOPES_JS, SCOPES_RHAI), ext=ext)

    def look(user: str, session: str, template: str, write: str | None = None) -> Any:
        args = {"write": write} if write else {}
        return run_tool(skernel, "scopes", args, user_id=user, session_id=session, template=template)

    assert look("alice", "s1", "t1", write="A") == ["A:session", "A:user", "A:agent", "A:global"]
    # bob, in another session of the same template, sees only what he shares with alice
    assert look("bob", "s2", "t1") == [None, None, "A:agent", "A:global"]
    # alice in another session keeps her user keys, not the first session's
    assert look("alice", "s3", "t2") == [None, "A:user", None, "A:global"]
    # one id string in three scopes is three keys
    assert look("x", "x", "x", write="X") == ["X:session", "X:user", "X:agent", "X:global"]
    assert look("alice", "s1", "t1") == ["A:session", "A:user", "A:agent", "X:global"]


@pytest.mark.parametrize("ext", ENGINES)
def test_s11_2_keys_of_one_user_are_invisible_to_another(
    skernel: Kernel, make_tool: ToolFactory, ext: str
) -> None:
    js = """
    function run(args) {
        if (args.secret) {
            state_set("user", "secret", args.secret);
            state_sadd("session", "seen", args.secret);
        }
        return { content: "ok", data: [state_keys("user"), state_keys("session"), state_get("user", "secret"),
                                       state_smembers("session", "seen")] };
    }
    """
    rhai = """
    fn run(args) {
        if args.secret != () {
            state_set("user", "secret", args.secret);
            state_sadd("session", "seen", args.secret);
        }
        #{ content: "ok", data: [state_keys("user"), state_keys("session"), state_get("user", "secret"),
                                  state_smembers("session", "seen")] }
    }
    """
    make_tool("secret", source(ext, js, rhai), ext=ext)
    alice = {"user_id": "alice", "session_id": "a-1"}
    assert run_tool(skernel, "secret", {"secret": "s3cr3t"}, **alice) == [
        ["secret"],
        ["seen"],
        "s3cr3t",
        ["s3cr3t"],
    ]
    assert run_tool(skernel, "secret", user_id="bob", session_id="b-1") == [[], [], None, []]
    # ids that look like paths, patterns or SQL are just ids
    for user in ("alice/..", "ALICE", "alice ", "%", "' OR '1'='1"):
        assert run_tool(skernel, "secret", user_id=user, session_id="a-1 ") == [[], [], None, []]


@pytest.mark.parametrize("ext", ENGINES)
def test_s11_2_a_reused_session_id_is_another_users_session(
    skernel: Kernel, make_tool: ToolFactory, ext: str
) -> None:
    """Issue 9: session keys were keyed by the session id alone, so Bob naming Alice's session id
    read and overwrote her session's keys. A session is now the user's session."""
    make_tool("scopes", source(ext, SCOPES_JS, SCOPES_RHAI), ext=ext)
    alice = {"user_id": "alice", "session_id": "chat-1", "template": "t"}
    bob = {"user_id": "bob", "session_id": "chat-1", "template": "t"}
    assert run_tool(skernel, "scopes", {"write": "A"}, **alice) == [
        "A:session",
        "A:user",
        "A:agent",
        "A:global",
    ]
    assert run_tool(skernel, "scopes", **bob) == [None, None, "A:agent", "A:global"]
    run_tool(skernel, "scopes", {"write": "B"}, **bob)
    assert run_tool(skernel, "scopes", **alice)[:2] == ["A:session", "A:user"]


QUOTA_YAML = STATE_YAML + "state:\n  max_user_bytes: 300\n"

QUOTA_JS = """
function run(args) {
    const out = [];
    for (const step of args.steps) {
        try {
            const [op, scope, key, value] = step;
            if (op === "set") state_set(scope, key, value);
            else if (op === "push") state_push(scope, key, value);
            else if (op === "sadd") state_sadd(scope, key, value);
            else if (op === "delete") state_delete(scope, key);
            out.push("ok");
        } catch (e) { out.push(e.message); }
    }
    return { content: "ok", data: out };
}
"""
QUOTA_RHAI = """
fn run(args) {
    let out = [];
    for step in args.steps {
        try {
            let op = step[0];
            if op == "set" { state_set(step[1], step[2], step[3]); }
            else if op == "push" { state_push(step[1], step[2], step[3]); }
            else if op == "sadd" { state_sadd(step[1], step[2], step[3]); }
            else if op == "delete" { state_delete(step[1], step[2]); }
            out.push("ok");
        } catch (e) { out.push(e); }
    }
    #{ content: "ok", data: out }
}
"""


def over(helper: str, total: int, whose: str = "this user's keys") -> str:
    return (
        f"{helper}: {whose} would take {total:,} bytes, over the 300-byte quota "
        "(state.max_user_bytes); delete keys to make room"
    )


@pytest.mark.parametrize("ext", ENGINES)
def test_a_users_keys_are_held_to_max_user_bytes(project: Path, make_tool: ToolFactory, ext: str) -> None:
    """Issue 9: a script could fill the disk through the state store. Every scope counts for the writer."""
    kernel = build_kernel(project, QUOTA_YAML)
    make_tool("quota", source(ext, QUOTA_JS, QUOTA_RHAI), ext=ext)
    blob = "x" * 98  # 100 bytes of JSON; a one-letter key adds 1

    def steps(user: str | None, *todo: list[Any]) -> Any:
        who = {"user_id": user} if user else {}
        return run_tool(kernel, "quota", {"steps": list(todo)}, session_id="s", template="t", **who)

    assert steps("alice", ["set", "user", "a", blob], ["set", "session", "b", blob]) == ["ok", "ok"]
    assert steps("alice", ["set", "global", "c", blob]) == [over("state_set", 303)]  # shared scopes count too
    item = 1 + 100 + ITEM_ROW_BYTES  # a list item or set member counts its key and its row too
    assert steps("alice", ["push", "agent", "l", blob]) == [over("state_push", 202 + 1 + item)]
    assert steps("alice", ["sadd", "user", "m", blob]) == [over("state_sadd", 202 + 1 + item)]
    assert steps("alice", ["set", "user", "a", "x" * 90]) == ["ok"]  # a smaller value always fits
    assert steps("alice", ["set", "user", "c", "y" * 88]) == ["ok"]  # 93 + 101 + 91 = 285
    assert steps("alice", ["sadd", "user", "d", "z" * 14]) == [
        over("state_sadd", 285 + 1 + 1 + 16 + ITEM_ROW_BYTES)
    ]
    assert steps("bob", ["set", "user", "a", blob], ["set", "global", "g", blob]) == ["ok", "ok"]
    assert steps(None, ["set", "session", "a", blob], ["push", "global", "h", blob]) == ["ok", "ok"]
    assert steps(None, ["set", "global", "n", blob]) == [
        over("state_set", 101 + 1 + item + 101, "the keys of callers without a user")
    ]
    assert steps("alice", ["delete", "user", "c"], ["push", "user", "l", "x" * 30]) == ["ok", "ok"]
    assert steps("alice", ["delete", "user", "l"], ["delete", "session", "b"]) == ["ok", "ok"]
    assert steps("alice", ["set", "global", "g", blob]) == ["ok"]  # Bob's global key is now Alice's
    assert steps("bob", ["set", "session", "s", blob], ["set", "session", "t", blob]) == [
        "ok",  # room freed when Alice took his global key over
        over("state_set", 303),
    ]
    close_store(kernel)


def test_the_quota_counts_every_kind_of_key(store: Store, where: str) -> None:
    """Usage is kept by triggers in the write's own transaction: what goes in, and what comes out."""
    store.max_user_bytes = 10_000
    alice = Namespace("user", "alice", user="alice")
    shared = Namespace("global", "", user="alice")

    def usage() -> dict[str, int]:
        return usage_in(where)

    store.set(alice, "k", "v")  # "k" + '"v"'
    assert usage() == {"alice": 4}
    store.push(shared, "list", [1, 2])  # "list" + "[1,2]"
    store.push(shared, "list", 3)
    store.sadd(alice, "set", "a")
    store.sadd(alice, "set", "a")  # already there: nothing more
    row = ITEM_ROW_BYTES  # an item or member counts its key again, and its row
    assert usage() == {"alice": 4 + 4 + (4 + 5 + row) + (4 + 1 + row) + 3 + (3 + 3 + row)}
    store.push(Namespace("global", "", user="bob"), "list", "bob's")
    assert usage() == {"alice": 223, "bob": 4 + 7 + row}
    assert store.delete(Namespace("global", "", user="carol"), "list")  # frees what each had put there
    assert usage() == {"alice": 4 + 3 + (3 + 3 + row)}
    store.srem(alice, "set", "a")
    store.set(alice, "k", None)
    assert usage() == {"alice": 5}


@pytest.mark.parametrize("ext", ENGINES)
def test_tiny_items_under_a_long_key_are_held_to_the_quota(
    project: Path, make_tool: ToolFactory, ext: str
) -> None:
    """Each item stores its key again: `state_push(scope, <1,000-byte key>, 0)` in a loop counted 1 byte
    a row and wrote about 6 KB of file a row, 400 MB in 20 s past a 1 MB quota (S11, issue 9's quota)."""
    kernel = build_kernel(project, STATE_YAML + "state:\n  max_user_bytes: 100000\n")
    js = """
    function run(args) {
        const key = "k".repeat(1000);
        let n = 0;
        try { for (; n < 1000; n++) state_push("user", key, 0); return "all"; }
        catch (e) { return `${n}: ${e.message}`; }
    }
    """
    rhai = """
    fn run(args) {
        let key = "k";
        key.pad(1000, "k");
        let n = 0;
        try { while n < 1000 { state_push("user", key, 0); n += 1; } return "all"; }
        catch (e) { return `${n}: ${e}`; }
    }
    """
    make_tool("flood", source(ext, js, rhai), ext=ext)
    result = kernel.run_tool("flood", {}, kernel.caller(user_id="alice", session_id="s"))
    per_item = 1000 + 1 + ITEM_ROW_BYTES
    made = (100_000 - 1000) // per_item
    assert result.content == (
        f"{made}: state_push: this user's keys would take {1000 + (made + 1) * per_item:,} bytes, "
        "over the 100,000-byte quota (state.max_user_bytes); delete keys to make room"
    )
    close_store(kernel)


def test_a_version_1_store_is_upgraded_and_keeps_its_data(tmp_path: Path) -> None:
    """Keys written before issue 9 stay; session keys, whose user is unknown, reach no caller."""
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE state_schema (version INTEGER NOT NULL)")
        raw.execute("INSERT INTO state_schema VALUES (1)")
        raw.execute(
            "CREATE TABLE state_keys (scope TEXT NOT NULL, owner TEXT NOT NULL, key TEXT NOT NULL, type TEXT "
            "NOT NULL, value TEXT, size INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (scope, owner, key))"
        )
        raw.execute(
            "CREATE TABLE state_list_items (scope TEXT NOT NULL, owner TEXT NOT NULL, key TEXT NOT NULL, "
            "pos INTEGER NOT NULL, value TEXT NOT NULL, PRIMARY KEY (scope, owner, key, pos))"
        )
        raw.execute(
            "CREATE TABLE state_set_members (id INTEGER PRIMARY KEY, scope TEXT NOT NULL, owner TEXT NOT "
            "NULL, key TEXT NOT NULL, digest TEXT NOT NULL, value TEXT NOT NULL, "
            "UNIQUE (scope, owner, key, digest))"
        )
        raw.execute("INSERT INTO state_keys VALUES ('user', 'alice', 'k', 'value', '\"kept\"', 0)")
        raw.execute("INSERT INTO state_keys VALUES ('session', 's1', 'k', 'value', '\"orphan\"', 0)")
        raw.execute("INSERT INTO state_keys VALUES ('global', '', 'l', 'list', NULL, 1)")
        raw.execute("INSERT INTO state_list_items VALUES ('global', '', 'l', 0, '[1]')")
    with SqliteStateStore(path, max_user_bytes=100) as store:
        assert store.get(Namespace("user", "alice"), "k") == "kept"
        assert store.range(Namespace("global", ""), "l", 0, -1) == [[1]]
        for user in (None, "", "alice"):
            owner = json.dumps([user, "s1"])
            assert store.get(Namespace("session", owner), "k") is None
        store.push(Namespace("global", "", user="alice"), "l", 2)
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT max(version) FROM state_schema").fetchone() == (3,)
        assert raw.execute("SELECT owner FROM state_keys WHERE scope = 'session'").fetchall() == [
            ('[0,"s1"]',)
        ]
        usage = dict(raw.execute("SELECT payer, bytes FROM state_usage").fetchall())
    assert usage == {
        "": len("k") + len('"kept"') + len("k") + len('"orphan"') + len("l") + len("l[1]") + ITEM_ROW_BYTES,
        "alice": len("l2") + ITEM_ROW_BYTES,
    }


@pytest.mark.parametrize("ext", ENGINES)
def test_s11_2_a_scope_without_an_id_is_an_error(skernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    js = """
    function run(args) {
        return { content: "ok", data: ["session", "user", "agent", "global"].map((scope) => {
            try { state_set(scope, "k", 1); return state_get(scope, "k"); } catch (e) { return e.message; }
        }) };
    }
    """
    rhai = """
    fn run(args) {
        let out = [];
        for scope in ["session", "user", "agent", "global"] {
            try { state_set(scope, "k", 1); out.push(state_get(scope, "k")); } catch (e) { out.push(e); }
        }
        #{ content: "ok", data: out }
    }
    """
    make_tool("noid", source(ext, js, rhai), ext=ext)
    for caller in ({}, {"user_id": "", "template": ""}):
        assert run_tool(skernel, "noid", **caller) == [
            "state_set: scope 'session' has no id for this caller",
            "state_set: scope 'user' has no id for this caller",
            "state_set: scope 'agent' has no id for this caller",
            1,
        ]


BAD_SCOPES: list[Any] = ["users", "USER", "", " user", "user:bob", "global/../user", 5, [], {"scope": "user"}]


@pytest.mark.parametrize("ext", ENGINES)
def test_s11_2_unknown_scopes_are_refused(skernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    js = """
    function run(args) {
        return { content: "ok", data: args.scopes.map((scope) => {
            try { state_keys(scope); return "no error"; } catch (e) { return e.message; }
        }) };
    }
    """
    rhai = """
    fn run(args) {
        let out = [];
        for scope in args.scopes {
            try { state_keys(scope); out.push("no error"); } catch (e) { out.push(e); }
        }
        #{ content: "ok", data: out }
    }
    """
    make_tool("badscope", source(ext, js, rhai), ext=ext)
    data = run_tool(skernel, "badscope", {"scopes": BAD_SCOPES}, user_id="bob", session_id="s")
    shown = [
        "'users'",
        "'USER'",
        "''",
        "' user'",
        "'user:bob'",
        "'global/../user'",
        "5",
        "[]",
        '{"scope": "user"}',
    ]
    assert data == [
        f"state_keys: unknown scope {s} (expected one of: session, user, agent, global)" for s in shown
    ]


# -- keys and values with odd characters; limits ---------------------------------------------------

ODD_KEYS = [
    "",
    " ",
    "a\x00b",
    "'; DROP TABLE state_keys; --",
    '"quoted"',
    "%",
    "_",
    "*",
    "../../etc/passwd",
    "/abs",
    "ключ🙂",
    "\n\t\r",
    "\u202eRTL",
    "k" * 1024,
    "ж" * 512,
]


@pytest.mark.parametrize("ext", ENGINES)
def test_odd_keys_and_values_round_trip(skernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    js = """
    function run(args) {
        for (const key of args.keys) state_set("user", key, { key, text: key + "\\u0000" });
        const values = args.keys.map((k) => state_get("user", k));
        return { content: "ok", data: { keys: state_keys("user"), values } };
    }
    """
    rhai = """
    fn run(args) {
        for key in args.keys { state_set("user", key, #{ key: key, text: key + "\\x00" }); }
        let values = [];
        for key in args.keys { values.push(state_get("user", key)); }
        #{ content: "ok", data: #{ keys: state_keys("user"), values: values } }
    }
    """
    make_tool("odd", source(ext, js, rhai), ext=ext)
    data = run_tool(skernel, "odd", {"keys": ODD_KEYS}, user_id="u")
    assert data["keys"] == sorted(ODD_KEYS)
    assert data["values"] == [{"key": k, "text": k + "\x00"} for k in ODD_KEYS]
    assert run_tool(skernel, "odd", {"keys": []}, user_id="other")["keys"] == []
    store = kernel_parts(skernel).services.get(STATE)  # the tables survived: every key is there
    assert store is not None and len(store.keys(Namespace("user", "u"))) == len(ODD_KEYS)


@pytest.mark.parametrize("ext", ENGINES)
def test_bad_keys_are_refused(skernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    js = """
    function run(args) {
        return { content: "ok", data: args.keys.map((key) => {
            try { state_set("user", key, 1); return "no error"; } catch (e) { return e.message; }
        }) };
    }
    """
    rhai = """
    fn run(args) {
        let out = [];
        for key in args.keys {
            try { state_set("user", key, 1); out.push("no error"); } catch (e) { out.push(e); }
        }
        #{ content: "ok", data: out }
    }
    """
    make_tool("badkey", source(ext, js, rhai), ext=ext)
    keys: list[Any] = ["k" * 1025, "ж" * 513, 5, None, ["k"], {"k": 1}, True]
    assert run_tool(skernel, "badkey", {"keys": keys}, user_id="u") == [
        "state_set: key is 1025 bytes, over the limit of 1024",
        "state_set: key is 1026 bytes, over the limit of 1024",
        "state_set: key must be a string, got 5",
        "state_set: key must be a string, got null",
        'state_set: key must be a string, got ["k"]',
        'state_set: key must be a string, got {"k": 1}',
        "state_set: key must be a string, got true",
    ]


def test_lone_surrogates_from_js(skernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "surrogates",
        """
        function run(args) {
            state_set("user", "v", "\\ud800x\\udc00");
            let keyError = null;
            try { state_set("user", "\\ud800", 1); } catch (e) { keyError = e.message; }
            return { content: "ok", data: [state_get("user", "v") === "\\ud800x\\udc00", keyError] };
        }
        """,
    )
    assert run_tool(skernel, "surrogates", user_id="u") == [
        True,
        "state_set: key must be valid Unicode text (it holds a lone surrogate)",
    ]


LIMIT_JS = """
function run(args) {
    const out = [];
    const ops = [
        (v) => state_set("user", "v", v),
        (v) => state_push("user", "l", v),
        (v) => state_sadd("user", "s", v),
    ];
    for (const op of ops) {
        for (const text of args.texts) {
            try { op(text); out.push("ok"); } catch (e) { out.push(e.message); }
        }
    }
    out.push(state_srem("user", "s", args.texts[args.texts.length - 1]));
    return { content: "ok", data: out };
}
"""
LIMIT_RHAI = """
fn run(args) {
    let out = [];
    for text in args.texts {
        try { state_set("user", "v", text); out.push("ok"); } catch (e) { out.push(e); }
    }
    for text in args.texts {
        try { state_push("user", "l", text); out.push("ok"); } catch (e) { out.push(e); }
    }
    for text in args.texts {
        try { state_sadd("user", "s", text); out.push("ok"); } catch (e) { out.push(e); }
    }
    out.push(state_srem("user", "s", args.texts[-1]));
    #{ content: "ok", data: out }
}
"""


@pytest.mark.parametrize("ext", ENGINES)
def test_value_size_limit(project: Path, make_tool: ToolFactory, ext: str) -> None:
    kernel = build_kernel(project, STATE_YAML + "state:\n  max_value_bytes: 64\n")
    make_tool("limits", source(ext, LIMIT_JS, LIMIT_RHAI), ext=ext)
    texts = ["x" * 62, "ж" * 31, "x" * 63]  # 64, 64 and 65 bytes of JSON with the quotes
    over = "value is 65 bytes of JSON, over the limit of 64 (state.max_value_bytes)"
    expected = [
        verdict
        for helper in ("state_set", "state_push", "state_sadd")
        for verdict in ("ok", "ok", f"{helper}: {over}")
    ]
    try:
        assert run_tool(kernel, "limits", {"texts": texts}, user_id="u") == [*expected, False]
    finally:
        close_store(kernel)


def test_default_value_limit_is_one_mebibyte(skernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "big",
        """
        function run(args) {
            state_set("user", "big", "x".repeat(1048574));
            let error = null;
            try { state_set("user", "big", "x".repeat(1048575)); } catch (e) { error = e.message; }
            return { content: "ok", data: [state_get("user", "big").length, error] };
        }
        """,
    )
    assert run_tool(skernel, "big", user_id="u") == [
        1048574,
        "state_set: value is 1048577 bytes of JSON, over the limit of 1048576 (state.max_value_bytes)",
    ]


@pytest.mark.parametrize("ext", ENGINES)
def test_result_size_limit(project: Path, make_tool: ToolFactory, ext: str) -> None:
    kernel = build_kernel(project, STATE_YAML + "state:\n  max_result_bytes: 100\n")
    js = """
    function run(args) {
        for (let i = 0; i < 5; i++) {
            state_push("user", "l", "x".repeat(28));
            state_sadd("user", "s", i + "x".repeat(27));
        }
        for (let i = 0; i < 20; i++) state_set("user", "key-" + "k".repeat(10) + i, 1);
        const out = [state_range("user", "l", 0, 2).length];
        const reads = [
            () => state_range("user", "l", 0, -1),
            () => state_smembers("user", "s"),
            () => state_keys("user"),
        ];
        for (const f of reads) {
            try { f(); out.push("no error"); } catch (e) { out.push(e.message); }
        }
        return { content: "ok", data: out };
    }
    """
    rhai = """
    fn run(args) {
        for i in 0..5 {
            let item = "x";
            item.pad(28, 'x');                      // pad changes the string in place
            let member = `${i}`;
            member.pad(28, 'x');
            state_push("user", "l", item);
            state_sadd("user", "s", member);
        }
        for i in 0..20 { state_set("user", `key-kkkkkkkkkk${i}`, 1); }
        let out = [state_range("user", "l", 0, 2).len()];
        try { state_range("user", "l", 0, -1); out.push("no error"); } catch (e) { out.push(e); }
        try { state_smembers("user", "s"); out.push("no error"); } catch (e) { out.push(e); }
        try { state_keys("user"); out.push("no error"); } catch (e) { out.push(e); }
        #{ content: "ok", data: out }
    }
    """
    make_tool("results", source(ext, js, rhai), ext=ext)
    tail = "the result is over the limit of 100 bytes of JSON (state.max_result_bytes); read a smaller range"
    try:
        assert run_tool(kernel, "results", user_id="u") == [
            3,
            f"state_range: {tail}",
            f"state_smembers: {tail}",
            f"state_keys: {tail}",
        ]
    finally:
        close_store(kernel)


def test_values_without_a_json_form(store: Store) -> None:
    ns = Namespace("user", "u")
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    for bad, why in [(float("nan"), "no JSON form"), (object(), "no JSON form"), (deep, "nested too deeply")]:
        with pytest.raises(StateError, match=why):
            store.set(ns, "k", bad)
    assert store.keys(ns) == []
    assert encode_value({"a": [1, 2.0]}) == '{"a":[1,2.0]}'


def test_deeply_nested_values_from_a_script_fail_cleanly(skernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "deep",
        """
        function run(args) {
            let v = 1;
            for (let i = 0; i < 100000; i++) v = [v];
            try { state_set("user", "k", v); return "stored"; } catch (e) { return e.message; }
        }
        """,
    )
    result = skernel.run_tool("deep", {}, skernel.caller(user_id="u"))
    assert result.success and "state_set" in result.content and "internal error" not in result.content


# -- S11.3 no store configured; the configuration ---------------------------------------------


@pytest.mark.parametrize("ext", ENGINES)
def test_s11_3_without_a_store_every_call_throws(project: Path, make_tool: ToolFactory, ext: str) -> None:
    kernel = build_kernel(project, extra_yaml="")
    assert kernel_parts(kernel).services.get(STATE) is None
    js = """
    function run(args) {
        const calls = [
            () => state_get("user", "k"), () => state_set("user", "k", 1), () => state_delete("user", "k"),
            () => state_keys("user"), () => state_push("user", "k", 1), () => state_range("user", "k", 0, -1),
            () => state_sadd("user", "k", 1), () => state_smembers("user", "k"),
            () => state_srem("bogus", "k", 1),
        ];
        const out = calls.map((f) => {
            try { f(); return "no error"; } catch (e) { return e.message; }
        });
        return { content: "ok", data: out };
    }
    """
    rhai = """
    fn run(args) {
        let out = [];
        try { state_get("user", "k"); } catch (e) { out.push(e); }
        try { state_set("user", "k", 1); } catch (e) { out.push(e); }
        try { state_delete("user", "k"); } catch (e) { out.push(e); }
        try { state_keys("user"); } catch (e) { out.push(e); }
        try { state_push("user", "k", 1); } catch (e) { out.push(e); }
        try { state_range("user", "k", 0, -1); } catch (e) { out.push(e); }
        try { state_sadd("user", "k", 1); } catch (e) { out.push(e); }
        try { state_smembers("user", "k"); } catch (e) { out.push(e); }
        try { state_srem("bogus", "k", 1); } catch (e) { out.push(e); }
        #{ content: "ok", data: out }
    }
    """
    make_tool("nostore", source(ext, js, rhai), ext=ext)
    assert run_tool(kernel, "nostore", user_id="u") == [
        f"{name}: the state store is off: kernel.yaml sets no state.db_path"
        " (set it, e.g. data/state.db, to turn it on)"
        for name in HELPERS
    ]


def config_with(project: Path, yaml_text: str) -> KernelConfig:
    path = project / "config" / "kernel.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    return load_kernel_config(path)


def test_from_config(project: Path, tmp_path: Path) -> None:
    assert from_config(config_with(project, "{}\n")) is None
    assert from_config(config_with(project, "logging:\n  messages_db_path: data/m.db\n")) is None
    store = from_config(
        config_with(project, STATE_YAML + "state: {max_value_bytes: 10, max_result_bytes: 20}\n")
    )
    assert store is not None
    assert (store.path, store.max_value_bytes, store.max_result_bytes) == (project / "data/state.db", 10, 20)
    assert not store.path.exists()  # opened on first use only
    store.set(Namespace("global", ""), "k", 1)
    assert store.path.is_file()
    store.close()
    absolute = from_config(config_with(project, f"logging:\n  state_db_path: {tmp_path / 'abs.db'}\n"))
    assert absolute is not None and absolute.path == tmp_path / "abs.db"


@pytest.mark.parametrize(
    "where", ["state:\n  db_path: data/s.db\n", "logging:\n  state_db_path: data/s.db\n"]
)
def test_s11_3_the_store_path_in_either_place(project: Path, where: str) -> None:
    """`state.db_path` is the natural place; the manual's `logging.state_db_path` still works."""
    store = from_config(config_with(project, where))
    assert store is not None and store.path == project / "data" / "s.db"
    assert not (project / "data").exists()  # nothing is made before the first operation
    store.close()


def test_the_store_path_in_both_places_is_an_error_naming_both(project: Path) -> None:
    path = project / "config" / "kernel.yaml"
    with pytest.raises(ConfigError) as caught:
        from_config(
            config_with(project, "state:\n  db_path: data/a.db\nlogging:\n  state_db_path: data/b.db\n")
        )
    assert str(caught.value) == (
        f"{path}: state.db_path ('data/a.db') and logging.state_db_path ('data/b.db') "
        "both name the state store's file; keep one of them"
    )


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("logging:\n  state_db_path: 5\n", "logging.state_db_path: 5 is not of type 'string'"),
        ("logging:\n  state_db_path: ''\n", "logging.state_db_path: '' should be non-empty"),
        ("logging:\n  state_db_path: '  '\n", "logging.state_db_path: expected a non-empty string, got '  '"),
        (
            STATE_YAML + "state: {max_value_bytes: 0}\n",
            "state.max_value_bytes: expected an integer >= 1, got 0",
        ),
        (
            STATE_YAML + "state: {max_result_bytes: true}\n",
            "state.max_result_bytes: expected an integer >= 1",
        ),
        (STATE_YAML + "state: {max_value_bytes: 1.5}\n", "state.max_value_bytes: expected an integer >= 1"),
        (
            STATE_YAML + "state: {path: x}\n",
            "state.path: unknown field (known: db_path, max_value_bytes, max_result_bytes, max_user_bytes)",
        ),
        (STATE_YAML + "state: [1]\n", "state: [1] is not of type 'object'"),
        ("state: {max_value_bytes: -1}\n", "state.max_value_bytes: expected an integer >= 1, got -1"),
        ("state: {db_path: 5}\n", "state.db_path: expected a non-empty string, got 5"),
        ("state: {db_path: ' '}\n", "state.db_path: expected a non-empty string, got ' '"),
    ],
)
def test_bad_configuration_names_the_field(project: Path, yaml_text: str, message: str) -> None:
    """The kernel schema or `from_config` refuses it, naming `section.field` (either is fine)."""
    with pytest.raises(ConfigError) as caught:
        from_config(config_with(project, yaml_text))
    assert caught.value.path == str(project / "config" / "kernel.yaml")
    assert caught.value.reason.startswith(message)


def test_both_stores_are_state_stores(store: Store) -> None:
    assert isinstance(store, StateStore)


# -- the store itself: persistence, schema, failures -------------------------------------------


def test_values_persist_across_store_instances(where: str) -> None:
    ns = Namespace("user", "u")
    with open_store(where) as first:
        first.set(ns, "v", {"a": 1})
        first.push(ns, "l", 1)
        first.sadd(ns, "s", "x")
    with open_store(where) as second:
        assert (second.get(ns, "v"), second.range(ns, "l", 0, -1), second.smembers(ns, "s")) == (
            {"a": 1},
            [1],
            ["x"],
        )
        assert second.push(ns, "l", 2) == 2


def test_a_newer_schema_is_refused(where: str) -> None:
    with open_store(where) as store:
        store.keys(Namespace("global", ""))
    if where.startswith("postgresql://"):
        with psycopg.connect(where) as conn:
            conn.execute("UPDATE schema_versions SET version = 99 WHERE store = 'state'")
    else:
        with sqlite3.connect(where) as raw:
            raw.execute("UPDATE state_schema SET version = 99")
    with open_store(where) as store, pytest.raises(StateError, match=r"schema version 99\b.* newer"):
        store.keys(Namespace("global", ""))


def test_the_file_may_be_shared_with_the_message_store(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with SqliteMessageStore(path) as messages, SqliteStateStore(path) as state:
        messages.append("s", "user", "user", "hello")
        state.set(Namespace("session", "s"), "k", 1)
        assert messages.count("s") == 1 and state.get(Namespace("session", "s"), "k") == 1
    with SqliteMessageStore(path) as messages, SqliteStateStore(path) as state:
        assert messages.count("s") == 1 and state.get(Namespace("session", "s"), "k") == 1


def test_a_closed_store_refuses(store: Store) -> None:
    store.close()
    store.close()
    with pytest.raises(StateError, match="closed"):
        store.get(Namespace("global", ""), "k")


def test_a_broken_file_is_a_clear_script_error(project: Path, make_tool: ToolFactory) -> None:
    (project / "data").mkdir()
    (project / "data" / "state.db").write_bytes(b"this is not a database at all" * 100)
    kernel = build_kernel(project)
    make_tool(
        "broken", 'function run() { try { state_get("global", "k"); } catch (e) { return e.message; } }'
    )
    try:
        result = kernel.run_tool("broken", {}, kernel.caller())
        assert result.content == "state_get: the state store is unusable: file is not a database"
    finally:
        close_store(kernel)


# -- concurrency: threads and processes ------------------------------------------------------------

PUSHER_JS = """
function run(args) {
    const lengths = [];
    for (let i = 0; i < args.n; i++) lengths.push(state_push("global", "log", args.who + ":" + i));
    return { content: "ok", data: lengths };
}
"""
PUSHER_RHAI = """
fn run(args) {
    let lengths = [];
    for i in 0..args.n { lengths.push(state_push("global", "log", `${args.who}:${i}`)); }
    #{ content: "ok", data: lengths }
}
"""


def in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run `work(i)` on `count` threads released together; their results in order."""
    barrier = threading.Barrier(count)

    def start(i: int) -> Any:
        barrier.wait(timeout=10)
        return work(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(start, range(count)))


def check_log(items: list[str], writers: int, per_writer: int) -> None:
    """Every push landed once, and each writer's items are in its own order."""
    assert len(items) == writers * per_writer
    for who in range(writers):
        assert [item for item in items if item.startswith(f"{who}:")] == [
            f"{who}:{i}" for i in range(per_writer)
        ]


@pytest.mark.parametrize("ext", ENGINES)
def test_concurrent_pushes_from_threads_lose_nothing(
    skernel: Kernel, make_tool: ToolFactory, ext: str
) -> None:
    make_tool("pusher", source(ext, PUSHER_JS, PUSHER_RHAI), ext=ext)
    results = in_threads(8, lambda who: run_tool(skernel, "pusher", {"n": 200, "who": who}))
    lengths = sorted(length for lengths in results for length in lengths)
    assert lengths == list(range(1, 1601))  # every push saw a length of its own
    store = kernel_parts(skernel).services.get(STATE)
    assert isinstance(store, StateStore)  # either store: the file, or PostgreSQL with store.url
    check_log(store.range(Namespace("global", ""), "log", 0, -1), 8, 200)  # type: ignore[arg-type]


@pytest.mark.parametrize("ext", ENGINES)
def test_concurrent_sadd_reports_added_once(skernel: Kernel, make_tool: ToolFactory, ext: str) -> None:
    js = """
    function run(args) {
        const out = [];
        for (let i = 0; i < 100; i++) out.push(state_sadd("global", "members", { n: i }));
        return { content: "ok", data: out };
    }
    """
    rhai = """
    fn run(args) {
        let out = [];
        for i in 0..100 { out.push(state_sadd("global", "members", #{ n: i })); }
        #{ content: "ok", data: out }
    }
    """
    make_tool("adder", source(ext, js, rhai), ext=ext)
    results = in_threads(8, lambda _: run_tool(skernel, "adder"))
    assert [sum(r[i] for r in results) for i in range(100)] == [1] * 100
    store = kernel_parts(skernel).services.get(STATE)
    assert isinstance(store, StateStore)  # either store: the file, or PostgreSQL with store.url
    assert len(store.smembers(Namespace("global", ""), "members")) == 100


def test_store_threads_without_scripts(store: Store) -> None:
    """Writers of one key, each for a user of its own (quotas apart, so only the key keeps them apart)."""
    ns = Namespace("global", "")

    def writer(who: int) -> Namespace:
        return Namespace("global", "", user=f"user {who}")

    in_threads(8, lambda who: [store.push(writer(who), "log", f"{who}:{i}") for i in range(200)])
    check_log(store.range(ns, "log", 0, -1), 8, 200)  # type: ignore[arg-type]
    added = in_threads(8, lambda who: store.sadd(writer(who), "one", "same"))
    assert added.count(True) == 1
    assert store.smembers(ns, "one") == ["same"]


WORKER = textwrap.dedent(
    """
    import json, sys
    from agentkernel.services.state import Namespace, SqliteStateStore
    from agentkernel.services.state_pg import PostgresStateStore

    where, who = sys.argv[1], sys.argv[2]
    ns = Namespace("global", "", user=who)  # quotas apart: only the key keeps the two apart
    print("ready", flush=True)
    sys.stdin.readline()  # "go": both start together
    opened = PostgresStateStore(where) if where.startswith("postgresql://") else SqliteStateStore(where)
    with opened as store:  # both open the fresh file (or database) at once: WAL switch, schema
        lengths = [store.push(ns, "log", f"{who}:{i}") for i in range(300)]
        added = [i for i in range(200) if store.sadd(ns, "members", i)]
    print(json.dumps({"lengths": lengths, "added": added}), flush=True)
    """
)


def test_two_processes_open_a_fresh_file_push_and_sadd_at_once(where: str) -> None:
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, where, str(who)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for who in range(2)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        reports = [json.loads(worker.communicate(timeout=60)[0]) for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    assert all(worker.returncode == 0 for worker in workers)
    assert sorted(reports[0]["lengths"] + reports[1]["lengths"]) == list(range(1, 601))
    added = reports[0]["added"] + reports[1]["added"]
    assert sorted(added) == list(range(200))  # each member added by exactly one process
    with open_store(where) as store:
        check_log(store.range(Namespace("global", ""), "log", 0, -1), 2, 300)  # type: ignore[arg-type]


QUOTA_WORKER = textwrap.dedent(
    """
    import json, sys
    from agentkernel.services.state import Namespace, SqliteStateStore, StateLimitError
    from agentkernel.services.state_pg import PostgresStateStore

    where, who, quota = sys.argv[1], sys.argv[2], int(sys.argv[3])
    kind = PostgresStateStore if where.startswith("postgresql://") else SqliteStateStore
    own, shared = Namespace("user", "alice", user="alice"), Namespace("global", "", user="alice")
    print("ready", flush=True)
    sys.stdin.readline()  # "go": both start together
    stored = 0
    with kind(where, max_user_bytes=quota) as store:
        for i in range(QUOTA_TRIES):
            try:
                store.push(own, "k" + who, "x" * 40) if i % 2 else store.push(shared, "sh", "x" * 40)
                stored += 1
            except StateLimitError:
                pass
    print(json.dumps(stored), flush=True)
    """
)
QUOTA_TRIES = 150
QUOTA = 5_000
ITEM = 2 + len('"' + "x" * 40 + '"') + ITEM_ROW_BYTES  # a 2-byte key's item of 40 x's


def test_two_processes_writing_for_one_user_at_once_never_pass_the_quota(where: str) -> None:
    """Each write checks the user's total with that total locked (S11 quota, S27.2 across processes)."""
    worker = QUOTA_WORKER.replace("QUOTA_TRIES", str(QUOTA_TRIES))
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", worker, where, str(who), str(QUOTA)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for who in range(2)
    ]
    try:
        for worker_process in workers:
            assert worker_process.stdout is not None and worker_process.stdout.readline().strip() == "ready"
        for worker_process in workers:
            assert worker_process.stdin is not None
            worker_process.stdin.write("go\n")
            worker_process.stdin.flush()
        stored = [json.loads(worker_process.communicate(timeout=120)[0]) for worker_process in workers]
    finally:
        for worker_process in workers:
            worker_process.kill()
            worker_process.wait()
    assert all(worker_process.returncode == 0 for worker_process in workers)
    with open_store(where) as store:
        own, shared = Namespace("user", "alice"), Namespace("global", "")
        lengths = [len(store.range(ns, key, 0, -1)) for ns, key in ((own, "k0"), (own, "k1"), (shared, "sh"))]
    assert sum(lengths) == sum(stored)  # every write reported stored is there, and no other
    total = usage_in(where)["alice"]
    assert total == sum(2 + length * ITEM for length in lengths if length)  # the count is exact
    assert QUOTA - ITEM < total <= QUOTA  # full up to the last item that fits, never past it


# -- bounded waits -----------------------------------------------------------------------------


@pytest.fixture
def locked_file(tmp_path: Path) -> Iterator[Path]:
    """A state file whose write lock another connection holds (a writer in another process)."""
    path = tmp_path / "state.db"
    with SqliteStateStore(path) as store:
        store.keys(Namespace("global", ""))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    yield path
    holder.execute("ROLLBACK")
    holder.close()


def busy_timeout_ms(store: SqliteStateStore) -> int:
    """The busy wait SQLite was last told to use on the store's connection."""
    assert store._conn is not None
    return int(store._conn.execute("PRAGMA busy_timeout").fetchone()[0])


def test_a_locked_file_gives_up_by_the_timeout(locked_file: Path) -> None:
    ns = Namespace("global", "")
    with SqliteStateStore(locked_file) as store:
        with pytest.raises(StateBusyError, match="locked by another writer"):
            store.set(ns, "k", 1, timeout=0.3)
        assert busy_timeout_ms(store) == 300  # SQLite's own wait was the caller's, not the 10 s default
        assert store.get(ns, "k", timeout=0.3) is None  # readers do not wait for the writer


def test_the_thread_lock_wait_is_bounded(tmp_path: Path) -> None:
    busy = pytest.raises(StateBusyError, match=r"stayed busy for 0\.1 s")
    with SqliteStateStore(tmp_path / "state.db") as store, store._lock, busy:  # another thread's call
        store.get(Namespace("global", ""), "k", timeout=0.1)


@pytest.mark.parametrize("held", ["key", "quota"])
def test_a_key_or_a_quota_held_in_the_database_gives_up_by_the_timeout(pg_url: str, held: str) -> None:
    """On PostgreSQL a write waits for its key's advisory lock and its user's usage row, by `lock_timeout`."""
    ns = Namespace("global", "", user="alice")
    with PostgresStateStore(pg_url) as store, psycopg.connect(pg_url) as holder:
        store.set(ns, "other", 1)  # the tables, and alice's usage row
        if held == "key":
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (key_lock(ns, "k"),))
        else:
            holder.execute("SELECT bytes FROM state_usage WHERE payer = 'alice' FOR UPDATE")
        with pytest.raises(StateBusyError, match="locked by another writer"):
            store.set(ns, "k", 1, timeout=0.3)
        assert store.get(ns, "k", timeout=0.3) is None  # readers do not wait for the writer
        store.set(Namespace("global", "", user="bob"), "free" if held == "quota" else "k2", 1, timeout=0.3)
        holder.rollback()
        store.set(ns, "k", 2, timeout=0.3)
        assert store.get(ns, "k") == 2


def test_a_script_is_not_held_past_its_time_limit(
    locked_file: Path, project: Path, make_tool: ToolFactory
) -> None:
    kernel = build_kernel(project, f"logging:\n  state_db_path: {locked_file}\n")
    make_tool(
        "writer",
        'function run() { state_set("global", "k", 1); return "wrote"; }',
        yaml_extra="timeout_secs: 0.5\n",
    )
    try:
        result = kernel.run_tool("writer", {}, kernel.caller())
        assert not result.success, result.content
        assert "state_set: the state store is locked by another writer" in result.content, result.content
        store = kernel_parts(kernel).services.get(STATE)
        assert isinstance(store, SqliteStateStore)
        assert 0 < busy_timeout_ms(store) <= 500  # the script's remaining time, not the 10 s default
    finally:
        close_store(kernel)
