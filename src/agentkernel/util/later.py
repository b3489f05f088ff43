"""A value built the first time it is asked for, once, whichever thread asks first.

A kernel attaches every embedded service, but building one imports its
library (DuckDB, httpx, …) and may open files; a `tool run` of a script that
only counts words should pay for none of that. So the kernel hands
`Services` a `Later` per service, built when a helper first reaches for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Later(Generic[T]):
    """A value made by `factory` on the first `get()`; None is a value too ("not attached").

    A factory that raises is asked again next time: a failure is not kept.
    """

    def __init__(self, factory: Callable[[], T | None]) -> None:
        self._factory: Callable[[], T | None] | None = factory
        self._value: T | None = None
        self._lock = threading.Lock()

    @classmethod
    def ready(cls, value: T | None) -> Later[T]:
        """A Later that holds `value` already (a service handed over built, or None)."""
        later: Later[T] = cls(lambda: value)
        later.get()
        return later

    def get(self) -> T | None:
        if self._factory is not None:
            with self._lock:
                if self._factory is not None:
                    self._value = self._factory()
                    self._factory = None
        return self._value

    def built(self) -> T | None:
        """The value if it was made already; never makes it."""
        return self._value


__all__ = ["Later"]
