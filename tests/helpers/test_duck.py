"""The DuckDB helpers (S12) from JS and Rhai through the real dispatch path, and the service underneath.

Real DuckDB files in tmp_path; every helper runs from both engines as a
script tool. The attacks a script can try (SQL that reaches files,
extensions, settings and other databases; paths and ids that climb out;
another user's file) are tested too, as are writers racing from threads,
readers beside a writer, and queries that run too long.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.bundle import Services
from agentkernel.config import CallBudget, KernelConfig, ScriptLimits, load_kernel_config
from agentkernel.config.sections import parse_duck_settings
from agentkernel.errors import ConfigError, HelperError
from agentkernel.helpers import default_helper_table
from agentkernel.helpers.table import ScriptCall
from agentkernel.identity import Caller, safe_folder_name, session_folder_name
from agentkernel.ports import DUCKDB
from agentkernel.services.duck import DuckError, DuckService, DuckSettings, without_root
from agentkernel.services.duck_values import plain, unique_names
from agentkernel.testing.parts import kernel_parts
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory

ENGINES = [".js", ".rhai"]
HELPERS = ("db_execute", "db_query", "db_schema")

KernelFactory = Callable[..., Kernel]


def kernel_for(config: KernelConfig, *, attach: bool = True) -> Kernel:
    """A kernel with the DuckDB helpers registered and (unless `attach` is false) the service."""
    table = default_helper_table()
    duck = DuckService.from_config(config) if attach else None  # None detaches one the kernel may attach
    return Kernel(config, helpers=table, extra_services={"duckdb": duck})


def close_service(kernel: Kernel) -> None:
    service = kernel_parts(kernel).services.get(DUCKDB)
    if isinstance(service, DuckService):
        service.close()


@pytest.fixture
def make_kernel(project: Path) -> Iterator[KernelFactory]:
    """Build a kernel on the project's kernel.yaml plus `extra` YAML; services closed at the end."""
    kernels: list[Kernel] = []

    def make(extra: str = "", *, attach: bool = True) -> Kernel:
        path = project / "config" / "kernel.yaml"
        if extra:
            path.write_text(path.read_text(encoding="utf-8") + extra, encoding="utf-8")
        kernels.append(kernel_for(load_kernel_config(path), attach=attach))
        return kernels[-1]

    yield make
    for kernel in kernels:
        close_service(kernel)


@pytest.fixture
def dk(make_kernel: KernelFactory) -> Kernel:
    return make_kernel()


def service(kernel: Kernel) -> DuckService:
    found = kernel_parts(kernel).services.get(DUCKDB)
    assert isinstance(found, DuckService)
    return found


def call(
    kernel: Kernel,
    name: str,
    args: JSONValue = None,
    *,
    user_id: str | None = None,
    session_id: str | None = None,
    template: str | None = None,
) -> ToolResult:
    caller = kernel.caller(user_id=user_id, session_id=session_id, template=template)
    return kernel.run_tool(name, {} if args is None else args, caller)


def data_tool(make_tool: ToolFactory, name: str, ext: str, expression: str, yaml_extra: str = "") -> None:
    """A tool returning one helper expression's value as `data` (the same code in JS and Rhai)."""
    if ext == ".js":
        source = f"function run(args) {{ return {{content: 'ok', data: {expression}}}; }}"
    else:
        source = f'fn run(args) {{ #{{ content: "ok", data: {expression} }} }}'
    make_tool(name, source, ext=ext, yaml_extra=yaml_extra)


def data(kernel: Kernel, name: str, args: JSONValue = None, /, **who: str | None) -> Any:
    """The tool's `data`, the call having succeeded; `who`: the caller's user_id, session_id, template."""
    result = call(kernel, name, args, **who)
    assert result.success, result.content
    return result.data


def error_of(kernel: Kernel, name: str, args: JSONValue = None, /, **who: str | None) -> str:
    result = call(kernel, name, args, **who)
    assert not result.success, result.content
    return result.content


def setup_db(kernel: Kernel, relative: str, sql: str) -> None:
    service(kernel).execute(relative, sql)


# -- the three helpers from both engines --------------------------------------------------------


@pytest.mark.parametrize("ext", ENGINES)
def test_s12_1_execute_query_schema(dk: Kernel, make_tool: ToolFactory, ext: str) -> None:
    create = (
        "CREATE TABLE t (id INTEGER NOT NULL, name VARCHAR); INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, '')"
    )
    data_tool(make_tool, "w", ext, f'db_execute("s.duckdb", "{create}")')
    data_tool(make_tool, "q", ext, 'db_query("s.duckdb", "SELECT * FROM t ORDER BY id", 2)')
    data_tool(make_tool, "d", ext, 'db_schema("s.duckdb")')
    assert data(dk, "w") == {"ok": True, "rows_affected": 3}
    assert data(dk, "q") == {
        "columns": ["id", "name"],
        "rows": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
        "count": 2,
        "has_more": True,
    }
    assert data(dk, "d") == "table t\n  id INTEGER NOT NULL\n  name VARCHAR"


@pytest.mark.parametrize("ext", ENGINES)
def test_sql_errors_are_catchable_and_name_the_helper(dk: Kernel, make_tool: ToolFactory, ext: str) -> None:
    setup_db(dk, "e.duckdb", "CREATE TABLE t (x INTEGER)")
    if ext == ".js":
        source = """function run() {
            try { db_query("e.duckdb", "SELECT * FROM nope"); } catch (e) { return "caught: " + e.message; }
        }"""
    else:
        source = """fn run(args) {
            try { db_query("e.duckdb", "SELECT * FROM nope"); } catch (e) { return "caught: " + e; }
        }"""
    make_tool("err", source, ext=ext)
    content = call(dk, "err").content
    assert content.startswith(
        "caught: db_query: 'e.duckdb': Catalog Error: Table with name nope does not exist!"
    )


@pytest.mark.parametrize("ext", ENGINES)
def test_without_the_service_the_calls_throw(
    make_kernel: KernelFactory, make_tool: ToolFactory, ext: str
) -> None:
    kernel = make_kernel(attach=False)
    for helper in HELPERS:
        data_tool(make_tool, helper, ext, f'{helper}("x.duckdb", "SELECT 1")')
        assert f"{helper}: no duckdb service attached" in error_of(kernel, helper)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ('db_query(42, "SELECT 1")', "db_query: path must be a non-empty string, got 42"),
        ('db_query("", "SELECT 1")', "db_query: path must be a non-empty string, got ''"),
        ('db_query("a.duckdb", "  ")', "db_query: sql must be a non-empty string, got '  '"),
        ('db_execute("a.duckdb", 7)', "db_execute: sql must be a non-empty string, got 7"),
        ('db_query("a.duckdb", "SELECT 1", -1)', "db_query: limit must be a whole number ≥ 0, got -1"),
        ('db_query("a.duckdb", "SELECT 1", 1.5)', "db_query: limit must be a whole number ≥ 0, got 1.5"),
        ('db_query("a.duckdb", "SELECT 1", "10")', "db_query: limit must be a whole number ≥ 0, got '10'"),
        ('db_query("a.duckdb", "SELECT 1", true)', "db_query: limit must be a whole number ≥ 0, got True"),
        (
            'db_execute("a.duckdb", "SELECT 1", "x")',
            "db_execute: params must be an array or an object, got 'x'",
        ),
        ('db_schema("a.duckdb", 5)', "db_schema: table must be a non-empty string, got 5"),
        ('db_query("a.duckdb")', "db_query: expected at least 2 argument(s), got 1"),
    ],
)
@pytest.mark.parametrize("ext", ENGINES)
def test_bad_arguments_are_named(
    dk: Kernel, make_tool: ToolFactory, ext: str, expression: str, message: str
) -> None:
    data_tool(make_tool, "bad", ext, expression)
    assert message in error_of(dk, "bad")


