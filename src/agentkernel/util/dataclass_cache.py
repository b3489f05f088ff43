"""Compiled code of the methods `dataclasses` generates, kept on disk: a command defines its
value classes without compiling their methods again.

`@dataclass` writes each class's `__init__`, `__repr__`, `__eq__`, `__hash__`,
`__setattr__`… as Python source and compiles every one with its own `exec`:
about 4 M instructions for a frozen class of five fields, a third of
`agentkernel tool run`'s start-up (about a hundred such classes,
docs/benchmarks.md). `install()` points the name `exec` in the `dataclasses`
module at `cached_exec`, which runs the same source as the same code object
(`compile(source, "<string>", "exec")`, as `exec` of a string does) but takes
that code object from a table when the same source was compiled before, in
this process or an earlier one. The classes come out exactly as they would
have: same source, same code, same namespaces; only the compiling is saved.

The table is one file per Python build and optimisation level, in
`$XDG_CACHE_HOME/agentkernel/code` (else `~/.cache/…`), written with
`marshal`, keyed by the whole source text; it is read once, at `install()`,
and written (merged with what other processes added, at most `MAX_ENTRIES`)
when the process ends, if it compiled anything new. The folder must be the
user's own and 0700, or nothing is read or written (its code is run). Every
failure — no folder, a damaged or foreign file, a full disk — is a miss or a
skipped write: the cache can only save time.

The command line installs it (cli/main.py); importing agentkernel as a
library leaves `dataclasses` as it is.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import marshal
import os
import sys
import threading
from types import CodeType

from agentkernel.util.cache_folder import cache_folder

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the command may not need it)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

FORMAT = 1  # bump when what the file holds changes
MAX_ENTRIES = 4096

_table: dict[str, CodeType] = {}
_added: dict[str, CodeType] = {}  # compiled by this process, written at exit
_lock = threading.Lock()
_compiled = [0]  # sources this process had to compile (not found in the table)


def table_path() -> str | None:
    """This Python's table file, or None when there is no usable cache folder."""
    where = cache_folder("code")
    if where is None:
        return None
    build = f"{sys.implementation.cache_tag}-{sys.hexversion:x}-O{sys.flags.optimize}"
    return os.path.join(where, f"dataclasses-{build}.marshal")


def _read(path: str) -> dict[str, CodeType]:
    """The table in `path`, or an empty one when it is missing, damaged or of another format."""
    try:
        with open(path, "rb") as file:
            data = marshal.loads(file.read())
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if type(data) is not tuple or len(data) != 2 or data[0] != FORMAT or type(data[1]) is not dict:
        return {}
    entries: dict[Any, Any] = data[1]
    return {k: v for k, v in entries.items() if type(k) is str and type(v) is CodeType}


def cached_exec(
    source: object,
    globals: dict[str, Any] | None = None,  # exec's own parameter names
    locals: Mapping[str, object] | None = None,
    /,
) -> None:
    """`exec(source, globals, locals)`, compiling a source text only the first time it is seen."""
    if type(source) is not str or globals is None:  # dataclasses always passes its globals
        builtins.exec(source, globals, locals)  # type: ignore[arg-type]
        return
    code = _table.get(source)
    if code is None:
        code = compile(source, "<string>", "exec", dont_inherit=True)
        with _lock:
            _compiled[0] += 1
            if not _added:
                atexit.register(save)
            _table[source] = _added[source] = code
    builtins.exec(code, globals, locals)


def compiled() -> int:
    """How many sources this process compiled because the table did not have them."""
    return _compiled[0]


def install() -> None:
    """Make `dataclasses` compile through the table (read from disk now); idempotent."""
    import dataclasses  # patched only by the command line, never at import

    if vars(dataclasses).get("exec") is cached_exec:
        return
    path = table_path()
    if path is not None:
        _table.update(_read(path))
    dataclasses.exec = cached_exec  # type: ignore[attr-defined]


def save() -> None:
    """Merge what this process compiled into the table file (whole: a reader sees old or new)."""
    path = table_path()
    with _lock:
        added = dict(_added)
        _added.clear()
    if path is None or not added:
        return
    merged = _read(path)
    if len(merged) + len(added) > MAX_ENTRIES:
        merged = {}
    merged.update(added)
    part = f"{path}.{os.getpid()}.{threading.get_ident()}.part"
    try:
        with open(part, "wb") as file:
            file.write(marshal.dumps((FORMAT, merged)))
        os.replace(part, path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(part)


__all__ = ["FORMAT", "MAX_ENTRIES", "cached_exec", "compiled", "install", "save", "table_path"]
