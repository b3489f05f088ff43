"""Who goes next when users share something scarce: the user with the fewest running, then the longest waiter.

The policy behind the LLM's fair slots (llm/fair_slots.py) and the script
workers' fair pool (fair_pool.py). Items wait in one queue per user (a
`key`: the user id; None is the kernel itself, every call with no user);
when a place frees, the next item is the oldest of the user with the
fewest items running among those that have one waiting; ties go to the
user who has waited longest: since their oldest item came, or since they
were last given a place, whichever is later. So a user with sixteen calls
in flight waits behind a user with none, and users with the same share
take turns (round robin), however many items each has queued. `per_key`,
when set, is the most items one user may have running: past it their
items wait even while places are free.

No lock of its own: its owner holds one around every call. Choosing is
linear in the number of users with an item waiting, not in the items.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")
Key = str | None  # a user id; None: the kernel itself (no user)


class FairQueue(Generic[T]):
    """Items waiting per key, and which one runs next; see the module docstring."""

    def __init__(self, per_key: int | None = None) -> None:
        if per_key is not None and per_key < 1:
            raise ValueError(f"per_key must be at least 1, got {per_key}")
        self.per_key = per_key
        self._waiting: dict[Key, deque[tuple[int, T]]] = {}
        self._running: dict[Key, int] = {}
        self._served: dict[Key, int] = {}  # when each active key was last given a place (an order stamp)
        self._order = itertools.count()
        self._count = 0

    def __len__(self) -> int:
        """Items waiting, every key's."""
        return self._count

    def running(self, key: Key) -> int:
        """Items of `key` running now."""
        return self._running.get(key, 0)

    def waiting(self, key: Key) -> int:
        """Items of `key` waiting now."""
        return len(self._waiting.get(key, ()))

    def push(self, key: Key, item: T) -> None:
        """`item` waits, behind the items `key` already has waiting."""
        self._waiting.setdefault(key, deque()).append((next(self._order), item))
        self._count += 1

    def start(self, key: Key) -> None:
        """An item of `key` runs without having waited (a place was free)."""
        self._running[key] = self._running.get(key, 0) + 1
        self._served[key] = next(self._order)

    def pop(self) -> tuple[Key, T] | None:
        """The next item to run, now counted as running; None when no waiting item may run."""
        chosen: Key = None
        best: tuple[int, int] | None = None
        for key, items in self._waiting.items():
            running = self._running.get(key, 0)
            if self.per_key is not None and running >= self.per_key:
                continue
            rank = (running, max(items[0][0], self._served.get(key, -1)))
            if best is None or rank < best:
                chosen, best = key, rank
        if best is None:
            return None
        items = self._waiting[chosen]
        _, item = items.popleft()
        if not items:
            del self._waiting[chosen]
        self._count -= 1
        self.start(chosen)
        return chosen, item

    def finish(self, key: Key) -> None:
        """An item of `key` stopped running."""
        left = self._running.get(key, 0) - 1
        if left < 0:
            raise RuntimeError(f"finish({key!r}) without a running item")
        if left:
            self._running[key] = left
        else:
            del self._running[key]
            if key not in self._waiting:  # an idle key is forgotten: memory only for active users
                del self._served[key]

    def drain(self) -> list[tuple[Key, T]]:
        """Every waiting item, taken out of the queue (their owner is closing); none counts as running."""
        items = [(key, item) for key, queue in self._waiting.items() for _, item in queue]
        self._waiting.clear()
        self._served = {key: stamp for key, stamp in self._served.items() if key in self._running}
        self._count = 0
        return items

    def remove(self, key: Key, item: T) -> bool:
        """Take `item` out of `key`'s queue (its waiter gave up); False when it was chosen already."""
        items = self._waiting.get(key)
        if items is None:
            return False
        for index, (_, waiting) in enumerate(items):
            if waiting is item:
                del items[index]
                self._count -= 1
                if not items:
                    del self._waiting[key]
                    if key not in self._running:
                        self._served.pop(key, None)
                return True
        return False


__all__ = ["FairQueue", "Key"]
