"""How fast each user may send requests: a token bucket per user of `server.tokens`.

A user's bucket holds up to `server.request_burst_per_user` requests and
refills at `server.requests_per_user_per_sec`; each request admitted takes
one, a request refused takes none, so a user who keeps sending is served
at the rate, never locked out. The caps per user bound the work running
at once; this bounds how often a user may ask at all, so a flood of cheap
requests (`POST /v1/sessions` at hundreds a second) costs the server its
refusals only, not the work each would have been.

The buckets are made once, one per user the tokens name, and no others:
nothing grows with requests, nor with tokens the server does not know.
Each process keeps its own (like `server.max_run_streams_per_user`): a
write to a shared store on every request would cost more than the flood
it stops. Time is `time.monotonic`, or the clock a test gives.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from agentkernel.config.server import ServerSettings

RATE_SETTING = "server.requests_per_user_per_sec"
BURST_SETTING = "server.request_burst_per_user"


@dataclass
class _Bucket:
    level: float  # requests the user may send now (fractions drip in between)
    stamp: float  # the clock when `level` was last brought up to date


class RequestRates:
    """The users' buckets: `wait(user)` admits a request or says how long until one would pass.

    Thread-safe (a lock around each bucket's update), as a worker's metrics
    page answers on threads of its own; on the event loop the lock is never
    contended.
    """

    def __init__(
        self, users: Iterable[str], rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        now = clock()
        self._buckets = {user: _Bucket(float(burst), now) for user in users}
        self._lock = threading.Lock()

    def wait(self, user: str) -> float:
        """0.0 when `user` may send a request now (it is counted); else the seconds until one would pass.

        A user with no bucket (none of the tokens' users) is never held.
        """
        bucket = self._buckets.get(user)
        if bucket is None:
            return 0.0
        with self._lock:
            now = self._clock()
            level = min(float(self.burst), bucket.level + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
            if level >= 1.0:
                bucket.level = level - 1.0
                return 0.0
            bucket.level = level
            return (1.0 - level) / self.rate

    def refusal(self, user: str, wait: float) -> str:
        """The sentence a refusal says: whose, which settings allow how much, when to send again."""
        return (
            f"user {user!r} sends requests faster than {RATE_SETTING} ({self.rate:g} a second, "
            f"after a burst of {BURST_SETTING} ({self.burst})) allows; send again in {retry_after(wait)} s"
        )


def user_rates(settings: ServerSettings) -> RequestRates | None:
    """The buckets of the users `server.tokens` names; None when nobody is held: no tokens (everyone is
    `local`, the one user, with nobody else to protect) or `server.requests_per_user_per_sec: null`."""
    rate = settings.requests_per_user_per_sec
    if not settings.tokens or rate is None:
        return None
    return RequestRates(set(settings.tokens.values()), rate, settings.request_burst_per_user)


def retry_after(wait: float) -> int:
    """A `Retry-After` header's whole seconds for a wait: rounded up, at least 1 (0 would invite a retry
    at once, which the bucket would refuse again)."""
    return max(1, math.ceil(wait))


__all__ = ["BURST_SETTING", "RATE_SETTING", "RequestRates", "retry_after", "user_rates"]
