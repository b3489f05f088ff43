"""The sessions' scratch folders over time: how much they hold, and removing the ones left idle.

Every session gets a scratch folder under `paths.temp_root` (process.py),
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
import shutil
import stat
import threading
from pathlib import Path

CLEAN_INTERVAL_SECS = 3600.0


def folder_bytes(folder: Path) -> int:
    """The bytes of the regular files below `folder`, links not followed; 0 for a missing folder."""
    total = 0
    for parent, _folders, files in os.walk(folder, followlinks=False):
        for name in files:
            with contextlib.suppress(OSError):  # removed meanwhile
                info = os.lstat(os.path.join(parent, name))
                if stat.S_ISREG(info.st_mode):
                    total += info.st_size
    return total


def last_touched(folder: Path) -> float:
    """The newest modification time of `folder` and of anything below it (links not followed)."""
    newest = os.lstat(folder).st_mtime
    for parent, folders, files in os.walk(folder, followlinks=False):
        for name in (*folders, *files):
            with contextlib.suppress(OSError):
                newest = max(newest, os.lstat(os.path.join(parent, name)).st_mtime)
    return newest


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
        shutil.rmtree(folder, ignore_errors=True)
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


__all__ = ["CLEAN_INTERVAL_SECS", "ScratchJanitor", "clean_scratch", "folder_bytes", "last_touched"]
