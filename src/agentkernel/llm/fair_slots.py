"""The LLM's concurrency slots, shared fairly between users (S9.2).

A counting semaphore whose waiters queue per user: when a slot frees it
goes to the waiting user with the fewest calls in flight, ties to the one
who waited longest (fair_share.py), not to whoever asked first. One user
keeping every slot busy, with more calls waiting, thus waits behind a user
with none: the next free slot is the other user's.

Who is asking travels with each call (`acquire(key)`, the request's
`user`), never in a thread-local or a context variable (DESIGN rule 3).

The provider behind it is called from several event loops and from
threads (services/kernel_loop.py), so no state here belongs to a loop: a
`threading.Lock` guards the queue for the few instructions a decision
takes, and each waiter sleeps on an `aiologic.Event` of its own, which any
thread may set and any loop may await. A waiter that is cancelled or times
out leaves the queue; one cancelled just as it was handed a slot passes
the slot on, so none is lost.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiologic

from agentkernel.util.fair_share import FairQueue, Key


class FairSlots:
    """At most `limit` holders at once; a freed slot goes to the waiting user with the fewest held."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._free = limit
        self._queue: FairQueue[aiologic.Event] = FairQueue()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FairSlots({self.limit}, free={self._free}, waiting={len(self._queue)})"

    def held(self, key: Key) -> int:
        """Slots `key` holds now (each handed-over slot counts from the moment it is handed)."""
        with self._lock:
            return self._queue.running(key)

    def waiting(self, key: Key) -> int:
        """Calls of `key` waiting for a slot now."""
        with self._lock:
            return self._queue.waiting(key)

    async def acquire(self, key: Key) -> None:
        """Wait for a slot for `key` (a user id; None: the kernel); cancelling the wait frees what it held."""
        with self._lock:
            if self._free and not len(self._queue):
                self._free -= 1
                self._queue.start(key)
                return
            waiter = aiologic.Event()
            self._queue.push(key, waiter)
        try:
            await waiter
        except BaseException:
            with self._lock:
                handed = not self._queue.remove(key, waiter)
            if handed:  # the slot came as the wait was given up: pass it on
                self.release(key)
            raise

    def release(self, key: Key) -> None:
        """`key` gives a slot back; it goes to the next waiter by fair share, if any."""
        with self._lock:
            self._queue.finish(key)
            self._free += 1
            woken: list[aiologic.Event] = []
            while self._free:
                chosen = self._queue.pop()
                if chosen is None:
                    break
                self._free -= 1
                woken.append(chosen[1])
        for waiter in woken:
            waiter.set()

    @asynccontextmanager
    async def slot(self, key: Key) -> AsyncIterator[None]:
        """`async with slots.slot(user):` holds one slot for `key` for the block."""
        await self.acquire(key)
        try:
            yield
        finally:
            self.release(key)


__all__ = ["FairSlots"]
