"""Worker processes that run a function under a call's deadline and memory limit (DESIGN rule 8).

A built-in Python tool's heavy part (Markdown → .docx, a template filled)
runs in C and pure Python that read no clock: on a thread it would hold
the GIL, and every other user's work with it, until it ended. Here it runs
in a worker process (tools/worker_process.py): the caller waits on a
socket, the GIL released; at the call's deadline the worker is killed
(SIGKILL), whatever it was doing, reaped, and replaced. Its memory is
capped for the call (what it holds when the call starts plus the call's
`memory_limit_mb`), so a call that needs more fails there, not here.

The function and its arguments must pickle (a module-level function;
plain values, bytes). What comes back is read with no class allowed, so
only plain values cross into the kernel: a worker that hostile input
broke cannot hand the kernel an object.

Workers are fresh interpreters started with `python -I` (no environment
variables read, no current folder on the path), a small allow-listed
environment, `/` as their folder, and no descriptor of the kernel's but
their own socket: none of the kernel's sockets, stores or secrets reach
them. Starting one imports python-docx (a heavy import), so the pool
keeps up to `size` of them, started on first use and
reused call after call; a killed one is replaced at once. `close` kills
them all; a pool never closed kills its workers when it is collected or
at exit. The workers are shared fairly between users (fair_share.py): a
freed worker goes to the waiting user with the fewest calls running, and
no user has more than half of them (at least one) at once: one user's
long documents never take every worker.
"""

from __future__ import annotations

import functools
import io
import json
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from agentkernel.config import CallBudget
from agentkernel.errors import ScriptError, ScriptLimitError
from agentkernel.util.fair_share import FairQueue, Key
from agentkernel.util.lazy_log import LazyLogger

# processes, sockets and pickles are imported with the first call (a kernel builds its pool at start)

log = LazyLogger("agentkernel.workers")
T = TypeVar("T")

