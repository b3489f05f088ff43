"""Writing and reading files strictly inside one folder (S14.2, S14.3), race-free, whatever the path says.

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

Reading (`open_below`) takes the same walk: every name below the base
folder, the last one too, is opened with `O_NOFOLLOW`, so a link never
leads a read out of its folder, and the path is reduced lexically first
(`absolute_names`), so `..` cannot climb out either.

Linux's `openat2(RESOLVE_BENEATH)` would do the walk in the kernel, but it is
not in Python's `os` and needs Linux 5.6; this works on any POSIX system.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath

#: Longest path text accepted (PATH_MAX on Linux); longer paths are refused before any walk.
MAX_PATH_CHARS = 4096
#: Most names a written path may have below its base folder: each one may be a folder `write_below`
#: makes, and a tree thousands deep broke every walk of the folder (the quota count, the clean-up).
MAX_WRITE_DEPTH = 64

#: How a folder is opened here and by the clean-up (scratch.py): never through a link.
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LEAF_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class PathRefused(Exception):
    """The path may not be written: the message says why, without the helper's name."""


class OutsideBase(PathRefused):
    """The path leads outside the base folder (S14.2's error)."""


class NotFound(PathRefused):
    """A read found nothing at the path (or a folder on the way is missing)."""


def names_below(base: Path, path: str) -> list[str]:
    """The names leading from `base` to the file `path` means, checked lexically.

    Relative paths start at `base`; absolute ones must lie under it. `.` and
    empty names are dropped and `..` goes up one name, but never above `base`.
    """
    shown = show_path(path)
    check_path_text(path)
    names = _normalised(base, path)
    if names is None:
        raise OutsideBase(f"path {shown} is outside the session temp dir")
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if not names:
        raise PathRefused(f"path {shown} is the session temp dir itself, not a file")
    if path.endswith("/") or last in (".", ".."):
        raise PathRefused(f"path {shown} names a folder, not a file")
    return names


def check_path_text(path: str) -> None:
    """Refuse an empty path, a NUL byte or a path over MAX_PATH_CHARS before anything is touched."""
    if not path:
        raise PathRefused("path is empty")
    if "\x00" in path:
        raise PathRefused(f"path {show_path(path)} contains a NUL byte")
    if len(path) > MAX_PATH_CHARS:
        raise PathRefused(f"path is too long ({len(path):,} characters, at most {MAX_PATH_CHARS:,})")


def absolute_names(start: Path, path: str) -> list[str]:
    """The names of the absolute path `path` means, `..` and `.` resolved by text alone.

    A relative path starts at `start`. No link is looked at: the walks below
    never follow one, so the text is what the walk will see.
    """
    pure = PurePosixPath(path)
    names = list(pure.parts[1:]) if pure.is_absolute() else [*start.parts[1:], *pure.parts]
    stack: list[str] = []
    for name in names:
        if name == "..":
            if stack:
                stack.pop()
        elif name not in ("", "."):
            stack.append(name)
    return stack


def names_under(base: Path, names: list[str]) -> list[str] | None:
    """The rest of `names` below `base` (an absolute path), or None when they are not under it."""
    prefix = list(base.parts[1:])
    return names[len(prefix) :] if names[: len(prefix)] == prefix else None


def below_one_of(bases: list[Path], start: Path, path: str) -> tuple[Path, list[str]] | None:
    """The deepest of `bases` that holds what `path` means, with the names below it; None if none does.

    The path's text is checked first (`check_path_text`); a relative path
    starts at `start`; `..` is resolved by text (`absolute_names`).
    """
    check_path_text(path)
    names = absolute_names(start, path)
    found = [(base, below) for base in bases if (below := names_under(base, names)) is not None]
    return min(found, key=lambda pair: len(pair[1])) if found else None


def _normalised(base: Path, path: str) -> list[str] | None:
    """The names below `base`, or None when the path leaves it."""
    pure = PurePosixPath(path)
    if not pure.is_absolute() and _climbs(pure.parts):
        return None
    return names_under(base, absolute_names(base, path))


def _climbs(parts: tuple[str, ...]) -> bool:
    """Whether a relative path's `..` ever goes above its start (`a/../../x` does)."""
    depth = 0
    for name in parts:
        depth += -1 if name == ".." else 0 if name == "." else 1
        if depth < 0:
            return True
    return False


#: What a write asks of a quota before it touches anything: `room(replaced, new_entries)`.
Room = Callable[[int, int], None]


def write_below(base: Path, path: str, data: bytes, *, room: Room | None = None) -> Path:
    """Write `data` to the file `path` means below `base`, creating folders; returns its path.

    `room`, when given, is called before any folder is made or byte
    written, with the size of the file being replaced (0 for a new one) and
    the number of new entries the write makes (the missing folders on the
    way, and the file when it is new); it may refuse (a quota).
    """
    names = names_below(base, path)
    _check_write_reach(base, names, path)
    folder = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        walked = 0
        while walked < len(names) - 1:
            inner = _enter(folder, names[walked], path, names[: walked + 1], create=False)
            if inner is None:
                break
            os.close(folder)
            folder, walked = inner, walked + 1
        missing = len(names) - 1 - walked
        replaced = _check_target(folder, names[-1], path) if missing == 0 else None
        if room is not None:
            room(replaced or 0, missing + (replaced is None))
        for depth in range(walked, len(names) - 1):
            inner = _enter(folder, names[depth], path, names[: depth + 1], create=True)
            assert inner is not None  # made when missing
            os.close(folder)
            folder = inner
        _replace(folder, names[-1], data, path)
    finally:
        os.close(folder)
    return base.joinpath(*names)