# -- S12.3 values -----------------------------------------------------------------------------------

TYPES_SQL = """SELECT
    TIMESTAMP '2024-01-02 03:04:05.5' AS ts, TIMESTAMP '2024-01-02 03:04:05' AS ts0,
    '2024-01-02 03:04:05.123456789'::TIMESTAMP_NS AS ts_ns,
    DATE '2024-01-02' AS d, TIME '03:04:05' AS t, TIMETZ '03:04:05+02' AS ttz,
    TIMESTAMPTZ '2024-01-02 03:04:05+02' AS tz,
    INTERVAL '3 days 4 hours 5.5 seconds' AS iv, INTERVAL '1 month' AS iv_month,
    -INTERVAL '90 minutes' AS iv_neg, INTERVAL '0 seconds' AS iv_zero,
    1.25::DECIMAL(10,2) AS dec, 12345678901234567.89::DECIMAL(38,2) AS dec_big,
    0.1::DECIMAL(18,17) AS dec_tenth,
    '\\xAA\\xBB\\x00'::BLOB AS blob, 'f198f17e-cc3e-4038-927f-22a2613d492f'::UUID AS u,
    [1, 2, NULL] AS l, [[1], []] AS ll, [1.5, 2.5]::DOUBLE[2] AS arr,
    {'a': 1, 'b': [DATE '2024-01-02'], 'c': {'d': NULL}} AS s,
    MAP {'k': 1, 'j': 2} AS m, MAP {1: 'x', 2: 'y'} AS m_int, MAP {DATE '2024-01-02': 1} AS m_date,
    170141183460469231731687303715884105727::HUGEINT AS huge, 42::HUGEINT AS huge_small,
    18446744073709551615::UBIGINT AS ubig, '-9223372036854775808'::BIGINT AS big_min,
    'nan'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, '-inf'::FLOAT AS ninf, 1.5::FLOAT AS f32, 2.25::DOUBLE AS f64,
    'a'::ENUM('a', 'b') AS en, '{"x": [1, null, "y"]}'::JSON AS js, '0101'::BIT AS bits,
    'infinity'::TIMESTAMP AS ts_inf, '-infinity'::DATE AS d_ninf, DATE '-1000-01-01' AS d_bc,
    TIMESTAMP '12000-01-01 00:00:00' AS ts_far, union_value(k := 'v') AS un, true AS yes, NULL AS nothing,
    'текст' AS txt, 255::UTINYINT AS small, NULL::TIMESTAMP AS ts_null, NULL::DECIMAL(5,2) AS dec_null,
    NULL::DOUBLE AS f_null, NULL::JSON AS js_null
"""

TYPES_EXPECTED: dict[str, Any] = {
    "ts": "2024-01-02T03:04:05.500000",
    "ts0": "2024-01-02T03:04:05",
    "ts_ns": "2024-01-02T03:04:05.123456",
    "d": "2024-01-02",
    "t": "03:04:05",
    "ttz": "03:04:05+02:00",
    "tz": "2024-01-02T01:04:05+00:00",
    "iv": "P3DT4H5.5S",
    "iv_month": "P30D",
    "iv_neg": "-PT1H30M",
    "iv_zero": "PT0S",
    "dec": 1.25,
    "dec_big": "12345678901234567.89",
    "dec_tenth": 0.1,
    "blob": "qrsA",
    "u": "f198f17e-cc3e-4038-927f-22a2613d492f",
    "l": [1, 2, None],
    "ll": [[1], []],
    "arr": [1.5, 2.5],
    "s": {"a": 1, "b": ["2024-01-02"], "c": {"d": None}},
    "m": {"k": 1, "j": 2},
    "m_int": {"1": "x", "2": "y"},
    "m_date": {"2024-01-02": 1},
    "huge": "170141183460469231731687303715884105727",
    "huge_small": 42,
    "ubig": "18446744073709551615",
    "big_min": -9223372036854775808,
    "nan": "NaN",
    "inf": "Infinity",
    "ninf": "-Infinity",
    "f32": 1.5,
    "f64": 2.25,
    "en": "a",
    "js": {"x": [1, None, "y"]},
    "bits": "0101",
    "ts_inf": "9999-12-31T23:59:59.999999",
    "d_ninf": "0001-01-01",
    "d_bc": "1001-01-01 (BC)",
    "ts_far": "12000-01-01 00:00:00",
    "un": "v",
    "yes": True,
    "nothing": None,
    "txt": "текст",
    "small": 255,
    "ts_null": None,
    "dec_null": None,
    "f_null": None,
    "js_null": None,
}


def test_s12_3_every_type_converts_from_js(dk: Kernel, make_tool: ToolFactory) -> None:
    setup_db(dk, "types.duckdb", "CREATE TABLE IF NOT EXISTS x (y INTEGER)")
    make_tool(
        "types",
        "function run(args) { const r = db_query('types.duckdb', args.sql); "
        "return {content: JSON.stringify(r.rows[0]), data: r}; }",
    )
    result = call(dk, "types", {"sql": TYPES_SQL})
    assert result.success, result.content
    assert isinstance(result.data, dict)
    assert result.data["columns"] == list(TYPES_EXPECTED)
    in_js = {**TYPES_EXPECTED, "big_min": -9223372036854776000}  # a JS number: 2**63 is not exact
    assert result.data["rows"] == [in_js]
    assert json.loads(result.content) == in_js  # what JS itself saw


def test_s12_3_every_type_converts_from_rhai(dk: Kernel, make_tool: ToolFactory) -> None:
    setup_db(dk, "types.duckdb", "CREATE TABLE IF NOT EXISTS x (y INTEGER)")
    make_tool(
        "types",
        """fn run(args) {
            let row = db_query("types.duckdb", args.sql).rows[0];
            let text = `${row.ts} ${row.dec + 1.0} ${row.l.len()} ${row.s.b[0]} ${type_of(row.huge)}`;
            #{ content: text, data: row }
        }""",
        ext=".rhai",
    )
    result = call(dk, "types", {"sql": TYPES_SQL})
    assert result.success, result.content
    assert result.content == "2024-01-02T03:04:05.500000 2.25 3 2024-01-02 string"
    assert result.data == TYPES_EXPECTED


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        ((1 << 63) - 1, (1 << 63) - 1),
        (1 << 63, str(1 << 63)),
        (-(1 << 63) - 1, str(-(1 << 63) - 1)),
        (math.nan, "NaN"),
        (-math.inf, "-Infinity"),
        (Decimal("0.30"), 0.3),
        (Decimal("1234567890.123456789"), "1234567890.123456789"),
        (Decimal("NaN"), "NaN"),
        (
            dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=5))),
            "2024-01-01T22:04:05+00:00",
        ),
        (dt.timedelta(days=-1, seconds=86399), "-PT1S"),
        (dt.timedelta(days=2, microseconds=1), "P2DT0.000001S"),
        (dt.timedelta(hours=25), "P1DT1H"),
        (memoryview(b"hi"), "aGk="),
        (bytearray(b"\xff"), "/w=="),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        ((1, (2, [3])), [1, [2, [3]]]),
        ({True: 1, None: 2, 1.5: math.inf}, {"true": 1, "null": 2, "1.5": "Infinity"}),
        (object, str(object)),
    ],
)
def test_plain_values(value: object, expected: object) -> None:
    assert plain(value) == expected
    json.dumps(plain(value), allow_nan=False)


