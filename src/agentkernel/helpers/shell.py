"""`shell(cmd[, timeout])` and `exec(program, args[, timeout])` (S13): programs for scripts.

Both return exactly `{ok, exit_code, stdout, stderr}` and never throw (S13.1):
every failure — a bad argument, a missing program, a timeout, the service
switched off (the default: `shell.enabled: false`) — is `{ok: false,
exit_code: -1, stderr: "<helper>: why"}`, so a script checks one shape. The
process itself is run and bounded by `ShellService` (services/shell.py);
this module turns script arguments into an argv, a timeout, a working folder
and an environment.

The child's environment is built from an allow list (`shell.env_allow` and
the few names every program needs), never with a variable `env_var` may not
read (`scripts.env_deny`, the LLM key), and before the first program starts
the kernel hides its own secrets from `/proc` (services/program_environment.py).
This is not a sandbox: the program runs with the kernel's own rights (see
docs/scripts.md, section 8.6).

In a trace (S26.1) a call is a span with the program's name (`sh` for
`shell`, the file name for `exec`) and its exit code: never the command
line, an argument or the environment, which may hold what a script read
with `env_var`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from agentkernel.bundle import MissingService
from agentkernel.helpers.table import HelperTable, ScriptCall, Traced
from agentkernel.identity import scratch_made
from agentkernel.ports import SHELL, ProgramOutcome
from agentkernel.services.program_environment import guard_kernel_environment, program_environment
from agentkernel.telemetry.helper_spans import Attributes
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.short_text import shown_value
from agentkernel.util.valid_unicode import has_lone_surrogate


class ArgumentProblem(ValueError):
    """A script argument that cannot be used; becomes the `stderr` of a failed result."""


#: Why a call failed when the operator has not opened the switch, and how to open it.
DISABLED = (
    "disabled in kernel.yaml (shell.enabled: false). To let scripts run programs, set "
    "`shell: {enabled: true}` in config/kernel.yaml; they then run with the kernel's own "
    "rights (not a sandbox), so enable it only when every script is trusted."
)

#: POSIX shells report "command not found" with this status; S13.1 reports it as -1.
_NOT_FOUND = 127


def shell(call: ScriptCall, cmd: JSONValue, timeout: JSONValue = None) -> JSONValue:
    """Run `cmd` through `sh -c` in the session's temp dir."""
    try:
        command = check_command(cmd)
    except ArgumentProblem as problem:
        return _failed(str(problem))
    result = _run(call, "shell", ["/bin/sh", "-c", command], timeout)
    if result["exit_code"] == _NOT_FOUND:
        result["exit_code"] = -1
    return result


def exec_program(
    call: ScriptCall, program: JSONValue, args: JSONValue, timeout: JSONValue = None
) -> JSONValue:
    """Start `program` directly with `args` passed verbatim: no shell, no quoting, no expansion."""
    try:
        argv = [check_program(program), *check_args(args)]
    except ArgumentProblem as problem:
        return _failed(str(problem))
    return _run(call, "exec", argv, timeout)


def check_command(cmd: JSONValue) -> str:
    if not isinstance(cmd, str) or not cmd.strip():
        raise ArgumentProblem(f"shell: cmd must be a non-empty string, got {shown_value(cmd)}")
    _check_text("shell: cmd", cmd)
    return cmd


def check_program(program: JSONValue) -> str:
    if not isinstance(program, str) or not program:
        raise ArgumentProblem(f"exec: program must be a non-empty string, got {shown_value(program)}")
    _check_text(f"exec: program {shown_value(program)}", program)
    return program


def check_args(args: JSONValue) -> list[str]:
    """Each argument exactly as given: strings only, so nothing is converted behind the script's back."""
    if not isinstance(args, list):
        raise ArgumentProblem(f"exec: args must be an array of strings, got {shown_value(args)}")
    for index, arg in enumerate(args):
        if not isinstance(arg, str):
            raise ArgumentProblem(f"exec: args[{index}] must be a string, got {shown_value(arg)}")
        _check_text(f"exec: args[{index}]", arg)
    return [str(arg) for arg in args]


