"""PEP 562 module attributes imported on first use, for packages whose root must stay cheap.

Every command line entry point imports `agentkernel`; if the package roots
imported their public names eagerly, `agentkernel --version` would load the
kernel, httpx, DuckDB and jsonschema. A package lists name → module instead
and installs the `__getattr__` made here.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms at start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module `__getattr__` that imports `exports[name]` once and caches the value in `namespace`."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__


__all__ = ["lazy_getattr"]
