"""The built-in `state_tool` and `duckdb_tool` (issue 15 §1): their YAML `tests:`, scopes, read-only, paging.

Every call goes through the real kernel (QuickJS, Rhai, SQLite, DuckDB) on a
throw-away project that loads the built-ins as every kernel does; a changed
copy is a project tool with `overrides: builtin`. Paging and isolation
between users also go through the real server.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agentkernel import Kernel
from agentkernel.builtins import TOOLS_FOLDER as BUILTIN_TOOLS
from agentkernel.config import load_kernel_config, load_script_spec
from agentkernel.config.scripts import ToolSpec
from agentkernel.config.server import token_hash
from agentkernel.testing.cases import ToolCase, read_cases
from agentkernel.testing.runner import ToolTestRun
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONValue
from tests.conftest import write_kernel_yaml
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import LiveServer, sse_events, write

STORE_TOOLS = ("state_tool", "duckdb_tool")
TOKENS = {token_hash("alice-token"): "alice", token_hash("bob-token"): "bob"}


def project(root: Path, tools: Path | None = None, extra: str = "") -> Path:
    """A project with a state store, the built-ins, and `tools` (a folder of changed copies) if given."""
    folders = ["config/scripts/tools", *([str(tools)] if tools else [])]
    scripts = f"scripts:\n  builtins: true\n  tools: [{', '.join(folders)}]\n"
    return write_kernel_yaml(root, scripts + "state:\n  db_path: data/state.db\n" + extra)


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    with Kernel(load_kernel_config(project(tmp_path))) as built:
        yield built


def run(
    kernel: Kernel, tool: str, args: JSONValue, user: str | None = "alice", session: str | None = "s1"
) -> ToolResult:
    return kernel.run_tool(tool, args, kernel.caller(user_id=user, session_id=session))


def content(result: ToolResult) -> Any:
    """The JSON a successful state_tool call answers."""
    assert result.success, result.content
    return json.loads(result.content)


def copied_tool(root: Path, name: str, **changes: object) -> Path:
    """The built-in copied to `root/tools` as a user would: `overrides: builtin`, `changes` to the YAML."""
    folder = root / "tools"
    folder.mkdir(parents=True, exist_ok=True)
    spec = yaml.safe_load((BUILTIN_TOOLS / f"{name}.yaml").read_text(encoding="utf-8"))
    spec["overrides"] = "builtin"
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    shutil.copy(BUILTIN_TOOLS / spec["script"], folder / spec["script"])
    return folder


# -- the YAML `tests:` blocks (ISSUE15 §3), through the testing kit's runner, as `agentkernel tool test` -----


def _cases() -> list[Any]:
    cases = []
    for name in STORE_TOOLS:
        spec = load_script_spec(BUILTIN_TOOLS / f"{name}.yaml")
        assert isinstance(spec, ToolSpec)
        for number, case in enumerate(read_cases(spec).cases, 1):
            cases.append(pytest.param(case, id=f"{name}-{number}-{case.name}"))
    assert len(cases) >= 20
    return cases


@pytest.mark.parametrize("case", _cases())
def test_the_yaml_tests_pass(tmp_path: Path, case: ToolCase) -> None:
    """Each case alone, in a data folder of its own; the benchmark of `tool test` repeats them in one."""
    with ToolTestRun(load_kernel_config(project(tmp_path))) as runner:
        outcome = runner.case(case)
    assert outcome.passed, outcome


# -- state_tool ------------------------------------------------------------------------------------


def test_state_tool_every_operation(kernel: Kernel) -> None:
    """S11.1 through the tool: values, lists (stop included, negative from the end) and sets."""
    calls: list[tuple[dict[str, Any], Any]] = [
        ({"op": "set", "key": "trip", "value": {"city": "Oslo", "days": 3}}, {"ok": True}),
        ({"op": "get", "key": "trip"}, {"value": {"city": "Oslo", "days": 3}}),
        ({"op": "push", "key": "log", "value": "a"}, {"length": 1}),
        ({"op": "push", "key": "log", "value": {"b": [1]}}, {"length": 2}),
        ({"op": "push", "key": "log", "value": None}, {"length": 3}),
        ({"op": "range", "key": "log"}, {"items": ["a", {"b": [1]}, None]}),
        ({"op": "range", "key": "log", "start": -2, "stop": -2}, {"items": [{"b": [1]}]}),
        ({"op": "sadd", "key": "tags", "value": "x"}, {"added": True}),
        ({"op": "sadd", "key": "tags", "value": "x"}, {"added": False}),
        ({"op": "sadd", "key": "tags", "value": 2}, {"added": True}),
        ({"op": "smembers", "key": "tags"}, {"members": ["x", 2]}),
        ({"op": "srem", "key": "tags", "value": "x"}, {"removed": True}),
        ({"op": "keys"}, {"keys": ["log", "tags", "trip"]}),
        ({"op": "delete", "key": "trip"}, {"deleted": True}),
        ({"op": "get", "key": "trip"}, {"value": None}),
        ({"op": "set", "key": "empty", "value": None}, {"ok": True}),  # null is a value to set
    ]
    for args, answer in calls:
        assert content(run(kernel, "state_tool", args)) == answer, args


def test_state_tool_scopes_keep_users_and_sessions_apart(kernel: Kernel) -> None:
    """S11.2: the ids come from the caller; `session` is the default scope, `user` spans sessions."""
    run(kernel, "state_tool", {"op": "set", "key": "k", "value": "alice's session"})
    run(kernel, "state_tool", {"op": "set", "scope": "user", "key": "k", "value": "alice's"})
    assert content(run(kernel, "state_tool", {"op": "get", "key": "k"}, session="s2")) == {"value": None}
    assert content(run(kernel, "state_tool", {"op": "get", "scope": "user", "key": "k"}, session="s2")) == {
        "value": "alice's"
    }
    for scope in ("session", "user"):  # bob, even in alice's session id, sees none of it
        got = run(kernel, "state_tool", {"op": "get", "scope": scope, "key": "k"}, user="bob")
        assert content(got) == {"value": None}
        assert content(run(kernel, "state_tool", {"op": "keys", "scope": scope}, user="bob")) == {"keys": []}
    no_session = run(kernel, "state_tool", {"op": "get", "key": "k"}, session=None)
    assert not no_session.success
    assert no_session.error == "state_get: scope 'session' has no id for this caller"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            {"op": "pop", "key": "k"},
            "op: 'pop' is not one of ['get', 'set', 'delete', 'keys', 'push', 'range', 'sadd'",
        ),
        ({"op": "get", "scope": "global", "key": "k"}, "scope: 'global' is not one of ['session', 'user']"),
        ({"op": "get"}, "get needs `key`"),
        ({"op": "get", "key": ""}, "key: '' should be non-empty"),
        ({"op": "set", "key": "k"}, "set needs `value`"),
        ({"op": "srem", "key": "k"}, "srem needs `value`"),
        ({"op": "range", "key": "k", "start": 1.5}, "start: 1.5 is not of type 'integer'"),
        (
            {"op": "get", "key": "k", "extra": 1},
            "Additional properties are not allowed ('extra' was unexpected)",
        ),
    ],
)
def test_state_tool_bad_input_is_a_clear_failure(kernel: Kernel, args: dict[str, Any], error: str) -> None:
    result = run(kernel, "state_tool", args)
    assert not result.success and error in (result.error or ""), result.error
    assert content(run(kernel, "state_tool", {"op": "keys"})) == {"keys": []}  # nothing was written


def test_state_tool_checks_op_and_scope_itself(tmp_path: Path) -> None:
    """Without the schema's enums (a user's copy), the script still names the bad value and the good ones."""
    loose = {
        "type": "object",
        "properties": {"op": {"type": "string"}, "scope": {"type": "string"}, "key": {"type": "string"}},
    }
    tools = copied_tool(tmp_path, "state_tool", parameters=loose)
    with Kernel(load_kernel_config(project(tmp_path, tools))) as kernel:
        pop = run(kernel, "state_tool", {"op": "pop", "key": "k"})
        assert pop.error == (
            'unknown operation "pop"; the operations are: '
            "get, set, delete, keys, push, range, sadd, smembers, srem"
        )
        assert (run(kernel, "state_tool", {"op": "toString", "key": "k"}).error or "").startswith("unknown")
        shared = run(kernel, "state_tool", {"op": "get", "scope": "agent", "key": "k"})
        assert shared.error == 'scope "agent" is not open to this tool; use one of: session, user'


def test_state_tool_scopes_come_from_its_yaml(tmp_path: Path) -> None:
    """`scopes:` opens `agent` and `global`; the first one listed is the default."""
    schema = yaml.safe_load((BUILTIN_TOOLS / "state_tool.yaml").read_text(encoding="utf-8"))["parameters"]
    schema["properties"]["scope"]["enum"] = ["user", "agent", "global"]
    tools = copied_tool(tmp_path, "state_tool", scopes=["user", "agent", "global"], parameters=schema)
    with Kernel(load_kernel_config(project(tmp_path, tools))) as kernel:

        def as_agent(user: str, args: dict[str, Any]) -> Any:
            return kernel.run_tool("state_tool", args, kernel.caller(user_id=user, template="helper"))

        assert content(as_agent("alice", {"op": "set", "key": "k", "value": 1})) == {"ok": True}  # user
        assert content(as_agent("alice", {"op": "get", "scope": "user", "key": "k"})) == {"value": 1}
        assert content(as_agent("alice", {"op": "push", "scope": "agent", "key": "seen", "value": "a"})) == {
            "length": 1
        }
        assert content(as_agent("bob", {"op": "push", "scope": "agent", "key": "seen", "value": "b"})) == {
            "length": 2
        }
        assert content(as_agent("bob", {"op": "get", "key": "k"})) == {"value": None}
        session = as_agent("bob", {"op": "get", "scope": "session", "key": "k"})
        assert "scope: 'session' is not one of ['user', 'agent', 'global']" in (session.error or "")


def test_state_tool_refuses_a_bad_scopes_field(tmp_path: Path) -> None:
    tools = copied_tool(tmp_path, "state_tool", scopes=["session", "everyone"])
    with Kernel(load_kernel_config(project(tmp_path, tools))) as kernel:
        result = run(kernel, "state_tool", {"op": "keys"})
    assert not result.success
    assert (
        "state_tool.yaml: scopes must be a non-empty list of session, user, agent, global; "
        'got ["session","everyone"]' in (result.error or "")
    )


# -- duckdb_tool -------------------------------------------------------------------------------------


def table_of(result: ToolResult) -> dict[str, Any]:
    """The result's one block, a table."""
    assert result.success, result.content
    (table,) = result.visual or []
    assert table["type"] == "table"
    return dict(table)


