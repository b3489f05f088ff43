"""Issue 9, items 3 and 4: the wall clock and memory limits hold against a hostile script (S21.1).

Each attack runs through a real tool call with small limits. Only the clock
can stop the time attacks (their `max_operations` is out of reach), and each
call runs on its own thread so that a runaway fails the test instead of
hanging it; the assertions are on the error, never on how long it took.
"""

from __future__ import annotations

import json
import threading

import pytest

from agentkernel import Kernel
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory

CLOCK_ONLY = "timeout_secs: 0.5\nmax_operations: 1000000000000\n"
SMALL_MEMORY = "memory_limit_mb: 16\ntimeout_secs: 20\nmax_operations: 1000000000000\n"
RUNAWAY_SECONDS = 60  # far beyond any bound under test: reaching it means the bound failed


def call(kernel: Kernel, name: str) -> ToolResult:
    """The tool's result; fails the test if the call is still running after RUNAWAY_SECONDS."""
    results: list[ToolResult] = []
    worker = threading.Thread(target=lambda: results.append(kernel.run_tool(name, {})), daemon=True)
    worker.start()
    worker.join(RUNAWAY_SECONDS)
    assert results, f"{name} still running after {RUNAWAY_SECONDS} s: its limit did not hold"
    return results[0]


# -- item 3: the wall clock holds whatever one operation costs -------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        # the attack: each `in` walks the whole array, one operation each
        "let a = []; a.pad(262144, 1); loop { 5 in a }",
        "let a = []; a.pad(262144, 1); let b = a; loop { a == b }",
        "let a = []; a.pad(131072, 1.5); loop { a.to_string() }",
        'let s = ""; s.pad(16777216, "a"); loop { s.index_of("b") }',
        "let m = #{}; for i in 0..100000 { m[`k${i}`] = i; } loop { m.keys() }",
    ],
    ids=["in", "array-equals", "to_string", "string-search", "map-keys"],
)
def test_s21_1_rhai_clock_holds_when_each_operation_is_long(
    kernel: Kernel, make_tool: ToolFactory, body: str
) -> None:
    make_tool("long_ops", f"fn run(args) {{ {body} }}", ext=".rhai", yaml_extra=CLOCK_ONLY)
    result = call(kernel, "long_ops")
    assert (result.success, result.content) == (False, "script exceeded timeout_secs (0.5 s)")


def test_s21_1_js_clock_holds_when_each_builtin_call_is_long(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "long_includes",
        "function run() { const a = new Array(2000000).fill(1); for (;;) a.includes(5); }",
        yaml_extra=CLOCK_ONLY,
    )
    result = call(kernel, "long_includes")
    assert (result.success, result.content) == (False, "script exceeded timeout_secs (0.5 s)")


@pytest.mark.parametrize(
    "body",
    [
        "const a = new Array(1000000).fill(1); const b = new Array(1000000).fill(1); for (;;) a.indexOf(2);",
        "const a = new Array(500000).fill(1); for (;;) a.join(',');",
        "const t = new Int32Array(4000000); for (;;) t.includes(5);",
        "const s = 'a'.repeat(8 << 20); for (;;) s.indexOf('b');",
        "const s = 'x'.repeat(1e7); for (;;) s.toUpperCase();",
        "const s = 'x'.repeat(1e6); for (;;) s.normalize('NFKC');",
        "const s = JSON.stringify('x'.repeat(1e7)); for (;;) JSON.parse(s);",
        "const s = 'x'.repeat(1e7); for (;;) JSON.stringify(s);",
        "const s = 'x'.repeat(1e6); for (;;) s.padEnd(1e7);",
        "const a = new Array(1000000).fill(1); for (;;) { a.unshift(0); a.shift(); }",
    ],
    ids=[
        "array-indexOf",
        "array-join",
        "typed-array-includes",
        "string-indexOf",
        "toUpperCase",
        "normalize",
        "JSON.parse",
        "JSON.stringify",
        "padEnd",
        "shift-unshift",
    ],
)
def test_s21_1_js_clock_holds_for_other_long_builtins(
    kernel: Kernel, make_tool: ToolFactory, body: str
) -> None:
    make_tool("long_builtin", f"function run() {{ {body} }}", yaml_extra=CLOCK_ONLY)
    result = call(kernel, "long_builtin")
    assert (result.success, result.content) == (False, "script exceeded timeout_secs (0.5 s)")


