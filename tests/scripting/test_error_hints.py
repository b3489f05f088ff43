"""Errors that say what to do (S4.4): the hints the kernel adds to script errors.

Every call goes through the real dispatch path (`Kernel.run_tool`) on real
QuickJS and our Rhai, so the text checked is exactly what an LLM reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.rhai import Engine
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory

WHY = (
    "a missing value: a null, a map field that is not there, or the result of a function that returns nothing"
)


def failure(kernel: Kernel, name: str, args: JSONValue) -> str:
    result = kernel.run_tool(name, args)
    assert result.success is False, result.content
    assert result.error == result.content
    return result.content


# -- JavaScript: the Node and browser globals QuickJS does not have ---------------------------


@pytest.mark.parametrize(
    ("call", "column", "hint"),
    [
        (
            'fetch("http://x")',
            29,
            "scripts have no fetch; use http_get(url) / http_post(url, body) (docs/scripts.md §8.5)",
        ),
        (
            'require("fs")',
            29,
            "scripts cannot load npm or Node modules; write the tool as an .mjs module that imports "
            "a file of your own (import { f } from './lib.mjs'), or use a helper (docs/scripts.md §3.1, §8)",
        ),
        (
            "process.env.HOME",
            29,
            "scripts have no process; use env_var(name) for the environment "
            "and caller() for who the script runs for (docs/scripts.md §8.1, §8.2)",
        ),
        (
            "new XMLHttpRequest()",
            33,
            "scripts have no XMLHttpRequest; use http_get(url) / http_post(url, body) (docs/scripts.md §8.5)",
        ),
    ],
)
def test_s4_4_missing_js_global_names_the_helper(
    kernel: Kernel, make_tool: ToolFactory, call: str, column: int, hint: str
) -> None:
    make_tool("t", f"function run(args) {{ return {call}; }}")
    name = call.removeprefix("new ").split("(")[0].split(".")[0]
    expected = f"ReferenceError: '{name}' is not defined (at t.js:1:{column}) — {hint}"
    assert failure(kernel, "t", {}) == expected


@pytest.mark.parametrize(
    ("name", "names_in_hint"),
    [
        ("setTimeout", ["no timers", "§3.4"]),
        ("setInterval", ["no timers"]),
        ("setImmediate", ["no timers"]),
        ("window", ["not run in a browser", "globalThis", "visual blocks"]),
        ("document", ["not run in a browser"]),
        ("navigator", ["not run in a browser"]),
        ("Deno", ["Node, Deno or Bun", "http_get", "env_var"]),
        ("Bun", ["Node, Deno or Bun"]),
        ("__dirname", ["Node, Deno or Bun"]),
        ("Buffer", ["fs_read_bytes", "base64"]),
        ("localStorage", ["state_get", "state_set", "§8.8"]),
    ],
)
def test_other_node_and_browser_globals_get_a_hint(
    kernel: Kernel, make_tool: ToolFactory, name: str, names_in_hint: list[str]
) -> None:
    make_tool("t", f"function run(args) {{ return typeof {name} === 'undefined' ? {name} : 'defined'; }}")
    content = failure(kernel, "t", {})
    assert content.startswith(f"ReferenceError: '{name}' is not defined (at t.js:1:")
    hint = content.split(" — ", 1)[1]
    for part in names_in_hint:
        assert part in hint


def test_module_and_exports_exist_so_they_need_no_hint(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("t", "module.exports.run = (args) => `${typeof module} ${typeof exports}`;", ext=".cjs")
    assert kernel.run_tool("t", {}).content == "object object"


def test_an_ordinary_reference_error_gets_no_hint(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("t", "function run(args) { return wordz.length; }")
    assert failure(kernel, "t", {}) == "ReferenceError: 'wordz' is not defined (at t.js:1:29)"


def test_a_thrown_error_that_mentions_fetch_gets_no_hint(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("t", "function run(args) { throw new Error(\"'fetch' is not defined\"); }")
    assert failure(kernel, "t", {}).startswith("Error: 'fetch' is not defined (at t.js:1:")
    assert " — " not in failure(kernel, "t", {})


def test_importing_an_npm_package_says_what_to_do(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path
) -> None:
    make_tool("static", 'import _ from "lodash";\nexport function run(args) { return 1; }', ext=".mjs")
    make_tool("dynamic", 'export async function run(args) { await import("node:fs"); }', ext=".mjs")
    (problem,) = kernel.problems()
    assert problem.path == tools_dir / "static.yaml"
    assert problem.reason.startswith(
        "script static.mjs: ReferenceError: module 'lodash' not found"
        " — scripts cannot load npm or Node modules"
    )
    assert failure(kernel, "dynamic", {}).startswith(
        "ReferenceError: module 'node:fs' not found — scripts cannot load npm or Node modules"
    )


def test_a_missing_file_of_your_own_is_not_called_an_npm_module(
    kernel: Kernel, make_tool: ToolFactory
) -> None:
    source = 'import { f } from "./lib/gone.mjs";\nexport function run(args) { return f(); }'
    make_tool("t", source, ext=".mjs")
    (problem,) = kernel.problems()
    assert problem.reason.endswith("gone.mjs' not found")
    assert "npm" not in problem.reason


# -- Rhai: `()` where a value was expected --------------------------------------------------------


def rhai_tool(make_tool: ToolFactory, body: str) -> None:
    make_tool("r", body, ext=".rhai")


@pytest.mark.parametrize(
    ("source", "args", "expected"),
    [
        (
            "fn run(args) { args.txt.len }",
            {"text": "a"},
            "Unknown property 'len' - a getter is not registered for type '()' (at r.rhai:1:25)"
            " — args.txt: the argument 'txt' is missing (args has: text)",
        ),
        (
            'fn run(args) { args["txt"].len }',
            {"text": "a", "n": 1},
            "Unknown property 'len' - a getter is not registered for type '()' (at r.rhai:1:28)"
            " — args[\"txt\"]: the argument 'txt' is missing (args has: text, n)",
        ),
        (
            "fn run(a) {\n    a.text.len + a.txt.len\n}",
            {"text": "a"},
            "Unknown property 'len' - a getter is not registered for type '()' (at r.rhai:2:24)"
            " — a.txt: the argument 'txt' is missing (a has: text)",
        ),
        (
            "fn run(args) { args.txt.len }",
            {},
            "Unknown property 'len' - a getter is not registered for type '()' (at r.rhai:1:25)"
            " — args.txt: the argument 'txt' is missing (args is empty)",
        ),
        (
            "fn run(args) { args.txt.len }",
            {"txt": None},
            "Unknown property 'len' - a getter is not registered for type '()' (at r.rhai:1:25)"
            " — args.txt: the argument 'txt' is null",
        ),
        (
            "fn run(args) { `${args.txt.len} символов` }",
            {"text": "a"},
            "Unknown property 'len' - a getter is not registered for type '()' (at r.rhai:1:28)"
            " — args.txt: the argument 'txt' is missing (args has: text)",
        ),
        (
            "fn run(args) { args.txt.len = 3; }",
            {"text": "a"},
            "No writable property 'len' - a setter is not registered for type '()' to handle 'i64'"
            " (at r.rhai:1:25) — args.txt: the argument 'txt' is missing (args has: text)",
        ),
    ],
)
def test_rhai_property_of_a_missing_argument(
    kernel: Kernel, make_tool: ToolFactory, source: str, args: dict[str, JSONValue], expected: str
) -> None:
    rhai_tool(make_tool, source)
    assert failure(kernel, "r", args) == expected


def test_many_arguments_are_listed_up_to_ten(kernel: Kernel, make_tool: ToolFactory) -> None:
    rhai_tool(make_tool, "fn run(args) { args.t.len }")
    args: dict[str, JSONValue] = {f"a{i}": i for i in range(12)}
    assert failure(kernel, "r", args).endswith(
        "args.t: the argument 't' is missing"
        " (args has: a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, … (12 in all))"
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "fn run(args) { 2.0 * args.n }",
            "Function not found: * (f64, ()) (at r.rhai:1:20)"
            " — the right operand of * is (); args.n: the argument 'n' is missing (args has: text)",
        ),
        (
            "fn run(args) { args.n * 2.0 }",
            "Function not found: * ((), f64) (at r.rhai:1:23)"
            " — the left operand of * is (); args.n: the argument 'n' is missing (args has: text)",
        ),
        (
            "fn run(args) { -args.n }",
            "Function not found: - (()) (at r.rhai:1:16)"
            " — the operand of - is (); args.n: the argument 'n' is missing (args has: text)",
        ),
        (
            "fn run(args) { let t = 0; t += args.n; t }",
            "Function not found: + (i64, ()) (at r.rhai:1:29)"
            " — the right operand of += is (); args.n: the argument 'n' is missing (args has: text)",
        ),
        (
            "fn run(args) { args.a - args.b }",
            "Function not found: - ((), ()) (at r.rhai:1:23) — both operands of - are ():"
            " args.a: the argument 'a' is missing (args has: text);"
            " args.b: the argument 'b' is missing (args has: text)",
        ),
        (
            "fn run(args) { [1, 2].map(|x| x * args.k) }",
            "Function not found: * (i64, ()) (at r.rhai:1:33)"
            " — the right operand of * is (); args.k: the argument 'k' is missing (args has: text)",
        ),
        (
            "fn run(args) { args.txt.trim(); }",
            "Function not found: trim (()) (at r.rhai:1:25)"
            " — the value .trim() is called on is ();"
            " args.txt: the argument 'txt' is missing (args has: text)",
        ),
        (
            "fn run(args) { parse_int(args.n) }",
            "Function not found: parse_int (()) (at r.rhai:1:16)"
            " — argument 1 of parse_int() is (); args.n: the argument 'n' is missing (args has: text)",
        ),
        (
            "fn run(args) { args.text.contains(args.part) }",
            "Function not found: contains (&str | ImmutableString | String, ()) (at r.rhai:1:26)"
            " — argument 1 of .contains() is (); args.part: the argument 'part' is missing (args has: text)",
        ),
        (
            "fn run(args) { if args.verbose { 1 } else { 0 } }",
            "Data type incorrect: () (expecting bool) (at r.rhai:1:23)"
            " — the condition is (); args.verbose: the argument 'verbose' is missing (args has: text)",
        ),
        # `()` that is not a missing argument is called a missing value.
        # A function that returns nothing: `()` is named, no argument is blamed.
        (
            "fn nothing() { } fn run(args) { nothing() * 2 }",
            "Function not found: * ((), i64) (at r.rhai:1:43) — the left operand of * is (): " + WHY,
        ),
        # The `()` passed through a variable: the position cannot tell where it came from.
        (
            "fn run(args) { let t = args.txt; t.len }",
            "Unknown property 'len' - a getter is not registered for type '()' (at r.rhai:1:36)"
            " — the value before .len is (): " + WHY,
        ),
        # A field of a field of a map that is not the arguments.
        (
            "fn run(args) { let m = #{a: #{}}; m.a.b.c }",
            "Unknown property 'c' - a getter is not registered for type '()' (at r.rhai:1:41)"
            " — the value before .c is (): " + WHY,
        ),
        # Another function's parameter is not the tool's arguments.
        (
            "fn count(a) { a.txt.len } fn run(args) { count(args) }",
            "Unknown property 'len' - a getter is not registered for type '()' (at r.rhai:1:21)"
            " — the value before .len is (): " + WHY,
        ),
        # `args` rebound: the map is no longer the arguments.
        (
            "fn run(args) { let args = #{}; args.text.len }",
            "Unknown property 'len' - a getter is not registered for type '()' (at r.rhai:1:42)"
            " — the value before .len is (): " + WHY,
        ),
        (
            "fn run(args) { let x = (); x[0] }",
            "Indexer unavailable: () [i64] (at r.rhai:1:30) — the indexed value is (): " + WHY,
        ),
        (
            "fn run(args) { let a = (); a + () }",
            "Function not found: + ((), ()) (at r.rhai:1:30) — both operands of + are (): " + WHY,
        ),
    ],
)
def test_rhai_operator_call_or_condition_with_a_unit(
    kernel: Kernel, make_tool: ToolFactory, source: str, expected: str
) -> None:
    rhai_tool(make_tool, source)
    assert failure(kernel, "r", {"text": "a"}) == expected


@pytest.mark.parametrize(
    "source",
    [
        "fn run(args) { args.text.foo }",  # a getter missing on a string, not on ()
        "fn run(args) { args.text * 2.0 }",  # no () operand
        'fn run(args) { throw "Function not found: * (f64, ())" }',  # a thrown text
    ],
)
def test_rhai_errors_without_a_unit_get_no_hint(kernel: Kernel, make_tool: ToolFactory, source: str) -> None:
    rhai_tool(make_tool, source)
    assert " — " not in failure(kernel, "r", {"text": "a"})


def test_rhai_interpreter_keeps_the_reference_text() -> None:
    """The hint is the adapter's: `agentkernel rhai run` and the conformance suite see Rhai's own text."""
    engine = Engine()
    with pytest.raises(Exception) as caught:
        engine.run(engine.compile("let args = #{}; args.txt.len"))
    assert str(caught.value) == (
        "Unknown property 'len' - a getter is not registered for type '()' (line 1, position 26)"
    )


def test_rhai_field_missing_from_config(kernel: Kernel, make_tool: ToolFactory) -> None:
    """`run(args, config)`: a field read from the YAML is named as a missing field of `config`."""
    source = "fn run(args, config) { args.amount * config.rate }"
    make_tool("r", source, ext=".rhai", yaml_extra="rates: {}\n")
    assert failure(kernel, "r", {"amount": 2}) == (
        "Function not found: * (i64, ()) (at r.rhai:1:36) — the right operand of * is ();"
        " config.rate: the field 'rate' is missing (config has: kind, name, description, script, rates)"
    )


def test_rhai_hint_reaches_the_hook_edge(kernel: Kernel, project: Path) -> None:
    hooks_dir = project / "config" / "scripts" / "hooks"
    (hooks_dir / "h.rhai").write_text("fn before_user_message(ctx, message) { message.txt.len; }")
    (hooks_dir / "h.yaml").write_text("kind: script_hook\nname: h\nscript: h.rhai\n")
    run = kernel.run_hooks(kernel.list_hooks(), {"role": "user", "content": "Привет"})
    (record,) = run.records
    assert record.error == (
        "Unknown property 'len' - a getter is not registered for type '()' (at h.rhai:1:52)"
        " — message.txt: the field 'txt' is missing (message has: role, content)"
    )
