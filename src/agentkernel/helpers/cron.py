"""`schedule_cron`, `cancel_cron`, `list_cron` (S10): a script makes a standing agent of itself.

The helpers check nothing but their argument's shape; the `cron` service
(services/cron.py) checks the job against the templates and the `http:`
rules and keeps it, owned by the calling user: a script lists and cancels
only its own user's jobs, and the job's agent runs as that user. Without
the service (`hook_tool` without `--live`) each throws the manual's
`no cron service attached…`.
"""

from __future__ import annotations

from agentkernel.helpers.table import HelperTable, ScriptCall
from agentkernel.ports import CRON
from agentkernel.types import JSONValue


def schedule_cron(call: ScriptCall, options: JSONValue) -> JSONValue:
    """`{name, template, interval_secs | schedule | oneshot_at, prompt, notify?, …}` → `{name, ok}`."""
    service = call.caller.services.require(CRON, "schedule_cron")
    return service.schedule(call.caller, options)


def cancel_cron(call: ScriptCall, name: JSONValue) -> JSONValue:
    """True when the caller's user had a job of that name, now removed; false otherwise."""
    return call.caller.services.require(CRON, "cancel_cron").cancel(call.caller, name)


def list_cron(call: ScriptCall) -> JSONValue:
    """The caller's user's jobs: `{name, template, timing, next_run, last_run, last_ok, runs, …}`."""
    jobs: JSONValue = list(call.caller.services.require(CRON, "list_cron").list(call.caller))
    return jobs


def register(table: HelperTable) -> None:
    """Add the three cron helpers of S10 to `table`."""
    table.register("schedule_cron", schedule_cron)
    table.register("cancel_cron", cancel_cron)
    table.register("list_cron", list_cron)


__all__ = ["register"]