@pytest.mark.parametrize(
    ("body", "method", "length"),
    [
        ("const a = []; a.length = 2 ** 28; a.sort();", "sort", "268435456"),
        ("Array.prototype.indexOf.call({ length: 2 ** 28 }, 1);", "indexOf", "268435456"),
        ("const a = []; a.length = 2 ** 28; a.forEach(() => {});", "forEach", "268435456"),
        ("const a = []; a.length = 2 ** 28; [1].concat(a);", "concat", "268435456"),
    ],
    ids=["sparse-sort", "array-like-indexOf", "sparse-forEach", "concat-argument"],
)
def test_s21_1_js_refuses_to_walk_a_length_no_memory_backs(
    kernel: Kernel, make_tool: ToolFactory, body: str, method: str, length: str
) -> None:
    """One builtin call over a sparse array or an array-like walks every index in C, where QuickJS
    never asks the interrupt handler and Python's lock stays held: the whole kernel stood still for
    minutes (`2 ** 32 - 1`), or for good (`2 ** 53 - 1`). Such a length is refused before the walk."""
    make_tool("holes", f"function run() {{ {body} }}", yaml_extra="memory_limit_mb: 16\n")
    result = call(kernel, "holes")
    assert not result.success
    assert result.content.startswith(
        f"RangeError: Array.prototype.{method}: length {length} is more than any array this script's "
        "memory can hold (1048576); walking a sparse array or an array-like that long would outlast "
        "timeout_secs"
    ), result.content


def test_js_arrays_the_memory_holds_are_walked_as_before(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "dense",
        """
        function run() {
            const a = new Array(300000).fill(1);
            const sparse = []; sparse.length = 1048576; sparse[5] = 7;
            const joined = Array.prototype.join.call(new Uint8Array(2000000), "");
            return [a.indexOf(2), a.concat([2]).lastIndexOf(2), sparse.indexOf(7), joined.length].join();
        }
        """,
        yaml_extra="memory_limit_mb: 16\n",
    )
    result = call(kernel, "dense")
    assert (result.success, result.content) == (True, "-1,300000,5,2000000")


def test_js_stopped_builtin_cannot_be_caught(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "sly_includes",
        """
        function run() {
            const a = new Array(2000000).fill(1);
            for (;;) { try { a.includes(5); } catch (e) {} }
        }
        """,
        yaml_extra=CLOCK_ONLY,
    )
    result = call(kernel, "sly_includes")
    assert (result.success, result.content) == (False, "script exceeded timeout_secs (0.5 s)")


# -- item 4: memory is bounded per call, not per value -------------------------------------------------------

RHAI_MEMORY_ATTACKS = {
    # many strings, each well under the per-string limit (issue: 150 × 8 Mi chars = 1.27 GiB)
    "many-strings": 'let s = ""; s.pad(1048576, "x"); let b = []; for i in 0..150 { b.push(s + i); } b.len()',
    # one value shared many times: its size counts each time it is stored (issue: a.pad(n, big))
    "shared-in-pad": 'let s = ""; s.pad(1048576, "x"); let a = []; a.pad(100, s); a',
    "shared-pushed": 'let s = ""; s.pad(1048576, "x"); let b = []; for i in 0..100 { b.push(s); } b.len()',
    # an array pushed again and again is copied each time (issue: `loop { b.push(a) }`)
    "array-pushed": "let a = []; a.pad(65536, 1); let b = []; for i in 0..200 { b.push(a); } b.len()",
    "map-values": 'let s = ""; s.pad(1048576, "x"); let m = #{}; for i in 0..100 { m[`k${i}`] = s + i; } 1',
    # copies made by calls, one per level of recursion
    "recursion": "fn f(n, a) { if n > 0 { f(n - 1, a) } else { a.len() } } "
    "fn run(args) { let a = []; a.pad(131072, 1); f(60, a) }",
    # closures hold what they capture
    "closures": 'let s = ""; s.pad(1048576, "x"); let fs = []; '
    "for i in 0..100 { let t = s + i; fs.push(|| t); } fs.len()",
    "curried": 'let s = ""; s.pad(1048576, "x"); let fs = []; '
    'for i in 0..100 { fs.push(Fn("len").curry(s + i)); } fs.len()',
    # text built from a value made of many shared references
    "shared-to-string": 'let s = ""; s.pad(65536, "x"); let a = []; a.pad(1000, s); '
    "let t = a.to_string(); t.len()",
    "string-doubling": 'let s = "x"; for i in 0..24 { s = `${s}${s}`; } s.len()',
}


