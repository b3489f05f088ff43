"""Rhai tools sharing code through modules (issue 14 §3; S1.1, S1.4, S4.4).

A `.rhai` tool imports `.rhai` files of its own folder and below, as an `.mjs`
tool does (tests/scripting/js/test_modules.py): the same attack list is refused, with
the reason, and an edited module applies from the next call (S1.4).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentkernel import Kernel
from tests.conftest import ToolFactory

UTIL = 'export const GREETING = "hi";\nfn greet(who) { `${global::GREETING} ${who}` }\n'


@pytest.fixture
def shared(tools_dir: Path) -> Path:
    (tools_dir / "shared").mkdir()
    util = tools_dir / "shared" / "util.rhai"
    util.write_text(UTIL)
    return util


def test_two_tools_share_a_module(kernel: Kernel, make_tool: ToolFactory, shared: Path) -> None:
    make_tool("a", 'import "shared/util" as u;\nfn run(args) { u::greet(args.who) }', ext=".rhai")
    make_tool("b", 'import "shared/util" as u;\nfn run(args) { u::GREETING.len }', ext=".rhai")
    assert kernel.run_tool("a", {"who": "you"}).content == "hi you"
    assert kernel.run_tool("b", {}).content == "2"


def test_tools_and_hooks_share_the_scripts_folders(
    kernel: Kernel, make_tool: ToolFactory, project: Path, tools_dir: Path
) -> None:
    """The kernel's tools and hooks folders are where modules may come from (kernel.yaml `scripts`)."""
    hooks = project / "config" / "scripts" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    (hooks / "words.rhai").write_text('fn banned() { ["спам"] }\n')
    make_tool("checker", 'import "../hooks/words" as w;\nfn run(args) { w::banned()[0] }', ext=".rhai")
    assert kernel.run_tool("checker", {}).content == "спам"


def test_an_edited_module_applies_from_the_next_call(
    kernel: Kernel, make_tool: ToolFactory, shared: Path
) -> None:
    """S1.4: the module is compiled again when its file changes; the tool's file did not."""
    make_tool("greeter", 'import "shared/util" as u;\nfn run(args) { u::greet("x") }', ext=".rhai")
    assert kernel.run_tool("greeter", {}).content == "hi x"
    shared.write_text(UTIL.replace('"hi"', '"hello"'))
    stamp = shared.stat()
    os.utime(shared, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000_000))
    assert kernel.run_tool("greeter", {}).content == "hello x"


def test_an_error_in_a_module_names_the_module_file(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path
) -> None:
    (tools_dir / "broken.rhai").write_text("fn f() { 1 }\nlet y = nope;\n")
    make_tool("user", 'fn run(args) {\n  import "broken" as b;\n  1\n}', ext=".rhai")
    result = kernel.run_tool("user", {})
    assert not result.success
    assert "Variable not found: nope" in result.content and "broken.rhai:2:9" in result.content
    (tools_dir / "lib").mkdir()
    (tools_dir / "lib" / "calc.rhai").write_text("fn half(x) {\n  x / 2\n}\nfn name(x) { x.nope }\n")
    make_tool("halver", 'import "lib/calc" as c;\nfn run(args) { c::name(1) }', ext=".rhai")
    content = kernel.run_tool("halver", {}).content
    assert content.endswith("@ 'lib/calc' (at lib/calc.rhai:4:16)"), content


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("/etc/hostname", "an absolute path"),
        ("../../../data/keys", "outside the scripts' folder"),
        ("shared/../../../../data/keys", "outside the scripts' folder"),
        ("keys", "is a symbolic link"),
        ("data/keys", "is a symbolic link"),
        ("cycle_a", "Cyclic import: cycle_a -> cycle_b -> cycle_a (at cycle_b.rhai:1:8)"),
        ("missing", "Module not found: missing"),
    ],
)
def test_the_attack_list_is_refused(
    kernel: Kernel, make_tool: ToolFactory, project: Path, tools_dir: Path, spec: str, reason: str
) -> None:
    secret = project / "data" / "keys.rhai"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text('export const KEY = "the secret";\n')
    (tools_dir / "keys.rhai").symlink_to(secret)
    (tools_dir / "data").symlink_to(secret.parent)
    (tools_dir / "cycle_a.rhai").write_text('import "cycle_b";')
    (tools_dir / "cycle_b.rhai").write_text('import "cycle_a";')
    make_tool("attack", f'import "{spec}" as k;\nfn run(args) {{ k::KEY }}', ext=".rhai")
    result = kernel.run_tool("attack", {})
    assert not result.success and reason in result.content, result.content
    assert "the secret" not in result.content
    make_tool("fine", 'fn run(args) { "still here" }', ext=".rhai")
    assert kernel.run_tool("fine", {}).content == "still here"  # the refusal failed its tool alone


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        ("max_operations: 5000", "script exceeded max_operations (5,000): Too many operations"),
        ("timeout_secs: 0.2", "script exceeded timeout_secs (0.2 s)"),
    ],
)
def test_the_call_limits_count_module_code(
    kernel: Kernel, make_tool: ToolFactory, tools_dir: Path, limit: str, expected: str
) -> None:
    """S21.1: a module's code runs within the importing call's limits, uncatchable as ever."""
    (tools_dir / "spin.rhai").write_text("fn forever() { loop { } }\nexport let started = true;\n")
    source = 'import "spin" as s;\nfn run(args) { try { s::forever() } catch { "caught" } }'
    make_tool("spinner", source, ext=".rhai", yaml_extra=f"{limit}\n")
    assert kernel.run_tool("spinner", {}).content == expected
