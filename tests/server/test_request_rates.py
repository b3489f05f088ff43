"""The token bucket per user (server/request_rates.py), on a clock the test moves: no sleeps."""

from __future__ import annotations

import pytest

from agentkernel.config import ServerSettings
from agentkernel.server.request_rates import RequestRates, retry_after, user_rates


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def admitted(rates: RequestRates, user: str, tries: int) -> int:
    """How many of `tries` requests sent at once `user` may send."""
    return sum(rates.wait(user) == 0.0 for _ in range(tries))


def test_a_burst_passes_then_the_next_waits_one_drip(clock: Clock) -> None:
    rates = RequestRates(["alice"], rate=4.0, burst=3, clock=clock)
    assert admitted(rates, "alice", 3) == 3
    assert rates.wait("alice") == pytest.approx(0.25)
    clock.now += 0.1
    assert rates.wait("alice") == pytest.approx(0.15)  # a refusal takes nothing: the drip goes on
    clock.now += 0.15
    assert rates.wait("alice") == 0.0
    assert rates.wait("alice") == pytest.approx(0.25)


def test_a_user_who_keeps_sending_is_served_at_the_rate(clock: Clock) -> None:
    rates = RequestRates(["alice"], rate=10.0, burst=5, clock=clock)
    served = 0
    for _ in range(1000):  # ten seconds of 100 requests a second
        served += rates.wait("alice") == 0.0
        clock.now += 0.01
    assert 5 + 99 <= served <= 5 + 100  # the burst, then ten a second


def test_an_idle_user_saves_up_no_more_than_the_burst(clock: Clock) -> None:
    rates = RequestRates(["alice"], rate=50.0, burst=200, clock=clock)
    clock.now += 3600
    assert admitted(rates, "alice", 1000) == 200


def test_one_user_s_flood_leaves_another_user_s_bucket_full(clock: Clock) -> None:
    rates = RequestRates(["alice", "bob"], rate=1.0, burst=2, clock=clock)
    assert admitted(rates, "alice", 100) == 2
    assert admitted(rates, "bob", 2) == 2


def test_a_user_with_no_bucket_is_never_held_and_gets_none(clock: Clock) -> None:
    rates = RequestRates(["alice"], rate=1.0, burst=1, clock=clock)
    assert admitted(rates, "stranger", 100) == 100
    assert admitted(rates, "alice", 2) == 1  # alice's own bucket, untouched by the stranger's requests


def test_retry_after_is_whole_seconds_rounded_up_and_never_zero() -> None:
    assert [retry_after(w) for w in (0.001, 0.5, 1.0, 1.01, 9.5)] == [1, 1, 1, 2, 10]


def test_the_refusal_names_the_settings_the_rate_and_the_wait(clock: Clock) -> None:
    rates = RequestRates(["alice"], rate=0.5, burst=1, clock=clock)
    rates.wait("alice")
    text = rates.refusal("alice", rates.wait("alice"))
    assert text == (
        "user 'alice' sends requests faster than server.requests_per_user_per_sec (0.5 a second, after a "
        "burst of server.request_burst_per_user (1)) allows; send again in 2 s"
    )


def test_only_the_tokens_users_have_buckets_and_only_with_a_rate() -> None:
    tokens = {"a" * 64: "alice", "b" * 64: "bob", "c" * 64: "alice"}
    rates = user_rates(ServerSettings(tokens=tokens, requests_per_user_per_sec=2.0, request_burst_per_user=1))
    assert rates is not None and (rates.rate, rates.burst) == (2.0, 1)
    assert admitted(rates, "alice", 5) == 1 and admitted(rates, "bob", 5) == 1
    assert admitted(rates, "local", 5) == 5
    assert user_rates(ServerSettings(tokens=tokens, requests_per_user_per_sec=None)) is None
    assert user_rates(ServerSettings()) is None  # no tokens: everyone is `local`, nobody else to protect
