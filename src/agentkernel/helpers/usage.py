"""`usage()` (S26.3): the caller's own LLM use this UTC day and month, and where it stands against each quota.

A hook or a tool reads it to act before a quota refuses: switch to a
cheaper model, shorten a prompt, or deny a request early. The figures are
the usage ledger's (services/usage.py), every process's calls counted; the
quotas those of kernel.yaml's `quotas:` that a call of the caller's user
within the caller's template must fit (services/quotas.py).
"""

from __future__ import annotations

from datetime import UTC, datetime

from agentkernel.helpers.table import HelperTable, ScriptCall
from agentkernel.ports import QUOTAS, USAGE, QuotaStanding, UsageTotals
from agentkernel.types import JSONObject, JSONValue


def usage(call: ScriptCall) -> JSONValue:
    """`{today, month, quotas}`: calls and tokens (`input_tokens`, `output_tokens`, `tokens`), each quota's
    `{name, template, limit, used, remaining, resets_at}`."""
    caller = call.caller
    ledger = caller.services.require(USAGE, "usage")
    quotas = caller.services.require(QUOTAS, "usage")
    today = datetime.now(UTC).date()
    day = ledger.totals(user=caller.user_id, since=today, until=today)
    month = ledger.totals(user=caller.user_id, since=today.replace(day=1), until=today)
    standings = quotas.standings(user=caller.user_id, template=caller.template)
    return {"today": _figures(day), "month": _figures(month), "quotas": [_quota(s) for s in standings]}


def _figures(totals: UsageTotals) -> JSONObject:
    return {
        "calls": totals.calls,
        "input_tokens": totals.input_tokens,
        "output_tokens": totals.output_tokens,
        "tokens": totals.tokens,
    }


def _quota(standing: QuotaStanding) -> JSONObject:
    return {
        "name": standing.name,
        "template": standing.template,
        "limit": standing.limit,
        "used": standing.used,
        "remaining": standing.remaining,
        "resets_at": standing.resets_at,
    }


def register(table: HelperTable) -> None:
    """Add `usage` (S26.3) to `table`."""
    table.register("usage", usage)


__all__ = ["register", "usage"]
