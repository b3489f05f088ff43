"""`caller()` (S15) and `env_var()` (S8.4): who am I, and the environment."""

from __future__ import annotations

import logging

from agentkernel.errors import HelperError
from agentkernel.helpers.table import HelperTable, ScriptCall
from agentkernel.identity import scratch_made
from agentkernel.types import JSONValue

log = logging.getLogger("agentkernel.helpers")


def caller(call: ScriptCall) -> JSONValue:
    """`{pid, session_id, user_id, template, temp_dir}`, null where unknown; the folder `temp_dir` names
    is made first (a process makes its scratch folder on first use): a script may hand it to anything."""
    if call.caller.temp_dir is not None:
        scratch_made(call.caller.temp_dir)
    return call.caller.identity()


def env_var(call: ScriptCall, name: JSONValue) -> JSONValue:
    """The variable's value, or "" with a logged warning when unset or denied."""
    if not isinstance(name, str) or not name:
        raise HelperError(f"env_var: name must be a non-empty string, got {name!r}")
    environment = call.caller.services.environment
    value = environment.get(name)
    if value is None:
        why = "denied by kernel config" if environment.is_denied(name) else "not set"
        log.warning('[%s] env_var(%r): %s, returning ""', call.script, name, why)
        return ""
    return value


def register(table: HelperTable) -> None:
    table.register("caller", caller)
    table.register("env_var", env_var)