def _check_text(what: str, text: str) -> None:
    """What the OS cannot take in an argv: a NUL byte, or a lone surrogate (no UTF-8 form)."""
    if "\x00" in text:
        raise ArgumentProblem(f"{what} contains a NUL byte")
    if has_lone_surrogate(text):
        raise ArgumentProblem(f"{what} is not valid Unicode: it holds a lone surrogate")


def _run(call: ScriptCall, helper: str, argv: list[str], timeout: JSONValue) -> JSONObject:
    try:
        service = call.caller.services.require(SHELL, helper)
    except MissingService as exc:
        return _failed(str(exc))
    if not service.settings.enabled:
        return _failed(f"{helper}: {DISABLED}")
    if os.name != "posix":  # pragma: no cover - this build runs on POSIX only
        return _failed(f"{helper}: not supported on this platform (cmd /C is not implemented)")
    try:
        wanted = _timeout(helper, timeout, service.settings.default_timeout_secs)
    except ArgumentProblem as problem:
        return _failed(str(problem))
    remaining = call.remaining_secs()
    capped = remaining is not None and remaining < wanted
    budget = remaining if capped and remaining is not None else wanted
    if budget <= 0:
        return _failed(f"{helper}: no time left: the script's own timeout is used up")
    environment = call.caller.services.environment
    guard_kernel_environment(environment.is_denied, non_dumpable=service.settings.non_dumpable)
    env = program_environment(environment.source, service.settings.env_allow, environment.is_denied)
    cwd = None if call.caller.temp_dir is None else scratch_made(call.caller.temp_dir)
    outcome = service.run(argv, timeout=budget, cwd=cwd, env=env)
    return _result(helper, outcome, budget, capped)


def _timeout(helper: str, value: JSONValue, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ArgumentProblem(f"{helper}: timeout must be a number of seconds > 0, got {value!r}")
    return float(value)


def _result(helper: str, outcome: ProgramOutcome, budget: float, capped: bool) -> JSONObject:
    if outcome.exit_code is not None:
        code = outcome.exit_code
        return {"ok": code == 0, "exit_code": code, "stdout": outcome.stdout, "stderr": outcome.stderr}
    if outcome.timed_out:
        why = " (the script's remaining time)" if capped else ""
        note = f"{helper}: timed out after {round(budget, 2):g}s{why}; the process group was killed"
    else:
        note = f"{helper}: {outcome.failure}"
    stderr = outcome.stderr
    if stderr and not stderr.endswith("\n"):
        stderr += "\n"
    stderr += note
    return {"ok": False, "exit_code": -1, "stdout": outcome.stdout, "stderr": stderr}


def _failed(message: str) -> JSONObject:
    return {"ok": False, "exit_code": -1, "stdout": "", "stderr": message}


# -- in a trace (S26.1) ---------------------------------------------------------------------------


def _shell_program(_: ScriptCall, __: Sequence[JSONValue]) -> Attributes:
    return {"process.executable.name": "sh"}  # the command line is the script's, and may hold a secret


def _exec_program(_: ScriptCall, args: Sequence[JSONValue]) -> Attributes:
    program = args[0] if args else None
    return {"process.executable.name": os.path.basename(program)} if isinstance(program, str) else {}


def _exit(result: JSONValue) -> Attributes:
    """The exit code; `error.type` when the program failed (-1: it did not start, or timed out)."""
    code = result.get("exit_code") if isinstance(result, dict) else None
    if not isinstance(code, int):
        return {}
    if code == 0:
        return {"process.exit.code": 0}
    return {"process.exit.code": code, "error.type": "_OTHER" if code < 0 else str(code)}


def register(table: HelperTable) -> None:
    table.register("shell", shell, traced=Traced(_shell_program, _exit))
    table.register("exec", exec_program, traced=Traced(_exec_program, _exit))


__all__ = ["exec_program", "register", "shell"]
