"""A QuickJS context kept between calls (reuse.py, lockdown.js): S3.3 holds as with a fresh one.

Each test has one call change something a kept context would carry over, and
the next call (another tool, or another user) look for it: it must find the
context as new. The tests fail if a changed context were kept (`leave` always
True), and `test_a_clean_call_keeps_its_context` fails if none were.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel import Kernel, load_kernel_config
from agentkernel.agent.hooks import HookPipeline
from agentkernel.scripting.js.engine import JsEngine
from agentkernel.types import JSONObject, JSONValue
from tests.agent.test_hooks import hooks_dir, make_hook, pipeline
from tests.conftest import ToolFactory
from tests.helpers.test_files import build_kernel

__all__ = ["hooks_dir", "pipeline"]  # the fixtures, shared with tests/agent/test_hooks.py


def run(kernel: Kernel, name: str, args: JSONValue = None, user: str | None = None) -> JSONValue:
    caller = kernel.caller(user_id=user)
    return kernel.run_tool(name, {} if args is None else args, caller).to_json()["content"]


def js_engine(kernel: Kernel) -> JsEngine:
    engine = kernel._parts.host.engine_for(Path("x.js"))
    assert isinstance(engine, JsEngine)
    return engine


READER = """
function run() {
  const proto = Object.getPrototypeOf(globalThis) === Object.prototype;
  const iter = Object.getPrototypeOf([][Symbol.iterator]());
  const names = Object.keys(globalThis);
  Array.prototype.map = Array.prototype.map;  // still writable
  return [typeof left, typeof later, String(({}).evil), String([].x), [1].map((x) => x + 1)[0],
          typeof JSON.parse, Object.isExtensible(globalThis), proto, typeof console.log, typeof fs_read,
          typeof iter.next, String(Object.getOwnPropertyDescriptor(Array.prototype, "map").writable),
          typeof module.exports.leak, typeof iterLeak,
          typeof "".capitalize, typeof [].includes, String(Math.left), Object.isExtensible(Math),
          Object.keys(Array.prototype).length, String(Math), Math.max.name, String(Math.max.tag),
          names.includes("JSON"), names.indexOf("fs_read") < names.indexOf("console"),
          Object.getOwnPropertySymbols(globalThis).length, String(Math.length), new Map().size,
          Object.keys(Array.prototype[Symbol.unscopables]).length,
          Object.hasOwn(TypeError.prototype, "message"), Object.keys(Array.prototype[Symbol.unscopables])[0],
          ].join();
}
"""
AS_NEW = ",".join(
    ["undefined"] * 4
    + ["2", "function", "true", "true", "function", "function", "function", "true"]
    + ["undefined"] * 3
    + ["function", "undefined", "true", "0", "[object Math]", "max", "undefined", "false", "true", "1"]
    + ["undefined", "0", "16", "true", "at"]
)
#: A base class whose constructor returns the object it is given: a derived class's fields are then
#: defined on that object, as by `Object.defineProperty` but without calling it.
STAMP = "class Given { constructor(o) { return o; } }"


@pytest.mark.parametrize(
    "change",
    [
        "globalThis.left = 1;",
        "left = 1;",  # a sloppy script's undeclared name
        "Object.defineProperty(globalThis, 'left', { value: 1 });",
        "JSON.parse = null;",
        "Array.prototype.map = () => [0];",
        "console.log = null;",
        "fs_read = null;",
        "delete globalThis.fs_read;",
        "Object.prototype.evil = 1; Array.prototype.x = 2;",
        "Object.defineProperty(Array.prototype, 'map', { writable: false });",
        "Object.freeze(Array.prototype);",
        "Object.freeze(globalThis);",
        "Object.preventExtensions(globalThis);",
        "Object.setPrototypeOf(globalThis, { left: 1 });",
        "globalThis.__proto__ = { left: 1 };",
        "Object.getPrototypeOf([][Symbol.iterator]()).next = null;",
        "Object.getPrototypeOf([][Symbol.iterator]()).iterLeak = 1; globalThis.iterLeak = 1;",
        "module.exports.leak = 1;",
        "globalThis.__defineGetter__('module', () => ({ exports: { leak: 1 } }));",
        "Promise.resolve().then(() => { globalThis.later = 1; });",
        "(0, eval)('let left = 1; class iterLeak {}');",  # eval code's `let` is its own
        "eval = null;",
        "(0, eval)('var left = 1;');",
        # a polyfill, and what else an open builtin lets a call do: add, delete, redefine, re-prototype
        "String.prototype.capitalize = function () { return this[0].toUpperCase() + this.slice(1); };",
        "Object.defineProperty(String.prototype, 'capitalize', { value: () => '' });",
        "delete Array.prototype.includes;",
        "Reflect.deleteProperty(Array.prototype, 'includes');",
        "const m = Array.prototype.map; delete Array.prototype.map; Array.prototype.map = m;",
        f"{STAMP} new (class extends Given {{ map = Array.prototype.map; }})(Array.prototype);",
        "Object.setPrototypeOf(Math, { left: 1 });",
        "Reflect.setPrototypeOf(Math, { left: 1 });",
        "Math.__proto__ = { left: 1 };",
        """Object.assign(Math, JSON.parse('{"__proto__": {"left": 1}}'));""",
        "Object.prototype.__defineGetter__.call(Math, 'left', () => 1);",
        "Object.preventExtensions(Math);",
        "Object.seal(Math);",
        "Reflect.preventExtensions(Math);",
        "delete Math[Symbol.toStringTag];",
        "Object.defineProperty(Math, Symbol.toStringTag, { value: 'Math', enumerable: true });",
        "delete Math.max.name; Math.max.tag = 1;",  # a builtin method stays frozen
        "Array.prototype.push.call(Math, 1);",
        "delete Map.prototype.size;",
        "Array.prototype[Symbol.unscopables].left = true;",
        "delete Array.prototype[Symbol.unscopables].at;",
        "const u = Array.prototype[Symbol.unscopables]; delete u.at; u.at = true;",  # the same, but last
        "delete TypeError.prototype.message;",  # as it reads: Error.prototype.message is "" too
        "const f = fs_read; delete globalThis.fs_read; globalThis.fs_read = f;",
        "const f = fs_read, e = exports; delete globalThis.fs_read; fs_read = f;"
        " delete globalThis.exports; exports = e;",  # exports is last again
        f"{STAMP} new (class extends Given {{ JSON = JSON; }})(globalThis);",
        "globalThis[Symbol.for('left')] = 1;",
        "delete globalThis[Symbol.toStringTag];",
        "Object.getPrototypeOf([][Symbol.iterator]()).iterLeak = 1; delete globalThis.left;",
    ],
)
def test_what_a_call_changes_is_gone_in_the_next(kernel: Kernel, make_tool: ToolFactory, change: str) -> None:
    make_tool("changer", f"function run() {{ try {{ {change} }} catch (e) {{}} return 'changed'; }}")
    make_tool("reader", READER)
    make_tool(
        "async_reader",
        READER.replace("function run()", "async function run()").replace("{\n", "{ await null;\n", 1),
    )
    assert run(kernel, "reader") == AS_NEW
    assert run(kernel, "changer") == "changed"
    assert run(kernel, "async_reader") == AS_NEW  # its `await` runs any job the changer left
    assert run(kernel, "changer") == "changed"
    assert run(kernel, "reader") == AS_NEW


def test_eval_called_directly_still_sees_the_callers_scope(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "direct", "const base = 40;\nfunction run() { const two = 2; return String(eval('base + two')); }"
    )
    assert [run(kernel, "direct") for _ in range(2)] == ["42", "42"]


def test_a_module_imported_by_one_call_is_loaded_anew_by_the_next(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path
) -> None:
    (tools_dir / "counter.mjs").write_text("let n = 0;\nexport const next = () => ++n;\n")
    make_tool("importer", "async function run() { return String((await import('./counter.mjs')).next()); }")
    assert [run(kernel, "importer") for _ in range(3)] == ["1", "1", "1"]


def test_top_level_declarations_are_the_calls_own(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "decls",
        """
        let calls = 0; const once = {}; var seen = (typeof seen === 'number') ? seen + 1 : 1;
        class Box {}
        function run() {
          calls += 1; once.n = (once.n || 0) + 1;
          return `${calls}/${once.n}/${seen}/${typeof Box}`;
        }
        """,
    )
    assert [run(kernel, "decls") for _ in range(3)] == ["1/1/1/function"] * 3


def test_a_helper_answers_the_user_of_the_call_under_way(project: Path, make_tool: ToolFactory) -> None:
    kernel = build_kernel(project, "state:\n  db_path: data/state.db\n")
    make_tool(
        "note",
        "function run(a) { if (a.text) state_set('user', 'note', a.text);"
        " return String(state_get('user', 'note')); }",
    )
    assert run(kernel, "note", {"text": "alice's"}, user="alice") == "alice's"
    assert run(kernel, "note", {}, user="bob") == "null"
    assert run(kernel, "note", {}, user="alice") == "alice's"


def test_limits_hold_in_a_kept_context(kernel: Kernel, make_tool: ToolFactory) -> None:
    """A call past its time fails as in a fresh context, and the calls after it run as ever: each
    call's budget, not the first one's, answers QuickJS's interrupt handler."""
    make_tool(
        "spin",
        "function run() { for (;;) {} }",
        yaml_extra="timeout_secs: 0.3\nmax_operations: 1000000000000\n",
    )
    make_tool(
        "fine", "function run() { let n = 0; for (let i = 0; i < 30000; i++) n += i; return `fine ${n}`; }"
    )
    for _ in range(2):
        assert run(kernel, "fine") == "fine 449985000"
        assert run(kernel, "spin") == "script exceeded timeout_secs (0.3 s)"
        assert run(kernel, "fine") == "fine 449985000"