def test_duplicate_column_names_get_suffixes(dk: Kernel) -> None:
    setup_db(dk, "dup.duckdb", "CREATE TABLE a (id INTEGER); INSERT INTO a VALUES (1)")
    result = service(dk).query("dup.duckdb", "SELECT id, id + 1 AS id, 3 AS id_1 FROM a", 10)
    assert result["columns"] == ["id", "id_1", "id_1_1"]
    assert result["rows"] == [{"id": 1, "id_1": 2, "id_1_1": 3}]
    assert unique_names(["a", "a", "a"]) == ["a", "a_1", "a_2"]


# -- limit, has_more and the result cap -------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "count", "has_more"),
    [("0", 0, True), ("2", 2, True), ("3", 3, False), ("1000", 3, False), ("null", 3, False)],
)
@pytest.mark.parametrize("ext", ENGINES)
def test_limit_and_has_more(
    dk: Kernel, make_tool: ToolFactory, ext: str, limit: str, count: int, has_more: bool
) -> None:
    setup_db(dk, "l.duckdb", "CREATE TABLE t AS SELECT range AS i FROM range(3)")
    limit = "()" if limit == "null" and ext == ".rhai" else limit
    data_tool(make_tool, "lim", ext, f'db_query("l.duckdb", "SELECT i FROM t ORDER BY i", {limit})')
    result = data(dk, "lim")
    assert (result["count"], len(result["rows"]), result["has_more"]) == (count, count, has_more)
    assert [row["i"] for row in result["rows"]] == list(range(count))


def test_an_empty_result_has_columns(dk: Kernel) -> None:
    setup_db(dk, "e.duckdb", "CREATE TABLE t (a INTEGER, b VARCHAR)")
    assert service(dk).query("e.duckdb", "SELECT * FROM t", 5) == {
        "columns": ["a", "b"],
        "rows": [],
        "count": 0,
        "has_more": False,
    }


@pytest.mark.parametrize("ext", ENGINES)
def test_limit_is_capped_by_max_rows(make_kernel: KernelFactory, make_tool: ToolFactory, ext: str) -> None:
    kernel = make_kernel("duckdb:\n  max_rows: 5\n")
    setup_db(kernel, "c.duckdb", "CREATE TABLE t AS SELECT range AS i FROM range(50)")
    data_tool(make_tool, "big", ext, 'db_query("c.duckdb", "SELECT i FROM t ORDER BY i", 40)')
    data_tool(make_tool, "dflt", ext, 'db_query("c.duckdb", "SELECT i FROM t ORDER BY i")')
    for name in ("big", "dflt"):
        result = data(kernel, name)
        assert (result["count"], result["has_more"]) == (5, True)


def test_rhai_whole_float_limit_is_accepted(dk: Kernel, make_tool: ToolFactory) -> None:
    setup_db(dk, "f.duckdb", "CREATE TABLE t AS SELECT range AS i FROM range(5)")
    data_tool(make_tool, "fl", ".rhai", 'db_query("f.duckdb", "SELECT i FROM t", 2.0)')
    assert data(dk, "fl")["count"] == 2


def test_rows_beyond_max_result_bytes_are_left_out(
    make_kernel: KernelFactory, make_tool: ToolFactory
) -> None:
    kernel = make_kernel("duckdb:\n  max_result_bytes: 100\n")
    setup_db(kernel, "b.duckdb", "CREATE TABLE t AS SELECT range AS i, repeat('x', 20) AS s FROM range(10)")
    data_tool(make_tool, "cut", ".js", 'db_query("b.duckdb", "SELECT * FROM t ORDER BY i", 10)')
    result = data(kernel, "cut")
    assert result["has_more"] and 0 < result["count"] < 10
    assert len(json.dumps(result["rows"], separators=(",", ":"))) <= 100
    data_tool(make_tool, "huge", ".rhai", 'db_query("b.duckdb", "SELECT repeat(\'y\', 500) AS s")')
    assert "db_query: 'b.duckdb': row 1 alone is larger than duckdb.max_result_bytes (100 bytes)" in error_of(
        kernel, "huge"
    )


# -- db_execute ----------------------------------------------------------------------------------


def test_rows_affected(dk: Kernel) -> None:
    run = service(dk).execute
    assert run("r.duckdb", "CREATE TABLE t (i INTEGER, s VARCHAR)") == 0
    assert (
        run("r.duckdb", "INSERT INTO t SELECT range, 'a' FROM range(5); INSERT INTO t VALUES (9, 'b')") == 6
    )
    assert run("r.duckdb", "UPDATE t SET s = 'c' WHERE i < 3") == 3
    assert run("r.duckdb", "DELETE FROM t WHERE i = 9") == 1
    assert run("r.duckdb", "INSERT INTO t VALUES (7, 'r'), (8, 'r') RETURNING i") == 2
    assert run("r.duckdb", "CREATE TABLE u AS SELECT * FROM t; SELECT 1") == 0
    merge = (
        "MERGE INTO t USING (SELECT $1 AS i) s ON t.i = s.i WHEN NOT MATCHED THEN INSERT VALUES (s.i, 'm')"
    )
    assert run("r.duckdb", merge, [100]) == 1
    assert run("r.duckdb", merge, [100]) == 0


@pytest.mark.parametrize("ext", ENGINES)
def test_a_failed_or_open_transaction_is_rolled_back(dk: Kernel, make_tool: ToolFactory, ext: str) -> None:
    setup_db(dk, "tx.duckdb", "CREATE TABLE t (i INTEGER PRIMARY KEY); INSERT INTO t VALUES (1)")
    data_tool(
        make_tool,
        "fail",
        ext,
        'db_execute("tx.duckdb", "BEGIN; INSERT INTO t VALUES (2); INSERT INTO t VALUES (1); COMMIT")',
    )
    data_tool(make_tool, "open", ext, 'db_execute("tx.duckdb", "BEGIN; INSERT INTO t VALUES (3)")')
    data_tool(make_tool, "count", ext, 'db_query("tx.duckdb", "SELECT count(*) AS n FROM t").rows[0].n')
    assert "Constraint Error" in error_of(dk, "fail")
    assert data(dk, "open") == {"ok": True, "rows_affected": 1}
    assert data(dk, "count") == 1


@pytest.mark.parametrize("ext", ENGINES)
def test_params_fill_placeholders(dk: Kernel, make_tool: ToolFactory, ext: str) -> None:
    setup_db(dk, "p.duckdb", "CREATE TABLE t (i INTEGER, s VARCHAR)")
    named = (
        '#{ i: 2, s: "x\'); DROP TABLE t; --" }' if ext == ".rhai" else '{i: 2, s: "x\'); DROP TABLE t; --"}'
    )
    data_tool(make_tool, "pos", ext, 'db_execute("p.duckdb", "INSERT INTO t VALUES (?, ?)", [1, "it\'s"])')
    data_tool(make_tool, "named", ext, f'db_execute("p.duckdb", "INSERT INTO t VALUES ($i, $s)", {named})')
    data_tool(
        make_tool, "sel", ext, 'db_query("p.duckdb", "SELECT s FROM t WHERE i >= ? ORDER BY i", 10, [1])'
    )
    data_tool(make_tool, "two", ext, 'db_execute("p.duckdb", "SELECT 1; SELECT ?", [1])')
    assert data(dk, "pos") == data(dk, "named") == {"ok": True, "rows_affected": 1}
    assert data(dk, "sel")["rows"] == [{"s": "it's"}, {"s": "x'); DROP TABLE t; --"}]
    assert "db_execute: 'p.duckdb': params need exactly one SQL statement, got 2" in error_of(dk, "two")


