"""QuickJS contexts kept between calls on a thread, each proved unchanged before it is used again (S3.3).

A fresh context costs about as much as a small tool's whole run, and the
prelude (helpers and guards) as much again. So a script that is no ES module
runs in a kept context: its top level is a function (engine.py `_wrapped`), so
its declarations live and die with the call, and lockdown.js has recorded the
builtins' shape (they stay open, so a polyfill works on the first call; only
builtin functions that construct nothing are frozen). After the call the
context goes back to its thread's pool only if no limit stopped the call (a
value returned or an error thrown alike), it left no job pending, imported
nothing, and `clean()` finds every builtin and global as it was; any other
context is dropped, and the next call makes a new one.

The host functions a kept context calls (`__ak_call`, `__ak_log`, `__ak_poll`,
the module loader) answer for the call under way, set by `enter` and cleared
by `leave`, so no call reaches another's helpers, log or deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agentkernel_quickjs as quickjs

#: Kept contexts a thread holds for one set of helpers and memory limit (a helper that runs
#: another script tool holds a second one while the first is in use).
POOL_SIZE = 2
#: How far a kept context's heap may grow past its size when made before QuickJS collects its
#: cycles: a call must not find the last call's garbage between it and its memory limit.
GC_HEADROOM = 256 << 10
_LOCKDOWN = Path(__file__).with_name("lockdown.js")

HelperCall = Callable[[str, str], str]
LogLine = Callable[[str, str], None]
Poll = Callable[[], bool]
Loader = Callable[[str], "str | None"]


def lockdown_source() -> str:
    """lockdown.js as it is compiled (engine.py strips its comments as the prelude's)."""
    return _LOCKDOWN.read_text("utf-8")


class _Slot:
    """The host functions a kept context calls, answering for the call under way. It holds no
    reference to the context (QuickJS holds it), so a dropped context is freed at once."""

    def __init__(self) -> None:
        self.call: HelperCall | None = None
        self.log_line: LogLine | None = None
        self.poll_deadline: Poll | None = None
        self.read: Loader | None = None
        self.budget: Poll | None = None
        self.imported = False

    def interrupt(self) -> bool:
        """QuickJS's interrupt handler, set once: the call's budget (none while the kernel's own
        prelude and lockdown.js run)."""
        budget = self.budget
        return budget is not None and budget()

    def helper(self, name: str, payload: str) -> str:
        assert self.call is not None, "a kept context ran outside a call"
        return self.call(name, payload)

    def log(self, level: str, text: str) -> None:
        assert self.log_line is not None, "a kept context ran outside a call"
        self.log_line(level, text)

    def poll(self) -> bool:
        assert self.poll_deadline is not None, "a kept context ran outside a call"
        return self.poll_deadline()

    def load(self, name: str) -> str | None:
        """An import makes a module the context would keep: this context is not used again."""
        assert self.read is not None, "a kept context ran outside a call"
        self.imported = True
        return self.read(name)


class KeptContext:
    """One runtime and context with the prelude and lockdown.js run in it, and the slot its host
    functions read."""

    def __init__(self, runtime: Any, ctx: Any) -> None:
        self.runtime = runtime
        self.ctx = ctx
        self.slot = _Slot()
        self.global_object: Any = ctx.get_global()
        self.invoke: Any = None
        self.begin: Any = None
        self.lookup: Any = None
        self.clean: Any = None
        self.gc_threshold = 0

    def enter(self, call: HelperCall, log: LogLine, poll: Poll, load: Loader, budget: Poll) -> None:
        slot = self.slot
        slot.call, slot.log_line, slot.poll_deadline, slot.read = call, log, poll, load
        slot.budget = budget
        self.begin.call()

    def leave(self, usable: bool) -> bool:
        """End the call; True when the context may serve another: it is still `usable` (no limit
        stopped the call: after one, out of memory above all, QuickJS is asked nothing more) and
        the call left it unchanged. The check runs within the call's budget: stopped by it, the
        context is not used again."""
        slot = self.slot
        slot.call = slot.log_line = slot.poll_deadline = slot.read = None
        try:
            if not usable or slot.imported or self.ctx.has_pending_job:
                return False
            return self.clean.call() is True
        except quickjs.QuickJSError:
            return False
        finally:
            slot.budget = None


class ContextPool:
    """Kept contexts by thread (a QuickJS runtime serves the thread that made it), then by key."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _idle(self, key: object) -> list[KeptContext]:
        pools: dict[object, list[KeptContext]] | None = getattr(self._local, "pools", None)
        if pools is None:
            pools = self._local.pools = {}
        return pools.setdefault(key, [])

    def take(self, key: object) -> KeptContext | None:
        idle = self._idle(key)
        return idle.pop() if idle else None

    def give_back(self, key: object, kept: KeptContext) -> None:
        idle = self._idle(key)
        if len(idle) < POOL_SIZE:
            idle.append(kept)

    def idle(self) -> list[KeptContext]:
        """The contexts this thread holds for its next calls."""
        pools: dict[object, list[KeptContext]] = getattr(self._local, "pools", {})
        return [kept for idle in pools.values() for kept in idle]


__all__ = ["GC_HEADROOM", "POOL_SIZE", "ContextPool", "KeptContext", "lockdown_source"]
