"""The wall-clock deadline, seen from work whose cost grows with its data (S21.1).

Compiled code looks at the clock every few thousand operations (the
runtime's checkpoint), but one operation can walk a million-element array
or print one. So every piece of code whose cost grows with the size of its
data (operators, natives, copying, printing) calls `poll_size(n)` before it
starts and `poll()` every `CHUNK` items as it goes. Past the deadline of the
evaluation running on this thread they raise the uncatchable
`Script terminated`, so the clock holds to about the cost of `CHUNK` items,
whatever the script does.

The runtime installs its deadline for the length of a call with
`deadline_scope`. Without one (an `Engine` with no time limit) the polls do
nothing. A context variable carries it, so operators and value printing,
which have no runtime at hand, see it too, and a nested evaluation on the
same thread (a Rhai tool calling another) has its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token

from agentkernel.rhai.runtime.failures import terminated
from agentkernel.rhai.syntax.records import field, record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import TypeVar

    Item = TypeVar("Item")  # annotations only

CHUNK = 4096  # items of work between two looks at the clock
POLL_SIZE = 256  # less work than this is not worth a look at the clock
STRING_WORK = 64  # characters of C-speed string work that cost about one item of Python work


@record
class Deadline:
    """A moment on `clock` past which the evaluation stops."""

    at: float
    clock: Callable[[], float] = field(default=time.monotonic)

    def passed(self) -> bool:
        return self.clock() > self.at


_CURRENT: ContextVar[Deadline | None] = ContextVar("rhai_deadline", default=None)


def poll() -> None:
    """Stop here if the deadline of this thread's evaluation has passed."""
    deadline = _CURRENT.get()
    if deadline is not None and deadline.passed():
        raise terminated()


def poll_size(items: int) -> None:
    """`items` of work are about to start: look at the clock if that is much."""
    if items >= POLL_SIZE:
        poll()


def work_size(value: object) -> int:
    """What walking `value` costs, in items (strings are cheaper per character)."""
    kind = type(value)
    if kind is list or kind is dict or kind is bytearray:
        return len(value)  # type: ignore[arg-type]
    if kind is str:
        return len(value) // STRING_WORK  # type: ignore[arg-type]
    return 0


def chunks(items: Sequence[Item]) -> Iterator[Sequence[Item]]:
    """`items` in slices of `CHUNK`, with a look at the clock before each."""
    if len(items) <= CHUNK:
        poll_size(len(items))
        yield items
        return
    for start in range(0, len(items), CHUNK):
        poll()
        yield items[start : start + CHUNK]


def paced(items: Sequence[Item]) -> Iterator[Item]:
    """Each of `items`, with a look at the clock every `CHUNK` of them."""
    for chunk in chunks(items):
        yield from chunk


def install(deadline: Deadline | None) -> Token[Deadline | None]:
    """Make `deadline` the one `poll` sees on this thread until `uninstall(token)`: what
    `deadline_scope` does, without a generator's cost (the runtime does it twice a call)."""
    return _CURRENT.set(deadline)


def uninstall(token: Token[Deadline | None]) -> None:
    """Give back the deadline `install` replaced."""
    _CURRENT.reset(token)


@contextmanager
def deadline_scope(deadline: Deadline | None) -> Iterator[None]:
    """Make `deadline` the one `poll` sees on this thread until the block ends."""
    token = install(deadline)
    try:
        yield
    finally:
        uninstall(token)


__all__ = [
    "CHUNK",
    "POLL_SIZE",
    "Deadline",
    "chunks",
    "deadline_scope",
    "install",
    "paced",
    "poll",
    "poll_size",
    "uninstall",
    "work_size",
]