def test_db_query_may_write_and_then_takes_the_writer_lock(dk: Kernel) -> None:
    duck = service(dk)
    duck.execute("w.duckdb", "CREATE TABLE t (i INTEGER)")
    assert duck.query("w.duckdb", "INSERT INTO t VALUES (1), (2) RETURNING i * 10 AS j", 10)["rows"] == [
        {"j": 10},
        {"j": 20},
    ]
    lock = _writer_lock(duck, "w.duckdb")
    with lock:  # a writer holds the file: a reading query runs, a writing one gives up in time
        assert duck.query("w.duckdb", "SELECT count(*) AS n FROM t", 1, remaining=0.3)["rows"] == [{"n": 2}]
        with pytest.raises(DuckError, match="gave up waiting for another writer"):
            duck.query("w.duckdb", "DELETE FROM t", 1, remaining=0.3)


@pytest.mark.parametrize("ext", ENGINES)
def test_read_only_option_reads_and_refuses_writes(dk: Kernel, make_tool: ToolFactory, ext: str) -> None:
    """`db_query(…, {read_only: true})`: statement kinds checked first, then a READ ONLY transaction."""
    setup_db(dk, "ro.duckdb", "CREATE TABLE t (i INTEGER); CREATE SEQUENCE seq; INSERT INTO t VALUES (1)")
    options = "#{ read_only: true }" if ext == ".rhai" else "{read_only: true}"
    nothing = "()" if ext == ".rhai" else "null"
    tries = {
        "read": ("SELECT i FROM t", None),
        "insert": ("INSERT INTO t VALUES (2)", "read-only: INSERT statements are not allowed"),
        "second": ("SELECT 1; DELETE FROM t", "read-only: DELETE statements are not allowed"),
        "commit": ("COMMIT; INSERT INTO t VALUES (2)", "read-only: TRANSACTION statements are not allowed"),
        "pragma": ("PRAGMA enable_checkpoint_on_shutdown", "read-only: PRAGMA statements are not allowed"),
        "sequence": ("SELECT nextval('seq')", "read-only: the SQL tried to write"),
        "analyze": ("EXPLAIN ANALYZE INSERT INTO t VALUES (2)", "read-only: the SQL tried to write"),
        "copy": ("COPY t TO 'out.csv'", "COPY statements are not allowed"),  # refused for everyone
    }
    for name, (sql, _) in tries.items():
        data_tool(make_tool, name, ext, f'db_query("ro.duckdb", "{sql}", {nothing}, {nothing}, {options})')
    for name, (_, refusal) in tries.items():
        if refusal is None:
            assert data(dk, name)["rows"] == [{"i": 1}]
        else:
            assert f"db_query: 'ro.duckdb': {refusal}" in error_of(dk, name), name
    duck = service(dk)
    assert duck.query("ro.duckdb", "SELECT count(*) AS n, nextval('seq') AS s FROM t", 1)["rows"] == [
        {"n": 1, "s": 1}  # nothing was written, the sequence never moved
    ]
    # the default still lets db_query write
    assert duck.query("ro.duckdb", "INSERT INTO t VALUES (2)", 1, read_only=False)["rows"] == [{"Count": 1}]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ('"yes"', "db_query: options must be an object, got 'yes'"),
        ("{readonly: true}", "db_query: unknown option 'readonly' (known: read_only)"),
        ('{read_only: "true"}', "db_query: option 'read_only' must be true or false, got 'true'"),
    ],
)
def test_bad_query_options_are_named(dk: Kernel, make_tool: ToolFactory, options: str, message: str) -> None:
    data_tool(make_tool, "bad", ".js", f'db_query("a.duckdb", "SELECT 1", 1, null, {options})')
    assert message in error_of(dk, "bad")


def test_missing_database_is_not_created_by_reads(dk: Kernel, make_tool: ToolFactory) -> None:
    data_tool(make_tool, "db_query", ".js", 'db_query("none/here.duckdb", "SELECT 1")')
    data_tool(make_tool, "db_schema", ".rhai", 'db_schema("none/here.duckdb")')
    for helper in ("db_query", "db_schema"):
        assert f"{helper}: 'none/here.duckdb': no such database (db_execute creates one)" in error_of(
            dk, helper
        )
    assert not (service(dk).root / "none").exists()


# -- db_schema -----------------------------------------------------------------------------------


def test_schema_text(dk: Kernel) -> None:
    duck = service(dk)
    assert duck.execute("sc.duckdb", "CREATE SCHEMA IF NOT EXISTS x") == 0
    assert duck.schema("sc.duckdb") == "no tables"
    duck.execute(
        "sc.duckdb",
        """CREATE TABLE Items (id BIGINT PRIMARY KEY, price DECIMAL(10,2), tags VARCHAR[], added TIMESTAMP);
           CREATE TABLE x.logs (line VARCHAR NOT NULL);
           CREATE VIEW cheap AS SELECT id FROM Items WHERE price < 1""",
    )
    assert duck.schema("sc.duckdb") == (
        "table Items\n  id BIGINT NOT NULL\n  price DECIMAL(10,2)\n  tags VARCHAR[]\n  added TIMESTAMP\n"
        "view cheap\n  id BIGINT\n"
        "table x.logs\n  line VARCHAR NOT NULL"
    )
    assert duck.schema("sc.duckdb", "items").startswith("table Items\n")
    assert duck.schema("sc.duckdb", "X.LOGS") == "table x.logs\n  line VARCHAR NOT NULL"
    with pytest.raises(DuckError, match="no table or view named 'nope'"):
        duck.schema("sc.duckdb", "nope")


# -- S12.2 one writer per file, readers beside it ---------------------------------------------------


def _writer_lock(duck: DuckService, relative: str) -> threading.Lock:
    with duck.pool.cursor(duck.locate(relative, create=False)) as (_, lock):
        return lock


@pytest.mark.parametrize("ext", ENGINES)
def test_s12_2_concurrent_writers_lose_nothing(dk: Kernel, make_tool: ToolFactory, ext: str) -> None:
    setup_db(dk, "race.duckdb", "CREATE TABLE t (writer INTEGER, n INTEGER, PRIMARY KEY (writer, n))")
    if ext == ".js":
        source = """function run(args) {
            for (let n = 0; n < 20; n++) {
                db_execute("race.duckdb", `INSERT INTO t VALUES (${args.w}, ${n})`);
                db_execute("race.duckdb", "UPDATE t SET n = n WHERE writer = ?", [args.w]);
            }
            return "done";
        }"""
    else:
        source = """fn run(args) {
            for n in 0..20 {
                db_execute("race.duckdb", `INSERT INTO t VALUES (${args.w}, ${n})`);
                db_execute("race.duckdb", "UPDATE t SET n = n WHERE writer = ?", [args.w]);
            }
            "done"
        }"""
    make_tool("writer", source, ext=ext)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda w: call(dk, "writer", {"w": w}), range(8)))
    assert [r.content for r in results] == ["done"] * 8
    rows = service(dk).query("race.duckdb", "SELECT writer, count(*) AS c FROM t GROUP BY 1 ORDER BY 1", 100)
    assert rows["rows"] == [{"writer": w, "c": 20} for w in range(8)]