def rows_of(result: ToolResult) -> list[dict[str, Any]]:
    return list(table_of(result)["rows"])


def test_duckdb_tool_summary_table_and_pages(kernel: Kernel) -> None:
    """S6.2/S6.3: a page of rows as a table, the next page's args in `continuation`, a short `content`."""
    sql = "SELECT range AS n, 'r' || range || 'x' AS label FROM range(120)"
    first = run(kernel, "duckdb_tool", {"sql": sql})
    assert first.content == (
        "50 rows shown; the result has more rows:\nn | label\n0 | r0x\n1 | r1x\n2 | r2x\n3 | r3x\n4 | r4x\n"
        "… 45 more rows in the table shown to the user"
    )
    table = table_of(first)
    assert table["columns"] == [{"key": "n", "title": "n"}, {"key": "label", "title": "label"}]
    assert [row["n"] for row in table["rows"]] == list(range(50))
    assert table["continuation"] == {"args": {"sql": sql, "offset": 50}}

    second = run(kernel, "duckdb_tool", table["continuation"]["args"])
    assert [row["n"] for row in rows_of(second)] == list(range(50, 100))
    assert second.content.startswith("rows 51-100 of the result:\nn | label\n50 | r50x\n")
    table2 = table_of(second)
    last = run(kernel, "duckdb_tool", table2["continuation"]["args"])
    assert [row["n"] for row in rows_of(last)] == list(range(100, 120))
    assert "continuation" not in table_of(last)


