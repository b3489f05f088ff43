"""The sessions' scratch folders over time: how much they hold, and removing the ones left idle.

Every session gets a scratch folder under `paths.temp_root` (identity.py),
and nothing else ever removes one: a kernel that runs for months would keep
every session's files. `clean_scratch` removes the folders nobody has
touched for `files.scratch_ttl_hours`: "touched" is the newest time stamp
of the folder and of everything in it (links are not followed), and the
kernel renews a folder's time stamp each time a session uses it, so a
session in use keeps its folder.

`ScratchJanitor` decides when to clean: on the first session folder a
kernel hands out (the kernel has just started) and then at most once per
`interval`, by a clock the caller passes — tests give it one and never
sleep.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agentkernel.services.confined import DIR_FLAGS
from agentkernel.util.folder_walk import entries_below

CLEAN_INTERVAL_SECS = 3600.0


@dataclass(frozen=True)
class Usage:
    """What a folder holds: the bytes of its regular files, and how many entries of any kind."""

    bytes: int = 0
    entries: int = 0


def folder_usage(folder: Path) -> Usage:
    """The bytes of the regular files below `folder` and its entries, links not followed; 0s when missing."""
    size = entries = 0
    for info in _entries_below(folder):
        entries += 1
        if stat.S_ISREG(info.st_mode):
            size += info.st_size
    return Usage(size, entries)


def last_touched(folder: Path) -> float:
    """The newest modification time of `folder` and of anything below it (links not followed)."""
    newest = os.lstat(folder).st_mtime
    for info in _entries_below(folder):
        newest = max(newest, info.st_mtime)
    return newest


def _entries_below(folder: Path) -> Iterator[os.stat_result]:
    """The `lstat` of everything below `folder`, however deep (folder_walk.py); vanished ones skipped."""
    for entry in entries_below(folder):
        with contextlib.suppress(OSError):  # removed meanwhile, or a path too long
            yield entry.stat(follow_symlinks=False)


def remove_tree(folder: Path) -> None:
    """Remove `folder` and everything below it, however deep, never through a link; best effort.

    `shutil.rmtree` recurses once per level in Python 3.11 (a RecursionError
    a thousand folders down) and a path-based removal fails once the path
    passes PATH_MAX. Here every folder below is first moved up to `folder`
    itself under a fresh name and emptied from there, so no path is longer
    than two names, no more than two folders are open at once, and nothing
    recurses. Folders are opened with `O_NOFOLLOW`; links are unlinked, not
    followed.
    """
    try:
        top = os.open(folder, DIR_FLAGS)
    except OSError:
        return
    try:
        pending = [*_empty_folder(top, top)]
        while pending:
            name = pending.pop()
            with contextlib.suppress(OSError):
                inner = os.open(name, DIR_FLAGS, dir_fd=top)
                try:
                    pending.extend(_empty_folder(inner, top))
                finally:
                    os.close(inner)
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    with contextlib.suppress(OSError):
        os.rmdir(folder)


def _empty_folder(handle: int, top: int) -> list[str]:
    """Unlink what the folder `handle` holds, but move its folders to `top`; their names there."""
    import secrets  # with hashlib: for a folder removed only

    moved: list[str] = []
    with os.scandir(handle) as entries:
        found = list(entries)
    for entry in found:
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                name = entry.name if handle == top else f".removing-{secrets.token_hex(8)}"
                if handle != top:
                    os.rename(entry.name, name, src_dir_fd=handle, dst_dir_fd=top)
                moved.append(name)
            else:
                os.unlink(entry.name, dir_fd=handle)
    return moved


def clean_scratch(temp_root: Path, ttl_secs: float, now: float) -> list[Path]:
    """Remove the scratch folders under `temp_root` untouched since `now - ttl_secs`; the removed ones.

    Only folders directly under `temp_root` are candidates; files and links
    there are left alone.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(temp_root))
    except FileNotFoundError:
        return removed
    for entry in sorted(entries, key=lambda e: e.name):
        if not entry.is_dir(follow_symlinks=False):
            continue
        folder = Path(entry.path)
        try:  # a folder in use has a fresh time stamp of its own: no need to walk it
            if (
                now - entry.stat(follow_symlinks=False).st_mtime < ttl_secs
                or now - last_touched(folder) < ttl_secs
            ):
                continue
        except OSError:  # gone meanwhile
            continue
        remove_tree(folder)
        if not folder.exists():
            removed.append(folder)
    return removed


class ScratchJanitor:
    """Runs `clean_scratch` for one kernel: at the first session, then at most once per interval."""

    def __init__(self, temp_root: Path, ttl_secs: float, interval: float = CLEAN_INTERVAL_SECS) -> None:
        self.temp_root = temp_root
        self.ttl_secs = ttl_secs
        self.interval = min(interval, ttl_secs)
        self._last: float | None = None
        self._lock = threading.Lock()

    def due(self, now: float) -> bool:
        """Whether a pass should run at `now`; claims it, so two threads never clean at once."""
        with self._lock:
            if self._last is not None and now - self._last < self.interval:
                return False
            self._last = now
            return True

    def clean(self, now: float) -> list[Path]:
        """One pass now, whatever the interval says."""
        with self._lock:
            self._last = now
        return clean_scratch(self.temp_root, self.ttl_secs, now)

    def maybe_clean(self, now: float) -> list[Path]:
        """A pass if one is due (see `due`), else nothing."""
        return clean_scratch(self.temp_root, self.ttl_secs, now) if self.due(now) else []


__all__ = [
    "CLEAN_INTERVAL_SECS",
    "ScratchJanitor",
    "Usage",
    "clean_scratch",
    "folder_usage",
    "last_touched",
    "remove_tree",
]
