"""What a file looked like when it was read, so a reload happens only when it changed.

The kernel reloads YAML and scripts without a restart (S2.4) by asking the
file system, on each use, whether a file changed since it was read: a
`stat`, never a re-read. A stamp is (mtime in ns, size, inode): an editor
that saves by writing a new file and renaming it over the old one changes
the inode even when the time and size happen to match.
"""

from __future__ import annotations

import os
from pathlib import Path

Stamp = tuple[int, int, int] | None  # None: the file is gone (or unreadable)


def stamp_of(path: Path | None) -> Stamp:
    """The stamp of `path` now; None when there is no such file."""
    if path is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


__all__ = ["Stamp", "stamp_of"]