def test_duckdb_tool_pages_keep_params(kernel: Kernel) -> None:
    first = run(kernel, "duckdb_tool", {"sql": "SELECT range AS n FROM range($1)", "params": [60]})
    table = table_of(first)
    assert table["continuation"] == {
        "args": {"sql": "SELECT range AS n FROM range($1)", "params": [60], "offset": 50}
    }
    assert [row["n"] for row in rows_of(run(kernel, "duckdb_tool", table["continuation"]["args"]))] == list(
        range(50, 60)
    )


def test_duckdb_tool_stops_paging_at_max_rows(tmp_path: Path) -> None:
    with Kernel(load_kernel_config(project(tmp_path, extra="duckdb:\n  max_rows: 70\n"))) as kernel:
        first = run(kernel, "duckdb_tool", {"sql": "SELECT range AS n FROM range(100)"})
        table = table_of(first)
        second = run(kernel, "duckdb_tool", table["continuation"]["args"])
    assert [row["n"] for row in rows_of(second)] == list(range(50, 70))
    assert "continuation" not in table_of(second)
    assert second.content.endswith(
        "the table stops here (duckdb.max_rows): narrow the query with WHERE or LIMIT/OFFSET"
    )


def test_duckdb_tool_cells_in_the_summary(kernel: Kernel) -> None:
    sql = "SELECT NULL AS nothing, [1, 2] AS list, {'a': 1} AS struct, repeat('x', 100) AS long"
    result = run(kernel, "duckdb_tool", {"sql": sql})
    assert (
        result.content == f'1 row:\nnothing | list | struct | long\nNULL | [1, 2] | {{"a":1}} | {"x" * 59}…'
    )
    assert rows_of(result) == [{"nothing": None, "list": [1, 2], "struct": {"a": 1}, "long": "x" * 100}]


