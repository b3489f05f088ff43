"""`agentkernel usage` (S26.3): the project's usage ledger as a table with a totals line, or JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agentkernel.services.usage import UsageLedger
from tests.cli.conftest import cli
from tests.conftest import write_kernel_yaml

NOW = datetime.now(UTC)
TODAY = NOW.date()


def spend(project: Path) -> None:
    """Ann's two calls today (one estimated) and one a month and a half ago; Bob's call today."""
    with UsageLedger(project / "data" / "messages.db") as ledger:
        for user, template, tokens, estimated, at in (
            ("ann", "helper", (1200, 30), False, NOW),
            ("ann", "helper", (800, 20), True, NOW),
            ("ann", "helper", (5, 5), False, NOW - timedelta(days=45)),
            ("bob", None, (7, 3), False, NOW),
        ):
            ledger.record(
                user=user,
                template=template,
                model="gpt-x",
                provider="main",
                input_tokens=tokens[0],
                output_tokens=tokens[1],
                estimated=estimated,
                at=at,
            )


def test_the_table_shows_every_users_rows_and_the_totals(tmp_path: Path) -> None:
    write_kernel_yaml(tmp_path)
    empty = cli("agentkernel", "usage", cwd=tmp_path)
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.startswith("no usage from ") and "data/messages.db" in empty.stdout
    assert not (tmp_path / "data" / "messages.db").exists(), "reading made no store"
    spend(tmp_path)
    shown = cli("agentkernel", "usage", "--since", (TODAY - timedelta(days=1)).isoformat(), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    ann = next(line for line in lines if " ann " in line)
    assert [cell for cell in ann.replace("│", " ").split()] == [
        TODAY.isoformat(), "ann", "helper", "gpt-x", "main", "2", "2,000", "50", "1"
    ]  # fmt: skip
    assert any(" bob " in line and " - " in line for line in lines)  # no template
    assert lines[-1] == "3 calls, 2,060 tokens (2,007 in, 53 out)"


def test_one_user_a_range_and_json(tmp_path: Path) -> None:
    write_kernel_yaml(tmp_path)
    spend(tmp_path)
    since = (TODAY - timedelta(days=60)).isoformat()
    answer = cli("agentkernel", "usage", "--user", "ann", "--since", since, "--json", cwd=tmp_path)
    assert answer.returncode == 0, answer.stderr
    body = json.loads(answer.stdout)
    assert (body["user"], body["since"], body["until"]) == ("ann", since, TODAY.isoformat())
    assert [row["calls"] for row in body["rows"]] == [1, 2]
    assert body["totals"] == {
        "calls": 3,
        "input_tokens": 2005,
        "output_tokens": 55,
        "estimated_calls": 1,
        "tokens": 2060,
    }
    bob = json.loads(
        cli("agentkernel", "usage", "--user", "bob", "--template", "x", "--json", cwd=tmp_path).stdout
    )
    assert bob["rows"] == [] and bob["totals"]["calls"] == 0


def test_a_bad_day_or_range_is_refused_naming_it(tmp_path: Path) -> None:
    write_kernel_yaml(tmp_path)
    bad = cli("agentkernel", "usage", "--since", "2026-02-30", cwd=tmp_path)
    assert bad.returncode == 2 and "--since: expected a day as YYYY-MM-DD, got '2026-02-30'" in bad.stderr
    backwards = cli("agentkernel", "usage", "--since", "2026-03-02", "--until", "2026-03-01", cwd=tmp_path)
    assert backwards.returncode == 2 and "is not a range of 1 to 366 days" in backwards.stderr
