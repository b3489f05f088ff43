"""The files service (S14): reads only from the read roots, writes only inside a session's temp dir.

Reading is confined (S14.3, a decision: reads anywhere under the kernel's
root would let one user's scripts read another's DuckDB files, the state
store and their scratch files). A script reads
from the **read roots** — `files.read_roots`, by default the scripts folders
and `data/shared` — and from its own session's temp dir, nothing else. A
relative path starts at the project folder. The path is reduced
to names by text, matched against those folders, then opened by the same
race-free walk writes use (`confined.open_below`): no link below a read
root is followed, so neither `..` nor a link leads out. No read root may
hold a store (the state and message databases, the DuckDB folder, the
sessions' scratch folders): the kernel refuses to start with one
(`read_roots`). Reads are also bounded: only regular files and folders, at
most `max_read_bytes` per file and `max_list_entries` per folder, opened
without blocking; nothing on /proc's file system is read.

Writing goes through `confined.write_below` (race-free, see there), with at
most `max_write_bytes` per file, and `max_scratch_bytes` and
`max_scratch_entries` (files and folders) per session temp dir. What a temp
dir holds is counted once by walking it, then kept up to date by each
write; a write the count would refuse walks the folder again first, so
files removed meanwhile (by `shell`, say) are not held against it, and a
write that fails is counted again by the next one (it may have made
folders).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from agentkernel.config import FilesSettings, KernelConfig, ReadRoot
from agentkernel.services.confined import (
    PathRefused,
    below_one_of,
    open_below,
    read_at_most,
    show_path,
    write_below,
)
from agentkernel.services.scratch import Usage, folder_usage


class FilesService:
    """File access for scripts; every refusal is a PathRefused whose text names the path."""

    def __init__(
        self,
        settings: FilesSettings | None = None,
        *,
        root: Path | None = None,
        roots: Iterable[ReadRoot] = (),
    ) -> None:
        self.settings = settings or FilesSettings()
        self.root = (root or Path.cwd()).resolve()
        self.roots = tuple(roots)
        self._used: dict[Path, Usage] = {}  # what each temp dir this service wrote to holds
        self._locks: dict[Path, threading.Lock] = {}  # one writer at a time per temp dir
        self._guard = threading.Lock()

    @classmethod
    def from_config(cls, config: KernelConfig) -> FilesService:
        """The service for kernel.yaml's `files:` section; relative reads start at the kernel root."""
        return cls(config.files, root=config.root, roots=config.read_roots)

    # -- reading (confined to the read roots and the caller's temp dir, S14.3) ---------------------

    def read_file(self, path: str, temp_dir: Path | None = None) -> bytes:
        """The bytes of a regular file, at most `max_read_bytes` of them."""
        limit = self.settings.max_read_bytes
        handle = self._open(path, temp_dir)
        try:
            info = os.fstat(handle)
            if stat.S_ISDIR(info.st_mode):
                raise PathRefused(f"{show_path(path)} is a folder, not a file")
            if not stat.S_ISREG(info.st_mode):
                raise PathRefused(f"{show_path(path)} is not a regular file")
            if info.st_size > limit:
                raise PathRefused(_too_big(path, info.st_size, limit))
            data = read_at_most(handle, limit + 1)
        finally:
            os.close(handle)
        if len(data) > limit:  # it grew while we read
            raise PathRefused(_too_big(path, len(data), limit))
        return data

    def list_folder(self, path: str, temp_dir: Path | None = None) -> list[str]:
        """The folder's entry names, sorted; folders end in `/` (links do not: reads never follow them)."""
        handle = self._open(path, temp_dir)
        try:
            if not stat.S_ISDIR(os.fstat(handle).st_mode):
                raise PathRefused(f"{show_path(path)} is not a folder")
            return sorted(self._entries(handle, path))
        finally:
            os.close(handle)

    def _entries(self, handle: int, path: str) -> list[str]:
        limit = self.settings.max_list_entries
        names: list[str] = []
        with os.scandir(handle) as entries:
            for entry in entries:
                if len(names) == limit:
                    raise PathRefused(
                        f"{show_path(path)} has more than {limit:,} entries (files.max_list_entries)"
                    )
                names.append(entry.name + "/" if _is_folder(entry) else entry.name)
        return names

    def _open(self, path: str, temp_dir: Path | None) -> int:
        """A descriptor for what `path` names inside a read root or `temp_dir`, never through a link."""
        bases = [root.path for root in self.roots] + ([temp_dir] if temp_dir is not None else [])
        place = below_one_of(bases, self.root, path)
        if place is None:
            raise PathRefused(
                f"{show_path(path)} is outside the folders scripts may read ({self._readable()})"
            )
        handle = open_below(*place, path)
        if os.fstat(handle).st_dev == _procfs_device():
            os.close(handle)
            raise PathRefused(f"{show_path(path)} is under /proc, which scripts may not read")
        return handle

    def _readable(self) -> str:
        shown = ", ".join(root.shown for root in self.roots) or "none"
        return f"files.read_roots: {shown}; and the session temp dir"

    # -- writing (confined, S14.2) -----------------------------------------------------------------

    def write_file(self, temp_dir: Path, path: str, data: bytes) -> str:
        """Write below `temp_dir` (see confined.py); returns the absolute path written."""
        limit = self.settings.max_write_bytes
        if len(data) > limit:
            raise PathRefused(
                f"content is {len(data):,} bytes, over the {limit:,}-byte limit (files.max_write_bytes)"
            )
        with self._writer(temp_dir):  # one write at a time per temp dir, so its count stays true
            quota = _Quota(self._used.get(temp_dir), temp_dir, len(data), self.settings)
            try:
                written = write_below(temp_dir, path, data, room=quota.check)
            except PathRefused:
                self._used.pop(temp_dir, None)  # it may have made folders before failing: count again
                raise
            self._used[temp_dir] = quota.after
        return str(written)

    def _writer(self, temp_dir: Path) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(temp_dir, threading.Lock())

    def forget(self, temp_dirs: Iterable[Path]) -> None:
        """Drop the counts of temp dirs that were removed (the scratch clean-up)."""
        with self._guard:
            for folder in temp_dirs:
                self._used.pop(folder, None)


