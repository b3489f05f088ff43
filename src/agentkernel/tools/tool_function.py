"""A tool's script against its contract: it must define `run` (S3).

A script that defines no `run` compiles, yet every call of its tool would
fail ("does not define a function run()"), and the LLM would be offered it.
So a missing `run` is a load error at the YAML's `script:` line, as a hook
without its functions is (hook_functions.py). When the script defines a
likely stand-in (`Run`, `main`, `handler`, `runTool`…), the error names it.

Which functions a script defines is the engines' knowledge, asked through
`ScriptHost.defined_functions`. For JavaScript that runs the script's top
level within the tool's limits, with no services and an empty environment:
a top level that reaches for a helper or a secret fails here and says so.
"""

from __future__ import annotations

import re

from agentkernel.bundle import Services
from agentkernel.config import KernelLimits, ToolSpec
from agentkernel.errors import ConfigError, ScriptError
from agentkernel.helpers.table import ScriptCall
from agentkernel.identity import Caller
from agentkernel.scripting.host import ScriptHost
from agentkernel.util.environment import Environment

ENTRY = "run"
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
# names an author may have given the entry point instead of `run`
_STAND_INS = frozenset({"main", "execute", "handle", "handler", "invoke", "call", "tool", "start"})
_NO_ONE = Caller(services=Services(environment=Environment(source={})))


def _stand_ins(spec: ToolSpec) -> list[str]:
    """Identifiers of the script that look like a misnamed `run` (`Run`, `runTool`, `main`), sorted."""
    try:
        source = spec.script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # the compiler has said so already
        return []
    words = set(_IDENTIFIER.findall(source)) - {ENTRY}
    return sorted(w for w in words if _looks_like_run(w))


def _looks_like_run(word: str) -> bool:
    lower = word.lower()
    return (lower.startswith(ENTRY) and len(word) <= 8) or lower in _STAND_INS


def check_tool_function(host: ScriptHost, spec: ToolSpec, limits: KernelLimits) -> None:
    """Raise ConfigError at the `script:` line when the tool's script defines no `run`."""
    candidates = _stand_ins(spec)
    call = ScriptCall.limited(_NO_ONE, f"tool {spec.name}", limits, spec.call_budget(limits))
    line = spec.lines.of("script")
    try:
        defined = host.defined_functions(spec.script, (ENTRY, *candidates), call)
    except ScriptError as exc:
        reason = (
            f"script {spec.script.name}: its top level failed while looking for run()"
            f" (it runs with no services at load): {exc.describe(spec.yaml_path.parent)}"
        )
        raise ConfigError(spec.yaml_path, reason, line) from exc
    if ENTRY in defined:
        return
    reason = f"script: {spec.script.name} defines no run() function, which a tool's script must"
    named = [c for c in candidates if c in defined]
    if named:
        reason += f"; it defines {named[0]}(): did you mean run?"
    elif spec.script.suffix == ".mjs":
        reason += " (a module exports it: `export function run(args)`)"
    raise ConfigError(spec.yaml_path, reason, line)


__all__ = ["ENTRY", "check_tool_function"]
