"""The QuickJS engine through the real dispatch path: S1.1, S3, S4.4, S21.1."""

from __future__ import annotations

import threading
from importlib import resources
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.scripting.js.engine import _prelude_source
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory


def run(kernel: Kernel, name: str, args: JSONValue = None) -> dict[str, JSONValue]:
    return kernel.run_tool(name, {} if args is None else args).to_json()


# -- S1.1: .js, .cjs and .mjs -------------------------------------------------


def test_plain_js_global_run(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("plain", "function run(args) { return 'hi ' + args.who; }")
    assert run(kernel, "plain", {"who": "you"})["content"] == "hi you"


@pytest.mark.parametrize("decl", ["const run = (a) => 'lex';", "let run = function () { return 'lex'; };"])
def test_top_level_lexical_run(kernel: Kernel, make_tool: ToolFactory, decl: str) -> None:
    make_tool("lexical", decl)
    assert run(kernel, "lexical")["content"] == "lex"


def test_cjs_module_exports(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("cjs", "module.exports.run = (args) => `cjs ${args.n * 2}`;", ext=".cjs")
    assert run(kernel, "cjs", {"n": 21})["content"] == "cjs 42"


def test_cjs_exports_shorthand(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("cjs2", "exports.run = function (args) { return 'short'; };", ext=".cjs")
    assert run(kernel, "cjs2")["content"] == "short"


def test_mjs_exported_run(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("esm", "export function run(args) { return { content: 'esm ' + args.x }; }", ext=".mjs")
    assert run(kernel, "esm", {"x": 1})["content"] == "esm 1"


def test_mjs_imports_a_sibling_module(kernel: Kernel, make_tool: ToolFactory, tools_dir: Path) -> None:
    (tools_dir / "lib").mkdir()
    (tools_dir / "lib" / "double.mjs").write_text("export const double = (n) => n * 2;\n")
    make_tool(
        "esm_import",
        "import { double } from './lib/double.mjs';\nexport function run(a) { return `x${double(a.n)}`; }",
        ext=".mjs",
    )
    assert run(kernel, "esm_import", {"n": 4})["content"] == "x8"


def test_mjs_without_run_export(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("esm_none", "function run() { return 1; }\nexport const x = 1;", ext=".mjs")
    result = run(kernel, "esm_none")
    assert result["success"] is False
    assert "esm_none.mjs defines no run() function, which a tool's script must (a module exports it" in str(
        result["content"]
    )


# -- S3.2: arity decides whether config is passed -------------------------------


def test_two_parameter_run_gets_whole_raw_yaml(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "cfg",
        "function run(args, config) { return JSON.stringify([config.name, config.repos, config.ui]); }",
        yaml_extra="repos: [a, b]\nui: {icon: '📝'}\n",
    )
    assert run(kernel, "cfg")["content"] == '["cfg",["a","b"],{"icon":"📝"}]'


def test_one_parameter_run_gets_only_args(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("one", "function run(args) { return String(arguments.length); }")
    assert run(kernel, "one")["content"] == "1"


def test_default_parameter_hides_config(kernel: Kernel, make_tool: ToolFactory) -> None:
    # JS counts parameters before the first default: run(args, config = {}) has length 1.
    make_tool("dflt", "function run(args, config = {fallback: true}) { return JSON.stringify(config); }")
    assert run(kernel, "dflt")["content"] == '{"fallback":true}'


def test_yaml_dates_reach_the_script_as_iso_text(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("dates", "function run(a, c) { return c.since; }", yaml_extra="since: 2024-05-01\n")
    assert run(kernel, "dates")["content"] == "2024-05-01"


# -- S3.3: a fresh scope every call ------------------------------------------------


def test_each_call_gets_a_fresh_scope(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "counter",
        """
        var count = (typeof count === 'number') ? count : 0;
        globalThis.seen = (globalThis.seen || 0) + 1;
        function run() { count += 1; return `${count}/${globalThis.seen}`; }
        """,
    )
    assert [run(kernel, "counter")["content"] for _ in range(3)] == ["1/1", "1/1", "1/1"]


def test_prototype_pollution_does_not_survive(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("polluter", "function run() { Object.prototype.evil = 1; Array.prototype.x = 2; return 'ok'; }")
    make_tool("victim", "function run() { return String(({}).evil) + String([].x); }")
    assert run(kernel, "polluter")["content"] == "ok"
    assert run(kernel, "victim")["content"] == "undefinedundefined"


def test_a_builtin_a_call_replaces_is_guarded_again_in_the_next(
    kernel: Kernel, make_tool: ToolFactory
) -> None:
    """The guards are set in each fresh context: one call's own `includes`, `JSON.parse` or
    `String.prototype.indexOf` (or a global it leaves) is gone in the next call, which sees the
    guarded builtins answering as ever."""
    make_tool(
        "replacer",
        """
        function run() {
          Array.prototype.includes = () => 'mine'; JSON.parse = () => 'mine';
          String.prototype.indexOf = () => 'mine'; globalThis.left = 'mine';
          return [[1].includes(1), JSON.parse('1'), 'ab'.indexOf('b'), left].join();
        }
        """,
    )
    make_tool(
        "reader",
        "function run() { return [[1, 2].includes(2), JSON.parse('[7]')[0], 'ab'.indexOf('b'),"
        " typeof left, String(Array.prototype.includes).includes('native code')].join(); }",
    )
    assert run(kernel, "replacer")["content"] == "mine,mine,mine,mine"
    assert run(kernel, "reader")["content"] == "true,7,1,undefined,true"


def test_guarded_builtins_look_like_the_builtins(kernel: Kernel, make_tool: ToolFactory) -> None:
    """A guarded builtin keeps its name, its length and its `[native code]` text, and is still no
    constructor; a helper is named after itself."""
    make_tool(
        "looks",
        """
        function run() {
          const seen = [Array.prototype.includes, String.prototype.indexOf, JSON.stringify,
                        Array.prototype.map, Int8Array.prototype.sort].map((f) => `${f.name}/${f.length}`);
          let constructed = 'no error';
          try { new Array.prototype.includes(); } catch (e) { constructed = e.constructor.name; }
          return [...seen, String([].indexOf).includes('[native code]'), constructed, fs_read.name].join();
        }
        """,
    )
    assert run(kernel, "looks")["content"] == (
        "includes/1,indexOf/1,stringify/3,map/1,sort/1,true,TypeError,fs_read"
    )


# -- Promises --------------------------------------------------------------------


def test_async_run_is_awaited(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "async_ok",
        "async function run(a) { const v = await Promise.resolve(a.n + 1); return {content: `v=${v}`}; }",
    )
    assert run(kernel, "async_ok", {"n": 1})["content"] == "v=2"


def test_rejected_promise_is_a_failure(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("async_bad", "async function run() { await null; throw new RangeError('nope'); }")
    result = run(kernel, "async_bad")
    assert result["success"] is False
    assert "RangeError: nope" in str(result["content"])


def test_promise_that_never_settles(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("never", "function run() { return new Promise(() => {}); }")
    result = run(kernel, "never")
    assert result["success"] is False
    assert "never settled" in str(result["content"])


# -- S4.4: thrown exceptions carry file and line ---------------------------------------


def test_runtime_error_names_file_and_line(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("broken", "function run(args) {\n  const x = null;\n  return x.field;\n}\n")
    result = run(kernel, "broken")
    assert result["success"] is False
    content = str(result["content"])
    assert content == "TypeError: cannot read property 'field' of null (at broken.js:3:11)"
    assert result["error"] == content


@pytest.mark.parametrize(
    ("throw", "expected"),
    [
        ("throw 'plain string';", "Error: plain string"),
        ("throw {code: 7, why: 'bad'};", 'Error: {"code":7,"why":"bad"}'),
        ("throw 42;", "Error: 42"),
        ("throw undefined;", "Error: undefined"),
    ],
)
def test_throwing_a_non_error_value(
    kernel: Kernel, make_tool: ToolFactory, throw: str, expected: str
) -> None:
    make_tool("thrower", f"function run() {{ {throw} }}")
    result = run(kernel, "thrower")
    assert result["success"] is False
    assert str(result["content"]).startswith(expected)


# -- bad return values ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("return undefined;", "returned undefined"),
        ("", "returned undefined"),
        ("return function () {};", "returned a function"),
        ("return Symbol('s');", "returned a Symbol"),
        ("const o = {}; o.self = o; return o;", "circular"),
        ("const a = []; a.push({content: a}); return a;", "circular"),
    ],
)
def test_returns_without_json_form_fail_clearly(
    kernel: Kernel, make_tool: ToolFactory, body: str, fragment: str
) -> None:
    make_tool("bad_return", f"function run() {{ {body} }}")
    result = run(kernel, "bad_return")
    assert result["success"] is False
    assert fragment in str(result["content"])
    make_tool("after", "function run() { return 'still fine'; }")
    assert run(kernel, "after")["content"] == "still fine"


def test_bigint_result_is_its_number_text(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("big", "function run() { return 2n ** 70n; }")
    assert run(kernel, "big")["content"] == str(2**70)


# -- S21.1: limits -------------------------------------------------------------------------


def test_infinite_loop_is_stopped_by_max_operations(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("spin", "function run() { while (true) {} }", yaml_extra="max_operations: 1000000\n")
    result = run(kernel, "spin")
    assert result["success"] is False
    assert "max_operations (1,000,000)" in str(result["content"])


def test_try_catch_cannot_swallow_the_limit(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "sly",
        "function run() { for (;;) { try { while (true) {} } catch (e) { continue; } } }",
        yaml_extra="max_operations: 200000\n",
    )
    result = run(kernel, "sly")
    assert result["success"] is False
    assert "max_operations" in str(result["content"])


def test_wall_clock_bound(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "slow",
        "function run() { while (true) {} }",
        yaml_extra="timeout_secs: 0.2\nmax_operations: 1000000000000\n",
    )
    result = run(kernel, "slow")
    assert result["success"] is False
    assert "timeout_secs (0.2 s)" in str(result["content"])


def test_memory_bomb(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "bomb",
        "function run() { const a = []; while (true) a.push({x: 'y'.repeat(100)}); }",
        yaml_extra="memory_limit_mb: 16\n",
    )
    result = run(kernel, "bomb")
    assert result["success"] is False
    assert "out of memory (limit 16 MiB)" in str(result["content"])


def test_thrown_null_is_reported_honestly(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("null_thrower", "function run() { throw null; }")
    result = run(kernel, "null_thrower")
    assert result["success"] is False
    assert "or threw null" in str(result["content"])


def test_hundred_megabyte_string(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("huge", "function run() { return 'x'.repeat(100 * 1024 * 1024); }")
    result = run(kernel, "huge")
    assert result["success"] is False
    assert "out of memory" in str(result["content"])


def test_infinite_recursion(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("deep", "function run() { const f = (n) => f(n + 1) + 1; return f(0); }")
    result = run(kernel, "deep")
    assert result["success"] is False
    assert "stack overflow" in str(result["content"])


def test_deeply_nested_result(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("nest", "function run() { let o = {}; for (let i = 0; i < 100000; i++) o = {o}; return o; }")
    result = run(kernel, "nest")
    assert result["success"] is False


def test_kernel_keeps_working_after_every_failure(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("spin2", "function run() { for(;;){} }", yaml_extra="max_operations: 100000\n")
    make_tool("deep2", "function run() { return run(); }")
    make_tool("fine", "function run(a) { return 'ok ' + a.i; }")
    for i in range(3):
        assert run(kernel, "spin2")["success"] is False
        assert run(kernel, "deep2")["success"] is False
        assert run(kernel, "fine", {"i": i})["content"] == f"ok {i}"


def test_limits_hold_on_worker_threads(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("spin3", "function run() { while (true) {} }", yaml_extra="max_operations: 500000\n")
    make_tool("deep3", "function run() { const f = () => f(); return f(); }")
    make_tool("ok3", "function run(a) { return String(a.i * 2); }")
    outcomes: dict[int, list[object]] = {}

    def worker(i: int) -> None:
        outcomes[i] = [
            run(kernel, "spin3")["success"],
            run(kernel, "deep3")["success"],
            run(kernel, "ok3", {"i": i})["content"],
        ]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert outcomes == {i: [False, False, str(i * 2)] for i in range(6)}


# -- the sandbox ---------------------------------------------------------------------------


def test_no_host_modules_or_python_reach(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "probe",
        """
        function run() {
          return [typeof std, typeof os, typeof require, typeof process, typeof __ak_call,
                  typeof __ak_log, typeof caller, typeof console.log, typeof print].join(',');
        }
        """,
    )
    assert run(kernel, "probe")["content"] == (
        "undefined,undefined,undefined,undefined,undefined,undefined,function,function,function"
    )


def test_eval_and_json_are_real_javascript(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "stdlib",
        "function run() { return [eval('1+1'), JSON.parse('[3]')[0], /a(b)/.exec('ab')[1],"
        " Math.max(1, 5), [3,1,2].sort().join('')].join(' '); }",
    )
    assert run(kernel, "stdlib")["content"] == "2 3 b 5 123"


def test_the_compiled_prelude_keeps_the_lines_of_prelude_js() -> None:
    """Comments and indentation are dropped before the prelude is compiled, never a line: a stack
    frame of `<agentkernel>` names the line of prelude.js it ran."""
    written = (
        resources.files("agentkernel.scripting.js").joinpath("prelude.js").read_text("utf-8").split("\n")
    )
    compiled = _prelude_source(["fs_read"]).split("\n")
    assert len(compiled) == len(written)
    for line, code in zip(written, compiled, strict=True):
        assert code == (
            "" if line.strip().startswith("//") else line.strip().replace("HELPER_NAMES", '["fs_read"]')
        )