def test_a_calls_garbage_leaves_the_next_its_whole_memory(kernel: Kernel, make_tool: ToolFactory) -> None:
    """Cycles the last call left (`big` and `run` hold each other) are collected before they could
    crowd a call that needs most of its memory limit, as in a fresh context."""
    make_tool(
        "near_limit",
        "const big = []; function run() { for (let i = 0; i < 90000; i++) big.push('x'.repeat(100) + i);"
        " big.me = run; return 'ok'; }",
        yaml_extra="memory_limit_mb: 16\n",
    )
    assert [run(kernel, "near_limit") for _ in range(4)] == ["ok"] * 4


def test_a_clean_call_keeps_its_context(kernel: Kernel, make_tool: ToolFactory) -> None:
    """The pool does hold a context: the second call of a tool runs in the one the first used, a
    call that changed it leaves none behind, and that script's next calls take fresh contexts."""
    make_tool("plain", "function run(a) { return [1, 2].map((x) => x * a.n).join(); }")
    make_tool("dirty", "function run() { globalThis.left = 1; return 'dirty'; }")
    pool = js_engine(kernel)._pool
    assert run(kernel, "plain", {"n": 2}) == "2,4"
    kept = pool.idle()
    assert len(kept) == 1
    assert run(kernel, "plain", {"n": 3}) == "3,6"
    assert pool.idle() == kept
    assert run(kernel, "dirty") == "dirty"
    assert pool.idle() == []
    assert run(kernel, "plain", {"n": 1}) == "1,2"
    kept = pool.idle()
    assert len(kept) == 1
    assert run(kernel, "dirty") == "dirty"  # a script that left its context unusable runs in a fresh one
    assert pool.idle() == kept


