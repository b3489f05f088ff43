"""Quotas (S26.3): where a user stands against each limit of kernel.yaml's `quotas:`, read from the ledger.

The usage ledger (services/usage.py) is the truth, shared by every process
on the store, so each check reads it afresh rather than keeping a count: a
day's and a month's totals are each one indexed range of the ledger's key
(at most four reads: the user's day and month, and the template's), and
only the periods some limit names are read. A call is refused when the use
has reached a limit (`used >= limit`); a call under it may still go past it
(its cost is known only once it is answered), and the next is refused.

Calls without a user (the kernel's own, `agentkernel tool run` at a
terminal without `--user`) are not limited. Days and months are UTC: a
day's use resets at the next midnight UTC, a month's at the first of the
next month.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

from agentkernel.config.quotas import QuotaLimit, QuotaSettings
from agentkernel.errors import QuotaExhausted
from agentkernel.ports import QuotaStanding, UsageStore, UsageTotals


def period_start(period: str, today: date) -> date:
    """The first day of the `day` or `month` that holds `today`."""
    return today if period == "day" else today.replace(day=1)


def next_reset(period: str, today: date) -> datetime:
    """When the use of the period holding `today` starts again from zero: midnight UTC."""
    if period == "day":
        following = today + timedelta(days=1)
    else:
        following = date(today.year + today.month // 12, today.month % 12 + 1, 1)
    return datetime(following.year, following.month, following.day, tzinfo=UTC)


def rfc3339(moment: datetime) -> str:
    """`2026-12-06T00:00:00Z`: a UTC time as the refusals and `usage()` show it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class QuotaBook:
    """The quotas of `settings`, measured in the ledger `ledger()` gives (None: nothing is refused)."""

    def __init__(self, settings: QuotaSettings, ledger: Callable[[], UsageStore | None]) -> None:
        self.settings = settings
        self._ledger = ledger

    @property
    def enabled(self) -> bool:
        """Whether any limit is set: without one, no call needs a check."""
        return self.settings.enabled

    def standings(
        self, *, user: str | None, template: str | None, now: datetime | None = None
    ) -> list[QuotaStanding]:
        """Each limit a call of `user` within `template` must fit, with its use now; [] without a user."""
        ledger = self._ledger()
        limits = self.settings.limits_for(user, template) if user is not None else ()
        if ledger is None or not limits:
            return []
        today = (now or datetime.now(UTC)).astimezone(UTC).date()
        read: dict[tuple[str, str | None], UsageTotals] = {}
        standings = []
        for limit in limits:
            key = (limit.period, limit.template)
            if key not in read:
                since = period_start(limit.period, today)
                read[key] = ledger.totals(user=user, since=since, until=today, template=limit.template)
            standings.append(_standing(limit, read[key], next_reset(limit.period, today)))
        return standings

    def check(self, *, user: str | None, template: str | None, now: datetime | None = None) -> None:
        """Nothing when `user` may make one more call within `template`; QuotaExhausted naming the first
        limit reached otherwise."""
        moment = now or datetime.now(UTC)
        for standing in self.standings(user=user, template=template, now=moment):
            if standing.used >= standing.limit:
                assert user is not None  # a call without a user has no standings
                raise refusal(standing, user, moment)


def _standing(limit: QuotaLimit, totals: UsageTotals, resets: datetime) -> QuotaStanding:
    used = totals.tokens if limit.measure == "tokens" else totals.calls
    return QuotaStanding(limit.name, limit.template, limit.limit, used, rfc3339(resets))


def refusal(standing: QuotaStanding, user: str, now: datetime) -> QuotaExhausted:
    """The error a call refused by `standing` raises, saying when the limit resets."""
    resets = datetime.fromisoformat(standing.resets_at.replace("Z", "+00:00"))
    return QuotaExhausted(
        quota=standing.name,
        user=user,
        template=standing.template,
        used=standing.used,
        limit=standing.limit,
        resets_at=standing.resets_at,
        retry_after_secs=max(1, int((resets - now).total_seconds())),
    )


__all__ = ["QuotaBook", "next_reset", "period_start", "refusal", "rfc3339"]