def test_s12_2_readers_run_while_a_writer_writes(dk: Kernel, make_tool: ToolFactory) -> None:
    setup_db(dk, "rw.duckdb", "CREATE TABLE t (i INTEGER)")
    make_tool(
        "fill",
        """function run() {
            for (let i = 0; i < 60; i++) {
                db_execute("rw.duckdb", `INSERT INTO t SELECT * FROM range(${i * 100}, ${i * 100 + 100})`);
            }
            return "filled";
        }""",
    )
    make_tool(
        "count",
        """fn run(args) {
            let seen = [];
            for i in 0..30 { seen.push(db_query("rw.duckdb", "SELECT count(*) AS n FROM t").rows[0].n); }
            #{ content: "ok", data: seen }
        }""",
        ext=".rhai",
    )
    with ThreadPoolExecutor(4) as pool:
        writer = pool.submit(call, dk, "fill")
        readers = [pool.submit(call, dk, "count") for _ in range(3)]
        assert writer.result().content == "filled"
        for reader in readers:
            outcome = reader.result()
            assert outcome.success, outcome.content
            seen = outcome.data
            assert isinstance(seen, list) and all(isinstance(n, int) for n in seen), seen
            counts = [n for n in seen if isinstance(n, int)]
            assert counts == sorted(counts) and all(
                n % 100 == 0 for n in counts
            )  # whole statements, never torn
    assert service(dk).query("rw.duckdb", "SELECT count(*) AS n FROM t", 1)["rows"] == [{"n": 6000}]


# -- nothing hangs -------------------------------------------------------------------------------

LONG_QUERY = "SELECT count(*) FROM range(100000000000) a"


@pytest.mark.parametrize("ext", ENGINES)
def test_query_timeout_interrupts_duckdb(
    make_kernel: KernelFactory, make_tool: ToolFactory, ext: str
) -> None:
    kernel = make_kernel("duckdb:\n  query_timeout_secs: 0.4\n")
    setup_db(kernel, "slow.duckdb", "CREATE TABLE t (i INTEGER)")
    data_tool(make_tool, "slow", ext, f'db_query("slow.duckdb", "{LONG_QUERY}")')
    message = error_of(kernel, "slow")
    assert "db_query: 'slow.duckdb': query interrupted: duckdb.query_timeout_secs of 0.4 s ran out" in message
    assert service(kernel).query("slow.duckdb", "SELECT 42 AS x", 1)["rows"] == [{"x": 42}]  # still usable


@pytest.mark.parametrize("ext", ENGINES)
def test_the_tools_own_budget_bounds_the_query(dk: Kernel, make_tool: ToolFactory, ext: str) -> None:
    setup_db(dk, "slow.duckdb", "CREATE TABLE t (i INTEGER)")
    data_tool(
        make_tool, "slow", ext, f'db_execute("slow.duckdb", "{LONG_QUERY}")', yaml_extra="timeout_secs: 0.5\n"
    )
    message = error_of(dk, "slow")
    budget = r"db_execute: 'slow\.duckdb': query interrupted: the tool's time budget of 0\.\d+ s ran out"
    assert re.search(budget, message), message


def test_no_time_left_fails_at_once(dk: Kernel) -> None:
    with pytest.raises(DuckError, match="no time left"):
        service(dk).execute("z.duckdb", "SELECT 1", remaining=0.0)


# -- S12.4 paths and placeholders --------------------------------------------------------------------


def _file_for(duck: DuckService, *parts: str) -> Path:
    return duck.root.joinpath(*parts)


@pytest.mark.parametrize("ext", ENGINES)
def test_s12_4_placeholders_resolve_from_the_caller(dk: Kernel, make_tool: ToolFactory, ext: str) -> None:
    paths = [
        "{user}/a.duckdb",
        "s/{session}.duckdb",
        "t/{template}.db",
        "t/{agent}.db",
        "x/{user}_{session}.duckdb",
    ]
    for i, path in enumerate(paths):
        data_tool(
            make_tool, f"p{i}", ext, f'db_execute("{path}", "CREATE TABLE IF NOT EXISTS t (i INTEGER)")'
        )
    who = {"user_id": "alice", "session_id": "chat/1", "template": "helper"}
    for i in range(len(paths)):
        assert data(dk, f"p{i}", **who)["ok"] is True
    duck, user, session = service(dk), safe_folder_name("alice"), session_folder_name("alice", "chat/1")
    for expected in (
        f"u@{user}/a.duckdb",
        f"s/s@{session}.duckdb",
        f"t/t@{safe_folder_name('helper')}.db",
        f"x/u@{user}_s@{session}.duckdb",
    ):
        assert _file_for(duck, expected).is_file(), expected


@pytest.mark.parametrize("ext", ENGINES)
def test_s12_4_each_user_sees_only_their_own_database(dk: Kernel, make_tool: ToolFactory, ext: str) -> None:
    data_tool(
        make_tool, "put", ext, 'db_execute("{user}/notes.duckdb", "CREATE TABLE secrets AS SELECT 42 AS s")'
    )
    data_tool(make_tool, "get", ext, 'db_schema("{user}/notes.duckdb")')
    assert data(dk, "put", user_id="alice")["ok"] is True
    assert "no such database" in error_of(dk, "get", user_id="bob")
    assert data(dk, "put", user_id="bob")["ok"] is True
    service(dk).execute(f"u@{safe_folder_name('bob')}/notes.duckdb", "DROP TABLE secrets")
    assert data(dk, "get", user_id="bob") == "no tables"
    assert data(dk, "get", user_id="alice").startswith("table secrets")
    # bob knows (or listed) alice's folder name, and still cannot name it
    alice = f"u@{safe_folder_name('alice')}/notes.duckdb"
    data_tool(make_tool, "steal", ext, f'db_query("{alice}", "SELECT * FROM secrets")')
    assert "may not contain '@'" in error_of(dk, "steal", user_id="bob")


@pytest.mark.parametrize(
    "user_id", ["../../etc", "/", "a/b", "..", ".", "x\x00y", "é" * 300, "C:\\x", "{user}", "u@alice"]
)
def test_s12_4_hostile_ids_stay_inside(dk: Kernel, make_tool: ToolFactory, user_id: str) -> None:
    data_tool(
        make_tool, "mine", ".js", 'db_execute("{user}/db.duckdb", "CREATE TABLE IF NOT EXISTS t (i INTEGER)")'
    )
    assert data(dk, "mine", user_id=user_id)["ok"] is True
    duck = service(dk)
    files = [p for p in duck.root.rglob("*.duckdb")]
    assert len(files) == 1
    assert files[0].parent.parent == duck.root and files[0].parent.name == f"u@{safe_folder_name(user_id)}"
    assert len(files[0].parent.name) < 80


