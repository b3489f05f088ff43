"""Everything below a folder, by a loop rather than recursion, never through a link.

Python 3.11's `os.walk` (and `Path.rglob`) recurse once per level, so a
tree a thousand folders deep (`mkdir -p` through `shell`) raised
RecursionError out of whatever walked it; and the kernel walks folders
often (the script folders at every tool listing, a scratch folder for its
quota and its clean-up), so a walk asks the file system as little as it
can: one `scandir` a folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def entries_below(folder: Path | str) -> Iterator[os.DirEntry[str]]:
    """Every entry below `folder`, folders included; a linked folder is listed but not entered.

    A folder that vanishes or cannot be read meanwhile is skipped (what is
    not there is not listed).
    """
    pending = [str(folder)]
    while pending:
        try:
            with os.scandir(pending.pop()) as scanning:
                entries = list(scanning)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
            except OSError:  # removed meanwhile
                continue
            yield entry


__all__ = ["entries_below"]
