"""The helper table and its first helpers from a real script: S8.4, S15, DESIGN rules 1–3."""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.errors import HelperError
from agentkernel.helpers import AREAS, default_helper_table, register_area
from agentkernel.helpers.table import HelperTable, ScriptCall
from agentkernel.identity import Caller, safe_folder_name
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory, write_kernel_yaml


def content(
    kernel: Kernel,
    name: str,
    *,
    user_id: str | None = None,
    session_id: str | None = None,
    template: str | None = None,
) -> str:
    caller = kernel.caller(user_id=user_id, session_id=session_id, template=template)
    return kernel.run_tool(name, {}, caller).content


# -- S15 caller() ------------------------------------------------------------------


def test_s15_caller_outside_a_session(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("who", "function run() { return JSON.stringify(caller()); }")
    identity = json.loads(content(kernel, "who"))
    assert set(identity) == {"pid", "session_id", "user_id", "template", "temp_dir"}
    assert identity["session_id"] is None and identity["user_id"] is None and identity["temp_dir"] is None
    assert len(identity["pid"]) == 36


def test_s15_caller_in_a_session_has_a_private_temp_dir(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("who", "function run() { return JSON.stringify(caller()); }")
    identity = json.loads(content(kernel, "who", user_id="u-1", session_id="chat/../../etc", template="t"))
    assert (identity["user_id"], identity["session_id"], identity["template"]) == (
        "u-1",
        "chat/../../etc",
        "t",
    )
    temp = Path(identity["temp_dir"])
    assert temp.is_dir() and temp.parent == kernel.config.temp_root.resolve()
    assert temp.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("session", ["..", "../x", "a/b", "", "\x00", "é" * 300, "/etc/passwd"])
def test_session_folder_names_never_escape(session: str) -> None:
    name = safe_folder_name(session)
    assert "/" not in name and "\x00" not in name and name not in (".", "..") and len(name) < 80


def test_session_folder_names_do_not_collide() -> None:
    assert safe_folder_name("a/b") != safe_folder_name("a_b")


# -- S8.4 env_var() --------------------------------------------------------------------


def test_s8_4_env_var_reads_the_environment(
    kernel: Kernel, make_tool: ToolFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "t0k3n")
    make_tool("env", "function run() { return `[${env_var('MY_API_TOKEN')}]`; }")
    assert content(kernel, "env") == "[t0k3n]"


def test_s8_4_unset_variable_is_empty_with_a_warning(
    kernel: Kernel, make_tool: ToolFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("NOT_THERE_AT_ALL", raising=False)
    make_tool("env", "function run() { return `[${env_var('NOT_THERE_AT_ALL')}]`; }")
    with caplog.at_level(logging.WARNING, logger="agentkernel.helpers"):
        assert content(kernel, "env") == "[]"
    assert "env_var('NOT_THERE_AT_ALL'): not set" in caplog.text


def test_denied_variables_read_as_empty(
    project: Path, make_tool: ToolFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config = write_kernel_yaml(project, "scripts:\n  env_deny: ['*_SECRET']\n")
    kernel = Kernel(load_kernel_config(config))
    monkeypatch.setenv("DB_SECRET", "hunter2")
    make_tool("env", "function run() { return `[${env_var('DB_SECRET')}]`; }")
    with caplog.at_level(logging.WARNING, logger="agentkernel.helpers"):
        assert content(kernel, "env") == "[]"
    assert "denied by kernel config" in caplog.text


# -- helper errors are catchable JS errors (DESIGN rule 5) ---------------------------------


def test_helper_errors_are_catchable(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "catcher",
        """
        function run() {
          const out = [];
          for (const bad of [() => env_var(), () => env_var(5), () => env_var('A', 'B'), () => caller(1)]) {
            try { bad(); out.push('no error'); } catch (e) { out.push(`${e.name}: ${e.message}`); }
          }
          return out.join('\\n');
        }
        """,
    )
    assert content(kernel, "catcher").splitlines() == [
        "Error: env_var: expected at least 1 argument(s), got 0",
        "Error: env_var: name must be a non-empty string, got 5",
        "Error: env_var: expected at most 1 argument(s), got 2",
        "Error: caller: expected at most 0 argument(s), got 1",
    ]


def test_uncaught_helper_error_fails_the_tool(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("uncaught", "function run() { return env_var(''); }")
    result = kernel.run_tool("uncaught", {})
    assert result.success is False
    assert result.content.startswith("Error: env_var: name must be a non-empty string")
    assert "uncaught.js:1" in result.content


# -- the table: one registration binds into the engine, values stay plain ------------------


def custom_table() -> HelperTable:
    table = default_helper_table()

    def echo(call: ScriptCall, value: JSONValue, times: JSONValue = 1) -> JSONValue:
        return {"value": value, "times": times, "user": call.caller.user_id}

    def explode(call: ScriptCall) -> JSONValue:
        return 1 // 0

    def nan(call: ScriptCall) -> JSONValue:
        return math.nan

    def total(call: ScriptCall, *numbers: JSONValue) -> JSONValue:
        return sum(n for n in numbers if isinstance(n, int | float))

    functions: dict[str, Callable[..., JSONValue]] = {
        "echo": echo,
        "explode": explode,
        "nan": nan,
        "total": total,
    }
    for name, function in functions.items():
        table.register(name, function)
    return table


@pytest.fixture
def custom_kernel(project: Path) -> Kernel:
    return Kernel(load_kernel_config(project / "config" / "kernel.yaml"), helpers=custom_table())


def test_registered_helper_is_callable_from_js_with_plain_values(
    custom_kernel: Kernel, make_tool: ToolFactory
) -> None:
    make_tool(
        "use_echo",
        "function run() { const r = echo({n: 1, f: 1.5, s: 'ы', l: [true, null]}, 3);"
        " return JSON.stringify([r, typeof r.value.n, Number.isInteger(r.value.f)]); }",
    )
    result = custom_kernel.run_tool("use_echo", {}, custom_kernel.caller(user_id="u7"))
    assert json.loads(result.content) == [
        {"value": {"n": 1, "f": 1.5, "s": "ы", "l": [True, None]}, "times": 3, "user": "u7"},
        "number",
        False,
    ]


def test_a_helper_registered_after_calls_is_bound_in_the_next(project: Path, make_tool: ToolFactory) -> None:
    """The table's names are kept between calls (every call binds them): one registered later counts."""
    table = default_helper_table()
    kernel = Kernel(load_kernel_config(project / "config" / "kernel.yaml"), helpers=table)
    make_tool("late", "function run() { return typeof late_helper === 'function' ? late_helper() : 'none'; }")
    assert content(kernel, "late") == "none"
    table.register("late_helper", lambda call: "bound")
    assert content(kernel, "late") == "bound"


def test_trailing_undefined_arguments_are_dropped(custom_kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("trail", "function run() { return JSON.stringify(echo('x', undefined)); }")
    assert json.loads(content(custom_kernel, "trail"))["times"] == 1


def test_varargs_helper(custom_kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("sum", "function run() { return String(total(1, 2, 3.5)); }")
    assert content(custom_kernel, "sum") == "6.5"


def test_helper_bug_is_a_catchable_error_and_logged(
    custom_kernel: Kernel, make_tool: ToolFactory, caplog: pytest.LogCaptureFixture
) -> None:
    make_tool("bug", "function run() { try { explode(); } catch (e) { return 'caught: ' + e.message; } }")
    with caplog.at_level(logging.ERROR, logger="agentkernel.helpers"):
        assert content(custom_kernel, "bug") == (
            "caught: explode: internal error: ZeroDivisionError: integer division or modulo by zero"
        )
    assert "Traceback" in caplog.text


def test_helper_value_without_json_form(custom_kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("nanny", "function run() { try { nan(); } catch (e) { return e.message; } }")
    assert content(custom_kernel, "nanny").startswith("nan: value cannot cross into the script")


def test_cyclic_argument_is_refused_in_js(custom_kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "cyc", "function run() { const o = {}; o.o = o; try { echo(o); } catch (e) { return e.name; } }"
    )
    assert content(custom_kernel, "cyc") == "TypeError"


def test_registering_twice_is_refused() -> None:
    table = default_helper_table()
    with pytest.raises(ValueError, match="'caller' is already registered"):
        table.register("caller", lambda call: None)


def test_invoking_an_unknown_helper() -> None:
    from agentkernel.identity import Caller

    with pytest.raises(HelperError, match="nope: no such helper"):
        default_helper_table().invoke("nope", ScriptCall(Caller(), "test"), [])


# -- console.log / print go to the kernel log -----------------------------------------------


def test_console_and_print_reach_the_log(
    kernel: Kernel, make_tool: ToolFactory, caplog: pytest.LogCaptureFixture
) -> None:
    make_tool(
        "chatty",
        "function run() { console.log('hello', {a: 1}, [2]); print('printed'); console.warn('careful');"
        " console.error(new Error('x').message); console.debug('dbg'); return 'ok'; }",
    )
    with caplog.at_level(logging.DEBUG, logger="agentkernel.script"):
        assert content(kernel, "chatty") == "ok"
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "agentkernel.script"]
    assert lines == [
        ("INFO", '[tool chatty] hello {"a":1} [2]'),
        ("INFO", "[tool chatty] printed"),
        ("WARNING", "[tool chatty] careful"),
        ("ERROR", "[tool chatty] x"),
        ("DEBUG", "[tool chatty] dbg"),
    ]


def test_runaway_logging_is_capped(
    kernel: Kernel, make_tool: ToolFactory, caplog: pytest.LogCaptureFixture
) -> None:
    make_tool(
        "flood", "function run() { for (let i = 0; i < 5000; i++) console.log('line', i); return 'done'; }"
    )
    with caplog.at_level(logging.INFO, logger="agentkernel.script"):
        assert content(kernel, "flood") == "done"
    records = [r for r in caplog.records if r.name == "agentkernel.script"]
    assert len(records) == 201
    assert "more output suppressed (limit 200 lines)" in records[-1].getMessage()


# -- helpers registered on first use (issue 31: start-up) ------------------------------------------------


UNSET = "AGENTKERNEL_SURELY_UNSET_VARIABLE"


@pytest.mark.parametrize("area", sorted(AREAS))
def test_each_area_registers_the_helpers_the_index_names(area: str) -> None:
    """The index the default table names helpers from, before importing anything, is each module's own."""
    table = HelperTable()
    register_area(area, table)
    assert table.names() == AREAS[area]


def test_the_default_table_names_every_helper_at_once_and_registers_on_first_call() -> None:
    table = default_helper_table()
    every = HelperTable()
    for area in AREAS:
        register_area(area, every)
    assert table.names() == every.names()  # an engine binds them all, in the same order
    assert "usage" in table and "nope" not in table
    assert table.invoke("env_var", ScriptCall(Caller(), "t"), ["AGENTKERNEL_SURELY_UNSET_VARIABLE"]) == ""
    assert [(h.name, h.min_args, h.max_args) for h in table] == [
        (h.name, h.min_args, h.max_args) for h in every
    ]


def test_a_built_in_name_is_taken_before_its_module_is_loaded() -> None:
    table = default_helper_table()
    with pytest.raises(ValueError, match="already registered"):
        table.register("http_get", lambda call: None)
    with pytest.raises(ValueError, match="already registered"):
        table.register_later(["mine", "caller"], lambda table: None)
    assert "mine" not in table


def test_threads_calling_a_helper_first_all_find_it() -> None:
    table = default_helper_table()
    start = threading.Barrier(8)
    results: list[JSONValue] = []

    def first_call() -> None:
        start.wait()
        results.append(
            table.invoke("env_var", ScriptCall(Caller(), "t"), ["AGENTKERNEL_SURELY_UNSET_VARIABLE"])
        )

    threads = [threading.Thread(target=first_call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [""] * 8