def _check_write_reach(base: Path, names: list[str], path: str) -> None:
    """Refuse a path deeper than MAX_WRITE_DEPTH names, or longer than MAX_PATH_CHARS counted from `/`.

    The file must stay reachable by its full path: the quota's count and
    the clean-up walk the folder by path, and a file past PATH_MAX would be
    neither counted nor removed.
    """
    if len(names) > MAX_WRITE_DEPTH:
        raise PathRefused(
            f"path {show_path(path)} is {len(names):,} names deep, over the limit of {MAX_WRITE_DEPTH}"
        )
    full = len(str(base)) + sum(len(name) + 1 for name in names)
    if full >= MAX_PATH_CHARS:
        raise PathRefused(
            f"path {show_path(path)} would be {full:,} characters long inside the session temp dir, "
            f"at most {MAX_PATH_CHARS - 1:,}"
        )


def _enter(folder: int, name: str, path: str, walked: list[str], *, create: bool) -> int | None:
    """The folder `name` inside `folder`, never through a link; when missing, made if `create`, else None."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        if not create:
            return None
        _make_folder(folder, name, walked)
    except OSError as exc:
        raise _refusal(folder, name, path, walked, exc) from exc
    try:
        return os.open(name, DIR_FLAGS, dir_fd=folder)
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
    import secrets  # with hashlib: not for a command that writes no file

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


def _check_target(folder: int, name: str, path: str) -> int | None:
    """Refuse a link or a folder already at the target (S14.2's error for links); the size replaced.

    None when nothing is there yet: the write makes a new entry.
    """
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PathRefused(f"cannot write {show_path(path)}: {_why(exc)}") from exc
    if stat.S_ISLNK(info.st_mode):
        raise OutsideBase(f"path {show_path(path)} is outside the session temp dir: it is a symbolic link")
    if stat.S_ISDIR(info.st_mode):
        raise PathRefused(f"path {show_path(path)} names a folder, not a file")
    return info.st_size if stat.S_ISREG(info.st_mode) else 0


def open_below(base: Path, names: list[str], path: str) -> int:
    """A read-only descriptor for `base/names…`, never through a link below `base`.

    `base` itself is the operator's folder and is opened as configured;
    every name below it is opened with `O_NOFOLLOW` (folders on the way with
    `O_DIRECTORY` too), the last one without blocking, so a FIFO cannot
    hang the caller. The caller checks what kind of file it got.
    """
    try:
        folder = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise PathRefused(f"cannot open {show_path(path)}: {_why(exc)}") from exc
    try:
        for depth, name in enumerate(names):
            last = depth == len(names) - 1
            try:
                inner = os.open(name, _LEAF_FLAGS if last else DIR_FLAGS, dir_fd=folder)
            except OSError as exc:
                raise _read_refusal(folder, name, path, names[: depth + 1], exc) from exc
            os.close(folder)
            folder = inner
    except BaseException:
        os.close(folder)
        raise
    return folder


def read_at_most(handle: int, count: int) -> bytes:
    """Up to `count` bytes from an open file, fewer only at its end."""
    chunks: list[bytes] = []
    left = count
    while left > 0:
        chunk = os.read(handle, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_refusal(folder: int, name: str, path: str, walked: list[str], exc: OSError) -> PathRefused:
    """Why a read stopped at `name`: a link (never followed), not a folder, or the OS's word."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        info = None
    shown, where = show_path(path), show_path("/".join(walked))
    place = shown if where == shown else f"{shown}: {where}"
    if info is not None and stat.S_ISLNK(info.st_mode):
        return PathRefused(f"{place} is a symbolic link, and reads never follow links")
    if info is not None and not stat.S_ISDIR(info.st_mode) and exc.errno == errno.ENOTDIR:
        return PathRefused(f"{place} is not a folder")
    missing = NotFound if exc.errno == errno.ENOENT else PathRefused
    return missing(f"cannot open {shown}: {_why(exc)}")


def read_module(folder: Path, name: str, max_bytes: int) -> str | None:
    """The text of the module file `name` (absolute, as the engine resolved the import) below `folder`.

    Scripts are untrusted and a module is read on their word, so `name` is
    held to what the file helpers allow: reduced by text, it must lie under
    `folder`, and it is opened by the race-free walk that never follows a
    link; at most `max_bytes` are read, as UTF-8. None when there is no such
    file; PathRefused, saying why, for the rest. The engine adapters are
    handed this reader (scripting/host.py): they import nothing of services.
    """
    try:
        place = below_one_of([folder], folder, name)
        if place is None or not place[1]:
            raise PathRefused("modules are imported only from the script's own folder and below")
        handle = open_below(folder, place[1], "/".join(place[1]))
    except NotFound:
        return None
    try:
        return _module_text(handle, max_bytes)
    finally:
        os.close(handle)


def _module_text(handle: int, limit: int) -> str:
    info = os.fstat(handle)
    if not stat.S_ISREG(info.st_mode):
        raise PathRefused("not a regular file")
    if info.st_size > limit:
        raise PathRefused(f"module is {info.st_size:,} bytes, more than {limit:,}")
    data = read_at_most(handle, limit + 1)
    if len(data) > limit:
        raise PathRefused(f"module is more than {limit:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PathRefused(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _unlink_quietly(folder: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=folder)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def show_path(path: str) -> str:
    """The path quoted for an error message, shortened when very long."""
    text = repr(path)
    return text if len(text) <= 120 else f"{text[:80]}...{text[-30:]} ({len(path):,} characters)"


__all__ = [
    "DIR_FLAGS",
    "MAX_PATH_CHARS",
    "MAX_WRITE_DEPTH",
    "NotFound",
    "OutsideBase",
    "PathRefused",
    "absolute_names",
    "below_one_of",
    "check_path_text",
    "names_below",
    "names_under",
    "open_below",
    "read_at_most",
    "read_module",
    "show_path",
    "write_below",
]
