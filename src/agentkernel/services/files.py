"""The files service (S14): bounded reads anywhere, writes only inside a session's temp dir.

Reading is not confined (S14.3) — scripts may read the server's data and
configs, relative paths starting at the kernel's root — but it is bounded:
only regular files and folders, at most `max_read_bytes` per file and
`max_list_entries` per folder, opened without blocking (a FIFO cannot hang a
worker). Nothing under /proc is read: `/proc/self/environ` and
`/proc/self/mem` would hand a script the secrets `env_var` keeps from it.

Writing goes through `confined.write_below` (race-free, see there), with at
most `max_write_bytes` per file.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from agentkernel.config import KernelConfig
from agentkernel.services.confined import MAX_PATH_CHARS, PathRefused, show_path, write_below
from agentkernel.services.section import Section

_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class FilesSettings:
    """The `files:` section of kernel.yaml."""

    max_read_bytes: int = 16 << 20
    max_write_bytes: int = 16 << 20
    max_list_entries: int = 10_000

    @classmethod
    def from_config(cls, config: KernelConfig) -> FilesSettings:
        section = Section(config, "files", ("max_read_bytes", "max_write_bytes", "max_list_entries"))
        return cls(
            max_read_bytes=section.integer("max_read_bytes", cls.max_read_bytes, 1),
            max_write_bytes=section.integer("max_write_bytes", cls.max_write_bytes, 1),
            max_list_entries=section.integer("max_list_entries", cls.max_list_entries, 1),
        )


class FilesService:
    """File access for scripts; every refusal is a PathRefused whose text names the path."""

    def __init__(self, settings: FilesSettings | None = None, *, root: Path | None = None) -> None:
        self.settings = settings or FilesSettings()
        self.root = (root or Path.cwd()).resolve()

    @classmethod
    def from_config(cls, config: KernelConfig) -> FilesService:
        """The service for kernel.yaml's `files:` section; relative reads start at the kernel root."""
        return cls(FilesSettings.from_config(config), root=config.root)

    # -- reading (not confined, S14.3) -------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        """The bytes of a regular file, at most `max_read_bytes` of them."""
        limit = self.settings.max_read_bytes
        handle = self._open(path)
        try:
            info = os.fstat(handle)
            if stat.S_ISDIR(info.st_mode):
                raise PathRefused(f"{show_path(path)} is a folder, not a file")
            if not stat.S_ISREG(info.st_mode):
                raise PathRefused(f"{show_path(path)} is not a regular file")
            if info.st_size > limit:
                raise PathRefused(_too_big(path, info.st_size, limit))
            data = _read_at_most(handle, limit + 1)
        finally:
            os.close(handle)
        if len(data) > limit:  # it grew while we read
            raise PathRefused(_too_big(path, len(data), limit))
        return data

    def list_folder(self, path: str) -> list[str]:
        """The folder's entry names, sorted; folders (and links to folders) end in `/`."""
        handle = self._open(path)
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

    def _open(self, path: str) -> int:
        """A descriptor for what `path` names (links followed), refused under /proc."""
        if not path:
            raise PathRefused("path is empty")
        if "\x00" in path:
            raise PathRefused(f"path {show_path(path)} contains a NUL byte")
        if len(path) > MAX_PATH_CHARS:
            raise PathRefused(f"path is too long ({len(path):,} characters, at most {MAX_PATH_CHARS:,})")
        try:
            handle = os.open(self.root / path, _READ_FLAGS)
        except OSError as exc:
            raise PathRefused(f"cannot open {show_path(path)}: {exc.strerror or exc}") from exc
        if os.fstat(handle).st_dev == _procfs_device():
            os.close(handle)
            raise PathRefused(f"{show_path(path)} is under /proc, which scripts may not read")
        return handle

    # -- writing (confined, S14.2) -----------------------------------------------------------------

    def write_file(self, temp_dir: Path, path: str, data: bytes) -> str:
        """Write below `temp_dir` (see confined.py); returns the absolute path written."""
        limit = self.settings.max_write_bytes
        if len(data) > limit:
            raise PathRefused(
                f"content is {len(data):,} bytes, over the {limit:,}-byte limit (files.max_write_bytes)"
            )
        return str(write_below(temp_dir, path, data))


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _read_at_most(handle: int, count: int) -> bytes:
    chunks: list[bytes] = []
    left = count
    while left > 0:
        chunk = os.read(handle, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _too_big(path: str, size: int, limit: int) -> str:
    return f"{show_path(path)} is {size:,} bytes, over the {limit:,}-byte limit (files.max_read_bytes)"


@cache
def _procfs_device() -> int | None:
    """The device number of /proc (every procfs file shares it), or None without a procfs."""
    try:
        return os.stat("/proc").st_dev
    except OSError:
        return None


__all__ = ["FilesService", "FilesSettings"]
