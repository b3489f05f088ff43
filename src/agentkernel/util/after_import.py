"""Run a function right after a module's first import: set up what a command may never load.

`agentkernel rhai run` logs nothing unless the interpreter itself fails, and
importing `logging` (with what it imports) costs about 17 M instructions of
its start-up; so the command line's log set-up (cli/common.py
`setup_logging`) is applied when `logging` is first imported, not before —
which is before anything can log.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from importlib.machinery import ModuleSpec
    from types import ModuleType


def after_import(name: str, then: Callable[[], None]) -> None:
    """Call `then()` once module `name` is imported: now if it already is, else right after its
    first import has run the module's code, before the importer gets the module."""
    if name in sys.modules:
        then()
    else:
        sys.meta_path.insert(0, _Finder(name, then))


class _Finder:
    """A finder of `name` alone, used once: it asks the other finders and wraps the loader."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name = name
        self.then = then

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if name != self.name or self not in sys.meta_path:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec: ModuleSpec | None = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Then(spec.loader, self.then)  # type: ignore[assignment]
                return spec
        return None


class _Then:
    """The module's own loader, then `then()`; anything else is asked of the loader itself."""

    def __init__(self, loader: object, then: Callable[[], None]) -> None:
        self.loader = loader
        self.then = then

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self.loader.create_module(spec)  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)  # type: ignore[attr-defined]
        self.then()

    def __getattr__(self, attribute: str) -> object:
        return getattr(self.loader, attribute)


__all__ = ["after_import"]
