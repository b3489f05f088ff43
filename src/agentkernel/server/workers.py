"""`agentkernel serve --workers N`: N server processes on one listening socket, kept running by a parent.

The parent binds the socket once and starts each worker as a fresh
interpreter (`python -m agentkernel serve … --listen-fd`), never a fork: each
builds its own kernel, so no thread, lock or connection is shared across a
fork, and the kernel accepts connections on the inherited socket (the
kernel spreads them between the processes). Everything the workers must
agree on lives in the project's stores (docs/server.md section 13).

Each worker gets one end of a socket pair, its link to the parent: it says
`ready` there when its kernel is loaded, and it stops gracefully when the
link ends, so a parent killed with -9 leaves no worker behind. The workers
run in sessions of their own, so a terminal's Ctrl-C reaches the parent
alone, which forwards it (SIGINT or SIGTERM) to each worker once and exits
when they have stopped; a worker not ready yet has its link closed instead,
since a signal could reach it before it catches signals. A worker that ends while the parent is not stopping
(killed, crashed) is started again, sooner or later depending on how long it
had lived, so one that cannot start does not spin.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

log = logging.getLogger(__name__)

READY = b"ready\n"
FIRST_RESTART_DELAY_SECS = 0.1
MOST_RESTART_DELAY_SECS = 5.0
SETTLED_SECS = 10.0  # a worker that lived this long is started again at once
CHECK_SECS = 1.0  # how often the parent looks at its workers when no signal woke it
STOP_MARGIN_SECS = 15.0  # beyond a worker's own graceful bound (twice the grace, plus its stopping time)

Command = Callable[[int, int, int], Sequence[str]]
"""The argv of worker `index` on the listening fd and its link's fd."""


class WorkerFailed(Exception):
    """A worker ended before it was ready (its own error is on stderr already)."""


def worker_count(text: str) -> int:
    """`--workers`: a whole number 1 or more, or `auto` (the machine's cores); ValueError naming the value."""
    if text.strip().lower() == "auto":
        return max(os.cpu_count() or 1, 1)
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"expected a number of processes, 1 or more, or 'auto' (the cores), got {text!r}")
    return count


@dataclass
class Worker:
    """One worker process, the parent's end of its link, and when it started."""

    index: int
    process: subprocess.Popen[bytes]
    link: socket.socket
    started: float = field(default_factory=time.monotonic)
    restart_delay: float = FIRST_RESTART_DELAY_SECS
    ready: bool = False


