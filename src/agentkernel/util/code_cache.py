"""Compiled code of the methods `dataclasses` (and the Rhai syntax tree's `@record`) generate, kept on
disk: a command defines its value classes without compiling their methods again.

`@dataclass` writes each class's `__init__`, `__repr__`, `__eq__`, `__hash__`,
`__setattr__`… as Python source and compiles every one with its own `exec`:
about 4 M instructions for a frozen class of five fields, a third of
`agentkernel tool run`'s start-up (about a hundred such classes,
docs/benchmarks.md); `rhai/syntax/records.py` compiles one `__init__` template
a shape of class (number of fields, frozen or not).
`install(name, *modules)` points the name `exec` in each module at
`cached_exec`, which runs the same source as the same code object
(`compile(source, "<string>", "exec")`, as `exec` of a string does) but takes
that code object from a table when the same source was compiled before, in
this process or an earlier one. The classes come out exactly as they would
have: same source, same code, same namespaces; only the compiling is saved.

A table is one file per name (the command line uses its command's and
action's, `tool-run`: each reads only the sources it needs), Python build and optimisation level, in
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
import __future__

import atexit
import builtins
import contextlib
import functools
import marshal
import operator
import os
import sys
import threading
from types import CodeType, ModuleType

from agentkernel.util.cache_folder import cache_folder

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the command may not need it)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

FORMAT = 2  # bump when what the file holds changes
MAX_ENTRIES = 4096

# what `exec` inherits of its caller's compiler flags: the `__future__` features
_FUTURE_FLAGS = functools.reduce(
    operator.or_, (getattr(__future__, name).compiler_flag for name in __future__.all_feature_names)
)

Key = tuple[int, str]  # (the caller's `__future__` flags, the source)
_table: dict[Key, CodeType] = {}
_added: dict[Key, CodeType] = {}  # compiled by this process, written at exit
_lock = threading.Lock()
_compiled = [0]  # sources this process had to compile (not found in the table)
_name: list[str] = []  # the table in use: the first install()'s name


def table_path(name: str | None = None) -> str | None:
    """The file of table `name` (default: the one installed) for this Python, or None when there
    is no usable cache folder."""
    where = cache_folder("code")
    if where is None:
        return None
    build = f"{sys.implementation.cache_tag}-{sys.hexversion:x}-O{sys.flags.optimize}"
    return os.path.join(where, f"{name or (_name or ['default'])[0]}-{build}.marshal")


def _read(path: str) -> dict[Key, CodeType]:
    """The table in `path`, or an empty one when it is missing, damaged or of another format."""
    try:
        with open(path, "rb") as file:
            data = marshal.loads(file.read())
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if type(data) is not tuple or len(data) != 2 or data[0] != FORMAT or type(data[1]) is not dict:
        return {}
    entries: dict[Any, Any] = data[1]
    return {k: v for k, v in entries.items() if _is_key(k) and type(v) is CodeType}


def _is_key(key: object) -> bool:
    return type(key) is tuple and len(key) == 2 and type(key[0]) is int and type(key[1]) is str


def cached_exec(
    source: object,
    globals: dict[str, Any] | None = None,  # exec's own parameter names
    locals: Mapping[str, object] | None = None,
    /,
) -> None:
    """`exec(source, globals, locals)`, compiling a source text only the first time it is seen.

    As `exec` does, the source is compiled with the `__future__` features of the calling code
    (records.py's `annotations`), which are part of the key."""
    if type(source) is not str or globals is None:  # both callers always pass their globals
        builtins.exec(source, globals, locals)  # type: ignore[arg-type]
        return
    key = (sys._getframe(1).f_code.co_flags & _FUTURE_FLAGS, source)
    code = _table.get(key)
    if code is None:
        code = compile(source, "<string>", "exec", flags=key[0], dont_inherit=True)
        with _lock:
            _compiled[0] += 1
            if not _added:
                atexit.register(save)
            _table[key] = _added[key] = code
    builtins.exec(code, globals, locals)


def compiled() -> int:
    """How many sources this process compiled because the table did not have them."""
    return _compiled[0]


def install(name: str, *modules: ModuleType) -> None:
    """Make each of `modules` (`dataclasses`, `records`) compile the source it runs with `exec`
    through table `name`, read from disk now. Only the first call reads a table: later ones add
    modules to the one in use."""
    with _lock:
        first = not _name
        if first:
            _name.append(name)
    path = table_path() if first else None
    if path is not None:
        _table.update(_read(path))
    for module in modules:
        module.exec = cached_exec  # type: ignore[attr-defined]


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