class _Quota:
    """One write's check against `files.max_scratch_bytes` and `files.max_scratch_entries`.

    Entries count as well as bytes: folders and empty files hold no bytes
    of their own, and a loop of `fs_write("dN/x", "")` filled a disk with
    folders (4 KiB each on ext4) and inodes past any byte quota.
    """

    def __init__(self, known: Usage | None, temp_dir: Path, size: int, settings: FilesSettings) -> None:
        self.known, self.temp_dir, self.size, self.settings = known, temp_dir, size, settings
        self.after = Usage()

    def check(self, replaced: int, new_entries: int) -> None:
        used = self.known if self.known is not None else folder_usage(self.temp_dir)
        if self.known is not None and self._refusal(used, replaced, new_entries) is not None:
            used = folder_usage(self.temp_dir)  # the count may be stale: count again before refusing
        refusal = self._refusal(used, replaced, new_entries)
        if refusal is not None:
            raise PathRefused(refusal)
        self.after = Usage(max(used.bytes - replaced + self.size, 0), used.entries + new_entries)

    def _refusal(self, used: Usage, replaced: int, new_entries: int) -> str | None:
        after = used.bytes - replaced + self.size
        limit = self.settings.max_scratch_bytes
        if after > limit and self.size > replaced:
            return (
                f"the session temp dir would hold {after:,} bytes, over its "
                f"{limit:,}-byte quota (files.max_scratch_bytes); it holds {used.bytes:,}"
            )
        entries, most = used.entries + new_entries, self.settings.max_scratch_entries
        if entries > most and new_entries > 0:
            return (
                f"the session temp dir would hold {entries:,} files and folders, over its "
                f"{most:,}-entry quota (files.max_scratch_entries)"
            )
        return None


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _too_big(path: str, size: int, limit: int) -> str:
    return f"{show_path(path)} is {size:,} bytes, over the {limit:,}-byte limit (files.max_read_bytes)"


@cache
def _procfs_device() -> int | None:
    """The device number of /proc (every procfs file shares it), or None without a procfs."""
    try:
        return os.stat("/proc").st_dev
    except OSError:
        return None


__all__ = ["FilesService", "FilesSettings", "ReadRoot"]
