"""The user's own cache folder of one kind (`$XDG_CACHE_HOME/agentkernel/KIND`), or none.

Shared by the caches that only save start-up time (yaml_cache.py, code_cache.py, and `rhai run`'s
compiled scripts: cli/rhai_cmd.py): a folder anyone else may write is never used, since what it holds
is read back as parsed values or code.
"""

from __future__ import annotations

import os


def cache_folder(kind: str) -> str | None:
    """`$XDG_CACHE_HOME/agentkernel/<kind>` (else `~/.cache/…`), made owner-only if missing;
    None when there is no usable one (no absolute base, not ours, or others may write it)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None
    path = os.path.join(base, "agentkernel", kind)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.stat(path)
    except OSError:
        return None
    mine = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return path if mine and info.st_mode & 0o077 == 0 else None


__all__ = ["cache_folder"]
