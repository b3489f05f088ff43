"""A hook's script against its `events:`: the hook functions must exist (S2.2, S7).

A hook whose script defines none of `before_user_message`, `after_turn`,
`after_loop` never runs, and one whose `events:` lists a function its script
lacks silently skips that event; both are load errors. A function whose name
is a near miss of an event (`beforeUserMessage`, `after_turns`) is named in
the error with the name it should have.

Which functions a script defines is the engines' knowledge, asked through
`ScriptHost.defined_functions`, the call the hook pipeline makes before each
event. The candidates for near misses are the identifiers of the source that
are close to an event name; the engine says which of them are functions.
For JavaScript that runs the script's top level, so it runs as a call does,
within the hook's limits, but with no services and an empty environment: a
top level that reaches for a helper or a secret fails here and says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agentkernel.bundle import Services
from agentkernel.config import HOOK_EVENTS, HookSpec, KernelLimits
from agentkernel.errors import ConfigError, ScriptError
from agentkernel.helpers.table import ScriptCall
from agentkernel.identity import Caller
from agentkernel.scripting.host import ScriptHost
from agentkernel.util.environment import Environment
from agentkernel.util.near_miss import close_match

_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
# Stricter than for YAML keys: a helper such as `after_turn_count` is no typo.
_FUNCTION_CUTOFF = 0.85
_NO_ONE = Caller(services=Services(environment=Environment(source={})))


def _near_misses(spec: HookSpec) -> dict[str, str]:
    """Identifiers of the script that are near misses of an event name → that event."""
    try:
        source = spec.script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # the compiler has said so already
        return {}
    found: dict[str, str] = {}
    for word in set(_IDENTIFIER.findall(source)) - set(HOOK_EVENTS):
        event = close_match(word, HOOK_EVENTS, _FUNCTION_CUTOFF)
        if event is not None:
            found[word] = event
    return found


def _hint(misses: Mapping[str, str], event: str | None = None) -> str:
    """`; it defines afterTurn(): did you mean after_turn?` for the first near miss (of `event`)."""
    for function, meant in sorted(misses.items()):
        if event is None or meant == event:
            return f"; it defines {function}(): did you mean {meant}?"
    return ""


def _defined(
    host: ScriptHost, spec: HookSpec, names: tuple[str, ...], limits: KernelLimits
) -> frozenset[str]:
    call = ScriptCall.limited(_NO_ONE, f"hook {spec.name}", limits, spec.call_budget(limits))
    try:
        return host.defined_functions(spec.script, names, call)
    except ScriptError as exc:
        reason = (
            f"script {spec.script.name}: its top level failed while looking for the hook functions"
            f" (it runs with no services at load): {exc.describe(spec.yaml_path.parent)}"
        )
        raise ConfigError(spec.yaml_path, reason, spec.lines.of("script")) from exc


def check_hook_functions(host: ScriptHost, spec: HookSpec, limits: KernelLimits) -> None:
    """Raise ConfigError, at the `script:` line or the `events:` item, when a hook function is missing."""
    candidates = _near_misses(spec)
    defined = _defined(host, spec, (*HOOK_EVENTS, *sorted(candidates)), limits)
    misses = {f: e for f, e in candidates.items() if f in defined and e not in defined}
    script = spec.script.name
    if spec.events is not None:
        for index, event in enumerate(spec.events):
            if event not in defined:
                reason = f"events[{index}]: {script} does not define {event}(){_hint(misses, event)}"
                raise ConfigError(spec.yaml_path, reason, spec.lines.of("events", index))
        return
    if not defined & set(HOOK_EVENTS):
        functions = ", ".join(HOOK_EVENTS)
        reason = f"script: {script} defines none of the hook functions {functions}{_hint(misses)}"
        raise ConfigError(spec.yaml_path, reason, spec.lines.of("script"))
    if misses:
        function, meant = min(misses.items())
        reason = f"script: {script} defines {function}(), which is never called; did you mean {meant}?"
        raise ConfigError(spec.yaml_path, reason, spec.lines.of("script"))


__all__ = ["check_hook_functions"]
