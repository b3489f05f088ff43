"""One event loop on a thread of its own, where scripts' `llm()` calls run (S9.2, S21.3).

Scripts are synchronous and run on worker threads; the provider is async.
A helper hands its request to this loop and waits for the answer, blocking
only its own worker thread. One loop for every script of the process, not
one per call: the provider keeps one HTTP client per loop, so this one's
connections are reused call after call, and the kernel-wide concurrency
limit (llm/limited.py) is shared with the server's loop.

The wait is bounded by the caller's remaining time; when it runs out the
request is cancelled on the loop (its connection is closed, its slot of the
concurrency limit freed) and TimeoutError is raised to the waiting thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # asyncio costs a tenth of a second to import: paid by the first `llm()` call only
    import asyncio

T = TypeVar("T")


class LoopThread:
    """An asyncio loop running forever on a daemon thread, started on first use."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                import asyncio

                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name=self._name, daemon=True).start()
                self._loop = loop
            return self._loop

    def run(self, make: Callable[[], Coroutine[Any, Any, T]], timeout: float | None) -> T:
        """Run the coroutine `make()` on the loop and wait at most `timeout` seconds for its result.

        TimeoutError when the time runs out, after the coroutine was told to
        stop; its own exceptions come out as they are.
        """
        import asyncio
        import concurrent.futures

        if timeout is not None and timeout <= 0:
            raise TimeoutError("no time left")
        future = asyncio.run_coroutine_threadsafe(make(), self._running_loop())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:g} s") from None


HELPER_LOOP = LoopThread("agentkernel-llm")
"""The loop every script's `llm()` and `llm_json()` call runs on, shared by all kernels of the process."""

__all__ = ["HELPER_LOOP", "LoopThread"]
