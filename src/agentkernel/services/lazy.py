"""Named services built the first time a helper asks for one.

A kernel attaches every embedded service, but building one imports its
library (DuckDB, httpx, …) and may open files. A `tool run` of a script that
only counts words should pay for none of that (issue 8: start-up time), so
the kernel hands `Services` factories, and each service is built — once,
whichever thread asks first — when a helper first reaches for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

ServiceFactory = Callable[[], Any]


class LazyServices(Mapping[str, Any]):
    """A read-only mapping name → service whose values are built on first access."""

    def __init__(self, factories: Mapping[str, ServiceFactory]) -> None:
        self._factories = dict(factories)
        self._built: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> Any:
        if name in self._built:
            return self._built[name]
        factory = self._factories[name]  # KeyError for an unknown name, as a Mapping should
        with self._lock:
            if name not in self._built:
                self._built[name] = factory()
            return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def built(self) -> list[Any]:
        """The services built so far: what there is to close, without building the rest."""
        with self._lock:
            return list(self._built.values())


__all__ = ["LazyServices", "ServiceFactory"]
