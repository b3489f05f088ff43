"""Worker threads for script calls, shared fairly between users (DESIGN rule 10).

Scripts and helpers are synchronous, so every tool and hook call an event
loop makes runs on a worker thread — never on the loop's default executor,
which every other user's work shares. Calls wait in one queue per user; a
free worker takes the next call of the user with the fewest calls running
(ties: the longest waiter, fair_share.py), and no user has more than
`max_per_user` calls running, however many workers are free: one user's
two dozen slow tool runs take that many workers, and the rest of theirs
wait in their own queue while other users' calls go on.

Who is calling travels with each call (`submit(key, …)`, the Caller's user
id), never in a thread-local (DESIGN rule 3). A call runs in a copy of its
submitter's context variables, as `asyncio.to_thread` runs one: the span
it is part of (telemetry/spans.py) is the one its caller was in, so the
spans its script makes are that span's children (S26.1), and its log lines
name the run (telemetry/log_lines.py).

Nested calls never come here: `call_tool` runs on its caller's thread, and
a sub-agent's tools and hooks get a pool of their own (agent/
subagents.py), so a call never waits for a worker of the pool it holds one
of. A call submitted from one of the pool's own workers anyway runs there
at once, for the same reason.

Workers start when there is work and none is idle, up to `max_workers`,
and are daemon threads: `shutdown` cancels the calls still waiting and lets
the running ones finish within their own deadlines.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from agentkernel.util.fair_share import FairQueue, Key

if TYPE_CHECKING:  # imported by the first call submitted (with `logging`): a tool run submits none
    from concurrent.futures import Future
    from queue import SimpleQueue

T = TypeVar("T")


@dataclass(eq=False)
class _Call:
    """One submitted call and the future its result goes to, run in its submitter's context (the
    context variables: the run its log lines name, the span its helper calls' spans nest under)."""

    future: Future[Any]
    function: Callable[..., Any]
    args: tuple[Any, ...]
    context: contextvars.Context  # the submitter's context variables, copied
    outcome: tuple[bool, Any] | None = None  # (raised, the result or exception), once computed

    def run(self) -> None:
        """Compute, then hand over: what a call from a worker does in place."""
        self.compute()
        self.publish()

    def compute(self) -> None:
        """Run the function, unless the call was cancelled while it waited; the outcome is kept."""
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            self.outcome = (False, self.context.run(self.function, *self.args))
        except BaseException as exc:
            self.outcome = (True, exc)

    def publish(self) -> None:
        """Hand the outcome to the future (and so to whoever waits for it)."""
        if self.outcome is None:
            return
        raised, value = self.outcome
        self.outcome = None
        if raised:
            self.future.set_exception(value)
        else:
            self.future.set_result(value)


class FairPool:
    """At most `max_workers` threads running calls, at most `max_per_user` of them one user's."""

    def __init__(self, max_workers: int, max_per_user: int | None = None, *, name: str = "scripts") -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.max_workers = max_workers
        self.name = name
        self._queue: FairQueue[_Call] = FairQueue(max_per_user)
        self._lock = threading.Lock()
        self._wake: SimpleQueue[None] | None = None  # one token wakes one idle worker; made with the first
        self._threads = 0
        self._idle = 0  # workers asleep on `_wake` with no token on its way to them
        self._workers: set[int] = set()  # the workers' thread idents: a call from one runs in place
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"FairPool({self.name!r}, {self._threads}/{self.max_workers} threads, waiting={len(self._queue)})"
        )

    def running(self, key: Key) -> int:
        """Calls of `key` running now."""
        with self._lock:
            return self._queue.running(key)

    def waiting(self, key: Key) -> int:
        """Calls of `key` waiting for a worker now."""
        with self._lock:
            return self._queue.waiting(key)

    def submit(self, key: Key, function: Callable[..., T], /, *args: Any) -> Future[T]:
        """Queue `function(*args)` as a call of `key` (a user id; None: the kernel); its future.

        Cancelling the future before a worker takes the call removes it
        from the queue. RuntimeError after `shutdown`.
        """
        from concurrent.futures import Future

        future: Future[T] = Future()
        call = _Call(future, function, args, contextvars.copy_context())
        if threading.get_ident() in self._workers:  # waiting for a sibling worker could wait forever
            call.run()
            return future
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the {self.name} pool is shut down (the kernel was closed)")
            self._queue.push(key, call)
            wake = self._idle > 0
            if wake:
                self._idle -= 1
            elif self._threads < self.max_workers:
                try:
                    self._start_worker()
                except RuntimeError:  # no thread to be had: the running workers take it, if any
                    if not self._threads:
                        self._queue.remove(key, call)
                        raise
            # else every worker is busy: the first to finish takes it
        if wake:  # after the lock: the worker it wakes needs it at once
            self._woken().put(None)
        future.add_done_callback(lambda done: self._forget(key, call) if done.cancelled() else None)
        return future

    async def run(self, key: Key, function: Callable[..., T], /, *args: Any) -> T:
        """`function(*args)` as a call of `key`, awaited; cancelling the wait cancels a call still queued."""
        import asyncio  # only event loops await the pool; `tool run` never does

        return await asyncio.wrap_future(self.submit(key, function, *args))

    def shutdown(self) -> None:
        """No new calls; those waiting are cancelled; running ones finish (their deadlines bound them)."""
        with self._lock:
            self._closed = True
            waiting = self._queue.drain()
            threads = self._threads
        for _ in range(threads):
            self._woken().put(None)
        for _, call in waiting:
            call.future.cancel()

    def _forget(self, key: Key, call: _Call) -> None:
        with self._lock:
            self._queue.remove(key, call)

    def _woken(self) -> SimpleQueue[None]:
        """The workers' wake-up tokens: asked only once a worker is started, which made it."""
        assert self._wake is not None
        return self._wake

    def _start_worker(self) -> None:
        """One more worker (lock held); RuntimeError when the OS refuses a thread."""
        if self._wake is None:
            from queue import SimpleQueue  # with the first worker: a pool never used imports no queue

            self._wake = SimpleQueue()
        self._threads += 1
        thread = threading.Thread(target=self._work, name=f"{self.name}-{self._threads}", daemon=True)
        try:
            thread.start()
        except RuntimeError:
            self._threads -= 1
            raise

    def _work(self) -> None:
        """Take calls until the pool shuts down; each result is handed over only once this worker is
        counted again (idle, or holding its next call), so the caller's next call never finds every
        worker busy and starts a thread it does not need."""
        self._workers.add(threading.get_ident())
        done: tuple[Key, _Call] | None = None  # the call just computed, its result not yet handed over
        try:
            while True:
                with self._lock:
                    if done is not None:
                        self._queue.finish(done[0])
                    closed = self._closed
                    chosen = None if closed else self._queue.pop()
                    if closed:
                        self._threads -= 1
                    elif chosen is None:
                        self._idle += 1
                if done is not None:
                    done[1].publish()
                    done = None
                if closed:
                    return
                if chosen is None:
                    self._woken().get()
                    continue
                chosen[1].compute()
                done = chosen
        finally:
            self._workers.discard(threading.get_ident())


__all__ = ["FairPool"]
