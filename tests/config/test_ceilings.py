"""Issue 9 item 7: a script's YAML cannot lift the kernel's limits (S2.3, S21.1).

A tool or hook may lower `max_operations`, `timeout_secs` and
`memory_limit_mb` for itself, and raise them only up to `limits.ceilings`
in kernel.yaml; above, the file does not load, and `agentkernel check`
names the file, the line and the field. Without `ceilings`, the ceiling of
`timeout_secs` and `memory_limit_mb` is the kernel's own value, and
`max_operations` has none (the wall clock bounds every call anyway).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.config import KernelLimits, load_kernel_config
from agentkernel.errors import ConfigError
from tests.conftest import ToolFactory, write_kernel_yaml

BIN = Path(sys.executable).parent

# 24 strings of 4 MiB each, kept alive: about 200 MB of QuickJS heap, far above the default 64 MiB
GREEDY_JS = """
function run(args) {
    const kept = [];
    for (let i = 0; i < 24; i++) kept.push("x".repeat(4 << 20) + i);
    return "allocated " + kept.length * 4 + " MiB";
}
"""


def kernel_of(project: Path, extra: str = "") -> Kernel:
    return Kernel(load_kernel_config(write_kernel_yaml(project, extra)))


def check(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "agentkernel"), "check"], cwd=project, capture_output=True, text=True, timeout=120
    )


def test_the_attack_a_tool_asking_for_a_terabyte_does_not_get_it(
    project: Path, make_tool: ToolFactory
) -> None:
    """The attack suite's tool: `memory_limit_mb: 1000000` once ran with 1.1 GiB against the kernel's 64."""
    make_tool("greedy", GREEDY_JS, yaml_extra="memory_limit_mb: 1000000\n")
    kernel = kernel_of(project)
    result = kernel.run_tool("greedy", {})
    assert result.success is False
    assert result.content == (
        "tool 'greedy' is not available: config/scripts/tools/greedy.yaml:5 failed to load: "
        "memory_limit_mb: 1,000,000 is above the ceiling (the kernel's own limits.memory_limit_mb: 64; "
        "an operator allows more with limits.ceilings.memory_limit_mb in kernel.yaml)"
    )


def test_check_names_file_line_and_field(project: Path, make_tool: ToolFactory) -> None:
    make_tool("greedy", GREEDY_JS, yaml_extra="timeout_secs: 3600\n")
    make_tool("spinner", "fn run(args) { 1 }", ext=".rhai", yaml_extra="memory_limit_mb: 65\n")
    hooks = project / "config" / "scripts" / "hooks"
    (hooks / "slow.rhai").write_text("fn after_loop(ctx, reason) { () }\n")
    (hooks / "slow.yaml").write_text("kind: script_hook\nname: slow\nscript: slow.rhai\ntimeout_secs: 31\n")
    done = check(project)
    assert done.returncode == 1, done.stdout
    assert done.stdout.splitlines()[:-1] == [
        "config/scripts/hooks/slow.yaml:4: timeout_secs: 31 is above the ceiling (the kernel's own "
        "limits.timeout_secs: 30; an operator allows more with limits.ceilings.timeout_secs in kernel.yaml)",
        "config/scripts/tools/greedy.yaml:5: timeout_secs: 3,600 is above the ceiling (the kernel's own "
        "limits.timeout_secs: 30; an operator allows more with limits.ceilings.timeout_secs in kernel.yaml)",
        "config/scripts/tools/spinner.yaml:5: memory_limit_mb: 65 is above the ceiling (the kernel's own "
        "limits.memory_limit_mb: 64; an operator allows more with limits.ceilings.memory_limit_mb "
        "in kernel.yaml)",
    ]


def test_an_operators_ceiling_allows_raising_up_to_it_and_no_further(
    project: Path, make_tool: ToolFactory
) -> None:
    extra = "limits:\n  memory_limit_mb: 32\n  ceilings:\n    memory_limit_mb: 256\n    timeout_secs: 60\n"
    make_tool("roomy", GREEDY_JS, yaml_extra="memory_limit_mb: 256\n")
    make_tool("greedier", GREEDY_JS, yaml_extra="memory_limit_mb: 257\n")
    make_tool("small", GREEDY_JS)
    kernel = kernel_of(project, extra)
    assert kernel.run_tool("roomy", {}).content == "allocated 96 MiB"
    small = kernel.run_tool("small", {})  # no value of its own: the kernel's 32 MiB
    assert small.success is False and "out of memory (limit 32 MiB)" in small.content
    assert kernel.run_tool("greedier", {}).content.endswith(
        "memory_limit_mb: 257 is above the ceiling (limits.ceilings.memory_limit_mb: 256 in kernel.yaml)"
    )


def test_lowering_is_always_allowed_and_raising_max_operations_by_default_too(
    project: Path, make_tool: ToolFactory
) -> None:
    """`max_operations` only ends runaway loops early; `timeout_secs` still bounds the call."""
    make_tool(
        "modest", "fn run(args) { 1 }", ext=".rhai", yaml_extra="timeout_secs: 0.5\nmemory_limit_mb: 8\n"
    )
    make_tool("busy", "fn run(args) { 2 }", ext=".rhai", yaml_extra="max_operations: 100000000000\n")
    kernel = kernel_of(project)
    assert kernel.run_tool("modest", {}).content == "1"
    assert kernel.run_tool("busy", {}).content == "2"


def test_a_ceiling_on_max_operations_holds(project: Path, make_tool: ToolFactory) -> None:
    make_tool("busy", "function run() { return 2; }", yaml_extra="max_operations: 100000001\n")
    kernel = kernel_of(project, "limits:\n  ceilings:\n    max_operations: 100000000\n")
    assert kernel.run_tool("busy", {}).content.endswith(
        "max_operations: 100,000,001 is above the ceiling (limits.ceilings.max_operations: 100,000,000 "
        "in kernel.yaml)"
    )


def test_tool_run_by_path_is_held_to_the_ceiling_too(project: Path, make_tool: ToolFactory) -> None:
    yaml_path = make_tool("greedy", GREEDY_JS, yaml_extra="memory_limit_mb: 1000000\n")
    done = subprocess.run(
        [str(BIN / "agentkernel"), "tool", "run", str(yaml_path)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert f"{yaml_path}:5: memory_limit_mb: 1,000,000 is above the ceiling" in done.stderr


def test_a_ceiling_below_the_kernels_own_value_is_refused(tmp_path: Path) -> None:
    config = write_kernel_yaml(tmp_path, "limits:\n  timeout_secs: 30\n  ceilings:\n    timeout_secs: 10\n")
    with pytest.raises(ConfigError) as caught:
        load_kernel_config(config)
    assert str(caught.value) == (
        f"{config}:7: limits.ceilings.timeout_secs: 10 is below limits.timeout_secs (30), "
        "the value every script gets unless its YAML says otherwise"
    )


def test_unknown_ceiling_keys_are_refused(tmp_path: Path) -> None:
    config = write_kernel_yaml(tmp_path, "limits:\n  ceilings:\n    stack_limit_kb: 100\n")
    with pytest.raises(ConfigError, match=r"limits\.ceilings: unknown key 'stack_limit_kb'"):
        load_kernel_config(config)


def test_script_limits_are_capped_even_for_a_spec_built_by_hand(
    project: Path, make_tool: ToolFactory
) -> None:
    """Loading refuses a YAML over a ceiling; the cap in `script_limits` keeps the promise for any spec."""
    from agentkernel.config import load_script_spec

    spec = load_script_spec(make_tool("t", GREEDY_JS, yaml_extra="memory_limit_mb: 4096\ntimeout_secs: 99\n"))
    limits = spec.script_limits(KernelLimits())
    assert (limits.memory_limit_bytes, limits.timeout_secs) == (64 << 20, 30.0)


def test_script_limits_follow_the_defaults_they_are_asked_with(project: Path, make_tool: ToolFactory) -> None:
    """A spec keeps its limits for the kernel's defaults (asked at every call); others get their own."""
    from agentkernel.config import load_script_spec

    spec = load_script_spec(make_tool("t", GREEDY_JS))
    first, other = KernelLimits(), KernelLimits(timeout_secs=5.0, memory_limit_mb=8)
    assert spec.script_limits(first) is spec.script_limits(first)
    limits = spec.script_limits(other)
    assert (limits.timeout_secs, limits.memory_limit_bytes) == (5.0, 8 << 20)
    assert spec.script_limits(first).timeout_secs == 30.0
