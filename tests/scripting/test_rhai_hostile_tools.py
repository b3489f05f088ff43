"""Hostile Rhai tools and hooks, as a user meets them (issue 9, items 1, 2 and 6; S2.5, S4, S7, S21).

A script that cannot compile fails alone, with a Rhai syntax error, and
never takes the other tools down; compiling is bounded by the call's time
and by the size of a script; `exit()` ends a script with its value.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.scripting.contract import MAX_SCRIPT_SIZE, LoadedScript, ScriptEngine
from agentkernel.testing.parts import kernel_parts
from agentkernel.util.file_stamps import Stamp
from tests.conftest import ToolFactory, write_kernel_yaml

BIN = Path(sys.executable).parent


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def nested(opening: str, middle: str, closing: str, depth: int) -> str:
    return opening * depth + middle + closing * depth


def write_tool(tools: Path, name: str, source: str, extra: str = "") -> None:
    (tools / f"{name}.rhai").write_text(source, encoding="utf-8")
    (tools / f"{name}.yaml").write_text(
        f"kind: script_tool\nname: {name}\ndescription: {name}\nscript: {name}.rhai\n{extra}",
        encoding="utf-8",
    )


# -- item 1: one hostile file, through the command line ---------------------------------------------


def test_hostile_files_fail_alone_in_tool_list_and_tool_run(tmp_path: Path) -> None:
    """Files that once crashed every command (Python's int limit, its 20 nested blocks) now load
    and run; a genuinely broken one is a load problem with the reference's syntax error."""
    config = write_kernel_yaml(tmp_path)
    tools = tmp_path / "config" / "scripts" / "tools"
    write_tool(tools, "good", 'fn run(args) { "good" }')
    write_tool(tools, "digits", "fn run(args) { " + "1" * 5000 + " }")
    write_tool(tools, "loops", "fn run(args) { " + nested("loop { ", "break 7;", " break 1; }", 9) + " }")
    write_tool(
        tools, "tries", nested("try { ", "let x = 1;", " } catch {}", 18) + ' fn run(args) { "tries" }'
    )
    write_tool(
        tools,
        "deep",
        "let n = 0; " + nested("loop { ", "n += 1; break;", " break; }", 19) + " fn run(a) { 5 }",
    )
    write_tool(tools, "broken", "fn run(args) { 0x" + "f" * 5000 + " }")

    listed = cli("agentkernel", "tool", "list", "--config", str(config), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names == ["deep", "digits", "good", "loops", "tries"]
    assert listed.stderr.count("not loaded:") == 1
    assert "config/scripts/tools/broken.yaml:4: script broken.rhai: Syntax error: Invalid number: 'fff" in (
        listed.stderr
    )

    def run(name: str) -> subprocess.CompletedProcess[str]:
        return cli("agentkernel", "tool", "run", name, "{}", "--config", str(config), cwd=tmp_path)

    results = {
        name: json.loads(run(name).stdout)["content"] for name in ("good", "digits", "loops", "tries", "deep")
    }
    assert results == {"good": "good", "digits": "inf", "loops": "1", "tries": "tries", "deep": "5"}
    broken = run("broken")
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    assert "failed to load: script broken.rhai: Syntax error: Invalid number: 'fff" in broken.stderr


def test_rhai_run_exits_2_on_a_syntax_error_and_runs_deep_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.rhai"
    bad.write_text("let x = 0b" + "1" * 65 + ";")
    done = cli("agentkernel", "rhai", "run", str(bad), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (
        2,
        f"Syntax error: Invalid number: '{'1' * 65}' (line 1, position 9)\n",
    )
    deep = tmp_path / "deep.rhai"
    deep.write_text(nested("try { ", "print(18);", " } catch {}", 18) + " " + "9" * 5000)
    done = cli("agentkernel", "rhai", "run", "--print-result", str(deep), cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "18\nf64: inf\n", "")


# -- item 2: compiling is bounded -------------------------------------------------------------------


def test_eval_of_generated_text_stops_at_timeout_secs(kernel: Kernel, make_tool: ToolFactory) -> None:
    """Compiling `eval`'s text counts against the call's time (it once ran 12 s in a 1 s tool)."""
    make_tool(
        "evaluator",
        'fn run(args) { let s = ""; s.pad(250000, "x += 1;"); let x = 0; eval(s); x }',
        ext=".rhai",
        yaml_extra="timeout_secs: 1\nmax_operations: 100000000\n",
    )
    result = kernel.run_tool("evaluator", {})
    assert (result.success, result.content) == (False, "script exceeded timeout_secs (1 s)")


def test_eval_text_has_a_maximum_size(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "big_eval", f'fn run(args) {{ let s = ""; s.pad({MAX_SCRIPT_SIZE + 1}, "1"); eval(s) }}', ext=".rhai"
    )
    result = kernel.run_tool("big_eval", {})
    assert result.success is False
    too_large = f"{MAX_SCRIPT_SIZE + 1:,} characters, more than {MAX_SCRIPT_SIZE:,}"
    assert result.content.startswith(f"Syntax error: Script is too large: {too_large}")


def test_a_script_file_has_a_maximum_size(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("huge", "fn run(args) { 1 }" + " " * MAX_SCRIPT_SIZE, ext=".rhai")
    result = kernel.run_tool("huge", {})
    assert result.success is False
    assert f"bytes, more than the maximum of {MAX_SCRIPT_SIZE:,}" in result.content


def test_importing_the_engine_is_not_part_of_a_script_s_compile_time(
    kernel: Kernel, make_tool: ToolFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Rhai engine is imported when a kernel first meets a Rhai script (0.1-0.5 s, more on a busy
    machine): a tool of a short `timeout_secs` checked first failed to load for it, and its call
    answered `unknown tool`. The import (here made slower than the tool's whole timeout) comes first."""
    import time

    from agentkernel.scripting import host

    real = host.rhai_engine

    def slow_import(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)  # an import's cost, not a wait for anything
        return real(*args, **kwargs)

    monkeypatch.setattr(host, "rhai_engine", slow_import)
    make_tool("quick", "fn run(args) { 42 }", ext=".rhai", yaml_extra="timeout_secs: 0.1\n")
    result = kernel.run_tool("quick", {})
    assert (result.success, result.content) == (True, "42")


def test_a_tool_whose_check_was_cut_short_runs_once_it_compiles(
    kernel: Kernel, make_tool: ToolFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compile stopped by its deadline is tried again (it may pass on a quieter moment); asking why a
    tool is missing tries it again, and a tool that loads then was answered `unknown tool`."""
    from agentkernel.errors import ScriptLimitError

    host = kernel_parts(kernel).host
    real = host.compile
    cut_short: list[str] = []

    def first_compile_too_slow(path: Path, deadline: float | None = None, known: Stamp = None) -> Any:
        if not cut_short:
            cut_short.append(path.name)
            raise ScriptLimitError("timeout_secs", "script exceeded timeout_secs while being compiled")
        return real(path, deadline, known)

    monkeypatch.setattr(host, "compile", first_compile_too_slow)
    make_tool("steady", "fn run(args) { 7 }", ext=".rhai")
    result = kernel.run_tool("steady", {})
    assert cut_short == ["steady.rhai"]
    assert (result.success, result.content) == (True, "7")


def test_compiling_a_tool_stops_at_its_timeout_and_is_tried_again(
    kernel: Kernel, make_tool: ToolFactory
) -> None:
    """A script too slow to compile within its tool's `timeout_secs` is not offered, for now."""
    statements = "x += 1;\n" * ((MAX_SCRIPT_SIZE - 100) // len("x += 1;\n"))
    make_tool(
        "slow",
        "let x = 0;\n" + statements + "fn run(args) { 1 }",
        ext=".rhai",
        yaml_extra="timeout_secs: 0.2\n",
    )
    result = kernel.run_tool("slow", {})
    assert result.success is False
    assert (
        "failed to load: script slow.rhai: script exceeded timeout_secs while being compiled"
        in result.content
    )
    (problem,) = kernel.problems()
    assert "timeout_secs" in problem.reason
    entry = kernel_parts(kernel).catalog._entries[problem.path]
    assert entry.checked is False  # a compile cut short is tried again at the next lookup


def test_no_lock_is_held_while_a_script_compiles(kernel: Kernel, make_tool: ToolFactory) -> None:
    """While one thread compiles a script, another thread's lookup goes through the catalog."""
    make_tool("quick", 'fn run(args) { "quick" }', ext=".rhai")
    make_tool("blocked", 'fn run(args) { "blocked" }', ext=".rhai")
    assert kernel.run_tool("quick", {}).content == "quick"
    entered, release = threading.Event(), threading.Event()
    original = kernel_parts(kernel).host.compile

    def slow_compile(
        path: Path, deadline: float | None = None, known: Stamp = None
    ) -> tuple[ScriptEngine[Any], LoadedScript]:
        if threading.current_thread() is worker:  # the worker's compile takes as long as we like
            entered.set()
            release.wait(60)
        return original(path, deadline, known)

    kernel_parts(kernel).host.compile = slow_compile  # type: ignore[method-assign]
    results: list[str] = []
    worker = threading.Thread(target=lambda: results.append(kernel.run_tool("blocked", {}).content))
    worker.start()
    try:
        assert entered.wait(60)
        assert kernel.run_tool("quick", {}).content == "quick"  # would wait for the worker under the lock
        assert [t.name for t in kernel.list_tools()] == ["blocked", "quick"]  # compiled here too: last wins
    finally:
        release.set()
        worker.join(60)
    assert results == ["blocked"]


# -- item 6: exit ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "content", "success"),
    [
        ("fn run(args) { exit(42); 1 }", "42", True),
        ("fn run(args) { exit(); 1 }", "null", True),  # unit: S4.5's JSON text
        ('fn run(args) { exit("done") }', "done", True),  # a string is the content (S4.3)
        ('fn run(args) { exit(#{ error: "stop" }) }', "stop", False),  # S4.2
        ("fn helper() { exit(7) } fn run(args) { try { helper() } catch { 0 } }", "7", True),
        ('fn run(args) { eval("exit(args.n * 2)"); 0 }', "42", True),
        ("fn run(args) { [1, 2].map(|v| exit(v + 10)) }", "11", True),
        # the top level runs before `run`, as in the reference's call_fn: exit() ends it, run still runs
        ('print("before"); exit(1); print("after"); fn run(args) { "ran" }', "ran", True),
    ],
)
def test_exit_ends_the_script_with_its_value(
    kernel: Kernel, make_tool: ToolFactory, source: str, content: str, success: bool
) -> None:
    make_tool("quitter", source, ext=".rhai")
    result = kernel.run_tool("quitter", {"n": 21})
    assert (result.content, result.success) == (content, success)


def test_exit_in_a_hook_is_its_verdict(kernel: Kernel, project: Path) -> None:
    hooks = project / "config" / "scripts" / "hooks"
    (hooks / "leaver.rhai").write_text('fn before_user_message(ctx, msg) { exit(#{ notice: "bye" }); 1 }')
    (hooks / "leaver.yaml").write_text("kind: script_hook\nname: leaver\nscript: leaver.rhai\n")
    run = kernel.run_hooks("leaver", {"role": "user", "content": "hi"})
    assert run.before.notices == ["bye"]
    assert [record.error for record in run.records] == [None]