def test_s12_4_ids_never_collide_across_kinds(dk: Kernel, make_tool: ToolFactory) -> None:
    """A session named like a user gets another file: the kind letter differs."""
    data_tool(
        make_tool, "u", ".js", 'db_execute("{user}.duckdb", "CREATE TABLE IF NOT EXISTS t (i INTEGER)")'
    )
    data_tool(
        make_tool, "s", ".js", 'db_execute("{session}.duckdb", "CREATE TABLE IF NOT EXISTS t (i INTEGER)")'
    )
    data(dk, "u", user_id="alice")
    data(dk, "s", session_id="alice")
    assert len(list(service(dk).root.glob("*.duckdb"))) == 2


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../x.duckdb", "'../x.duckdb': may not contain '..'"),
        ("a/../../x.duckdb", "may not contain '..'"),
        ("{user}/../../x.duckdb", "may not contain '..'"),
        ("/etc/x.duckdb", "must be relative to the DuckDB folder, not absolute"),
        ("C:/x.duckdb", "not absolute"),
        ("a\\\\b.duckdb", "may not contain NUL or backslash"),
        ("x\\u0000.duckdb", "may not contain NUL or backslash"),
        ("notes.txt", "must name a file ending in .duckdb or .db"),
        ("dir/", "must name a file ending in .duckdb or .db"),
        ("a@b.duckdb", "may not contain '@'"),
        ("{pid}.duckdb", "unknown placeholder {pid}"),
        ("{}.duckdb", "unknown placeholder {}"),
        ("{user.duckdb", "unmatched '{' or '}'"),
        ("user}.duckdb", "unmatched '{' or '}'"),
        ("{session}.duckdb", "uses {session} but this call has no session"),
        ("{template}.duckdb", "uses {template} but this call has no template"),
        ("x" * 300 + ".duckdb", "has a name longer than 255 bytes"),
        ("a/" * 600 + "x.duckdb", "must be 1 to 1024 characters"),
    ],
)
def test_s12_4_bad_paths_are_refused(dk: Kernel, make_tool: ToolFactory, path: str, message: str) -> None:
    make_tool("bad", f'function run() {{ return JSON.stringify(db_execute("{path}", "SELECT 1")); }}')
    content = error_of(dk, "bad", user_id="alice")
    assert content.startswith("Error: db_execute: ") and message in content
    root = service(dk).root
    assert not root.exists() or list(root.rglob("*")) == []


def test_s12_4_symlinks_out_are_refused(dk: Kernel, tmp_path: Path) -> None:
    duck = service(dk)
    duck.execute("ok.duckdb", "CREATE TABLE t (i INTEGER)")
    outside = tmp_path / "outside"
    outside.mkdir()
    (duck.root / "out_dir").symlink_to(outside, target_is_directory=True)
    (duck.root / "out_file.duckdb").symlink_to(outside / "victim.duckdb")
    (duck.root / "dangling").symlink_to(tmp_path / "nowhere")
    (duck.root / "inside.duckdb").symlink_to(duck.root / "ok.duckdb")
    for relative in ("out_dir/x.duckdb", "out_file.duckdb", "dangling/x.duckdb"):
        with pytest.raises(DuckError, match="leads outside the DuckDB folder"):
            duck.execute(relative, "CREATE TABLE t (i INTEGER)")
    assert list(outside.iterdir()) == [] and not (tmp_path / "nowhere").exists()
    assert duck.schema("inside.duckdb") == "table t\n  i INTEGER"  # a link that stays inside is fine


def test_a_folder_or_a_non_database_file_is_refused(dk: Kernel) -> None:
    duck = service(dk)
    (duck.root / "dir.duckdb").mkdir(parents=True)
    (duck.root / "text.db").write_text("hello", encoding="utf-8")
    with pytest.raises(DuckError, match="not a database file"):
        duck.query("dir.duckdb", "SELECT 1", 1)
    with pytest.raises(DuckError, match="not a valid DuckDB database file"):
        duck.query("text.db", "SELECT 1", 1)
    assert (duck.root / "text.db").read_text(encoding="utf-8") == "hello"


# -- security: SQL that reaches out ----------------------------------------------------------------

ATTACKS = [
    ("db_query", "SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
    ("db_query", "SELECT * FROM read_text('/etc/hostname')", "file system operations are disabled"),
    ("db_query", "SELECT * FROM read_parquet('/etc/passwd')", "file system operations are disabled"),
    ("db_query", "SELECT * FROM glob('/etc/*')", "file system operations are disabled"),
    ("db_query", "SELECT * FROM '/etc/passwd'", "does not exist"),
    ("db_execute", "COPY t TO '{outside}/copy.csv'", "COPY statements are not allowed"),
    ("db_execute", "COPY t FROM '/etc/passwd'", "COPY statements are not allowed"),
    ("db_execute", "EXPORT DATABASE '{outside}/export'", "EXPORT statements are not allowed"),
    ("db_execute", "IMPORT DATABASE '{outside}'", "file system operations are disabled"),
    ("db_execute", "ATTACH '{outside}/other.duckdb' AS other", "ATTACH statements are not allowed"),
    ("db_execute", "ATTACH ':memory:' AS m", "ATTACH statements are not allowed"),
    ("db_execute", "DETACH db", "DETACH statements are not allowed"),
    ("db_execute", "INSTALL httpfs", "LOAD statements are not allowed"),
    ("db_execute", "LOAD httpfs", "LOAD statements are not allowed"),
    ("db_execute", "SET enable_external_access = true", "the configuration has been locked"),
    ("db_execute", "RESET enable_external_access", "the configuration has been locked"),
    ("db_execute", "SET lock_configuration = false", "the configuration has been locked"),
    ("db_execute", "SET autoinstall_known_extensions = true", "the configuration has been locked"),
    ("db_execute", "SET autoload_known_extensions = true", "the configuration has been locked"),
    ("db_execute", "SET memory_limit = '100GB'", "the configuration has been locked"),
    ("db_execute", "SET threads = 64", "the configuration has been locked"),
    ("db_execute", "PRAGMA enable_profiling", "the configuration has been locked"),
    (
        "db_execute",
        "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 's')",
        "file system operations are disabled",
    ),
    ("db_query", "SELECT * FROM sniff_csv('/etc/passwd')", "file system operations are disabled"),
    ("db_execute", "UPDATE EXTENSIONS", "is not a valid StatementType"),
]


@pytest.mark.parametrize("ext", ENGINES)
def test_sql_cannot_reach_files_extensions_or_settings(
    dk: Kernel, make_tool: ToolFactory, tmp_path: Path, ext: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    setup_db(dk, "db.duckdb", "CREATE TABLE t AS SELECT 1 AS i")
    attacks: list[JSONValue] = [
        [helper, sql.replace("{outside}", str(outside))] for helper, sql, _ in ATTACKS
    ]
    if ext == ".js":
        source = """function run(args) {
            return {content: "ok", data: args.attacks.map(([helper, sql]) => {
                try {
                    const f = helper === "db_query" ? db_query : db_execute;
                    return "ALLOWED " + JSON.stringify(f("db.duckdb", sql));
                } catch (e) { return e.message; }
            })};
        }"""
    else:
        source = """fn run(args) {
            let out = [];
            for attack in args.attacks {
                try {
                    let sql = attack[1];
                    let r = if attack[0] == "db_query" { db_query("db.duckdb", sql) }
                            else { db_execute("db.duckdb", sql) };
                    out.push(`ALLOWED ${r}`);
                } catch (e) { out.push(e); }
            }
            #{ content: "ok", data: out }
        }"""
    make_tool("attack", source, ext=ext)
    results = data(dk, "attack", {"attacks": attacks}, user_id="mallory")
    for (helper, sql, expected), got in zip(ATTACKS, results, strict=True):
        assert got.startswith(f"{helper}: 'db.duckdb': ") and expected in got, (sql, got)
    assert list(outside.iterdir()) == []
    # the pooled database still works for everyone afterwards
    assert service(dk).query("db.duckdb", "SELECT i FROM t", 1)["rows"] == [{"i": 1}]
    settings = service(dk).query(
        "db.duckdb",
        "SELECT name, value FROM duckdb_settings() WHERE name IN "
        "('enable_external_access', 'lock_configuration', 'autoload_known_extensions', "
        "'autoinstall_known_extensions') ORDER BY name",
        10,
    )["rows"]
    assert isinstance(settings, list) and all(isinstance(row, dict) for row in settings)
    assert {row["name"]: row["value"] for row in settings if isinstance(row, dict)} == {
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
        "enable_external_access": "false",
        "lock_configuration": "true",
    }


# -- the duckdb: section and the pool --------------------------------------------------------------


def test_settings_defaults_and_values(tmp_path: Path) -> None:
    assert parse_duck_settings(None) == DuckSettings()
    with pytest.raises(ConfigError, match="duckdb: 5 is not of type 'object'"):
        parse_duck_settings(5)
    settings = parse_duck_settings({"max_rows": 7, "query_timeout_secs": 0.5, "dir": "db", "threads": 1})
    assert (settings.max_rows, settings.query_timeout_secs, settings.dir, settings.threads) == (
        7,
        0.5,
        "db",
        1,
    )


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("duckdb:\n  max_rows: 0\n", "duckdb.max_rows: expected an integer of at least 1, got 0"),
        (
            "duckdb:\n  max_result_bytes: 1.5\n",
            "duckdb.max_result_bytes: expected an integer of at least 1, got 1.5",
        ),
        (
            "duckdb:\n  max_open_files: true\n",
            "duckdb.max_open_files: expected an integer of at least 1, got True",
        ),
        ("duckdb:\n  query_timeout_secs: 0\n", "duckdb.query_timeout_secs: expected seconds, more than 0"),
        ("duckdb:\n  query_timeout_secs: .inf\n", "at most a day, got inf"),
        ("duckdb:\n  query_timeout_secs: soon\n", "duckdb.query_timeout_secs: expected seconds"),
        ("duckdb:\n  dir: ''\n", "duckdb.dir: expected a non-empty folder name, got ''"),
        ("duckdb:\n  rows: 5\n", "duckdb.rows: unknown field (known: dir, max_rows,"),
        ("duckdb:\n  dir: .\n", "duckdb.dir: "),
        ("paths:\n  temp_root: data/duckdb/tmp\n", "holds paths.temp_root"),
    ],
)
def test_bad_settings_name_the_field(make_kernel: KernelFactory, section: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"kernel\.yaml") as caught:
        make_kernel(section)
    assert message in str(caught.value)