class Supervisor:
    """Starts the workers, restarts the ones that die, and stops them all on a signal."""

    def __init__(self, listening: socket.socket, count: int, command: Command, stop_secs: float) -> None:
        self.listening = listening
        self.count = count
        self.command = command
        self.stop_secs = stop_secs + STOP_MARGIN_SECS
        self.workers: list[Worker] = []
        self._signals: list[int] = []
        self._wake = threading.Event()

    def start(self) -> None:
        """Every worker started and ready; WorkerFailed (the others stopped) when one ends first."""
        self._catch_signals()
        self.workers = [self._spawn(index) for index in range(self.count)]
        for worker in self.workers:
            if not self._ready(worker):
                self._stop_all(signal.SIGTERM)
                code = worker.process.wait()
                raise WorkerFailed(f"worker {worker.index + 1} ended while starting (status {code})")

    def run(self) -> int:
        """Keep the workers going until a signal; then forward it and wait. 0 when each stopped cleanly."""
        while not self._signals:
            self._wake.wait(CHECK_SECS)
            self._wake.clear()
            if not self._signals:
                self._restart_ended()
        return self._stop_all(self._signals[0])

    # -- workers ---------------------------------------------------------------------------------

    def _spawn(self, index: int) -> Worker:
        mine, theirs = socket.socketpair()
        fds = (self.listening.fileno(), theirs.fileno())
        with theirs:
            process = subprocess.Popen(list(self.command(index, *fds)), pass_fds=fds, start_new_session=True)
        log.info("worker %d: pid %d", index + 1, process.pid)
        return Worker(index, process, mine)

    @staticmethod
    def _ready(worker: Worker) -> bool:
        """Wait for the worker's `ready`; False when its link ends first (it died)."""
        got = b""
        while not got.endswith(b"\n"):
            chunk = worker.link.recv(len(READY))
            if not chunk:
                return False
            got += chunk
        worker.ready = got == READY
        return worker.ready

    @staticmethod
    def _said_ready(worker: Worker) -> bool:
        """Whether the worker said `ready` (read now, without waiting); True once it has."""
        if worker.ready:
            return True
        try:
            got = worker.link.recv(len(READY), socket.MSG_DONTWAIT | socket.MSG_PEEK)
        except (BlockingIOError, OSError):
            return False
        worker.ready = got == READY
        return worker.ready

    def _restart_ended(self) -> None:
        for slot, worker in enumerate(self.workers):
            code = worker.process.poll()
            if code is None:
                continue
            lived = time.monotonic() - worker.started
            delay = 0.0 if lived >= SETTLED_SECS else worker.restart_delay
            log.warning(
                "worker %d (pid %d) ended (%s) after %.1f s; starting another%s",
                worker.index + 1,
                worker.process.pid,
                _status(code),
                lived,
                f" in {delay:.1f} s" if delay else "",
            )
            worker.link.close()
            if delay and self._wait_or_signal(delay):
                return
            replacement = self._spawn(worker.index)
            replacement.restart_delay = min(worker.restart_delay * 2, MOST_RESTART_DELAY_SECS)
            self.workers[slot] = replacement

    def _wait_or_signal(self, secs: float) -> bool:
        """Sleep `secs` unless a stopping signal comes; True when one came."""
        deadline = time.monotonic() + secs
        while not self._signals and time.monotonic() < deadline:
            self._wake.wait(deadline - time.monotonic())
            self._wake.clear()
        return bool(self._signals)

    def _stop_all(self, signum: int) -> int:
        """Stop each live worker, wait (bounded), kill the late ones; 0 if all ended 0.

        A ready worker gets `signum`; one still starting (a restarted one) has
        its link closed instead, since a signal could come before it catches
        signals: it stops once loaded, when it finds the link ended.
        """
        for worker in self.workers:
            if worker.process.poll() is not None:
                continue
            if self._said_ready(worker):
                worker.process.send_signal(signum)
            else:
                worker.link.close()
        deadline = time.monotonic() + self.stop_secs
        failed = 0
        for worker in self.workers:
            try:
                code = worker.process.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                log.error("worker %d (pid %d) did not stop; killing it", worker.index + 1, worker.process.pid)
                worker.process.kill()
                code = worker.process.wait()
            worker.link.close()
            failed += code != 0
        return 0 if not failed else 1

    # -- signals ---------------------------------------------------------------------------------

    def _catch_signals(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_stop)
        signal.signal(signal.SIGCHLD, self._on_child)

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        if self._signals:  # a second Ctrl-C: the workers stop at once (uvicorn's force exit)
            for worker in self.workers:
                if worker.process.poll() is None:
                    worker.process.send_signal(signum)
        self._signals.append(signum)
        self._wake.set()

    def _on_child(self, signum: int, frame: FrameType | None) -> None:
        self._wake.set()


def _status(code: int) -> str:
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"status {code}"


def watch_parent(link: socket.socket, stop: Callable[[], None]) -> None:
    """In a worker: say `ready` on the link, then call `stop` when the link ends (the parent is gone,
    or it stopped this worker before it was ready)."""
    try:
        link.sendall(READY)
    except OSError:  # the parent closed the link already
        link.close()
        stop()
        return

    def wait() -> None:
        with link, contextlib.suppress(OSError):
            while link.recv(64):
                pass
        stop()

    threading.Thread(target=wait, name="agentkernel-parent-link", daemon=True).start()


__all__ = ["Supervisor", "WorkerFailed", "watch_parent", "worker_count"]
