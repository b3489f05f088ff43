"""The usage ledger (S26.3): rows per user, template, model, provider and UTC day, summed across processes.

Every test but the one about the message store's file runs on both
ledgers: the SQLite file and the PostgreSQL database (S27.2, tests/pg.py).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from agentkernel.ports import UsageStore, UsageTotals
from agentkernel.services.approvals import Approvals
from agentkernel.services.turn_leases import TurnLeases
from agentkernel.services.usage import BUSY_TIMEOUT_SECS, UsageLedger
from agentkernel.services.usage_pg import PostgresUsageLedger

WAIT_SECS = 60.0
DAY = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)

Ledger = UsageLedger | PostgresUsageLedger


def open_ledger(where: str) -> Ledger:
    """The PostgreSQL ledger for a postgresql:// URL, else the SQLite one on that file."""
    return PostgresUsageLedger(where) if where.startswith("postgresql://") else UsageLedger(where)


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a ledger lives: a message store file, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "messages.db")
    return str(request.getfixturevalue("pg_url"))


def spend(
    ledger: UsageStore,
    user: str | None,
    template: str | None,
    *,
    model: str = "m",
    tokens: int = 1,
    at: datetime | None = None,
) -> None:
    ledger.record(
        user=user,
        template=template,
        model=model,
        provider=None,
        input_tokens=tokens,
        output_tokens=tokens,
        at=at,
    )


@pytest.fixture
def ledger(where: str) -> Iterator[Ledger]:
    with open_ledger(where) as opened:
        yield opened


def test_calls_of_one_key_and_day_add_up_in_one_row_and_estimates_are_counted(ledger: Ledger) -> None:
    assert isinstance(ledger, UsageStore)
    for estimated in (False, True, False):
        ledger.record(
            user="ann",
            template="helper",
            model="m1",
            provider="main",
            input_tokens=100,
            output_tokens=10,
            estimated=estimated,
            at=DAY,
        )
    [row] = ledger.rows(user="ann")
    key = (row.day, row.user, row.template, row.model, row.provider)
    assert key == (DAY.date(), "ann", "helper", "m1", "main")
    assert (row.calls, row.input_tokens, row.output_tokens, row.estimated_calls) == (3, 300, 30, 1)
    assert row.tokens == 330


def test_totals_sum_a_users_days_inclusive_and_by_template_only(ledger: Ledger) -> None:
    for day, user, template, tokens in (
        (DAY - timedelta(days=1), "ann", "a", 1),
        (DAY, "ann", "a", 10),
        (DAY, "ann", "b", 100),
        (DAY + timedelta(days=1), "ann", "a", 1000),
        (DAY, "bob", "a", 10_000),
    ):
        spend(ledger, user, template, tokens=tokens, at=day)
    today = DAY.date()
    assert ledger.totals(user="ann", since=today, until=today) == UsageTotals(2, 110, 110)
    assert ledger.totals(user="ann", since=today, until=today, template="a") == UsageTotals(1, 10, 10)
    three_days = ledger.totals(user="ann", since=today - timedelta(days=1), until=today + timedelta(days=1))
    assert three_days.tokens == 2222
    assert ledger.totals(user="carol", since=today) == UsageTotals(0, 0, 0)


def test_until_defaults_to_today_utc_and_a_day_is_utcs(ledger: Ledger) -> None:
    late_in_tokyo = datetime(2026, 3, 15, 8, 0, tzinfo=timezone(timedelta(hours=9)))  # 23:00 UTC on the 14th
    spend(ledger, "ann", None, at=late_in_tokyo)
    spend(ledger, "ann", None)
    [first, now] = ledger.rows(user="ann")
    assert first.day == date(2026, 3, 14)
    assert now.day == datetime.now(UTC).date()
    assert ledger.totals(user="ann", since=now.day).calls == 1


def test_no_user_template_or_provider_is_one_row_read_back_as_none(ledger: Ledger) -> None:
    for _ in range(2):
        spend(ledger, None, None, at=DAY)
    [row] = ledger.rows(user=None)
    assert (row.user, row.template, row.provider, row.calls) == (None, None, None, 2)
    assert ledger.rows(user="ann") == []


