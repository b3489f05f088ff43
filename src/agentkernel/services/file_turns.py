"""A file's turn between processes: who may have it open now, and whether another process waits for it.

DuckDB lets one process at a time open a database file (a second gets
"Could not set lock on file"), so server processes on one project take
turns with each file: a process holds its turn, an exclusive `flock` on
`<file>.lock`, while it has the file open, and keeps it across calls (an
open costs far more than a call: docs/benchmarks.md). A process that needs
the file holds a shared `flock` on `<file>.want` while it waits; the holder
sees that (`wanted`) and gives the file up as soon as its calls on it end.

flock locks belong to an open file, not to a process, so two pools of one
process take turns the same way, and a process that dies (kill -9) gives up
its turn and its wish with it.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

FIRST_POLL_SECS = 0.001
MOST_POLL_SECS = 0.01


class Turn(Protocol):
    """A turn with one file between processes: `FileTurn` on one machine, `PgFileTurn` across machines."""

    @property
    def held(self) -> bool: ...

    def acquire(self, deadline: float) -> bool: ...

    def wanted(self) -> bool: ...

    def release(self) -> None: ...


TurnOf = Callable[[Path], Turn]
"""The turn of a file, by its path (`FileTurn` itself, or the store database's turns)."""


class FileTurn:
    """One process's (one pool's) turn with one file; `acquire`, then `release` when the file is closed."""

    def __init__(self, path: Path) -> None:
        self.lock_path = path.with_name(path.name + ".lock")
        self.want_path = path.with_name(path.name + ".want")
        self._held: int | None = None  # the fd of `.lock` while the turn is ours
        self._probe: int | None = None  # an fd of `.want` to test for waiters, while the turn is ours

    @property
    def held(self) -> bool:
        return self._held is not None

    def acquire(self, deadline: float) -> bool:
        """Take the turn, waiting until `deadline` (time.monotonic) and saying we want it; False when late."""
        lock = _open(self.lock_path)
        try:
            if self._try(lock) or self._wait(lock, deadline):
                self._held, lock = lock, -1
                self._probe = _open(self.want_path)
                return True
            return False
        finally:
            if lock >= 0:
                os.close(lock)

    def wanted(self) -> bool:
        """Whether another (a process, a pool) waits for the turn we hold."""
        if self._probe is None:
            return False
        try:
            fcntl.flock(self._probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self._probe, fcntl.LOCK_UN)
        return False

    def release(self) -> None:
        """Give the turn up (the file is closed by now); releasing twice is harmless."""
        for fd in (self._probe, self._held):
            if fd is not None:
                os.close(fd)
        self._held = self._probe = None

    @staticmethod
    def _try(lock: int) -> bool:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _wait(self, lock: int, deadline: float) -> bool:
        """Poll for the turn, a shared lock on `.want` held meanwhile so the holder lets go."""
        want = _open(self.want_path)
        try:
            fcntl.flock(want, fcntl.LOCK_SH)  # the holder's test holds it for a moment only
            pause = FIRST_POLL_SECS
            while time.monotonic() < deadline:
                time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
                if self._try(lock):
                    return True
                pause = min(pause * 2, MOST_POLL_SECS)
            return False
        finally:
            os.close(want)


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


__all__ = ["FileTurn", "Turn", "TurnOf"]