def test_a_call_that_throws_keeps_its_context_and_a_limit_drops_it(
    kernel: Kernel, make_tool: ToolFactory
) -> None:
    """A tool that refuses bad input by throwing stays on the kept path (it went to fresh contexts
    for good after its first error); a call a limit stopped leaves no context, yet the script's next
    call runs kept again."""
    make_tool(
        "picky",
        "function run(a) { if (a.n < 0) throw new Error('n must be >= 0'); if (a.n > 1e6) { const b = [];"
        " for (;;) b.push('x'.repeat(1000)); } return `n=${a.n}`; }",
        yaml_extra="memory_limit_mb: 4\n",
    )
    engine = js_engine(kernel)
    pool = engine._pool
    assert run(kernel, "picky", {"n": 1}) == "n=1"
    kept = pool.idle()
    assert len(kept) == 1
    assert "n must be >= 0" in str(run(kernel, "picky", {"n": -1}))
    assert pool.idle() == kept
    assert run(kernel, "picky", {"n": 2}) == "n=2"
    assert pool.idle() == kept
    assert "out of memory" in str(run(kernel, "picky", {"n": 1e7}))
    assert pool.idle() == []
    assert run(kernel, "picky", {"n": 3}) == "n=3"
    assert len(pool.idle()) == 1 and pool.idle() != kept
    assert not any(path.name.startswith("picky") for path in engine._fresh)


def test_errors_name_the_scripts_own_lines_and_columns(kernel: Kernel, make_tool: ToolFactory) -> None:
    """The top level runs as a function, yet a stack names `<eval>` and the columns of line 1 as
    QuickJS gives them for the script itself (run as it is: `run (…thrower.js:1:33)`)."""
    make_tool("thrower", "function run() { throw new Error('boom'); }\n")
    make_tool("top", "const x = 1;\nnull.y;\nfunction run() {}\n")
    thrown = kernel.run_tool("thrower", {})
    assert thrown.error == "Error: boom (at thrower.js:1:33)"
    top = kernel.run_tool("top", {})
    assert top.error is not None and top.error.endswith("(at top.js:2:5)")


