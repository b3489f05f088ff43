"""The quota book (S26.3): each limit's use read from the real usage ledger, the refusal's words and resets.

Times are given (`now`), so a day's and a month's boundaries are tested
without waiting for one: days and months are UTC.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentkernel.config.quotas import QuotaSettings
from agentkernel.errors import HelperError, QuotaExhausted
from agentkernel.llm.base import (
    ChatMessage,
    Completion,
    CompletionRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
    Usage,
)
from agentkernel.services.quota_gate import QuotaGate
from agentkernel.services.quotas import QuotaBook, next_reset
from agentkernel.services.usage import UsageLedger

NOW = datetime(2026, 12, 5, 15, 30, tzinfo=UTC)
SETTINGS = QuotaSettings(
    default={"tokens_per_day": 100, "calls_per_month": 5},
    users={"alice": {"tokens_per_day": 1000}, "ops": {"calls_per_month": None}},
    templates={"writer": {"tokens_per_day": 50}},
)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[UsageLedger]:
    store = UsageLedger(tmp_path / "messages.db")
    try:
        yield store
    finally:
        store.close()


def spend(ledger: UsageLedger, user: str, tokens: int, *, template: str | None = None, day: int = 5) -> None:
    ledger.record(
        user=user,
        template=template,
        model="m",
        provider=None,
        input_tokens=tokens,
        output_tokens=0,
        at=datetime(2026, 12, day, 9, tzinfo=UTC),
    )


def test_a_spent_day_is_refused_naming_the_quota_the_use_and_the_reset(ledger: UsageLedger) -> None:
    book = QuotaBook(SETTINGS, lambda: ledger)
    spend(ledger, "bob", 60)
    book.check(user="bob", template=None, now=NOW)  # 60 of 100: one more call may go
    spend(ledger, "bob", 200_431 - 60)
    with pytest.raises(QuotaExhausted) as refused:
        book.check(user="bob", template=None, now=NOW)
    assert str(refused.value) == (
        "quota exhausted: tokens_per_day for user bob: 200,431 of 100 used; resets at 2026-12-06T00:00:00Z"
    )
    assert refused.value.retry_after_secs == 8.5 * 3600
    assert isinstance(refused.value, HelperError) and not isinstance(refused.value, ProviderError)
    book.check(user="carl", template=None, now=NOW)  # another user is not refused
    book.check(user="bob", template=None, now=datetime(2026, 12, 6, tzinfo=UTC))  # a new day


def test_a_users_override_replaces_the_defaults_limit_and_null_lifts_it(ledger: UsageLedger) -> None:
    book = QuotaBook(SETTINGS, lambda: ledger)
    spend(ledger, "alice", 500)
    book.check(user="alice", template=None, now=NOW)  # her own 1000, not the default's 100
    for _ in range(5):
        spend(ledger, "ops", 1)
        spend(ledger, "alice", 1, day=1)
    book.check(user="ops", template=None, now=NOW)  # calls_per_month lifted for ops
    with pytest.raises(
        QuotaExhausted, match="calls_per_month for user alice: 6 of 5 used; resets at 2027-01-01"
    ):
        book.check(user="alice", template=None, now=NOW)  # the default's month still holds for her


def test_a_templates_limit_counts_each_users_use_within_it(ledger: UsageLedger) -> None:
    book = QuotaBook(SETTINGS, lambda: ledger)
    spend(ledger, "alice", 50, template="writer")
    spend(ledger, "bob", 49, template="writer")
    with pytest.raises(QuotaExhausted) as refused:
        book.check(user="alice", template="writer", now=NOW)
    assert "tokens_per_day for user alice in template writer: 50 of 50 used" in str(refused.value)
    assert refused.value.template == "writer"
    book.check(user="alice", template="reviewer", now=NOW)  # her other templates go on
    book.check(user="bob", template="writer", now=NOW)  # bob's use within it is his own


def test_standings_list_each_limit_with_its_use_and_reset(ledger: UsageLedger) -> None:
    book = QuotaBook(SETTINGS, lambda: ledger)
    spend(ledger, "bob", 30, template="writer")
    spend(ledger, "bob", 10, day=1)
    shown = [
        (s.name, s.template, s.limit, s.used, s.remaining, s.resets_at)
        for s in book.standings(user="bob", template="writer", now=NOW)
    ]
    assert shown == [
        ("tokens_per_day", None, 100, 30, 70, "2026-12-06T00:00:00Z"),
        ("calls_per_month", None, 5, 2, 3, "2027-01-01T00:00:00Z"),
        ("tokens_per_day", "writer", 50, 30, 20, "2026-12-06T00:00:00Z"),
    ]


def test_calls_without_a_user_and_kernels_without_quotas_are_never_refused(ledger: UsageLedger) -> None:
    spend(ledger, "", 10_000)
    QuotaBook(SETTINGS, lambda: ledger).check(user=None, template=None, now=NOW)
    spend(ledger, "bob", 10_000)
    unlimited = QuotaBook(QuotaSettings(), lambda: ledger)
    assert not unlimited.enabled
    unlimited.check(user="bob", template=None, now=NOW)
    QuotaBook(SETTINGS, lambda: None).check(user="bob", template=None, now=NOW)  # a closed kernel's


def test_months_reset_on_the_first_of_the_next_and_the_year_turns() -> None:
    assert next_reset("month", datetime(2026, 12, 31).date()).isoformat() == "2027-01-01T00:00:00+00:00"
    assert next_reset("month", datetime(2027, 2, 3).date()).isoformat() == "2027-03-01T00:00:00+00:00"
    assert next_reset("day", datetime(2027, 2, 28).date()).isoformat() == "2027-03-01T00:00:00+00:00"


class _Recording:
    """A provider whose streams are kept, to tell whether the gate handed one on as it is."""

    def __init__(self) -> None:
        self.streams: list[AsyncIterator[StreamEvent]] = []

    async def complete(self, request: CompletionRequest) -> Completion:
        return Completion("hi", (), Usage(), "stop", None)

    def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        self.streams.append(self._events())
        return self.streams[-1]

    async def _events(self) -> AsyncIterator[StreamEvent]:
        yield TextDelta("hi")
        yield StreamDone(Completion("hi", (), Usage(), "stop", None))

    async def aclose(self) -> None:
        pass


def _texts(stream: AsyncIterator[StreamEvent]) -> list[str]:
    async def read() -> list[str]:
        return [event.text async for event in stream if isinstance(event, TextDelta)]

    return asyncio.run(read())


def test_the_gate_hands_on_the_inner_stream_itself_when_nothing_is_checked(ledger: UsageLedger) -> None:
    """No layer of its own (each would re-yield every event) for a kernel's call or a kernel without
    quotas; a user's call under limits is checked before the inner stream starts."""
    inner = _Recording()
    asked = CompletionRequest((ChatMessage.user("hi"),), user="bob")
    unlimited = QuotaGate(inner, QuotaBook(QuotaSettings(), lambda: ledger))
    assert unlimited.stream(asked) is inner.streams[-1]
    limited = QuotaGate(inner, QuotaBook(SETTINGS, lambda: ledger))
    assert limited.stream(replace(asked, user=None)) is inner.streams[-1]
    checked = limited.stream(asked)
    assert len(inner.streams) == 2  # not asked yet: the check comes first
    assert _texts(checked) == ["hi"]
    now = datetime.now(UTC)  # the gate checks today's use
    ledger.record(
        user="bob", template=None, model="m", provider=None, input_tokens=101, output_tokens=0, at=now
    )
    with pytest.raises(QuotaExhausted, match="tokens_per_day for user bob"):
        _texts(limited.stream(asked))
    assert len(inner.streams) == 3  # refused before the inner stream was asked for