def test_idle_files_close_to_make_room(make_kernel: KernelFactory) -> None:
    duck = service(make_kernel("duckdb:\n  max_open_files: 2\n"))
    for name in ("a", "b", "c", "a"):
        duck.execute(f"{name}.duckdb", "CREATE TABLE IF NOT EXISTS t (i INTEGER); INSERT INTO t VALUES (1)")
        assert len(duck.pool.open_files) <= 2
    assert duck.query("a.duckdb", "SELECT count(*) AS n FROM t", 1)["rows"] == [{"n": 2}]
    busy = r"too many databases in use at once \(duckdb.max_open_files = 2\)"
    with (
        duck.pool.cursor(duck.locate("a.duckdb", create=False)),
        duck.pool.cursor(duck.locate("b.duckdb", create=False)),
        pytest.raises(DuckError, match=busy),
    ):
        duck.query("c.duckdb", "SELECT 1", 1)
    duck.close()
    assert duck.pool.open_files == ()
    assert duck.query("c.duckdb", "SELECT count(*) AS n FROM t", 1)["rows"] == [{"n": 1}]  # reopens


def test_settings_reach_duckdb(make_kernel: KernelFactory) -> None:
    duck = service(make_kernel("duckdb:\n  memory_limit_mb: 64\n  threads: 1\n"))
    duck.execute("s.duckdb", "CREATE TABLE t (i INTEGER)")
    sql = "SELECT current_setting('threads') AS threads, current_setting('memory_limit') AS memory"
    assert duck.query("s.duckdb", sql, 1)["rows"] == [{"threads": 1, "memory": "61.0 MiB"}]