def test_duckdb_tool_users_have_databases_of_their_own(kernel: Kernel) -> None:
    """S12.4: `{user}/main.duckdb` is alice's alone; bob, even in her session id, sees an empty one."""
    made = run(
        kernel,
        "duckdb_tool",
        {"sql": "CREATE TABLE notes (t VARCHAR); INSERT INTO notes VALUES ('alice only')"},
    )
    assert made.success and made.content == "1 row:\nCount\n1", made.content
    assert rows_of(run(kernel, "duckdb_tool", {"sql": "FROM notes"})) == [{"t": "alice only"}]
    assert rows_of(run(kernel, "duckdb_tool", {"sql": "SHOW TABLES"}, user="bob")) == []
    theirs = run(kernel, "duckdb_tool", {"sql": "FROM notes"}, user="bob")
    assert not theirs.success and "Table with name notes does not exist" in (theirs.error or "")
    nobody = run(kernel, "duckdb_tool", {"sql": "SELECT 1"}, user=None)
    assert nobody.error == "db_query: path '{user}/main.duckdb' uses {user} but this call has no user"


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled by configuration"),
        (
            "SELECT * FROM read_text('{data}/state.db')",
            "file system operations are disabled by configuration",
        ),
        ("SELECT * FROM glob('/*')", "file system operations are disabled by configuration"),
        ("COPY (SELECT 42) TO '{out}'", 'COPY statements are not allowed: "COPY (SELECT 42) TO'),
        ("EXPORT DATABASE '{dir}'", "EXPORT statements are not allowed"),
        ("ATTACH '{other}' AS other", "ATTACH statements are not allowed"),
        ("INSTALL httpfs", "statements are not allowed"),
        ("LOAD httpfs", "statements are not allowed"),
        ("SET enable_external_access = true", "the configuration has been locked"),
        ("CREATE TABLE x AS SELECT * FROM '{data}/state.db'", "file system operations are disabled"),
    ],
)
def test_duckdb_tool_sql_cannot_touch_files(tmp_path: Path, sql: str, error: str) -> None:
    """S12.4 through the tool: no file outside the database is read, written or attached."""
    out = tmp_path / "outside"
    with Kernel(load_kernel_config(project(tmp_path))) as kernel:
        run(kernel, "state_tool", {"op": "set", "key": "k", "value": "v"})  # a real file to aim at
        filled = sql.format(data=tmp_path / "data", out=out / "x.csv", dir=out, other=out / "o.duckdb")
        result = run(kernel, "duckdb_tool", {"sql": filled})
    assert not result.success and error in (result.error or ""), result.error
    assert not out.exists()


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("read_only", "yes", "duckdb_tool.yaml: read_only must be true or false, got yes"),
        ("page_rows", 0, "duckdb_tool.yaml: page_rows must be a whole number of at least 1, got 0"),
        ("summary_rows", 2.5, "duckdb_tool.yaml: summary_rows must be a whole number of at least 1, got 2.5"),
        ("database", 7, 'duckdb_tool.yaml: database must be a path such as "{user}/main.duckdb", got 7'),
        ("database", "../x.duckdb", "db_query: '../x.duckdb': may not contain '..'"),
    ],
)
def test_duckdb_tool_names_a_bad_field_of_its_yaml(
    tmp_path: Path, field: str, value: object, error: str
) -> None:
    tools = copied_tool(tmp_path, "duckdb_tool", **{field: value})
    with Kernel(load_kernel_config(project(tmp_path, tools))) as kernel:
        result = run(kernel, "duckdb_tool", {"sql": "SELECT 1"})
    assert not result.success and error in (result.error or ""), result.error


