"""ES module imports for QuickJS (S1.1): only `.js`/`.mjs` files in the script's own folder and below.

A module is read on an untrusted script's word, so the loader holds it to
what the file helpers allow (services/confined.py): the name QuickJS has
made absolute is reduced by text and must lie under the script's folder,
and it is opened by the race-free walk that never follows a symbolic link.
Before issue 9 any `.js`/`.mjs` file the kernel could read was importable.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from agentkernel.scripting.contract import MAX_SCRIPT_SIZE
from agentkernel.services.confined import NotFound, PathRefused, below_one_of, open_below, read_at_most


def module_loader(script: Path, source: str) -> Callable[[str], str | None]:
    """QuickJS's loader for one script: itself from its cached source, its imports from its folder."""
    own = str(script)
    folder = script.parent

    def load(name: str) -> str | None:
        return source if name == own else _load_module_source(folder, name)

    return load


class ModuleRefused(Exception):
    """An import the loader refuses; QuickJS shows the text as `module loader failed for '…': text`."""


def _load_module_source(folder: Path, name: str) -> str | None:
    """An imported module's text: a `.js`/`.mjs` file in the script's own folder or below it.

    Scripts are untrusted and a module is read on their word, so the name
    (QuickJS has already made it absolute against the importer) is held to
    what the file helpers would allow: reduced by text, it must lie under
    `folder`, and it is opened by the race-free walk that never follows a
    link (services/confined.py); at most the script size limit is read.
    None (QuickJS: `module '…' not found`) for a package name or a missing
    file; ModuleRefused, with the reason, for the rest.
    """
    if not name.startswith("/"):
        return None  # `lodash`, `node:fs`: a package, which js_hints explains
    if PurePosixPath(name).suffix not in (".js", ".mjs"):
        raise ModuleRefused("only .js and .mjs files can be imported")
    try:
        place = below_one_of([folder], folder, name)
        if place is None or not place[1]:
            raise ModuleRefused("modules are imported only from the script's own folder and below")
        handle = open_below(folder, place[1], "/".join(place[1]))
    except NotFound:
        return None
    except PathRefused as exc:
        raise ModuleRefused(str(exc)) from None
    try:
        return _module_text(handle, MAX_SCRIPT_SIZE)
    finally:
        os.close(handle)


def _module_text(handle: int, limit: int) -> str:
    info = os.fstat(handle)
    if not stat.S_ISREG(info.st_mode):
        raise ModuleRefused("not a regular file")
    if info.st_size > limit:
        raise ModuleRefused(f"module is {info.st_size:,} bytes, more than {limit:,}")
    data = read_at_most(handle, limit + 1)
    if len(data) > limit:
        raise ModuleRefused(f"module is more than {limit:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModuleRefused(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


__all__ = ["ModuleRefused", "module_loader"]
