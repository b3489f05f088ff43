"""The event loop the kernel's async parts run on, reachable from the worker threads scripts run on.

A helper is synchronous (DESIGN rule 7) but what it may ask for is not: a
sub-agent is a run of the async agent loop, and the LLM provider it talks
through keeps connections and a concurrency limit that belong to one event
loop. So a helper never starts an event loop of its own for them; it hands
the coroutine to the kernel's loop and waits, on its worker thread, for no
longer than its call has left.

Which loop is the kernel's: the one its agent loop and tools run on (the
dispatcher `adopt`s it on every asynchronous tool call: the server's, a
chat's); when there is none (`agentkernel tool run`, `Kernel.run_tool` from
plain Python), a loop of the kernel's own on a daemon thread, started on
first use and stopped by `close`. asyncio is imported only then: a tool
run that never needs it never pays for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")


class KernelLoop:
    """Runs coroutines on the kernel's event loop for callers on other threads."""

    def __init__(self) -> None:
        self._adopted: asyncio.AbstractEventLoop | None = None
        self._own: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def adopt(self, loop: asyncio.AbstractEventLoop) -> None:
        """`loop` runs the kernel's async work now (called on it, e.g. by each asynchronous tool call)."""
        self._adopted = loop

    @property
    def owns_loop(self) -> bool:
        """Whether a loop of the kernel's own is running (it then holds the provider's connections)."""
        return self._own is not None

    def _loop(self) -> asyncio.AbstractEventLoop:
        adopted = self._adopted
        if adopted is not None and adopted.is_running():
            return adopted
        with self._lock:
            if self._own is None:
                self._own = self._start()
            return self._own

    def _start(self) -> asyncio.AbstractEventLoop:
        import asyncio

        loop = asyncio.new_event_loop()
        ready = threading.Event()
        loop.call_soon(ready.set)
        self._thread = threading.Thread(target=loop.run_forever, name="agentkernel-loop", daemon=True)
        self._thread.start()
        ready.wait()
        return loop

    def run(self, make: Callable[[], Coroutine[Any, Any, T]], timeout: float | None) -> T:
        """`make()` run on the kernel's loop; TimeoutError (the coroutine cancelled) after `timeout` s.

        Called on the loop itself it would wait for itself forever, so that is
        a RuntimeError: scripts never run on the event loop (S21.3).
        """
        import asyncio

        if timeout is not None and timeout <= 0:
            raise TimeoutError("no time left")
        loop = self._loop()
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError("a helper waited for the event loop it runs on; scripts run on worker threads")
        future = asyncio.run_coroutine_threadsafe(make(), loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:g} s") from None

    def close(self) -> None:
        """Stop the kernel's own loop, if one was started; an adopted loop belongs to its owner."""
        with self._lock:
            loop, thread, self._own, self._thread = self._own, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()


__all__ = ["KernelLoop"]