#: Scripts that change a builtin at their top level, the arguments they are called with, and what a
#: fresh context answers: every call must answer it, the first in a kept context included.
POLYFILLS: dict[str, tuple[str, JSONValue, str]] = {
    "method": (
        "String.prototype.capitalize = function () { return this[0].toUpperCase() + this.slice(1); };\n"
        "function run(a) { return a.text.capitalize(); }",
        {"text": "hello"},
        "Hello",
    ),
    "in run": (
        "function run(a) {\n  if (!String.prototype.capitalize) {\n"
        "    String.prototype.capitalize = function () { return this[0].toUpperCase() + this.slice(1); };\n"
        "  }\n  return a.text.capitalize();\n}",
        {"text": "hello"},
        "Hello",
    ),
    "strict": (
        '"use strict";\nArray.prototype.last = function () { return this[this.length - 1]; };\n'
        "function run() { return String([1, 2, 3].last()); }",
        None,
        "3",
    ),
    "namespace": (
        "Object.myHelper = (x) => x * 2; Math.clamp = (x, lo, hi) => Math.min(Math.max(x, lo), hi);\n"
        "function run() { return `${Object.myHelper(21)} ${Math.clamp(9, 0, 5)}`; }",
        None,
        "42 5",
    ),
    "read-only": (
        "Object.defineProperty(Array.prototype, 'second', { value: function () { return this[1]; } });\n"
        "function run() { 'use strict';\n"
        "  try { [].second = 0; } catch (e) { return `${[1, 2].second()} ${e.name}`; } }",
        None,
        "2 TypeError",
    ),
    "deleted": (
        "delete Array.prototype.includes;\nfunction run() { return typeof [].includes; }",
        None,
        "undefined",
    ),
    "prototype": (
        "Object.setPrototypeOf(Math, { answer: 42 });\nfunction run() { return String(Math.answer); }",
        None,
        "42",
    ),
}
SEER = """
function run() {
  return [typeof "".capitalize, typeof [].last, typeof Object.myHelper, typeof Math.clamp, typeof [].second,
          typeof [].includes, String(Math.answer)].join();
}
"""
NONE_SEEN = "undefined,undefined,undefined,undefined,undefined,function,undefined"


@pytest.mark.parametrize("name", sorted(POLYFILLS))
def test_a_polyfill_works_from_the_first_call_and_stays_its_own(
    kernel: Kernel, make_tool: ToolFactory, name: str
) -> None:
    """The script's top level first runs in a kept context when the tool loads (to find `run`), and
    `run` first runs in one on the first call: a change made there drops that context, and the
    script's later calls take fresh contexts. Every call answers alike, and another script on the
    thread never sees the change."""
    source, args, want = POLYFILLS[name]
    make_tool("polyfilled", source)
    make_tool("seer", SEER)
    assert run(kernel, "seer") == NONE_SEEN
    assert run(kernel, "polyfilled", args) == want
    assert run(kernel, "seer") == NONE_SEEN
    assert [run(kernel, "polyfilled", args) for _ in range(2)] == [want] * 2
    assert any(path.name.startswith("polyfilled") for path in js_engine(kernel)._fresh)
    assert run(kernel, "seer") == NONE_SEEN


def test_a_hooks_polyfill_works_from_the_first_call(
    kernel: Kernel, pipeline: HookPipeline, hooks_dir: Path
) -> None:
    """Hooks run through the same engine: finding the hook's functions runs its top level, then
    each event calls it; the polyfill holds in every one."""
    shouter = make_hook(
        hooks_dir,
        "shouter",
        "String.prototype.shout = function () { return this.toUpperCase() + '!'; };\n"
        "function before_tool_call(ctx, call) { return {notice: call.tool.shout()}; }",
    )
    call: JSONObject = {"id": "c1", "tool": "shell", "args": {}, "origin": "llm"}
    notices = [pipeline.before_tool_call([shouter], kernel.caller(), call).notices for _ in range(3)]
    assert notices == [["SHELL!"]] * 3


def test_a_kernel_that_keeps_no_contexts_answers_alike(project: Path, make_tool: ToolFactory) -> None:
    """`kept_contexts=False` (`agentkernel tool run`): every call, and the check of each script, in a
    new context, none left in the pool; the answers are those of a kept context (S3.3)."""
    source, args, want = POLYFILLS["method"]
    make_tool("polyfilled", source)
    make_tool("seer", SEER)
    make_tool("reader", READER)
    make_tool("thrower", "function run() { throw new Error('boom'); }\n")
    config = load_kernel_config(project / "config" / "kernel.yaml")
    with Kernel(config, kept_contexts=False) as fresh:
        engine = js_engine(fresh)
        assert run(fresh, "polyfilled", args) == want
        assert [run(fresh, "seer"), run(fresh, "reader")] == [NONE_SEEN, AS_NEW]
        assert run(fresh, "polyfilled", args) == want
        assert fresh.run_tool("thrower", {}).error == "Error: boom (at thrower.js:1:33)"
        assert engine._pool.idle() == [] and engine._fresh == {}