def test_rows_filter_by_user_days_template_and_model(ledger: Ledger) -> None:
    for user, template, model, day in (
        ("ann", "a", "m1", DAY),
        ("ann", "b", "m2", DAY),
        ("bob", "a", "m1", DAY),
        ("bob", "a", "m1", DAY + timedelta(days=3)),
    ):
        spend(ledger, user, template, model=model, at=day)
    assert [(r.user, r.template) for r in ledger.rows(user="ann")] == [("ann", "a"), ("ann", "b")]
    assert [r.user for r in ledger.rows(every_user=True)] == ["ann", "ann", "bob", "bob"]
    assert [r.user for r in ledger.rows(every_user=True, template="a", model="m1")] == ["ann", "bob", "bob"]
    later = ledger.rows(every_user=True, since=DAY.date() + timedelta(days=1))
    assert [(r.user, r.day) for r in later] == [("bob", DAY.date() + timedelta(days=3))]
    assert len(ledger.rows(every_user=True, until=DAY.date())) == 3


def test_rows_sort_by_bytes_and_stop_at_the_limit(ledger: Ledger) -> None:
    for user in ("b", "B", "a", "A"):
        spend(ledger, user, None, at=DAY)
    assert [r.user for r in ledger.rows(every_user=True)] == ["A", "B", "a", "b"]
    assert [r.user for r in ledger.rows(every_user=True, limit=2)] == ["A", "B"]
    assert ledger.rows(every_user=True, limit=0) == []
    assert ledger.rows(every_user=True, limit=-1) == []


def test_the_ledger_shares_the_message_store_file_with_the_runs_and_approvals(tmp_path: Path) -> None:
    path = tmp_path / "messages.db"
    with TurnLeases(path), Approvals(path), UsageLedger(path) as ledger:
        ledger.record(user="ann", template="t", model="m", provider=None, input_tokens=1, output_tokens=1)
    with UsageLedger(path) as again:
        assert again.totals(user="ann", since=DAY.date()).calls == 1


RECORDER = """
import sys
from agentkernel.services.usage import UsageLedger
if sys.argv[1].startswith("postgresql://"):
    from agentkernel.services.usage_pg import PostgresUsageLedger as UsageLedger
ledger = UsageLedger(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
for _ in range(int(sys.argv[2])):
    ledger.record(user="ann", template="t", model="m", provider=None, input_tokens=3, output_tokens=1)
print("done", flush=True)
"""


def test_two_processes_recording_at_once_lose_no_call(where: str) -> None:
    each = 200
    open_ledger(where).close()
    started = [
        subprocess.Popen(
            [sys.executable, "-c", RECORDER, where, str(each)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for process in started:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        for process in started:  # both go at once
            assert process.stdin is not None
            process.stdin.write("\n")
            process.stdin.flush()
        for process in started:
            out, err = process.communicate(timeout=WAIT_SECS)
            assert process.returncode == 0, err
            assert out.strip() == "done"
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
    with open_ledger(where) as ledger:
        today = datetime.now(UTC).date()
        spent = ledger.totals(user="ann", since=today - timedelta(days=1))
        assert spent == UsageTotals(2 * each, 6 * each, 2 * each)


def _at_once(ledger: Ledger, tokens: int) -> bool:
    return ledger.record(
        user="ann",
        template=None,
        model="m",
        provider=None,
        input_tokens=tokens,
        output_tokens=0,
        at=DAY,
        at_once=True,
    )


def _ann_tokens(ledger: Ledger) -> int:
    return ledger.totals(user="ann", since=DAY.date(), until=DAY.date()).input_tokens


def test_a_call_is_counted_at_once_only_when_nothing_holds_the_ledger(where: str) -> None:
    """For the event loop: the SQLite ledger writes when free, and says so at once, writing nothing, when
    another thread or process holds it (never waiting); the PostgreSQL one never writes at once."""
    with open_ledger(where) as ledger:
        if isinstance(ledger, PostgresUsageLedger):
            assert not _at_once(ledger, 1) and _ann_tokens(ledger) == 0
            return
        assert _at_once(ledger, 1) and _ann_tokens(ledger) == 1
        with ledger._write():  # this process's other thread writing
            assert not _at_once(ledger, 10)
        other = sqlite3.connect(where, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process writing the file
            assert not _at_once(ledger, 100)
            other.execute("COMMIT")
        finally:
            other.close()
        assert _ann_tokens(ledger) == 1
        assert _at_once(ledger, 1000) and _ann_tokens(ledger) == 1001
        # a write that may wait waits as long as ever (how: tests/services/test_sqlite_db.py)
        assert ledger._busy_timeout_secs == BUSY_TIMEOUT_SECS
