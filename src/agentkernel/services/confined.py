"""Writing a file strictly inside one folder (S14.2), race-free, whatever the path says.

The script's path is never handed to the operating system's path resolver.
It is first reduced lexically to a list of names below the base folder (a
`..` that would climb above it, or an absolute path not under it, is refused
before anything is touched). Then the folders are walked one name at a time
from a descriptor of the base folder: each step is an `openat` with
`O_NOFOLLOW | O_DIRECTORY`, so a symbolic link anywhere on the way is refused
rather than followed, and once a folder is open, swapping it for a link no
longer changes where the walk goes. The file itself is written under a fresh
random name with `O_CREAT | O_EXCL | O_NOFOLLOW` and renamed over the target
in the same folder: `rename` replaces a directory entry and never writes
through one, so a link (or a hard link to a file outside) planted at the
target between the check and the write is replaced, not followed, and a
reader never sees half a file.

Linux's `openat2(RESOLVE_BENEATH)` would do the walk in the kernel, but it is
not in Python's `os` and needs Linux 5.6; this works on any POSIX system.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path, PurePosixPath

#: Longest path text accepted (PATH_MAX on Linux); longer paths are refused before any walk.
MAX_PATH_CHARS = 4096

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class PathRefused(Exception):
    """The path may not be written: the message says why, without the helper's name."""


class OutsideBase(PathRefused):
    """The path leads outside the base folder (S14.2's error)."""


def names_below(base: Path, path: str) -> list[str]:
    """The names leading from `base` to the file `path` means, checked lexically.

    Relative paths start at `base`; absolute ones must lie under it. `.` and
    empty names are dropped and `..` goes up one name, but never above `base`.
    """
    shown = show_path(path)
    if not path:
        raise PathRefused("path is empty")
    if "\x00" in path:
        raise PathRefused(f"path {shown} contains a NUL byte")
    if len(path) > MAX_PATH_CHARS:
        raise PathRefused(f"path is too long ({len(path):,} characters, at most {MAX_PATH_CHARS:,})")
    names = _normalised(base, path)
    if names is None:
        raise OutsideBase(f"path {shown} is outside the session temp dir")
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if not names:
        raise PathRefused(f"path {shown} is the session temp dir itself, not a file")
    if path.endswith("/") or last in (".", ".."):
        raise PathRefused(f"path {shown} names a folder, not a file")
    return names


def _normalised(base: Path, path: str) -> list[str] | None:
    """The names below `base`, or None when the path leaves it."""
    pure = PurePosixPath(path)
    start = list(pure.parts[1:]) if pure.is_absolute() else [*base.parts[1:], *pure.parts]
    stack: list[str] = []
    for name in start:
        if name == "..":
            if stack:
                stack.pop()
        elif name not in ("", "."):
            stack.append(name)
    prefix = list(base.parts[1:])
    if stack[: len(prefix)] != prefix or (not pure.is_absolute() and _climbs(pure.parts)):
        return None
    return stack[len(prefix) :]


def _climbs(parts: tuple[str, ...]) -> bool:
    """Whether a relative path's `..` ever goes above its start (`a/../../x` does)."""
    depth = 0
    for name in parts:
        depth += -1 if name == ".." else 0 if name == "." else 1
        if depth < 0:
            return True
    return False


def write_below(base: Path, path: str, data: bytes) -> Path:
    """Write `data` to the file `path` means below `base`, creating folders; returns its path."""
    names = names_below(base, path)
    folder = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for depth, name in enumerate(names[:-1]):
            inner = _enter(folder, name, path, names[: depth + 1])
            os.close(folder)
            folder = inner
        _replace(folder, names[-1], data, path)
    finally:
        os.close(folder)
    return base.joinpath(*names)


def _enter(folder: int, name: str, path: str, walked: list[str]) -> int:
    """The folder `name` inside `folder`, created if missing; never through a link."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        _make_folder(folder, name, walked)
    except OSError as exc:
        raise _refusal(folder, name, path, walked, exc) from exc
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=folder)
    except OSError as exc:
        raise _refusal(folder, name, path, walked, exc) from exc


def _make_folder(folder: int, name: str, walked: list[str]) -> None:
    try:
        os.mkdir(name, 0o700, dir_fd=folder)
    except FileExistsError:  # made meanwhile by someone else: the open after this checks what it is
        pass
    except OSError as exc:
        raise PathRefused(f"cannot create folder {show_path('/'.join(walked))}: {_why(exc)}") from exc


def _refusal(folder: int, name: str, path: str, walked: list[str], exc: OSError) -> PathRefused:
    """Why a name on the way could not be entered: a link (outside), not a folder, or the OS's word."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        info = None
    where = show_path("/".join(walked))
    if info is not None and stat.S_ISLNK(info.st_mode):
        return OutsideBase(
            f"path {show_path(path)} is outside the session temp dir: {where} is a symbolic link"
        )
    if info is not None and not stat.S_ISDIR(info.st_mode):
        return PathRefused(f"path {show_path(path)}: {where} is not a folder")
    return PathRefused(f"cannot open folder {where}: {_why(exc)}")


def _replace(folder: int, name: str, data: bytes, path: str) -> None:
    """Put `data` at `name` in `folder` by writing a new file and renaming it over the old entry."""
    _check_target(folder, name, path)
    temporary = f".fs_write-{secrets.token_hex(8)}.tmp"
    try:
        handle = os.open(temporary, _NEW_FILE_FLAGS, 0o600, dir_fd=folder)
    except OSError as exc:
        raise PathRefused(f"cannot write {show_path(path)}: {_why(exc)}") from exc
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError as exc:
        _unlink_quietly(folder, temporary)
        if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):  # a folder appeared there
            raise PathRefused(f"path {show_path(path)} names a folder, not a file") from exc
        raise PathRefused(f"cannot write {show_path(path)}: {_why(exc)}") from exc


def _check_target(folder: int, name: str, path: str) -> None:
    """Refuse a link or a folder already at the target, with the error S14.2 gives for links."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise PathRefused(f"cannot write {show_path(path)}: {_why(exc)}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise OutsideBase(f"path {show_path(path)} is outside the session temp dir: it is a symbolic link")
    if stat.S_ISDIR(info.st_mode):
        raise PathRefused(f"path {show_path(path)} names a folder, not a file")


def _unlink_quietly(folder: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=folder)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def show_path(path: str) -> str:
    """The path quoted for an error message, shortened when very long."""
    text = repr(path)
    return text if len(text) <= 120 else f"{text[:80]}...{text[-30:]} ({len(path):,} characters)"


__all__ = ["MAX_PATH_CHARS", "OutsideBase", "PathRefused", "names_below", "show_path", "write_below"]
