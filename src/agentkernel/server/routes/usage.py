"""`GET /v1/usage` (S26.3): the LLM calls and tokens a user spent, per day, template or model.

A user reads their own usage; a user `server.operators` names may also
read another user's (`user=`) or everyone's (`all=true`). Anyone else
asking for another user's gets 403 naming the setting: whose usage it is
is no secret worth a 404 (the same answer for every other user id, known
or not). Dates are UTC days, `since`/`until` inclusive; a range is at
most `MAX_DAYS` days and the rows read at most `MOST_ROWS`, so no request
is expensive. The figures are the ledger's (services/usage.py), shared by
every server process.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from datetime import date
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from pydantic import BeforeValidator

from agentkernel.config.server import USER_ID
from agentkernel.ports import UsageRow, UsageStore
from agentkernel.server.identity import Parts, User
from agentkernel.server.problems import CALLER, documented
from agentkernel.services.usage import utc_day

router = APIRouter(tags=["usage"], responses=documented(*CALLER))

MAX_DAYS = 366  # the longest range one request may ask for
MOST_ROWS = 50_000  # ledger rows one request may read (a row: one user, day, template, model, provider)
Group = Literal["day", "template", "model"]


def _written_as_a_day(value: object) -> object:
    """Only YYYY-MM-DD is a day here: pydantic would also take a number as a timestamp (`until=0`)."""
    if isinstance(value, str) and not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        raise ValueError(f"{value!r} is not a day (YYYY-MM-DD)")
    return value


Day = Annotated[date, BeforeValidator(_written_as_a_day)]


@router.get("/v1/usage", responses=documented(403, 422))
async def usage(
    user: User,
    parts: Parts,
    since: Annotated[
        Day | None, Query(description="the first UTC day, YYYY-MM-DD; default: the 1st of `until`'s month")
    ] = None,
    until: Annotated[
        Day | None, Query(description="the last UTC day, YYYY-MM-DD, inclusive; default: today")
    ] = None,
    template: Annotated[str | None, Query(max_length=200, description="only this template's calls")] = None,
    model: Annotated[str | None, Query(max_length=200, description="only this model's calls")] = None,
    group: Annotated[Group | None, Query(description="sum the rows by day, template or model")] = None,
    of: Annotated[
        str | None,
        Query(alias="user", pattern=USER_ID, description="(operators) another user's usage"),
    ] = None,
    every: Annotated[bool, Query(alias="all", description="(operators) every user's usage")] = False,
) -> dict[str, Any]:
    """`{since, until, user, group, rows: [...], totals}`: the caller's usage (an operator's choice of
    user, or everyone's with `all=true`, `user` then null); each row with `calls`, `input_tokens`,
    `output_tokens`, `tokens` and `estimated_calls` (counted with the kernel's bound: the LLM server
    reported no usage)."""
    last = until or utc_day()
    first = since or last.replace(day=1)
    if first > last:
        raise HTTPException(422, f"query.since: {first} is after until ({last})")
    if (last - first).days + 1 > MAX_DAYS:
        raise HTTPException(
            422, f"query.since: a range is at most {MAX_DAYS} days, {first} to {last} is more"
        )
    if every and of is not None:
        raise HTTPException(422, "query.all: give user= or all=true, not both")
    whose = of if of is not None else user
    if (every or whose != user) and user not in parts.settings.operators:
        raise HTTPException(
            403, f"only a user server.operators names may read another user's usage (you are {user!r})"
        )
    ledger = parts.kernel.usage()
    rows = await asyncio.to_thread(_rows, ledger, None if every else whose, first, last, template, model)
    shown = [_json(row) for row in rows] if group is None else _grouped(rows, group, every)
    return {
        "since": first.isoformat(),
        "until": last.isoformat(),
        "user": None if every else whose,
        "group": group,
        "rows": shown,
        "totals": _sums(rows),
    }


def _rows(
    ledger: UsageStore, user: str | None, since: date, until: date, template: str | None, model: str | None
) -> list[UsageRow]:
    """The ledger's rows (`user` None: everyone's); 422 past MOST_ROWS."""
    found = ledger.rows(
        user=user,
        every_user=user is None,
        since=since,
        until=until,
        template=template,
        model=model,
        limit=MOST_ROWS + 1,
    )
    if len(found) > MOST_ROWS:
        raise HTTPException(
            422,
            f"query.since: {since} to {until} holds more than {MOST_ROWS} rows of usage; "
            "ask for fewer days, one user, one template or one model",
        )
    return found


def _sums(rows: Iterable[UsageRow]) -> dict[str, int]:
    calls = inputs = outputs = estimated = 0
    for row in rows:
        calls += row.calls
        inputs += row.input_tokens
        outputs += row.output_tokens
        estimated += row.estimated_calls
    return {
        "calls": calls,
        "input_tokens": inputs,
        "output_tokens": outputs,
        "tokens": inputs + outputs,
        "estimated_calls": estimated,
    }


def _json(row: UsageRow) -> dict[str, Any]:
    return {
        "day": row.day.isoformat(),
        "user": row.user,
        "template": row.template,
        "model": row.model,
        "provider": row.provider,
        **_sums((row,)),
    }


def _grouped(rows: list[UsageRow], group: Group, by_user: bool) -> list[dict[str, Any]]:
    """The rows summed by `group` (and by user, for everyone's), in the ledger's order of first sight."""
    groups: dict[tuple[Any, ...], list[UsageRow]] = {}
    for row in rows:
        value = row.day.isoformat() if group == "day" else getattr(row, group)
        groups.setdefault((row.user, value) if by_user else (value,), []).append(row)
    shown = []
    for key, members in sorted(groups.items(), key=lambda item: tuple(str(part) for part in item[0])):
        head: dict[str, Any] = {"user": key[0]} if by_user else {}
        shown.append({**head, group: key[-1], **_sums(members)})
    return shown


__all__ = ["MAX_DAYS", "MOST_ROWS", "router"]
