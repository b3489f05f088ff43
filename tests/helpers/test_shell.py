"""`shell` and `exec` (S13) from real JS and Rhai tools, against real processes.

Every helper call goes through a script tool and the real dispatch path, in
both engines. The attacks: a command that outlives its timeout (and its
grandchildren), floods on both pipes, a program waiting on stdin, arguments
a shell would mangle, many calls at once.
"""

from __future__ import annotations

import json
import os
import re
import select
import threading
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.templates import TemplateSpec
from agentkernel.errors import ConfigError
from agentkernel.helpers import default_helper_table
from agentkernel.ports import SHELL
from agentkernel.services.shell import ShellService, ShellSettings
from agentkernel.testing.parts import kernel_parts
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory, switched_on, write_kernel_yaml
from tests.helpers.probes import probe_source


def build_kernel(project: Path, kernel_yaml: str = "", *, attach: bool = True) -> Kernel:
    """A kernel with the shell helpers registered and (unless `attach` is False) the service.

    The shell is switched on (`shell.enabled: true`) unless `kernel_yaml` sets `enabled` itself.
    """
    config = load_kernel_config(write_kernel_yaml(project, switched_on(kernel_yaml, "shell", "enabled")))
    table = default_helper_table()
    service = ShellService.from_config(config) if attach else None
    return Kernel(config, helpers=table, extra_services={"shell": service})


@pytest.fixture
def kernel(project: Path) -> Kernel:
    return build_kernel(project)


_counter = iter(range(1_000_000))


def probe(
    kernel: Kernel,
    make_tool: ToolFactory,
    engine: str,
    expr: str,
    args: JSONValue = None,
    *,
    session: str | None = "s-1",
    yaml_extra: str = "",
) -> JSONValue:
    """Evaluate `expr` in a fresh tool of `engine`; the value, or {"error": message} when it threw."""
    name = f"probe{next(_counter)}"
    source = probe_source(engine, expr)
    make_tool(name, source, ext=engine, yaml_extra=yaml_extra)
    caller = kernel.caller(session_id=session, user_id="u-1") if session else kernel.caller()
    result = kernel.run_tool(name, args if args is not None else {}, caller)
    assert result.success, result.content
    data = result.data
    assert isinstance(data, dict)
    return data.get("value") if result.content == "ok" else {"error": data["error"]}


def run_shell(
    kernel: Kernel, make_tool: ToolFactory, engine: str, cmd: str, **kw: JSONValue
) -> dict[str, JSONValue]:
    value = probe(kernel, make_tool, engine, "shell(args.cmd, args.timeout)", {"cmd": cmd, **kw})
    assert isinstance(value, dict) and set(value) == {"ok", "exit_code", "stdout", "stderr"}, value
    return value


def run_exec(
    kernel: Kernel, make_tool: ToolFactory, engine: str, program: str, argv: list[JSONValue], **kw: JSONValue
) -> dict[str, JSONValue]:
    value = probe(
        kernel,
        make_tool,
        engine,
        "exec(args.program, args.argv, args.timeout)",
        {"program": program, "argv": argv, **kw},
    )
    assert isinstance(value, dict) and set(value) == {"ok", "exit_code", "stdout", "stderr"}, value
    return value


def temp_dir(kernel: Kernel) -> Path:
    temp = kernel.caller(session_id="s-1", user_id="u-1").temp_dir
    assert temp is not None
    return temp


def gone(pid: int, within: float = 30.0) -> bool:
    """Whether the process is dead (absent, or a zombie waiting for init), waiting on its exit.

    A pidfd becomes readable when the process ends, so this wakes at the exit
    itself; `within` is only a safety net for a process that survived.
    """
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([handle], [], [], within)
        return bool(readable)
    finally:
        os.close(handle)


# -- S13.1 shell: the result shape -----------------------------------------------------------------


