"""ES module imports for QuickJS (S1.1): only `.js`/`.mjs` files in the script's own folder and below.

A module is read on an untrusted script's word, so the loader holds it to
what the file helpers allow: it reads through the `ReadBelow` the host hands
the engine (services/confined.py `read_module`), which keeps the name under
the script's folder and never follows a symbolic link.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath

from agentkernel.scripting.contract import MAX_SCRIPT_SIZE, ReadBelow


def module_loader(script: Path, source: str, read_below: ReadBelow) -> Callable[[str], str | None]:
    """QuickJS's loader for one script: itself from its cached source, its imports from its folder."""
    own = str(script)
    folder = script.parent

    def load(name: str) -> str | None:
        return source if name == own else _load_module_source(folder, name, read_below)

    return load


class ModuleRefused(Exception):
    """An import the loader refuses; QuickJS shows the text as `module loader failed for '…': text`."""


def _load_module_source(folder: Path, name: str, read_below: ReadBelow) -> str | None:
    """An imported module's text: a `.js`/`.mjs` file in the script's own folder or below it.

    The name (QuickJS has already made it absolute against the importer) is
    read by `read_below`, at most the script size limit. None (QuickJS:
    `module '…' not found`) for a package name or a missing file;
    ModuleRefused, with the reader's reason, for the rest.
    """
    if not name.startswith("/"):
        return None  # `lodash`, `node:fs`: a package, which hints.py explains
    if PurePosixPath(name).suffix not in (".js", ".mjs"):
        raise ModuleRefused("only .js and .mjs files can be imported")
    try:
        return read_below(folder, name, MAX_SCRIPT_SIZE)
    except Exception as exc:  # the reader's refusal says why; QuickJS shows it as the loader's failure
        raise ModuleRefused(str(exc)) from None


__all__ = ["ModuleRefused", "module_loader"]