def test_a_file_another_process_holds_gives_a_clear_error(dk: Kernel, tmp_path: Path) -> None:
    duck = service(dk)
    duck.execute("held.duckdb", "CREATE TABLE t (i INTEGER)")
    duck.close()
    hold = (
        "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('open', flush=True); sys.stdin.readline()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(duck.root / "held.duckdb")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        with pytest.raises(DuckError, match=r"cannot open the database: .*lock") as info:
            duck.query("held.duckdb", "SELECT 1", 1)
        assert '"held.duckdb"' in str(info.value) and str(duck.root) not in str(info.value)
    finally:
        holder.communicate("\n", timeout=10)
    assert duck.query("held.duckdb", "SELECT count(*) AS n FROM t", 1)["rows"] == [{"n": 0}]


def test_the_helpers_are_plain_python_functions(tmp_path: Path) -> None:
    """The table entry point with a hand-made caller: no engine needed, same errors."""
    duck = DuckService(tmp_path / "dbs")
    table = default_helper_table()
    caller = Caller(user_id="u1", services=Services({DUCKDB: duck}))
    script_call = ScriptCall(
        caller, "test", budget=CallBudget.starting_now(ScriptLimits(10**8, 10.0, 64 << 20, 1 << 20))
    )
    try:
        assert table.invoke(
            "db_execute", script_call, ["{user}.db", "CREATE TABLE t AS SELECT 1 AS one"]
        ) == {
            "ok": True,
            "rows_affected": 0,
        }
        result = table.invoke("db_query", script_call, ["{user}.db", "SELECT * FROM t", None, None])
        assert result == {"columns": ["one"], "rows": [{"one": 1}], "count": 1, "has_more": False}
        with pytest.raises(HelperError, match=r"^db_schema: path must be a non-empty string, got None$"):
            table.invoke("db_schema", script_call, [None])
    finally:
        duck.close()


# -- speed ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("ext", ENGINES)
def test_ten_thousand_rows_through_a_script_tool(dk: Kernel, make_tool: ToolFactory, ext: str) -> None:
    setup_db(
        dk,
        "big.duckdb",
        "CREATE TABLE t AS SELECT range AS id, 'name ' || range AS name, range * 0.5 AS score, "
        "TIMESTAMP '2024-01-01' + INTERVAL (range) SECOND AS at, range % 2 = 0 AS even FROM range(10000)",
    )
    if ext == ".js":
        source = """function run() {
            const r = db_query("big.duckdb", "SELECT * FROM t ORDER BY id");
            return `${r.count} ${r.rows[9999].at}`;
        }"""
    else:
        source = """fn run(args) {
            let r = db_query("big.duckdb", "SELECT * FROM t ORDER BY id");
            `${r.count} ${r.rows[9999].at}`
        }"""
    make_tool("big", source, ext=ext)
    assert call(dk, "big").content == "10000 2024-01-01T02:46:39"  # its speed: benchmarks/helpers.py


# -- duckdb.max_file_bytes and the paths errors show (issue 9) ------------------------------------

FILL_JS = """function run() {
    const db = "full.duckdb";
    db_execute(db, "CREATE TABLE t (s TEXT)");
    let n = 0, refused = "";
    try {
        const rows = "INSERT INTO t SELECT md5(i::VARCHAR) || repeat('x', 200) FROM range(100) r(i)";
        for (;;) { db_execute(db, rows); n++; }
    } catch (e) { refused = e.message; }
    const deleted = db_execute(db, "DELETE FROM t").rows_affected;   // freeing space is always allowed
    db_execute(db, "DROP TABLE t");
    db_execute(db, "CREATE TABLE u (s TEXT); INSERT INTO u VALUES ('room again')");
    return { content: "ok", data: [n, refused, deleted, db_query(db, "SELECT s FROM u").rows] };
}"""
FILL_RHAI = """fn run(args) {
    let db = "full.duckdb";
    db_execute(db, "CREATE TABLE t (s TEXT)");
    let n = 0;
    let refused = "";
    loop {
        try {
            db_execute(db, "INSERT INTO t SELECT md5(i::VARCHAR) || repeat('x', 200) FROM range(100) r(i)");
            n += 1;
        } catch (e) { refused = e; break; }
    }
    let deleted = db_execute(db, "DELETE FROM t").rows_affected;
    db_execute(db, "DROP TABLE t");
    db_execute(db, "CREATE TABLE u (s TEXT); INSERT INTO u VALUES ('room again')");
    #{ content: "ok", data: [n, refused, deleted, db_query(db, "SELECT s FROM u").rows] }
}"""


@pytest.mark.parametrize("ext", ENGINES)
def test_a_database_is_held_to_max_file_bytes(
    make_kernel: KernelFactory, make_tool: ToolFactory, ext: str
) -> None:
    """A script inserting in a loop used to fill the disk until its time ran out; now the file stops
    at its quota, a DELETE or DROP is still allowed, and after one there is room again."""
    kernel = make_kernel("duckdb:\n  max_file_bytes: 300000\n")
    make_tool("fill", FILL_JS if ext == ".js" else FILL_RHAI, ext=ext)
    n, refused, deleted, rows = data(kernel, "fill")
    assert n > 0 and deleted == n * 100 and rows == [{"s": "room again"}]
    assert refused.startswith("db_execute: 'full.duckdb': the database uses ")
    assert refused.endswith(
        "bytes, at or over its 300,000-byte quota (duckdb.max_file_bytes); "
        "make room with DELETE or DROP TABLE"
    )
    file = service(kernel).root / "full.duckdb"
    on_disk = sum(p.stat().st_size for p in file.parent.iterdir() if p.is_file())
    assert on_disk < 3 * 300_000  # over by at most a block and one statement, never by much


@pytest.mark.parametrize("helper", ["query", "execute"])
def test_a_write_inside_explain_analyze_is_held_to_the_quota(make_kernel: KernelFactory, helper: str) -> None:
    """`EXPLAIN ANALYZE INSERT …` is an EXPLAIN by its kind but runs the INSERT: it used to skip the
    quota check (and, in db_query, the writer lock), so it could grow a file without bound."""
    duck = service(make_kernel("duckdb:\n  max_file_bytes: 300000\n"))
    duck.execute("ea.duckdb", "CREATE TABLE t (x BIGINT)")
    sql = "EXPLAIN ANALYZE INSERT INTO t SELECT * FROM range(1000000)"

    def run() -> object:
        return duck.query("ea.duckdb", sql, 1) if helper == "query" else duck.execute("ea.duckdb", sql)

    run()  # the first fits under the quota as any write would: checked before, not during
    duck.execute("ea.duckdb", "CHECKPOINT")
    with pytest.raises(DuckError, match=r"at or over its 300,000-byte quota \(duckdb.max_file_bytes\)"):
        run()
    assert duck.query("ea.duckdb", "SELECT count(*) AS n FROM t", 1)["rows"] == [{"n": 1_000_000}]
    assert duck.query("ea.duckdb", "EXPLAIN SELECT * FROM t", 1)["count"] == 1  # reads still run at quota


def test_a_select_that_writes_runs_again_as_the_writer(dk: Kernel) -> None:
    """A lock-free read is a READ ONLY transaction; `nextval` fails there unchanged, then takes the lock."""
    duck = service(dk)
    duck.execute("nv.duckdb", "CREATE SEQUENCE s")
    assert duck.query("nv.duckdb", "SELECT nextval('s') AS n", 1)["rows"] == [{"n": 1}]
    with _writer_lock(duck, "nv.duckdb"):
        assert duck.query("nv.duckdb", "SELECT currval('s') AS c", 1, remaining=0.3)["count"] == 1
        with pytest.raises(DuckError, match="gave up waiting for another writer"):
            duck.query("nv.duckdb", "SELECT nextval('s') AS n", 1, remaining=0.3)
    assert duck.query("nv.duckdb", "SELECT nextval('s') AS n", 1)["rows"] == [{"n": 2}]  # once per call


@pytest.mark.parametrize("ext", ENGINES)
def test_one_huge_statement_cannot_pass_the_quota(
    make_kernel: KernelFactory, make_tool: ToolFactory, ext: str
) -> None:
    """An uncommitted write stays in memory and DuckDB's temporary files, both capped: one INSERT of
    300 MB fails instead of landing in the file, and leaves nothing behind."""
    kernel = make_kernel("duckdb:\n  max_file_bytes: 1000000\n  memory_limit_mb: 32\n")
    setup_db(kernel, "huge.duckdb", "CREATE TABLE t (s TEXT)")
    data_tool(
        make_tool,
        "huge",
        ext,
        'db_execute("huge.duckdb", "INSERT INTO t SELECT md5(i::VARCHAR) || repeat(\'x\', 1000) "'
        '+ "FROM range(300000) r(i)")',
    )
    message = error_of(kernel, "huge")
    assert (
        "db_execute: 'huge.duckdb': the statement needs more temporary space than a database may use; "
        "its temporary files are capped like the file itself (duckdb.max_file_bytes)"
    ) in message
    assert service(kernel).query("huge.duckdb", "SELECT count(*) AS n FROM t", 1)["rows"] == [{"n": 0}]
    folder = service(kernel).root
    assert sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) < 3 * 1_000_000


def test_max_file_bytes_is_checked_at_start(make_kernel: KernelFactory) -> None:
    with pytest.raises(ConfigError, match=r"duckdb.max_file_bytes: expected an integer of at least 1, got 0"):
        make_kernel("duckdb:\n  max_file_bytes: 0\n")


def test_errors_never_show_the_servers_paths(dk: Kernel, make_tool: ToolFactory) -> None:
    """DuckDB names files by their absolute path; a script sees them as it named them."""
    duck = service(dk)
    (duck.root / "sub").mkdir(parents=True)
    (duck.root / "sub" / "bad.duckdb").write_bytes(b"not a database" * 1000)
    data_tool(make_tool, "bad", ".js", 'db_query("sub/bad.duckdb", "SELECT 1")')
    message = error_of(dk, "bad")
    assert "sub/bad.duckdb" in message and "not a valid DuckDB database file" in message
    assert str(duck.root) not in message and str(dk.config.root) not in message
    assert (
        without_root(f'IO Error: "{duck.root}/a.duckdb" and "{duck.root}"', duck.root)
        == 'IO Error: "a.duckdb" and "."'
    )