@pytest.mark.parametrize("body", RHAI_MEMORY_ATTACKS.values(), ids=RHAI_MEMORY_ATTACKS.keys())
def test_s21_1_rhai_memory_is_bounded_per_call(kernel: Kernel, make_tool: ToolFactory, body: str) -> None:
    source = body if body.startswith("fn ") else f"fn run(args) {{ {body} }}"
    make_tool("hoard", source, ext=".rhai", yaml_extra=SMALL_MEMORY)
    result = call(kernel, "hoard")
    assert result.success is False
    assert "memory_limit_mb (16 MiB)" in str(result.content)


def test_rhai_memory_limit_is_the_tools_own(kernel: Kernel, make_tool: ToolFactory) -> None:
    """The same work passes under a limit that fits it: the bound is the tool's `memory_limit_mb`."""
    body = 'let s = ""; s.pad(1048576, "x"); let b = []; for i in 0..10 { b.push(s + i); } b.len()'
    make_tool("fits", f"fn run(args) {{ {body} }}", ext=".rhai", yaml_extra="memory_limit_mb: 64\n")
    make_tool("tight", f"fn run(args) {{ {body} }}", ext=".rhai", yaml_extra="memory_limit_mb: 4\n")
    assert (call(kernel, "fits").success, call(kernel, "fits").content) == (True, "10")
    assert "memory_limit_mb (4 MiB)" in str(call(kernel, "tight").content)


def test_rhai_churn_within_the_limit_passes(kernel: Kernel, make_tool: ToolFactory) -> None:
    """Values that die are not counted: building and dropping far more than the limit is fine."""
    make_tool(
        "churn",
        """
        fn run(args) {
            let total = 0;
            for i in 0..200 {
                let s = "";
                s.pad(262144, "x");
                let a = [s + i, s];
                total += a[0].len();
            }
            total
        }
        """,
        ext=".rhai",
        yaml_extra="memory_limit_mb: 16\n",
    )
    result = call(kernel, "churn")
    expected = 200 * 262144 + sum(len(str(i)) for i in range(200))
    assert (result.success, result.content) == (True, str(expected))


JS_MEMORY_ATTACKS = {
    "many-strings": "const s = 'x'.repeat(8 << 20); const b = []; "
    "for (let i = 0; i < 150; i++) b.push((s + i).split('').reverse().join('')); return b.length;",
    "shared-returned": "const s = 'x'.repeat(8 << 20); return new Array(100).fill(s);",
    "array-pushed": "const s = 'x'.repeat(1 << 20); const a = [s]; const b = []; "
    "for (let i = 0; i < 5000; i++) b.push(a); return b;",
    "copies-pushed": "const a = new Array(65536).fill(1); const b = []; for (;;) b.push(a.slice());",
}


@pytest.mark.parametrize("body", JS_MEMORY_ATTACKS.values(), ids=JS_MEMORY_ATTACKS.keys())
def test_s21_1_js_memory_limit_holds_for_the_same_attacks(
    kernel: Kernel, make_tool: ToolFactory, body: str
) -> None:
    make_tool("js_hoard", f"function run() {{ {body} }}", yaml_extra=SMALL_MEMORY)
    result = call(kernel, "js_hoard")
    assert result.success is False
    assert "out of memory (limit 16 MiB)" in str(result.content)


def test_js_long_searches_give_the_same_answers(kernel: Kernel, make_tool: ToolFactory) -> None:
    """A long pattern in a long string is searched window by window; the answers do not change."""
    make_tool(
        "search",
        """
        function run(args) {
            const s = args.text, p = args.pattern;
            const at = (from) => [s.indexOf(p, from), s.lastIndexOf(p, from), s.includes(p, from)];
            return args.starts.map(at).concat([[s.indexOf(p), s.lastIndexOf(p), s.includes(p)]]);
        }
        """,
    )
    pattern = "ab" * 150 + "c"
    text = ("ab" * 40_000 + pattern + "ab" * 30_000) * 2 + "ab" * 150
    starts: list[int] = [
        0,
        1,
        80_000,
        80_001,
        200_000,
        len(text) - len(pattern),
        len(text),
        len(text) + 5,
        -3,
    ]
    result = kernel.run_tool("search", {"text": text, "pattern": pattern, "starts": list[JSONValue](starts)})

    def expected(start: int | None) -> list[object]:
        if start is None:
            return [text.find(pattern), text.rfind(pattern), pattern in text]
        at = min(max(start, 0), len(text))
        first = text.find(pattern, at)
        last = text.rfind(pattern, 0, at + len(pattern))
        return [first, last, first >= 0]

    assert result.success, result.content
    assert result.data is None and result.content == json.dumps([expected(s) for s in [*starts, None]])
