"""What a Rhai `import` may read in the kernel: `.rhai` files below the scripts' folders (S1.4).

The interpreter (agentkernel.rhai) finds a module by the reference's rules —
relative to the importing script, `.rhai` appended — and asks its host to
read the file (`ReadModule`), as the QuickJS adapter hands its module loader
a reader (scripting/js/modules.py). A module is read on an untrusted script's word, so
this reader holds it to what the file helpers allow (services/confined.py):
the path, reduced by text, must lie below one of the folders, and the file is
opened by the race-free walk that never follows a symbolic link; at most
`max_bytes` are read, as UTF-8 text.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from agentkernel.rhai.runtime.module_files import FileModuleResolver, ModuleRefused, ReadModule, SourceFile

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path

MAX_MODULE_BYTES = 256 << 10  # as much as a script file (the engine contract's MAX_SCRIPT_SIZE)


def module_resolver(
    root: str | Path, *, also: Sequence[str | Path] = (), max_bytes: int = MAX_MODULE_BYTES
) -> FileModuleResolver:
    """Modules for scripts below `root` (a script that is no file imports relative to it),
    read only below `root` and the folders `also` (a kernel's tools and hooks folders)."""
    roots = [os.path.abspath(folder) for folder in (root, *also)]
    return FileModuleResolver(roots[0], confined_reader(roots, max_bytes))


def confined_reader(roots: Sequence[str | Path], max_bytes: int = MAX_MODULE_BYTES) -> ReadModule:
    """A `ReadModule` that reads only below `roots`, never through a link, at most `max_bytes`."""

    def read(start: Path, name: str) -> SourceFile:
        # imported here: `agentkernel rhai run` leaves the kernel's services package and pathlib
        # unloaded until a script imports a module (start-up)
        from pathlib import Path

        from agentkernel.services.confined import NotFound, PathRefused, below_one_of, open_below

        try:
            place = below_one_of([Path(root) for root in roots], start, name)
        except PathRefused as exc:
            raise ModuleRefused(str(exc)) from None
        if place is None or not place[1]:
            raise ModuleRefused("outside the scripts' folder: modules are read only below it")
        base, names = place
        try:
            handle = open_below(base, names, "/".join(names))
        except NotFound:
            raise ModuleRefused() from None
        except PathRefused as exc:
            raise ModuleRefused(str(exc)) from None
        try:
            return _source(handle, str(base.joinpath(*names)), max_bytes)
        finally:
            os.close(handle)

    return read


def _source(handle: int, key: str, max_bytes: int) -> SourceFile:
    """The open file's stamp and text: a regular file of at most `max_bytes` bytes of UTF-8."""
    from agentkernel.services.confined import read_at_most

    info = os.fstat(handle)
    if not stat.S_ISREG(info.st_mode):
        raise ModuleRefused("not a regular file")
    if info.st_size > max_bytes:
        raise ModuleRefused(f"{info.st_size:,} bytes, more than {max_bytes:,}")
    data = read_at_most(handle, max_bytes + 1)
    if len(data) > max_bytes:
        raise ModuleRefused(f"more than {max_bytes:,} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModuleRefused(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return SourceFile(key, (info.st_mtime_ns, info.st_size), text)


__all__ = ["MAX_MODULE_BYTES", "confined_reader", "module_resolver"]