def test_duckdb_tool_small_settings(tmp_path: Path) -> None:
    tools = copied_tool(tmp_path, "duckdb_tool", page_rows=3, summary_rows=1, database="{session}/s.duckdb")
    with Kernel(load_kernel_config(project(tmp_path, tools))) as kernel:
        first = run(kernel, "duckdb_tool", {"sql": "FROM range(5)"})
        assert first.content == (
            "3 rows shown; the result has more rows:\nrange\n0\n… 2 more rows in the table shown to the user"
        )
        assert table_of(first)["continuation"] == {"args": {"sql": "FROM range(5)", "offset": 3}}
        made = run(kernel, "duckdb_tool", {"sql": "CREATE TABLE here (x INTEGER)"})
        assert made.success, made.content
        assert (
            rows_of(run(kernel, "duckdb_tool", {"sql": "SHOW TABLES"}, session="s2")) == []
        )  # a file per session


def read_only_kernel(root: Path) -> Kernel:
    """The built-in with `read_only: true`, on a database alice already has (made by the writable one)."""
    with Kernel(load_kernel_config(project(root / "rw"))) as writable:
        made = run(
            writable,
            "duckdb_tool",
            {"sql": "CREATE TABLE t AS SELECT range AS i FROM range(3); CREATE SEQUENCE s"},
        )
        assert made.success, made.content
    shutil.copytree(root / "rw" / "data", root / "ro" / "data")
    tools = copied_tool(root, "duckdb_tool", read_only=True)
    return Kernel(load_kernel_config(project(root / "ro", tools)))


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("INSERT INTO t VALUES (9)", "read-only: INSERT statements are not allowed"),
        ("UPDATE t SET i = 0", "read-only: UPDATE statements are not allowed"),
        ("DELETE FROM t", "read-only: DELETE statements are not allowed"),
        ("DROP TABLE t", "read-only: DROP statements are not allowed"),
        ("CREATE TABLE u (x INTEGER)", "read-only: CREATE statements are not allowed"),
        ("SELECT 1; INSERT INTO t VALUES (9)", "read-only: INSERT statements are not allowed"),
        ("BEGIN; INSERT INTO t VALUES (9); COMMIT", "read-only: TRANSACTION statements are not allowed"),
        ("CHECKPOINT", "read-only: CALL statements are not allowed"),
        ("SELECT nextval('s')", "read-only: the SQL tried to write"),
        ("EXPLAIN ANALYZE INSERT INTO t VALUES (9)", "read-only: the SQL tried to write"),
        ("EXPLAIN ANALYZE DELETE FROM t", "read-only: the SQL tried to write"),
    ],
)
def test_duckdb_tool_read_only_refuses_writes(tmp_path: Path, sql: str, error: str) -> None:
    with read_only_kernel(tmp_path) as kernel:
        result = run(kernel, "duckdb_tool", {"sql": sql})
    assert not result.success and error in (result.error or ""), result.error
    with Kernel(load_kernel_config(project(tmp_path / "ro"))) as writable:
        after = run(
            writable, "duckdb_tool", {"sql": "SELECT count(*) AS n, max(i) AS top, nextval('s') AS s FROM t"}
        )
    assert rows_of(after) == [{"n": 3, "top": 2, "s": 1}]  # nothing changed, not even the sequence


def test_duckdb_tool_read_only_reads(tmp_path: Path) -> None:
    with read_only_kernel(tmp_path) as kernel:
        assert rows_of(
            run(kernel, "duckdb_tool", {"sql": "SELECT i FROM t WHERE i > $1 ORDER BY i", "params": [0]})
        ) == [
            {"i": 1},
            {"i": 2},
        ]
        assert rows_of(run(kernel, "duckdb_tool", {"sql": "SHOW TABLES"})) == [{"name": "t"}]
        assert run(kernel, "duckdb_tool", {"sql": "DESCRIBE t"}).success
        missing = run(kernel, "duckdb_tool", {"sql": "SELECT 1"}, user="bob")
    assert missing.error == "the database {user}/main.duckdb does not exist yet: there is nothing to read"


