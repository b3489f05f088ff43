"""WAL checkpoints of an SQLite file on a thread of their own, never on the thread that commits.

SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL past
1,000 pages: that commit copies the pages into the database file and syncs
it twice, a few milliseconds on the event loop (the turn's writes are made
there when the file is free) every fifteen turns or so, during which no
other user's stream moves. A writing connection that hands its checkpoints
here has ``PRAGMA wal_autocheckpoint = 0``; `Checkpointer` is woken every
`every_commits` commits, and after `idle_secs` when any commit came since
the last checkpoint, and calls `checkpoint`: the writer's, made while no
commit can come (its lock held, so a write the event loop would make at
once goes to a worker thread meanwhile; and the file's write lock, for
another process's), since a WAL written to during its checkpoint is never
rewound and grows without end. The
thread starts with the first commit (a command that never writes starts
none) and stops at `close`.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

EVERY_COMMITS = 100  # about ten turns' writes: a WAL of a few hundred pages
IDLE_SECS = 5.0


class Checkpointer:
    """Calls `checkpoint` (`path`'s WAL) on a daemon thread as its writer's commits come (`committed`)."""

    def __init__(
        self,
        path: str,
        checkpoint: Callable[[], None],
        every_commits: int = EVERY_COMMITS,
        idle_secs: float = IDLE_SECS,
    ) -> None:
        self.path = path
        self._checkpoint = checkpoint
        self.every_commits = every_commits
        self.idle_secs = idle_secs
        self.runs = 0  # checkpoints made, for the tests and the curious
        self._commits = 0  # since the last checkpoint
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def committed(self) -> None:
        """One commit more (the writer's lock held): the thread started, or woken every `every_commits`."""
        self._commits += 1
        if self._thread is None:
            self._start()
        elif self._commits >= self.every_commits:
            with self._wake:
                self._wake.notify_all()

    def close(self) -> None:
        """Stop the thread after the checkpoint in flight; the file's last connection to close
        checkpoints what is left."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _start(self) -> None:
        with self._wake:
            if self._closed or self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name=f"checkpoints {self.path}", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while self._wait():
            self._commits = 0
            try:
                self._checkpoint()
            except sqlite3.Error:  # the next wake tries again; the WAL only grows meanwhile
                log.exception("%s: a WAL checkpoint failed", self.path)
            with self._wake:
                self.runs += 1
                self._wake.notify_all()

    def wait_runs(self, runs: int, timeout: float) -> bool:
        """Wait until `runs` checkpoints were made (False if not within `timeout` s): for tests."""
        with self._wake:
            return self._wake.wait_for(lambda: self.runs >= runs, timeout)

    def _wait(self) -> bool:
        """Until `every_commits` commits came, or `idle_secs` passed with one at least; False once closed."""
        with self._wake:
            while not self._closed:
                if self._commits >= self.every_commits:
                    return True
                if not self._wake.wait(self.idle_secs) and self._commits > 0:
                    return True
            return False


__all__ = ["Checkpointer"]
