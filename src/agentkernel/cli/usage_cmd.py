"""`agentkernel usage`: the usage ledger (S26.3) from the terminal, read from the project's store.

Every user's LLM calls and tokens per UTC day, template, model and
provider (one user's with `--user`), from `--since` (default: the 1st of
this month, UTC) to `--until` (default: today), as a table with a totals
line, or `--json` (the rows and totals as `GET /v1/usage` gives them).
Whoever runs it reads the project's files, so it shows everyone's: the
server's `server.operators` rule is for callers over HTTP. It opens the
ledger only when the message store exists (reading makes no store).
Building the parser imports nothing beyond argparse.
"""

from __future__ import annotations

import argparse
import json
import sys

from agentkernel.cli.common import EXIT_OK, EXIT_USAGE, load_project_config

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms at start-up)

if TYPE_CHECKING:
    from datetime import date

    from agentkernel.ports import UsageRow
    from agentkernel.services.usage_pg import PostgresUsageLedger

COLUMNS = ("DAY", "USER", "TEMPLATE", "MODEL", "PROVIDER", "CALLS", "IN", "OUT", "ESTIMATED")
MAX_DAYS = 366  # as GET /v1/usage: a longer range is asked in parts


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    usage = commands.add_parser("usage", help="LLM calls and tokens per user, template, model and day")
    usage.add_argument("--user", help="only this user's usage (default: every user's)")
    usage.add_argument(
        "--since", type=_day, help="the first UTC day, YYYY-MM-DD (default: the 1st of the month)"
    )
    usage.add_argument("--until", type=_day, help="the last UTC day, inclusive (default: today)")
    usage.add_argument("--template", help="only this template's calls")
    usage.add_argument("--model", help="only this model's calls")
    usage.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _day(text: str) -> date:
    from datetime import date

    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a day as YYYY-MM-DD, got {text!r}") from None


def run_command(options: argparse.Namespace) -> int:
    from agentkernel.cli.problems import shown_path
    from agentkernel.services.usage import UsageLedger, utc_day

    until = options.until or utc_day()
    since = options.since or until.replace(day=1)
    if since > until or (until - since).days + 1 > MAX_DAYS:
        print(
            f"agentkernel usage: --since {since} to --until {until} is not a range of 1 to {MAX_DAYS} days",
            file=sys.stderr,
        )
        return EXIT_USAGE
    config = load_project_config("agentkernel usage", options.config)
    rows: list[UsageRow] = []
    ledger: UsageLedger | PostgresUsageLedger | None = None
    where = shown_path(config.messages_db)
    if config.store.url is not None:  # the ledger lives in the store database (S27.2)
        from agentkernel.services.usage_pg import PostgresUsageLedger

        ledger, where = PostgresUsageLedger(config.store.url), str(config.store.shown)
    elif config.messages_db.is_file():
        ledger = UsageLedger(config.messages_db)
    if ledger is not None:
        with ledger:
            rows = ledger.rows(
                user=options.user,
                every_user=options.user is None,
                since=since,
                until=until,
                template=options.template,
                model=options.model,
            )
    if options.json:
        print(json.dumps(_json(rows, since, until, options.user), ensure_ascii=False, indent=2))
    elif not rows:
        whose = f" of {options.user!r}" if options.user else ""
        print(f"no usage{whose} from {since} to {until} in {where}")
    else:
        _table(rows, since, until)
    return EXIT_OK


def _sums(rows: list[UsageRow]) -> tuple[int, int, int, int]:
    return (
        sum(r.calls for r in rows),
        sum(r.input_tokens for r in rows),
        sum(r.output_tokens for r in rows),
        sum(r.estimated_calls for r in rows),
    )


def _json(rows: list[UsageRow], since: date, until: date, user: str | None) -> dict[str, object]:
    calls, inputs, outputs, estimated = _sums(rows)
    counts = ("calls", "input_tokens", "output_tokens", "estimated_calls")
    return {
        "since": since.isoformat(),
        "until": until.isoformat(),
        "user": user,
        "rows": [
            {
                "day": r.day.isoformat(),
                "user": r.user,
                "template": r.template,
                "model": r.model,
                "provider": r.provider,
                **dict(
                    zip(counts, (r.calls, r.input_tokens, r.output_tokens, r.estimated_calls), strict=True)
                ),
                "tokens": r.tokens,
            }
            for r in rows
        ],
        "totals": {
            **dict(zip(counts, (calls, inputs, outputs, estimated), strict=True)),
            "tokens": inputs + outputs,
        },
    }


def _table(rows: list[UsageRow], since: date, until: date) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"usage from {since} to {until} (UTC days)", title_justify="left")
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in COLUMNS[5:] else "left", no_wrap=True)
    for r in rows:
        table.add_row(
            r.day.isoformat(),
            r.user or "-",
            r.template or "-",
            r.model or "-",
            r.provider or "-",
            *(f"{n:,}" for n in (r.calls, r.input_tokens, r.output_tokens, r.estimated_calls)),
        )
    calls, inputs, outputs, estimated = _sums(rows)
    table.add_section()
    table.add_row("total", "", "", "", "", *(f"{n:,}" for n in (calls, inputs, outputs, estimated)))
    Console(highlight=False, width=max(Console().width, 120)).print(table)
    print(f"{calls:,} calls, {inputs + outputs:,} tokens ({inputs:,} in, {outputs:,} out)")


__all__ = ["add_parser", "run_command"]
