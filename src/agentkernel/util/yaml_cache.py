"""Parsed YAML texts on disk, so a command whose YAML files did not change needs no PyYAML.

Every command reads kernel.yaml and each tool's YAML; parsing them (and
importing PyYAML to do it) is a large part of `agentkernel tool run`'s
start-up. An entry is keyed by the whole text of a file, not by its stamp:
it holds that text and is used only when the text read now is equal, so an
edited file is parsed anew whatever its time and size say. It also holds
what made it — this Python and environment (`sys.prefix`), and the stamps
of PyYAML's module and of yaml_parse.py — and is used only when they are
unchanged.

Only what reads back the same is kept: a value that is a tree of JSON's
types alone (no date, set or bytes; no list or map an alias shares), which
`marshal` writes and reads back as it was. The
folder, `$XDG_CACHE_HOME/agentkernel/yaml` (else `~/.cache/…`), is the
user's own (0700) and is not used when anyone else may write it. Every
failure (no home, a read-only disk, a foreign or truncated file) is a miss
or a skipped write: the cache can only save time, never change what a file
says. At most `MAX_ENTRIES` are kept; the oldest go first. The folder may
be deleted at any time.
"""

from __future__ import annotations

import marshal
import os
import sys
import threading
import zlib
from pathlib import Path
from typing import Any

from agentkernel.util.cache_folder import cache_folder

FORMAT = 1  # bump when what an entry holds changes
MAX_ENTRIES = 512
MAX_TEXT_CHARS = 256 * 1024  # a larger file is parsed each time (it is not a config file)
_PARSER = Path(__file__).with_name("yaml_parse.py")

Stamp = tuple[int, int] | None


def folder() -> Path | None:
    """The cache folder, made owner-only if missing; None when there is no usable one."""
    path = cache_folder("yaml")
    return None if path is None else Path(path)


def _stamp(path: str) -> Stamp:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)


def _entry_name(text: str) -> str:
    data = text.encode("utf-8", "surrogatepass")
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}-{len(data)}"


def _cacheable(text: str) -> bool:
    return len(text) <= MAX_TEXT_CHARS


def lookup(text: str) -> tuple[object, dict[tuple[str | int, ...], int]] | None:
    """The value and key lines of `text` as parsed before, or None (parse it)."""
    where = folder() if _cacheable(text) else None
    if where is None:
        return None
    try:
        entry = marshal.loads((where / _entry_name(text)).read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return _unpacked(entry, text)


def _unpacked(entry: Any, text: str) -> tuple[object, dict[tuple[str | int, ...], int]] | None:
    """An entry's value and lines when it is well formed, of `text`, and made as now."""
    if type(entry) is not tuple or len(entry) != 9 or entry[:4] != (FORMAT, sys.hexversion, sys.prefix, text):
        return None
    yaml_file, yaml_stamp, parser_stamp, value, lines = entry[4:]
    if type(yaml_file) is not str or _stamp(yaml_file) != yaml_stamp or _stamp(str(_PARSER)) != parser_stamp:
        return None
    return (value, lines) if type(lines) is dict else None


def store(text: str, value: object, lines: dict[tuple[str | int, ...], int]) -> None:
    """Keep what PyYAML made of `text` (yaml_parse.py just parsed it), when it reads back the same."""
    where = folder() if _cacheable(text) else None
    yaml = sys.modules.get("yaml")
    yaml_file = getattr(yaml, "__file__", None)
    if where is None or yaml_file is None:
        return
    entry = (FORMAT, sys.hexversion, sys.prefix, text, yaml_file, _stamp(yaml_file), _stamp(str(_PARSER)))
    if not _plain(value):
        return
    record: tuple[Any, ...] = (*entry, value, lines)
    try:
        data = marshal.dumps(record)
    except ValueError:  # nested deeper than marshal goes: parsed each time
        return
    _write(where, _entry_name(text), data)


_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})


def _plain(value: object) -> bool:
    """Whether `value` is a tree of JSON's types alone, exactly: no date, set or bytes, and no
    list or map found twice (an alias's), which would read back as two."""
    seen: set[int] = set()
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind not in _PLAIN:
            return False
        if isinstance(item, dict | list):
            if id(item) in seen:
                return False
            seen.add(id(item))
            pending.extend(item)
            if isinstance(item, dict):
                pending.extend(item.values())
    return True


def _write(where: Path, name: str, data: bytes) -> None:
    """Write the entry whole (a reader sees the old file or the new), then keep at most MAX_ENTRIES."""
    part = where / f".{name}.{os.getpid()}.{threading.get_ident()}.part"  # this thread's alone
    try:
        part.write_bytes(data)
        os.replace(part, where / name)
        _trim(where)
    except OSError:
        part.unlink(missing_ok=True)


def _trim(where: Path) -> None:
    """Remove the oldest entries once there are more than MAX_ENTRIES."""
    entries = [e for e in os.scandir(where) if not e.name.startswith(".")]
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda e: e.stat().st_mtime_ns)
    for gone in entries[: len(entries) - MAX_ENTRIES * 3 // 4]:
        Path(gone.path).unlink(missing_ok=True)


__all__ = ["FORMAT", "MAX_ENTRIES", "folder", "lookup", "store"]
