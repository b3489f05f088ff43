"""Rhai tools through the real dispatch path: the same contract as JS (S1.2, S3, S4, S21.1)."""

from __future__ import annotations

import json
import logging

import pytest

from agentkernel import Kernel
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory


def run(kernel: Kernel, name: str, args: JSONValue = None) -> dict[str, JSONValue]:
    return kernel.run_tool(name, {} if args is None else args).to_json()


def test_run_with_args_only(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("greet", "fn run(args) { `hi ${args.who}` }", ext=".rhai")
    assert run(kernel, "greet", {"who": "you"})["content"] == "hi you"


def test_s3_2_two_parameters_get_the_raw_yaml(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "cfg",
        "fn run(args, config) { config.repos.len() + config.limit }",
        ext=".rhai",
        yaml_extra="repos: [a, b]\nlimit: 40\n",
    )
    assert run(kernel, "cfg")["content"] == "42"


def test_values_convert_at_the_boundary(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "types",
        """
        fn run(args) {
            #{ content: "ok", data: #{ unit: (), int: args.i + 1, float: args.f * 2.0, ch: 'ж',
                                        arr: [1, "a"], nested: args.m, big: args.big } }
        }
        """,
        ext=".rhai",
    )
    result = kernel.run_tool("types", {"i": 41, "f": 1.25, "m": {"k": [True, None]}, "big": 2**70})
    assert result.data == {
        "unit": None,
        "int": 42,
        "float": 2.5,
        "ch": "ж",
        "arr": [1, "a"],
        "nested": {"k": [True, None]},
        "big": float(2**70),
    }


def test_s4_forms(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("plain", 'fn run(args) { "just text" }', ext=".rhai")
    make_tool("number", "fn run(args) { 6 * 7 }", ext=".rhai")
    make_tool("unit", "fn run(args) { }", ext=".rhai")
    make_tool("fails", 'fn run(args) { #{ error: "nope" } }', ext=".rhai")
    assert run(kernel, "plain")["content"] == "just text"
    assert run(kernel, "number")["content"] == "42"
    assert (run(kernel, "unit")["content"], run(kernel, "unit")["success"]) == ("null", True)
    assert run(kernel, "fails") == {
        "content": "nope",
        "success": False,
        "error": "nope",
        "visual": None,
        "warnings": [],
    }


def test_s4_4_throw_and_runtime_errors_name_file_and_position(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("thrower", 'fn run(args) {\n    throw "сломалось";\n}', ext=".rhai")
    make_tool("typo", "fn run(args) {\n    let x = 1;\n    x + nope\n}", ext=".rhai")
    assert run(kernel, "thrower")["content"] == "Runtime error: сломалось (at thrower.rhai:2:5)"
    assert run(kernel, "typo")["content"] == "Variable not found: nope (at typo.rhai:3:9)"


def test_syntax_error_is_a_load_problem_with_file_line(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("broken", "fn run(args) {\n  let x = ;\n}", ext=".rhai")
    (problem,) = kernel.problems()
    assert "Syntax error: Unexpected ';'" in problem.reason and "broken.rhai:2:11" in problem.reason


def test_s3_3_fresh_scope_each_call(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("counter", "let n = 0; fn run(args) { global::START + 1 } const START = 10;", ext=".rhai")
    assert [run(kernel, "counter")["content"] for _ in range(3)] == ["11", "11", "11"]


def test_s21_1_exact_operation_limit(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("spin", "fn run(args) { loop { } }", ext=".rhai", yaml_extra="max_operations: 5000\n")
    result = run(kernel, "spin")
    assert result["success"] is False
    assert result["content"] == "script exceeded max_operations (5,000): Too many operations"


def test_each_tool_keeps_its_own_limits_with_engines_made_once(
    kernel: Kernel, make_tool: ToolFactory
) -> None:
    """The adapter makes an engine per pair of limits once, not per call: tools with other
    limits, called in turn, each still get their own."""
    body = "fn run(args) { let n = 0; while n < 3000 { n += 1 } n }"
    make_tool("tight", body, ext=".rhai", yaml_extra="max_operations: 5000\n")
    make_tool("loose", body, ext=".rhai")
    for _ in range(2):
        assert run(kernel, "loose")["content"] == "3000"
        assert run(kernel, "tight")["content"] == (
            "script exceeded max_operations (5,000): Too many operations"
        )


def test_operation_limit_cannot_be_caught(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "sly",
        "fn run(args) { loop { try { loop { } } catch { } } }",
        ext=".rhai",
        yaml_extra="max_operations: 5000\n",
    )
    assert "Too many operations" in str(run(kernel, "sly")["content"])


def test_wall_clock_bound(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("slow", "fn run(args) { loop { } }", ext=".rhai", yaml_extra="timeout_secs: 0.2\n")
    assert run(kernel, "slow")["content"] == "script exceeded timeout_secs (0.2 s)"


def test_deep_recursion_is_a_stack_overflow(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("deep", "fn f(n) { f(n + 1) } fn run(args) { f(0) }", ext=".rhai")
    result = run(kernel, "deep")
    assert result["success"] is False and "Stack overflow" in str(result["content"])


def test_memory_is_bounded_by_sizes(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("bomb", 'fn run(args) { let s = "x"; loop { s += s; } }', ext=".rhai")
    make_tool("pile", "fn run(args) { let a = []; loop { a.push(1); } }", ext=".rhai")
    assert run(kernel, "bomb")["content"] == "Length of string too large"
    assert run(kernel, "pile")["content"] == "Size of array/BLOB too large"


def test_kernel_goes_on_after_failures(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("bad", "fn run(args) { loop {} }", ext=".rhai", yaml_extra="max_operations: 1000\n")
    make_tool("good", "fn run(args) { args.i * 2 }", ext=".rhai")
    for i in range(3):
        assert run(kernel, "bad")["success"] is False
        assert run(kernel, "good", {"i": i})["content"] == str(i * 2)


def test_helpers_from_rhai(kernel: Kernel, make_tool: ToolFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RHAI_TOKEN", "secret-ish")
    make_tool(
        "who",
        """
        fn run(args) {
            let me = caller();
            let bad = "";
            try { env_var(); } catch (e) { bad = e; }
            to_json(#{ user: me.user_id, session: me.session_id, token: env_var("RHAI_TOKEN"), bad: bad })
        }
        """,
        ext=".rhai",
    )
    result = kernel.run_tool("who", {}, kernel.caller(user_id="u1", session_id="s1"))
    assert json.loads(result.content) == {
        "user": "u1",
        "session": "s1",
        "token": "secret-ish",
        "bad": "env_var: expected at least 1 argument(s), got 0",  # a helper error is a thrown string
    }


def test_print_and_debug_go_to_the_log(
    kernel: Kernel, make_tool: ToolFactory, caplog: pytest.LogCaptureFixture
) -> None:
    make_tool("chatty", 'fn run(args) { print("привет"); debug([1, "a"]); "ok" }', ext=".rhai")
    with caplog.at_level(logging.INFO, logger="agentkernel.script"):
        assert run(kernel, "chatty")["content"] == "ok"
    lines = [r.getMessage() for r in caplog.records if r.name == "agentkernel.script"]
    assert lines == ["[tool chatty] привет", '[tool chatty] 1:33 | [1, "a"]']


def test_visual_blocks_from_rhai(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "table",
        """
        fn run(args) {
            #{ content: "2 rows", visual: #{ type: "table", columns: [#{ key: "id" }],
                                             rows: [#{ id: 1 }, #{ id: 2 }] } }
        }
        """,
        ext=".rhai",
    )
    result = kernel.run_tool("table", {})
    assert result.visual == [{"type": "table", "columns": [{"key": "id"}], "rows": [{"id": 1}, {"id": 2}]}]


def test_dunder_names_are_just_missing_map_keys(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("dunder", 'fn run(args) { let m = #{}; [m.__class__, m["__dict__"]] }', ext=".rhai")
    assert run(kernel, "dunder")["content"] == "[null, null]"


@pytest.mark.parametrize(
    "source",
    [
        'fn run(args) { let x = "".__class__; x }',
        'fn run(args) { __import__("os") }',
        'fn run(args) { eval("__builtins__") }',
        "fn run(args) { K }",
        "fn run(args) { rt }",
        'fn run(args) { Fn("__import__").call("os") }',
        'fn run(args) { call("exec", "print(1)") }',
    ],
)
def test_python_is_out_of_reach(kernel: Kernel, make_tool: ToolFactory, source: str) -> None:
    make_tool("escape", source, ext=".rhai")
    result = run(kernel, "escape")
    assert result["success"] is False
    content = str(result["content"])
    assert "Python" not in content and "internal error" not in content


def test_sleep_is_bounded_by_the_wall_clock(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "sleepy", "fn run(args) { sleep(1000000000); 1 }", ext=".rhai", yaml_extra="timeout_secs: 0.2\n"
    )
    make_tool("napper", "fn run(args) { for i in 0..5 { sleep(0.1); } 1 }", ext=".rhai",
              yaml_extra="timeout_secs: 0.25\n")  # fmt: skip
    assert run(kernel, "sleepy")["content"] == "script exceeded timeout_secs (0.2 s)"
    assert run(kernel, "napper")["content"] == "script exceeded timeout_secs (0.25 s)"


def test_parse_json_is_data_never_code(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "parser",
        """
        fn run(args) {
            let ok = parse_json(`{"a": [1, 2.5, null, true], "big": 9223372036854775808}`);
            let code = "";
            try { parse_json(`{"a": print("leak")}`); } catch (e) { code = e.message; }
            #{ content: "ok", data: #{ ok: ok, code: code } }
        }
        """,
        ext=".rhai",
    )
    result = kernel.run_tool("parser", {})
    assert result.data == {
        "ok": {"a": [1, 2.5, None, True], "big": 9.223372036854776e18},
        "code": "Syntax error: Script is incomplete (line 1, position 7)",
    }


def test_malformed_json_names_no_fake_position(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("badjson", 'fn run(args) { parse_json("{bad") }', ext=".rhai")
    content = str(run(kernel, "badjson")["content"])
    assert content.startswith("Syntax error: Expecting name of a property (line 1, position 2)")
    assert ":0:0" not in content


def test_helpers_are_registered_once_not_on_every_call(
    kernel: Kernel, make_tool: ToolFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Registering ~250 helper natives per call cost ~2 ms a Rhai tool call (issue 10)."""
    from agentkernel.rhai.stdlib import Library

    make_tool("echo", 'fn run(args) { caller(); "none" }', ext=".rhai")
    assert run(kernel, "echo")["content"] == "none"
    registered: list[str] = []
    original = Library.register

    def counting(self: Library, name: str, *rest: object, **options: object) -> None:
        registered.append(name)
        original(self, name, *rest, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(Library, "register", counting)
    assert run(kernel, "echo")["content"] == "none"
    assert run(kernel, "echo")["content"] == "none"
    assert registered == []
