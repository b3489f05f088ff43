"""Time (RHAI.md §13 "Misc"; Rhai 1.25 `time_basic.rs`, `lang_core.rs`): `timestamp()`,
`elapsed`, `sleep`. Timestamp arithmetic and comparisons are operators (`ops.py`)."""

from __future__ import annotations

import threading
import time

from agentkernel.rhai.runtime.context import NativeContext
from agentkernel.rhai.runtime.failures import arithmetic
from agentkernel.rhai.runtime.values import Timestamp
from agentkernel.rhai.stdlib.registry import Library


def timestamp() -> Timestamp:
    return Timestamp.now()


def elapsed(ts: Timestamp) -> float:
    """Seconds since `ts` (a float); a timestamp in the future is an error."""
    now = time.monotonic()
    if ts.seconds > now:
        raise arithmetic("Time-stamp is later than now")
    return now - ts.seconds


def sleep_float(ctx: NativeContext, seconds: float) -> None:
    """`sleep(secs)`: zero, negative, subnormal, infinite or NaN seconds do not sleep.

    The interpreter does the sleeping, so a host can bound it by its own clock.
    """
    if seconds != seconds or seconds <= 0 or seconds == float("inf") or seconds < 2.2250738585072014e-308:
        return
    ctx.sleep(min(seconds, threading.TIMEOUT_MAX))


def sleep_int(ctx: NativeContext, seconds: int) -> None:
    if seconds > 0:
        ctx.sleep(min(seconds, threading.TIMEOUT_MAX))


def register(lib: Library) -> None:
    lib.register("timestamp", (), timestamp)
    lib.register("elapsed", (Timestamp,), elapsed)
    lib.getter(Timestamp, "elapsed", elapsed)
    lib.register("sleep", (float,), sleep_float, needs_context=True)
    lib.register("sleep", (int,), sleep_int, needs_context=True)


__all__ = ["register"]
