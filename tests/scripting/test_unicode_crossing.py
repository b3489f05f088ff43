"""Issue 9 item 9: what crosses from a script is valid Unicode, and bounded before it is encoded.

A JavaScript string may hold a lone surrogate (`"a\\ud800b"`,
`String.fromCharCode(0xD800)`), and so may a Rhai string made by
`parse_json`; `return "a\\ud800b"` once crashed `agentkernel tool run` with
UnicodeEncodeError. Where a script's value enters the kernel (a tool's
result: content, error, visual, data; a hook's verdict or error; a log
line) each lone surrogate becomes U+FFFD, with a warning; a helper given
one says so in the script's own terms.

And what crosses back is measured before it is encoded (S4, S6): a result
whose JSON would be gigabytes (a Rhai array of a thousand references to
one big string) is cut or dropped for the cost of the limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.agent.verdicts import parse_before_user_message
from agentkernel.config import load_kernel_config
from agentkernel.tools.results import normalize
from agentkernel.tools.visual import validate_visual
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory, write_kernel_yaml

BIN = Path(sys.executable).parent
FFFD = "\ufffd"
WARNING = "the result contained invalid Unicode (lone surrogate); replaced with U+FFFD"

# Each returns content "a\ud800b", a text block "x\udc00y", data {"k\udfff": "\ud83d"} (half a pair).
SURROGATE_TOOLS = {
    ".js": r"""
        function run(args) {
            const half = String.fromCharCode(0xD83D);
            return {content: "a\ud800b", visual: {type: "text", text: "x\udc00y"}, data: {"k\udfff": half}};
        }
    """,
    ".rhai": r"""
        fn run(args) {
            let odd = parse_json(
                "{\"a\": \"a\\ud800b\", \"x\": \"x\\udc00y\", \"k\": \"k\\udfff\", \"h\": \"\\ud83d\"}"
            );
            let data = #{};
            data[odd.k] = odd.h;
            #{ content: odd.a, visual: #{ type: "text", text: odd.x }, data: data }
        }
    """,
}


def run_cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], cwd=project, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("ext", [".js", ".rhai"])
def test_tool_run_prints_repaired_text_with_a_warning(
    project: Path, make_tool: ToolFactory, ext: str
) -> None:
    make_tool("odd", SURROGATE_TOOLS[ext], ext=ext)
    done = run_cli(project, "agentkernel", "tool", "run", "odd")
    assert done.returncode == 0, done.stderr  # was: UnicodeEncodeError, a traceback, exit 1
    assert json.loads(done.stdout) == {
        "content": f"a{FFFD}b",
        "success": True,
        "error": None,
        "visual": [{"type": "text", "text": f"x{FFFD}y"}],
        "warnings": [WARNING],
    }
    pretty = run_cli(project, "agentkernel", "tool", "run", "odd", "--pretty")
    assert pretty.returncode == 0, pretty.stderr
    assert f"a{FFFD}b" in pretty.stdout and f"x{FFFD}y" in pretty.stdout and WARNING in pretty.stdout


@pytest.mark.parametrize("ext", [".js", ".rhai"])
def test_data_reaches_other_scripts_repaired(project: Path, make_tool: ToolFactory, ext: str) -> None:
    make_tool("odd", SURROGATE_TOOLS[ext], ext=ext)
    kernel = Kernel(load_kernel_config(project / "config" / "kernel.yaml"))
    result = kernel.run_tool("odd", {})
    assert result.data == {f"k{FFFD}": FFFD}
    assert result.warnings == [WARNING]


THROWERS = {
    ".js": """
        function run(args) { if (args.how === "throw") throw "bad\\ud800"; return {error: "bad\\udc00"}; }
    """,
    ".rhai": r"""
        fn run(args) {
            let bad = parse_json("{\"t\": \"bad\\ud800\"}").t;
            if args.how == "throw" { throw bad; }
            #{ error: bad }
        }
    """,
}


@pytest.mark.parametrize("ext", [".js", ".rhai"])
@pytest.mark.parametrize("how", ["throw", "return"])
def test_errors_are_repaired_too(project: Path, make_tool: ToolFactory, ext: str, how: str) -> None:
    make_tool("thrower", THROWERS[ext], ext=ext)
    done = run_cli(project, "agentkernel", "tool", "run", "thrower", json.dumps({"how": how}))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["success"] is False
    assert f"bad{FFFD}" in result["content"] and f"bad{FFFD}" in result["error"]
    assert result["warnings"] == [WARNING]


HOOKS = {
    ".js": r"""
        function before_user_message(ctx, msg) {
            return {notice: "n\ud800", inject: [{role: "system", content: "s\udc00"}]};
        }
        function after_turn(ctx, q, a) { throw "bad\udbff"; }
    """,
    ".rhai": r"""
        fn before_user_message(ctx, msg) {
            let odd = parse_json("{\"n\": \"n\\ud800\", \"s\": \"s\\udc00\", \"b\": \"bad\\udbff\"}");
            #{ notice: odd.n, inject: [#{ role: "system", content: odd.s }] }
        }
        fn after_turn(ctx, q, a) { throw parse_json("{\"b\": \"bad\\udbff\"}").b; }
    """,
}


@pytest.mark.parametrize("ext", [".js", ".rhai"])
def test_hook_tool_prints_repaired_verdicts(project: Path, ext: str) -> None:
    hooks = project / "config" / "scripts" / "hooks"
    (hooks / f"odd{ext}").write_text(HOOKS[ext], encoding="utf-8")
    (hooks / "odd.yaml").write_text(f"kind: script_hook\nname: odd\nscript: odd{ext}\n")
    done = run_cli(project, "hook_tool", str(hooks / "odd.yaml"), "user", "hi")
    assert done.returncode == 1, done.stderr  # after_turn throws
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0] == {
        "event": "before_user_message",
        "result": {"notice": f"n{FFFD}", "inject": [{"role": "system", "content": f"s{FFFD}"}]},
        "warnings": [
            "the hook's return value contained invalid Unicode (lone surrogate); replaced with U+FFFD"
        ],
    }
    assert lines[1]["event"] == "after_turn" and f"bad{FFFD}" in lines[1]["error"]


def test_log_lines_are_repaired(project: Path, make_tool: ToolFactory) -> None:
    make_tool("talker", 'function run() { console.warn("w\\ud800"); return "ok"; }')
    done = run_cli(project, "agentkernel", "tool", "run", "talker")
    assert done.returncode == 0
    assert f"[tool talker] w{FFFD}" in done.stderr


HELPER_CALLS = [
    ("env_var", "env_var(s)", "env_var: an argument is not valid Unicode: it holds a lone surrogate"),
    (
        "fs_read",
        "fs_read(caller().temp_dir + '/' + s)",
        "fs_read: an argument is not valid Unicode: it holds a lone surrogate",
    ),
    ("shell", "shell('echo ' + s).stderr", "shell: cmd is not valid Unicode: it holds a lone surrogate"),
    ("exec", "exec('echo', [s]).stderr", "exec: args[0] is not valid Unicode: it holds a lone surrogate"),
    (
        "http_get",
        "http_get('http://127.0.0.1:9/' + s).error",
        "is not valid Unicode: it holds a lone surrogate",
    ),
]


@pytest.mark.parametrize(("helper", "call", "message"), HELPER_CALLS, ids=[c[0] for c in HELPER_CALLS])
def test_helpers_refuse_lone_surrogates_in_the_scripts_terms(
    project: Path, make_tool: ToolFactory, helper: str, call: str, message: str
) -> None:
    """No `internal error: UnicodeEncodeError`, no traceback in the log."""
    write_kernel_yaml(project, "shell:\n  enabled: true\n")
    source = (
        f"function run() {{ const s = 'a\\ud800'; "
        f"try {{ return String({call}); }} catch (e) {{ return e.message; }} }}"
    )
    make_tool("probe", source)
    done = run_cli(project, "agentkernel", "tool", "run", "probe", "--session", "s1")
    assert done.returncode == 0, done.stderr
    assert message in json.loads(done.stdout)["content"]
    assert "Traceback" not in done.stderr and "internal error" not in done.stdout


# -- bounded before encoding -------------------------------------------------------------------------------

# 100 references to one string of 100,000 characters: 10 MB of JSON from 100 KB of values
SHARED_REFERENCES = {
    ".rhai": r"""
        fn run(args) {
            let big = "x";
            big.pad(100000, "y");
            let many = [];
            many.pad(100, big);
            if args.where == "content" { return many; }
            if args.where == "error" { return #{ error: many }; }
            if args.where == "data" { return #{ content: "ok", data: many }; }
            let rows = [];
            rows.pad(100, #{ cell: big });
            #{ content: "ok", visual: #{ type: "table", columns: [#{ key: "cell" }], rows: rows } }
        }
    """,
    ".js": r"""
        function run(args) {
            const big = "x" + "y".repeat(99999);
            const many = new Array(100).fill(big);
            if (args.where === "content") return many;
            if (args.where === "error") return {error: many};
            if (args.where === "data") return {content: "ok", data: many};
            const rows = new Array(100).fill({cell: big});
            return {content: "ok", visual: {type: "table", columns: [{key: "cell"}], rows: rows}};
        }
    """,
}


@pytest.mark.parametrize("ext", [".js", ".rhai"])
@pytest.mark.parametrize("where", ["content", "error", "data", "visual"])
def test_a_result_too_big_as_json_is_cut_or_dropped(
    project: Path, make_tool: ToolFactory, where: str, ext: str
) -> None:
    """Content and error are cut at `max_result_chars`, data and visual dropped past their limits."""
    make_tool("bomb", SHARED_REFERENCES[ext], ext=ext)
    kernel = Kernel(load_kernel_config(project / "config" / "kernel.yaml"))
    result = kernel.run_tool("bomb", {"where": where})
    expected = {
        "content": "content truncated to 50,000 characters (its JSON text is longer)",
        "error": "error truncated to 50,000 characters (its JSON text is longer)",
        "data": "data dropped: its JSON text is longer than 50,000 characters (max_result_chars)",
        "visual": "visual dropped: more than 2,000,000 characters of JSON in its blocks (max_visual_chars)",
    }
    assert result.warnings == [expected[where]]
    if where in ("content", "error"):
        assert result.content.startswith('["xyyyy') and len(result.content) < 50_100
        assert result.content.endswith(
            "…[truncated: 50,000 characters of JSON shown; the rest was not encoded]"
        )
    assert result.data is None and result.visual == []


def test_measuring_allocates_nothing_like_the_text() -> None:
    """The same in-process, with the memory it takes: a 200 MB JSON text is never built."""
    from agentkernel.agent.verdicts import received

    many: list[JSONValue] = ["y" * 1_000_000] * 200
    tracemalloc.start()
    try:
        content = normalize(many, max_visual_chars=2_000_000, max_result_chars=50_000)
        visual = validate_visual([{"type": "text", "text": "t", "extra": many}], 2_000_000)
        hook = received({"reply": many}, 50_000)
        verdict = parse_before_user_message({"inject": {"huge": many}})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, peak  # a few copies of one 1 MB string at most, never 200 MB
    assert (
        content.content_cut and visual == ([], [visual[1][0]]) and visual[1][0].startswith("visual dropped")
    )
    assert (
        hook.problem
        == "returned more than 50,000 characters of JSON (max_result_chars); its verdict is ignored"
    )
    assert verdict.problems[0].startswith('inject: expected a list of messages, got {"huge": ["yyyy')
    assert len(verdict.problems[0]) < 150


def test_a_hook_verdict_too_big_is_an_error_record_not_a_display_of_it(project: Path) -> None:
    hooks = project / "config" / "scripts" / "hooks"
    (hooks / "big.rhai").write_text(
        'fn before_user_message(ctx, msg) { let s = "x"; s.pad(100000, "y"); let r = []; r.pad(100, s); '
        "#{ notice: r } }\n"
    )
    (hooks / "big.yaml").write_text(
        "kind: script_hook\nname: big\nscript: big.rhai\nevents: [before_user_message]\n"
    )
    done = run_cli(project, "hook_tool", str(hooks / "big.yaml"), "user", "hi")
    assert done.returncode == 1, done.stderr  # the call failed
    assert json.loads(done.stdout) == {
        "event": "before_user_message",
        "error": "returned more than 50,000 characters of JSON (max_result_chars); its verdict is ignored",
    }


ECHO_LENGTH = {
    ".js": "function run(args) { return 'chars ' + args.text.length; }",
    ".rhai": "fn run(args) { `chars ${args.text.len()}` }",
}


@pytest.mark.parametrize("ext", [".js", ".rhai"])
def test_arguments_with_a_lone_surrogate_reach_the_script(
    project: Path, make_tool: ToolFactory, ext: str
) -> None:
    """JSON can spell `"\\ud800"` (a model's tool call, a POST body): the script gets it, no failure."""
    make_tool("echo", ECHO_LENGTH[ext], ext=ext)
    kernel = Kernel(load_kernel_config(project / "config" / "kernel.yaml"))
    result = kernel.run_tool("echo", {"text": "a\ud800"})
    assert (result.content, result.success) == ("chars 2", True)