# -- through the real server: a chat turn, its table's pages, another user's ids ------------------------


def server_project(root: Path, llm: FakeLLMServer) -> Path:
    extra = (
        f"llm:\n  base_url: {llm.base_url}\n  model: fake\n  max_retries: 0\n"
        "server:\n  tokens:\n" + "".join(f'    "{h}": {user}\n' for h, user in TOKENS.items())
    )
    kernel_yaml = project(root, extra=extra)
    write(
        root / "config" / "templates" / "analyst.yaml",
        "name: analyst\ninstructions: Answer with SQL.\ntools: [duckdb_tool, state_tool]\n",
    )
    return kernel_yaml


def client(live: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=live.url, timeout=60, headers={"Authorization": f"Bearer {token}"})


def test_a_chat_turn_pages_through_the_server(tmp_path: Path) -> None:
    sql = "SELECT range AS n, 'r' || range || 'x' AS label FROM range(120)"
    with FakeLLMServer() as llm:
        llm.add(
            Reply(tool_calls=(FakeToolCall("duckdb_tool", json.dumps({"sql": sql}), id="c1"),)),
            Reply(text="120 numbers"),
        )
        with (
            LiveServer(Kernel(load_kernel_config(server_project(tmp_path, llm)))) as live,
            client(live, "alice-token") as alice,
            client(live, "bob-token") as bob,
        ):
            session = alice.post("/v1/sessions", json={"template": "analyst"}).json()["id"]
            stream = alice.post(f"/v1/sessions/{session}/messages", json={"content": "numbers please"})
            result = dict(sse_events(stream.text))["tool_result"]
            (table,) = result["visual"]
            assert [row["label"] for row in table["rows"]] == [f"r{i}x" for i in range(50)]
            assert set(table["continuation"]) == {"id"}  # the SQL stays on the server

            page = alice.post("/v1/continuations", json={"id": table["continuation"]["id"]})
            assert page.status_code == 200, page.text
            (table2,) = page.json()["visual"]
            assert [row["n"] for row in table2["rows"]] == list(range(50, 100))
            assert set(table2["continuation"]) == {"id"}
            (table3,) = alice.post("/v1/continuations", json={"id": table2["continuation"]["id"]}).json()[
                "visual"
            ]
            assert [row["n"] for row in table3["rows"]] == list(
                range(100, 120)
            ) and "continuation" not in table3

            assert bob.post("/v1/continuations", json={"id": table2["continuation"]["id"]}).status_code == 404
        sent = json.dumps(llm.bodies)
    assert "50 rows shown; the result has more rows" in sent and "r4x" in sent  # the summary reached the LLM
    assert "r5x" not in sent and "r49x" not in sent  # the table did not (S6.1)


def tool(who: httpx.Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """`POST /v1/tools/NAME/run` as the client's user: the result as JSON."""
    answer = who.post(f"/v1/tools/{name}/run", json={"args": args})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_tool_runs_keep_users_apart_through_the_server(tmp_path: Path) -> None:
    with (
        FakeLLMServer() as llm,
        LiveServer(Kernel(load_kernel_config(server_project(tmp_path, llm)))) as live,
        client(live, "alice-token") as alice,
        client(live, "bob-token") as bob,
    ):
        made = tool(alice, "duckdb_tool", {"sql": "CREATE TABLE secrets AS SELECT 'alice-secret' AS s"})
        assert made["success"], made
        (table,) = tool(alice, "duckdb_tool", {"sql": "FROM secrets"})["visual"]
        assert table["rows"] == [{"s": "alice-secret"}]
        assert tool(bob, "duckdb_tool", {"sql": "SHOW TABLES"})["visual"][0]["rows"] == []
        assert "does not exist" in tool(bob, "duckdb_tool", {"sql": "FROM secrets"})["error"]

        pin = {"scope": "user", "key": "pin"}
        assert tool(alice, "state_tool", {"op": "set", "value": 1234, **pin})["success"]
        assert tool(alice, "state_tool", {"op": "get", **pin})["content"] == '{"value": 1234}'
        assert tool(bob, "state_tool", {"op": "get", **pin})["content"] == '{"value": null}'
