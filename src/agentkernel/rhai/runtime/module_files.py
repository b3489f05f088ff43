"""Finding a module's file: the `ModuleResolver` seam and the file resolver behind it.

`import "lib"` asks the engine's `ModuleResolver` for the module `lib`
compiled. `FileModuleResolver` follows the reference's file resolver: the
path is relative to the importing script's folder (to its `root` for a
script that is no file) and `.rhai` is appended; it keeps each compiled
module by its file and stamp, so an edited module is compiled again at its
next `import` and the scripts importing it see the change on their next run.

Reading the file is the host's business, not the interpreter's: the
resolver is handed a `ReadModule` that decides which files may be read and
how (the kernel's reads only below its scripts' folders, through the file
helpers' race-free walk that never follows a link: scripting/rhai_modules.py),
and says why it refused one (`ModuleRefused`). An `Engine` without a resolver
finds no module at all: an embedded interpreter never reads a file unless
its host says where and how.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from agentkernel.rhai.runtime import failures
from agentkernel.rhai.syntax.records import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Protocol

    from agentkernel.rhai.compiled import CompiledScript
else:  # a plain base at run time: `ModuleResolver` is structural only (nothing subclasses it or
    # checks `isinstance` against it), and `typing.Protocol` would import `typing`
    Protocol = object

MODULE_EXTENSION = ".rhai"

#: Compiles a module's text: (text, the path as the import wrote it, deadline) → its script.
Compile = Callable[[str, str, "float | None"], "CompiledScript"]


@record
class ModuleFile:
    """A module found and compiled: `key` is its file (caches and cycles are keyed by it)."""

    key: str
    compiled: CompiledScript


class ModuleResolver(Protocol):
    """Finds and compiles the module `path` names for a script (`importer`: the importing
    file, None for a script that is not a file). Raises the `Module not found` error."""

    def resolve(
        self, compile: Compile, path: str, importer: str | None, deadline: float | None
    ) -> ModuleFile:
        """The module `path` names, compiled by `deadline` (a `time.monotonic()` value)."""
        ...


class ModuleRefused(Exception):
    """The host will not give a module's file; the message says why (empty: there is no such file)."""


@record
class SourceFile:
    """A module's file as the host read it."""

    key: str  # the file, as one name: compiled modules and import cycles are keyed by it
    stamp: object  # changes when the file does (its modification time and size)
    text: str


ReadModule = Callable[["Path", str], SourceFile]
"""The host's reader: `read(start, name)` is the file `name` (a relative path, `.rhai` appended)
means from the folder `start`, read as the host allows; it raises `ModuleRefused` with the reason."""


class FileModuleResolver:
    """Modules are `.rhai` files found relative to the importing script's folder, read by `read`.

    `import "lib"` in `root/tools/t.rhai` asks for `root/tools/lib.rhai`;
    `import "../common/util"` for `root/common/util.rhai`; a script that is
    no file imports relative to `root` itself. An absolute path is refused
    here; what else may be read (which folders, links, sizes) is `read`'s to say.
    """

    def __init__(self, root: str | Path, read: ReadModule) -> None:
        self._root = os.path.abspath(root)  # a Path on first use: a script may import nothing
        self.read = read
        self._cache: dict[str, tuple[object, CompiledScript]] = {}

    @property
    def root(self) -> Path:
        """The folder a script that is no file imports relative to."""
        from pathlib import Path  # on an import only: `agentkernel rhai run` may never need it

        return Path(self._root)

    def resolve(
        self, compile: Compile, path: str, importer: str | None, deadline: float | None
    ) -> ModuleFile:
        from pathlib import Path, PurePosixPath  # on an import only (start-up of `rhai run`)

        if PurePosixPath(path).is_absolute():
            raise failures.module_not_found(path, "an absolute path: import by a path relative to the script")
        try:
            file_name = str(PurePosixPath(path).with_suffix(MODULE_EXTENSION))
        except ValueError:  # "", "..", "a/": no file name to give the extension to
            raise failures.module_not_found(path) from None
        start = Path(importer).parent if importer is not None else self.root
        try:
            found = self.read(start, file_name)
        except ModuleRefused as exc:
            raise failures.module_not_found(path, str(exc) or None) from None
        cached = self._cache.get(found.key)
        if cached is not None and cached[0] == found.stamp:
            return ModuleFile(found.key, cached[1])
        compiled = compile(found.text, path, deadline)
        self._cache[found.key] = (found.stamp, compiled)
        return ModuleFile(found.key, compiled)


__all__ = [
    "MODULE_EXTENSION",
    "Compile",
    "FileModuleResolver",
    "ModuleFile",
    "ModuleRefused",
    "ModuleResolver",
    "ReadModule",
    "SourceFile",
]