def test_s13_1_shell_success(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    assert run_shell(kernel, make_tool, engine, "echo hello") == {
        "ok": True,
        "exit_code": 0,
        "stdout": "hello\n",
        "stderr": "",
    }


def test_s13_1_shell_exit_code_and_both_streams(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    assert run_shell(kernel, make_tool, engine, "echo out; echo err >&2; exit 3") == {
        "ok": False,
        "exit_code": 3,
        "stdout": "out\n",
        "stderr": "err\n",
    }


def test_s13_1_shell_missing_command_is_minus_one(
    kernel: Kernel, make_tool: ToolFactory, engine: str
) -> None:
    result = run_shell(kernel, make_tool, engine, "no-such-command-xyz --flag")
    assert result["ok"] is False and result["exit_code"] == -1
    assert "no-such-command-xyz" in str(result["stderr"]) and "not found" in str(result["stderr"])


def test_s13_1_exit_by_a_signal_is_128_plus_n(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    result = run_shell(kernel, make_tool, engine, "kill -TERM $$")
    assert (result["ok"], result["exit_code"]) == (False, 143)


def test_s13_1_shell_timeout(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    result = run_shell(kernel, make_tool, engine, "echo started; sleep 30", timeout=0.5)
    assert result["ok"] is False and result["exit_code"] == -1
    assert result["stdout"] == "started\n"  # what came before the timeout is kept
    assert result["stderr"] == "shell: timed out after 0.5s; the process group was killed"


def test_s13_1_default_timeout_from_config(project: Path, make_tool: ToolFactory, engine: str) -> None:
    kernel = build_kernel(project, "shell:\n  default_timeout_secs: 0.3\n")
    result = run_shell(kernel, make_tool, engine, "sleep 30")
    assert result["exit_code"] == -1 and "timed out after 0.3s" in str(result["stderr"])


def test_s13_1_timeout_is_capped_by_the_scripts_own_clock(
    kernel: Kernel, make_tool: ToolFactory, engine: str
) -> None:
    """A helper never outlives its script: `timeout_secs: 1` wins over a 60 s shell timeout."""
    make_tool(
        "capped",
        'function run() { return JSON.stringify(shell("sleep 30", 60)); }'
        if engine == ".js"
        else 'fn run(args) { shell("sleep 30", 60).to_json() }',
        ext=engine,
        yaml_extra="timeout_secs: 1\n",
    )
    result = kernel.run_tool("capped", {}, kernel.caller(session_id="s-1"))
    # the helper returns at the script's deadline; the engine may then end the script on its clock
    if result.success:
        stderr = json.loads(result.content)["stderr"]
        assert re.fullmatch(
            r"shell: timed out after (1|0\.9\d)s \(the script's remaining time\); "
            r"the process group was killed",
            stderr,
        ), stderr


def test_s13_1_shell_never_throws_on_bad_arguments(
    kernel: Kernel, make_tool: ToolFactory, engine: str
) -> None:
    bad = probe(kernel, make_tool, engine, 'shell("echo", "soon")')
    assert bad == {
        "ok": False,
        "exit_code": -1,
        "stdout": "",
        "stderr": "shell: timeout must be a number of seconds > 0, got 'soon'",
    }
    negative = probe(kernel, make_tool, engine, 'shell("echo", -1)')
    assert isinstance(negative, dict) and "timeout must be a number" in str(negative["stderr"])
    empty = probe(kernel, make_tool, engine, 'shell("")')
    assert isinstance(empty, dict) and empty["stderr"] == "shell: cmd must be a non-empty string, got ''"
    number = probe(kernel, make_tool, engine, "shell(42)")
    assert isinstance(number, dict) and number["exit_code"] == -1 and "cmd must be" in str(number["stderr"])


def test_s13_1_nul_byte_in_a_command(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    result = run_shell(kernel, make_tool, engine, "echo a\x00b")
    assert result == {"ok": False, "exit_code": -1, "stdout": "", "stderr": "shell: cmd contains a NUL byte"}


# -- S13.2 exec: no shell, arguments verbatim ------------------------------------------------------

AWKWARD = [
    "a b",
    "it's",
    '"quoted"',
    "%H%x1f%an",
    "%PATH%",
    "$HOME",
    "`id`",
    "*",
    "",
    "--author=Alice Bob",
    "é\t\n",
]


def test_s13_2_exec_passes_arguments_verbatim(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    result = run_exec(kernel, make_tool, engine, "printf", ["%s|", *AWKWARD])
    assert result == {"ok": True, "exit_code": 0, "stdout": "".join(f"{a}|" for a in AWKWARD), "stderr": ""}


def test_s13_2_exec_missing_program(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    result = run_exec(kernel, make_tool, engine, "no-such-program-xyz", ["x"])
    assert result == {
        "ok": False,
        "exit_code": -1,
        "stdout": "",
        "stderr": "exec: program 'no-such-program-xyz' not found",
    }


def test_s13_2_exec_not_executable(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    script = temp_dir(kernel) / "plain.txt"
    script.write_text("echo hi\n")
    result = run_exec(kernel, make_tool, engine, "./plain.txt", [])
    assert result["exit_code"] == -1 and "permission denied" in str(result["stderr"])


def test_s13_2_exec_exit_codes_and_timeout(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    assert run_exec(kernel, make_tool, engine, "sh", ["-c", "exit 7"])["exit_code"] == 7
    assert run_exec(kernel, make_tool, engine, "false", [])["ok"] is False
    timed = run_exec(kernel, make_tool, engine, "sleep", ["30"], timeout=0.3)
    assert (
        timed["exit_code"] == -1
        and timed["stderr"] == "exec: timed out after 0.3s; the process group was killed"
    )


def test_s13_2_exec_bad_arguments_never_throw(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    not_list = probe(kernel, make_tool, engine, 'exec("echo", "a b")')
    assert isinstance(not_list, dict)
    assert not_list["stderr"] == "exec: args must be an array of strings, got 'a b'"
    number = probe(kernel, make_tool, engine, 'exec("echo", ["a", 5])')
    assert isinstance(number, dict) and number["stderr"] == "exec: args[1] must be a string, got 5"
    nul = run_exec(kernel, make_tool, engine, "echo", ["a\x00b"])
    assert nul["stderr"] == "exec: args[0] contains a NUL byte"
    empty = probe(kernel, make_tool, engine, 'exec("", [])')
    assert isinstance(empty, dict) and empty["exit_code"] == -1 and "program must be" in str(empty["stderr"])


def test_s13_2_arity_errors_come_from_the_table(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    value = probe(kernel, make_tool, engine, 'exec("echo")')
    assert value == {"error": "exec: expected at least 2 argument(s), got 1"}


# -- S13.3 the whole process group dies; nothing is left behind ------------------------------------


def test_s13_3_timeout_kills_grandchildren(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    cmd = "sleep 300 & echo $! > grandchild.pid; sh -c 'sleep 301 & echo $! > great.pid; wait'; wait"
    result = run_shell(kernel, make_tool, engine, cmd, timeout=0.5)
    assert result["exit_code"] == -1
    for name in ("grandchild.pid", "great.pid"):
        pid = int((temp_dir(kernel) / name).read_text())
        assert gone(pid), f"{name}: process {pid} survived the timeout"


def test_s13_3_background_jobs_do_not_outlive_the_call(
    kernel: Kernel, make_tool: ToolFactory, engine: str
) -> None:
    """`cmd &` returns at once (the job holds the pipes, yet the call does not wait) and the job dies."""
    result = run_shell(kernel, make_tool, engine, "sleep 300 & echo $!")
    assert result["ok"] is True  # had the call waited for the job, the default timeout would have ended it
    assert gone(int(str(result["stdout"]).strip()))


def test_s13_3_stdin_is_closed(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    assert run_shell(kernel, make_tool, engine, 'cat; read line; echo "[$line]"')["stdout"] == "[]\n"
    assert run_exec(kernel, make_tool, engine, "cat", [])["ok"] is True  # not a timeout waiting on stdin


# -- output limits ---------------------------------------------------------------------------------


def test_floods_on_both_pipes_are_capped_without_deadlock(
    project: Path, make_tool: ToolFactory, engine: str
) -> None:
    kernel = build_kernel(project, "shell:\n  max_output_bytes: 1000\n")
    cmd = "head -c 3000000 /dev/zero | tr '\\0' o; head -c 2000000 /dev/zero | tr '\\0' e >&2; echo done >&2"
    result = run_shell(kernel, make_tool, engine, cmd)
    assert result["ok"] is True  # a deadlock would have ended in the timeout
    assert (
        result["stdout"] == "o" * 1000 + "\n[stdout truncated: 2,999,000 more bytes over the limit of 1,000]"
    )
    assert str(result["stderr"]).startswith("e" * 1000 + "\n[stderr truncated: 1,999,005 more bytes")


def test_endless_output_ends_at_the_timeout(project: Path, make_tool: ToolFactory, engine: str) -> None:
    kernel = build_kernel(project, "shell:\n  max_output_bytes: 64\n")
    result = run_shell(kernel, make_tool, engine, "yes", timeout=0.5)
    assert result["exit_code"] == -1 and str(result["stdout"]).startswith("y\n" * 32 + "\n[stdout truncated")
    assert str(result["stderr"]).endswith("timed out after 0.5s; the process group was killed")


def test_output_is_utf8_and_a_cut_character_is_dropped_whole(
    project: Path, make_tool: ToolFactory, engine: str
) -> None:
    kernel = build_kernel(project, "shell:\n  max_output_bytes: 5\n")
    result = run_shell(kernel, make_tool, engine, "printf 'жжж'")  # 6 bytes: the cap falls inside the third
    assert str(result["stdout"]).startswith("жж\n[stdout truncated: 1 more bytes")
    raw = run_exec(kernel, make_tool, engine, "printf", ["a\\377b"])
    assert raw["stdout"] == "a\ufffdb"


# -- where and with what it runs -------------------------------------------------------------------


def test_cwd_is_the_session_temp_dir(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    assert run_shell(kernel, make_tool, engine, "pwd -P")["stdout"] == f"{temp_dir(kernel)}\n"


def test_cwd_outside_a_session_is_the_kernel_root(
    kernel: Kernel, make_tool: ToolFactory, engine: str
) -> None:
    value = probe(kernel, make_tool, engine, 'exec("pwd", ["-P"])', session=None)
    assert isinstance(value, dict) and value["stdout"] == f"{kernel.config.root.resolve()}\n"


def test_denied_variables_are_not_passed_to_the_child(
    project: Path, make_tool: ToolFactory, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_SECRET_TOKEN", "s3cr3t")
    monkeypatch.setenv("TEST_PLAIN_VALUE", "visible")
    kernel = build_kernel(project, "scripts:\n  env_deny: ['*_SECRET_*']\nshell:\n  env_allow: ['TEST_*']\n")
    result = run_shell(kernel, make_tool, engine, 'echo "${TEST_SECRET_TOKEN:-unset} $TEST_PLAIN_VALUE"')
    assert result["stdout"] == "unset visible\n"


# -- configuration and service ---------------------------------------------------------------------


DISABLED = (
    "disabled in kernel.yaml (shell.enabled: false). To let scripts run programs, set "
    "`shell: {enabled: true}` in config/kernel.yaml; they then run with the kernel's own "
    "rights (not a sandbox), so enable it only when every script is trusted."
)


@pytest.mark.parametrize("kernel_yaml", ["", "shell:\n  max_concurrent: 2\n", "shell:\n  enabled: false\n"])
def test_disabled_unless_the_config_enables_it(
    project: Path, make_tool: ToolFactory, engine: str, kernel_yaml: str
) -> None:
    """S13.1, issue 8 §4: off by default; a failed result (never a throw) that names the switch."""
    config = load_kernel_config(write_kernel_yaml(project, kernel_yaml))
    kernel = Kernel(config)  # the services every kernel attaches, as built from the config
    marker = temp_dir(kernel) / "ran"
    assert run_shell(kernel, make_tool, engine, f"touch {marker}") == {
        "ok": False,
        "exit_code": -1,
        "stdout": "",
        "stderr": f"shell: {DISABLED}",
    }
    assert run_exec(kernel, make_tool, engine, "touch", [str(marker)]) == {
        "ok": False,
        "exit_code": -1,
        "stdout": "",
        "stderr": f"exec: {DISABLED}",
    }
    assert not marker.exists()


def test_enabled_by_config(project: Path, make_tool: ToolFactory, engine: str) -> None:
    config = load_kernel_config(write_kernel_yaml(project, "shell:\n  enabled: true\n"))
    kernel = Kernel(config)  # the services every kernel attaches, as built from the config
    assert run_shell(kernel, make_tool, engine, "echo hi")["stdout"] == "hi\n"
    assert run_exec(kernel, make_tool, engine, "echo", ["a b"])["stdout"] == "a b\n"


def test_no_service_attached(project: Path, make_tool: ToolFactory, engine: str) -> None:
    kernel = build_kernel(project, attach=False)
    result = run_exec(kernel, make_tool, engine, "echo", [])
    assert result["stderr"] == "exec: no shell service attached to this kernel" and result["exit_code"] == -1


def test_settings_defaults_and_config(project: Path) -> None:
    assert load_kernel_config(write_kernel_yaml(project)).shell == ShellSettings(
        enabled=False, default_timeout_secs=30.0, max_output_bytes=1 << 20, max_concurrent=8
    )
    config = load_kernel_config(
        write_kernel_yaml(
            project,
            "shell:\n  enabled: true\n  default_timeout_secs: 5\n"
            "  max_output_bytes: 10\n  max_concurrent: 2\n",
        )
    )
    assert config.shell == ShellSettings(True, 5.0, 10, 2)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("shell:\n  max_concurrent: 0", "shell.max_concurrent: expected an integer >= 1, got 0"),
        ("shell:\n  max_output_bytes: 1.5", "shell.max_output_bytes: expected an integer >= 1, got 1.5"),
        (
            "shell:\n  default_timeout_secs: -1",
            "shell.default_timeout_secs: expected a number of seconds > 0",
        ),
        ("shell:\n  enabled: 'yes'", "shell.enabled: expected true or false, got 'yes'"),
        ("shell:\n  env_allow: PATH", "shell.env_allow: expected a list of names, got 'PATH'"),
        ("shell:\n  non_dumpable: 0", "shell.non_dumpable: expected true or false, got 0"),
        ("shell:\n  timeout: 5", "shell.timeout: unknown field (known: enabled, default_timeout_secs,"),
    ],
)
def test_bad_config_names_the_field(project: Path, section: str, message: str) -> None:
    path = write_kernel_yaml(project, section + "\n")
    with pytest.raises(ConfigError) as info:
        load_kernel_config(path)  # refused at load, though the service is built at its first use
    assert message in str(info.value) and str(info.value).startswith(f"{path}:{info.value.line}: ")


def test_a_section_that_is_not_a_mapping(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"shell: \[1\] is not of type 'object'"):
        load_kernel_config(write_kernel_yaml(project, "shell: [1]\n"))


# -- many at once ----------------------------------------------------------------------------------


# Each call logs "+" when it starts and "-" before it ends (appends of a few bytes are atomic), and
# the first four wait until four have started: a limit of fewer slots would stall them into the timeout.
SLOT_CALL = (
    'echo + >> "$LOG"; until [ "$(grep -c + "$LOG")" -ge 4 ]; do sleep 0.01; done; echo - >> "$LOG"; echo $I'
)


def test_many_concurrent_calls_share_the_slots(project: Path, make_tool: ToolFactory, tmp_path: Path) -> None:
    """16 tools at once (JS and Rhai) with `max_concurrent: 4`: all finish, four at a time."""
    kernel = build_kernel(project, "shell:\n  max_concurrent: 4\n")
    make_tool("js_slot", "function run(args) { return shell(args.cmd, 20).stdout; }")
    make_tool("rhai_slot", "fn run(args) { shell(args.cmd, 20).stdout }", ext=".rhai")
    log = tmp_path / "slots.log"
    results: dict[int, str] = {}

    def one(i: int) -> None:
        name = "js_slot" if i % 2 else "rhai_slot"
        cmd = SLOT_CALL.replace("$LOG", str(log)).replace("$I", str(i))
        results[i] = kernel.run_tool(name, {"cmd": cmd}, kernel.caller(session_id=f"s-{i}")).content

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)  # a safety net: the calls' own timeout is 20 s
    assert results == {i: f"{i}\n" for i in range(16)}
    running, most = 0, 0
    for mark in log.read_text().split():
        running += 1 if mark == "+" else -1
        most = max(most, running)
    assert most == 4  # four at once, never a fifth


def test_waiting_for_a_slot_is_bounded_by_the_timeout(
    project: Path, make_tool: ToolFactory, tmp_path: Path
) -> None:
    kernel = build_kernel(project, "shell:\n  max_concurrent: 1\n")
    service = kernel_parts(kernel).services.get(SHELL)
    assert isinstance(service, ShellService)
    started, release = tmp_path / "started", tmp_path / "release"
    os.mkfifo(started)
    os.mkfifo(release)
    holder_argv = ["sh", "-c", f'echo up > "{started}"; read line < "{release}"']
    holder = threading.Thread(
        target=service.run, args=(holder_argv,), kwargs={"timeout": 60, "cwd": None, "env": {}}
    )
    holder.start()
    assert started.read_text() == "up\n"  # the holder runs: the only slot is taken
    try:
        result = run_shell(kernel, make_tool, ".js", "echo hi", timeout=0.3)
    finally:
        release.write_text("go\n")
        holder.join(60)
    assert result == {
        "ok": False,
        "exit_code": -1,
        "stdout": "",
        "stderr": "shell: no free process slot within 0.3s (1 already running: shell.max_concurrent)",
    }


def test_results_are_plain_json(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("plain", 'function run() { return JSON.stringify(shell("printf x")); }')
    assert json.loads(kernel.run_tool("plain", {}, kernel.caller()).content) == {
        "ok": True,
        "exit_code": 0,
        "stdout": "x",
        "stderr": "",
    }


def test_a_program_runs_in_the_sessions_folder_made_for_it(
    kernel: Kernel, make_tool: ToolFactory, engine: str
) -> None:
    """A process makes its session's scratch folder on first use: the first program of a fresh session
    runs in it (its working folder), the folder made for it."""
    tool = f"probe{next(_counter)}"
    make_tool(tool, probe_source(engine, 'exec("pwd", [], 10)'), ext=engine)
    process = kernel.spawn(
        TemplateSpec(name="scratchy", instructions="", tools=(tool,)), user_id="u-1", session_id="runs"
    )
    assert process.temp_dir is not None and not process.temp_dir.exists()
    result = kernel.run_tool(tool, {}, process)
    assert result.success and isinstance(result.data, dict), result.content
    value = result.data["value"]
    assert isinstance(value, dict) and value["ok"] is True, value
    assert value["stdout"] == f"{process.temp_dir}\n"