_BOOT = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from agentkernel.tools.worker_process import main; main(sys.argv[2], sys.argv[3])"
)
_ENVIRONMENT = ("PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
_REPLY_SLACK = 1 << 20  # a reply's pickle framing over what the worker's memory could hold
_CPU_SLACK_SECS = 5.0  # the worker's own CPU backstop, past the deadline the kernel kills it at
_DYING_SECS = 1.0  # how long a worker whose socket closed is given to end on its own before it is killed


class _Late(Exception):
    """The deadline passed; `starting`: before the worker had even started."""

    def __init__(self, starting: bool) -> None:
        self.starting = starting


class _Worker:
    """One worker process and the kernel's end of its socket."""

    def __init__(self, preload: Sequence[str]) -> None:
        import socket
        import subprocess

        mine, theirs = socket.socketpair()
        path = [os.path.abspath(entry) for entry in sys.path if entry]
        environment = {name: os.environ[name] for name in _ENVIRONMENT if name in os.environ}
        try:
            command = [sys.executable, "-I", "-c", _BOOT, json.dumps(path), str(theirs.fileno())]
            self.process = subprocess.Popen(
                [*command, json.dumps(preload)],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=environment,
                cwd="/",
                start_new_session=True,  # a Ctrl-C at the terminal reaches the kernel, not its workers
            )
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        self.sock = mine
        self.ready = False
        self.killed = False  # ended by the kernel's kill (`end`), not on its own

    def call(self, request: bytes, deadline: float, reply_limit: int) -> bytes:
        """Send the request, wait for the answer until `deadline`; _Late, EOFError, OSError, FrameTooLarge."""
        from agentkernel.tools.worker_process import receive_frame, send_frame

        if not self.ready:
            self._wait_ready(deadline)
        try:
            self._settimeout(deadline)
            send_frame(self.sock, request)
            self._settimeout(deadline)
            return receive_frame(self.sock, reply_limit)
        except TimeoutError:
            raise _Late(starting=False) from None

    def _wait_ready(self, deadline: float) -> None:
        """Wait for the worker's READY, consuming nothing if it does not come in time (_Late: starting)."""
        import select

        from agentkernel.tools.worker_process import READY, receive_frame

        left = deadline - time.monotonic()
        try:
            started = left > 0 and bool(select.select([self.sock], [], [], left)[0])
        except ValueError:  # the socket was closed meanwhile: the pool is closing
            raise EOFError("the worker was ended") from None
        if not started:
            raise _Late(starting=True)
        self.sock.settimeout(None)  # a frame of a few bytes, sent whole
        if receive_frame(self.sock, len(READY)) != READY:
            raise EOFError("the worker did not start")
        self.ready = True

    def _settimeout(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Late(starting=False)
        self.sock.settimeout(left)

    def alive(self) -> bool:
        return self.process.poll() is None

    def end(self, grace_secs: float = 0.0) -> int:
        """Kill the process (SIGKILL) unless it ends within `grace_secs`, reap it, close the socket: its
        status (-N: signal). `killed` says whether this kill ended it."""
        if self.process.poll() is None and not self._ends_within(grace_secs):
            self.process.kill()
            self.killed = True
        code = self.process.wait()
        self.sock.close()
        return code

    def _ends_within(self, secs: float) -> bool:
        import subprocess

        try:
            self.process.wait(secs) if secs > 0 else None
        except subprocess.TimeoutExpired:
            return False
        return self.process.returncode is not None


@dataclass(eq=False)
class _Ticket:
    """One call waiting for a worker: `worker` is set when its turn comes."""

    worker: _Worker | None = None


class WorkerPool:
    """Up to `size` worker processes, each running one call at a time; `run` is the one entry.

    `preload` names the modules a worker imports before its first call, so
    a call pays for none of them.
    """

    def __init__(self, size: int, preload: Sequence[str] = ()) -> None:
        if size < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {size}")
        self.size = size
        self.preload = tuple(preload)
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._changed = threading.Condition()
        self._turns: FairQueue[_Ticket] = FairQueue(max(1, size // 2))  # calls waiting for a worker, per user
        self._closed = False
        self._finalizer = weakref.finalize(self, _end_all, self._all)

    def run(
        self, label: str, budget: CallBudget, function: Callable[..., T], *args: Any, user: Key = None
    ) -> T:
        """`function(*args)` in a worker, ending by `budget.deadline`, within `budget.memory_limit_bytes`.

        `user` is whose call it is: a freed worker goes to the waiting user
        with the fewest calls running, and no user has more than half the
        workers (at least one) at once.

        ScriptLimitError naming `timeout_secs` (the worker is killed) or
        `memory_limit_mb`; ScriptError with the text of a ScriptError the
        function raised, or saying the worker failed. `label` names the
        work in those messages (`make_docx`).
        """
        import pickle

        request = pickle.dumps(
            (function, args, budget.memory_limit_bytes, budget.timeout_secs + _CPU_SLACK_SECS),
            protocol=pickle.HIGHEST_PROTOCOL,
        )
        worker = self._take(user, label, budget)
        kind, value = self._exchange(worker, request, label, budget, user)
        if kind == "ok":
            return value  # type: ignore[no-any-return]
        if kind == "error":
            raise ScriptError(str(value))
        if kind == "memory":
            raise _memory(label, budget, str(value))
        raise ScriptError(f"{label} failed in its worker process: {value}")

    def _exchange(
        self, worker: _Worker, request: bytes, label: str, budget: CallBudget, user: Key
    ) -> tuple[str, Any]:
        """The worker's answer (kind, value); the worker back in the pool, or killed and replaced."""
        import pickle

        from agentkernel.tools.worker_process import FrameTooLarge

        healthy = False
        try:
            reply = worker.call(request, budget.deadline, budget.memory_limit_bytes + _REPLY_SLACK)
            kind, value, keep = _plain(reply)
            healthy = keep and kind in ("ok", "error", "crash")
            return kind, value
        except _Late as late:
            healthy = late.starting  # still starting, never sent the request: the next call may have it
            raise _timeout(label, budget, late.starting) from None
        except FrameTooLarge:  # a reply larger than the worker's memory could hold
            raise _memory(label, budget, "its answer was too large") from None
        except pickle.UnpicklingError as exc:
            raise ScriptError(f"{label}: its worker process answered what no kernel reads: {exc}") from None
        except (EOFError, OSError) as exc:
            # a worker that dies closes its socket a moment before it can be reaped: its own end is waited
            # for, so its status is its death's, not the kill's
            status = worker.end(_DYING_SECS)
            if self._closed:
                raise ScriptError(f"{label}: stopped, the kernel is closing") from None
            if worker.killed:
                why = f"{type(exc).__name__}: {exc}" if str(exc) else "its socket closed"
                raise ScriptError(
                    f"{label}: its worker process stopped answering ({why}) and was ended"
                ) from None
            raise _died(label, budget, status) from None
        finally:
            self._give_back(worker, healthy, user)

    def _take(self, user: Key, label: str, budget: CallBudget) -> _Worker:
        """A worker for `user`'s call when its turn comes (fair_share.py); ScriptLimitError past deadline."""
        ticket = _Ticket()
        with self._changed:
            self._turns.push(user, ticket)
            self._hand_out()
            while ticket.worker is None:
                left = budget.deadline - time.monotonic()
                if self._closed or left <= 0 or not self._changed.wait(left):
                    if self._turns.remove(user, ticket) or ticket.worker is None:
                        raise self._not_taken(label, budget)
                    self._give_back_locked(ticket.worker, True, user)  # handed over as it gave up
                    raise self._not_taken(label, budget)
            return ticket.worker

    def _not_taken(self, label: str, budget: CallBudget) -> ScriptError:
        if self._closed:
            return ScriptError(f"{label}: the kernel is closing; its worker processes are stopped")
        return ScriptLimitError(
            "timeout_secs",
            f"{label} exceeded timeout_secs ({budget.timeout_secs:g} s) waiting for one of the "
            f"{self.size} worker processes (scripts.python_workers), all busy",
        )

    def _hand_out(self) -> None:
        """Free workers (idle, or new while there are fewer than `size`) to the calls whose turn it is."""
        while (self._idle or len(self._all) < self.size) and not self._closed:
            chosen = self._turns.pop()
            if chosen is None:
                return
            chosen[1].worker = self._free_worker()
            self._changed.notify_all()

    def _free_worker(self) -> _Worker:
        """An idle worker that is alive (ready ones first), else a new one; the caller knows there is room."""
        while self._idle:
            worker = self._idle.pop(_first_ready(self._idle))
            if worker.alive():
                return worker
            self._forget(worker)
        worker = _Worker(self.preload)
        self._all.add(worker)
        return worker

    def _give_back(self, worker: _Worker, healthy: bool, user: Key) -> None:
        """Back to the idle ones; or killed, and a fresh one started in its place. The next call's turn."""
        with self._changed:
            self._give_back_locked(worker, healthy, user)

    def _give_back_locked(self, worker: _Worker, healthy: bool, user: Key) -> None:
        if healthy and not self._closed:
            self._idle.append(worker)
        else:
            self._forget(worker)
            if not self._closed:
                fresh = _Worker(self.preload)
                self._all.add(fresh)
                self._idle.append(fresh)
        self._turns.finish(user)
        self._hand_out()
        self._changed.notify_all()

    def _forget(self, worker: _Worker) -> None:
        self._all.discard(worker)
        log.debug("worker process %s ended (status %s)", worker.process.pid, worker.end())

    def waiting(self, user: Key) -> int:
        """How many of `user`'s calls wait for their turn at a worker."""
        with self._changed:
            return self._turns.waiting(user)

    def pids(self) -> list[int]:
        """The worker processes' ids (what `close` ends)."""
        with self._changed:
            return sorted(worker.process.pid for worker in self._all)

    def close(self) -> None:
        """Kill every worker, idle or busy, and reap it; a call running gets an error. Twice is harmless."""
        with self._changed:
            self._closed = True
            self._idle.clear()
            self._changed.notify_all()
        self._finalizer()


def _first_ready(idle: list[_Worker]) -> int:
    """Where in `idle` the last worker that is ready sits; the last one (still starting) if none is."""
    return next((i for i in range(len(idle) - 1, -1, -1) if idle[i].ready), len(idle) - 1)


def _end_all(workers: set[_Worker]) -> None:
    for worker in list(workers):
        workers.discard(worker)
        worker.end()


@functools.cache
def _plain_unpickler() -> Any:
    """An Unpickler of plain values only (None, bool, numbers, str, bytes, tuple, list, dict): no class is
    found."""
    import pickle

    class PlainUnpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            reason = f"a worker's answer named {module}.{name}: only plain values may cross"
            raise pickle.UnpicklingError(reason)

    return PlainUnpickler


def _plain(reply: bytes) -> tuple[str, Any, bool]:
    """A worker's answer: its kind, its value, and whether the worker may be kept (worker_process.reply)."""
    import pickle

    answer = _plain_unpickler()(io.BytesIO(reply)).load()
    if not (isinstance(answer, tuple) and len(answer) == 3 and isinstance(answer[0], str)):
        raise pickle.UnpicklingError("a worker's answer is not (kind, value, keep)")
    return answer[0], answer[1], answer[2] is True


def _timeout(label: str, budget: CallBudget, starting: bool) -> ScriptLimitError:
    what = "waiting for its worker process to start" if starting else "its worker process was killed"
    limit = f"timeout_secs ({budget.timeout_secs:g} s)"
    return ScriptLimitError("timeout_secs", f"{label} exceeded {limit}: {what}")


def _died(label: str, budget: CallBudget, how: int) -> ScriptError:
    """A worker that ended on its own: C code that ran out of memory may crash rather than fail."""
    if how >= 0:
        return ScriptError(f"{label}: its worker process ended unexpectedly (exit status {how})")
    import signal

    megabytes = budget.memory_limit_bytes / (1 << 20)
    return ScriptError(
        f"{label}: its worker process died ({signal.Signals(-how).name}), most likely out of "
        f"memory_limit_mb ({megabytes:g} MiB)"
    )


def _memory(label: str, budget: CallBudget, detail: str) -> ScriptLimitError:
    megabytes = budget.memory_limit_bytes / (1 << 20)
    return ScriptLimitError(
        "memory", f"{label} exceeded memory_limit_mb ({megabytes:g} MiB) in its worker process: {detail}"
    )


__all__ = ["WorkerPool"]
