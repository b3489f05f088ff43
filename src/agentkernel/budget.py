"""What a process tree may spend: its tokens (a `BudgetGroup`, S9.2, S17) and its time (deadlines).

A group is shared by a process and the sub-agents it starts; every
inference holds an upper bound of its cost in the group before it is made
(llm/token_bound.py), so calls in parallel never spend past the limit. A
`Spender` is what a caller's inference is charged to: its running process.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

from agentkernel.errors import HelperError
from agentkernel.util.ids import new_uuid

if TYPE_CHECKING:  # aiologic: imported only by a limited budget under contention
    from aiologic import Event

BUDGET_EXHAUSTED = "caller budget exhausted"


class BudgetExhausted(HelperError):
    """A process asked for inference on a spent budget; the text is exactly S9.2's.

    A HelperError, so a script calling `llm()` can catch it like any helper
    error; the agent loop turns it into the end reason `budget_exhausted`.
    """

    def __init__(self) -> None:
        super().__init__(BUDGET_EXHAUSTED)


def earlier(a: float | None, b: float | None) -> float | None:
    """The earlier of two deadlines, where None means none."""
    if a is None:
        return b
    return a if b is None else min(a, b)


def _tighter(a: int | None, b: int | None) -> int | None:
    """The smaller of two limits, where None means unlimited."""
    if a is None:
        return b
    return a if b is None else min(a, b)


class BudgetGroup:
    """Tokens a process tree may spend: a limit (None = unlimited), what is used, what is held.

    Charging never refuses: the tokens of an answer already received are
    spent whatever the limit, and are always counted. Refusal happens before
    the next inference, in `reserve()`: every inference — the agent loop's,
    a sub-agent's, a script's `llm()` — holds an upper bound of what it can
    cost until its answer is charged (llm/token_bound.py), so any number of
    them in parallel never spend past the limit, unless a server reports
    more tokens than the bound allowed for.

    A group may sit inside an `outer` one (a child whose own template sets a
    budget): charges count in both, and it is exhausted when either is.
    """

    def __init__(self, limit: int | None = None, *, outer: BudgetGroup | None = None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"budget limit must be at least 1 token, got {limit}")
        self.id = new_uuid()
        self.limit = limit
        self.outer = outer
        self._used = 0
        self._held = 0
        self._lock = threading.Lock()
        self._signal: Event | None = None  # the outermost group's: set by the next release in the tree

    @property
    def used(self) -> int:
        """Tokens charged to this group (including those of any group inside it)."""
        with self._lock:
            return self._used

    @property
    def held(self) -> int:
        """Tokens reserved by inferences under way and not yet charged (`reserve`)."""
        with self._lock:
            return self._held

    @property
    def remaining(self) -> int | None:
        """Tokens neither used nor held, here and in every enclosing group; None when nothing limits."""
        own = None if self.limit is None else max(self._free(), 0)
        return _tighter(own, self.outer.remaining if self.outer is not None else None)

    def _free(self) -> int:
        assert self.limit is not None
        with self._lock:
            return self.limit - self._used - self._held

    @property
    def exhausted(self) -> bool:
        """Whether the tokens are spent, here or in an enclosing group. Tokens merely held by
        calls in flight do not count: most come back when their answers are charged, so a
        new call (a sub-agent starting) waits its turn for them (`reserve` via token_bound.py)
        instead of being refused while the budget is only busy."""
        with self._lock:
            spent = self.limit is not None and self._used >= self.limit
        return spent or (self.outer is not None and self.outer.exhausted)

    def reserve(self, least: int, most: int) -> int:
        """Hold between `least` and `most` tokens for one inference; how many were held.

        As many as are free up to `most`, here and in every enclosing group,
        atomically per group; BudgetExhausted when fewer than `least` are.
        The caller must `release` exactly what it got, once the answer is
        charged (or the call failed).
        """
        if not 0 <= least <= most:
            raise ValueError(f"reserve needs 0 <= least <= most, got {least} and {most}")
        with self._lock:
            free = None if self.limit is None else self.limit - self._used - self._held
            if free is not None and free < least:
                raise BudgetExhausted()
            granted = most if free is None else min(most, free)
            self._held += granted
        if self.outer is None:
            return granted
        try:
            outer_granted = self.outer.reserve(least, granted)
        except BudgetExhausted:
            self._unhold(granted)
            raise
        self._unhold(granted - outer_granted)
        return outer_granted

    def release(self, tokens: int) -> None:
        """Give back tokens held by `reserve`, here and in every enclosing group."""
        self._unhold(tokens)
        if self.outer is not None:
            self.outer.release(tokens)

    def _unhold(self, tokens: int) -> None:
        with self._lock:
            self._held -= tokens
            signal, self._signal = self._signal, None
        if signal is not None:
            signal.set()

    @property
    def in_flight(self) -> bool:
        """Whether tokens are held anywhere in this group's tree: a release will come, freeing some."""
        return self._outermost().held > 0

    def release_signal(self) -> Event:
        """An event (sync `wait(timeout)` and `await`) set by the next release anywhere in the tree.

        Take it before trying to reserve: a release between a failed attempt
        and the wait then still wakes the waiter. Every release reaches the
        outermost group, which hands out the signal.
        """
        root = self._outermost()
        with root._lock:
            if root._signal is None:
                from aiologic import Event  # only a limited budget under contention pays for it

                root._signal = Event()
            return root._signal

    def _outermost(self) -> BudgetGroup:
        group = self
        while group.outer is not None:
            group = group.outer
        return group

    def charge(self, tokens: int) -> None:
        """Count tokens spent, here and in every enclosing group; safe from any thread."""
        if tokens < 0:
            raise ValueError(f"cannot charge a negative number of tokens: {tokens}")
        with self._lock:
            self._used += tokens
        if self.outer is not None:
            self.outer.charge(tokens)

    def __repr__(self) -> str:
        return (
            f"BudgetGroup(limit={self.limit}, used={self.used}, held={self.held}, "
            f"outer={self.outer is not None})"
        )


class Spender(Protocol):
    """The running process a caller's inference is charged to (`Caller.process`, S9.2)."""

    budget: BudgetGroup

    @property
    def terminated(self) -> bool: ...

    def charge(self, tokens: int) -> None: ...


__all__ = ["BUDGET_EXHAUSTED", "BudgetExhausted", "BudgetGroup", "Spender", "earlier"]
