"""The one reader of the kernel's YAML files: each file is parsed once per change.

kernel.yaml, the tool and hook YAML, the templates and the scripted LLM's
rules files are read here and nowhere else. A file's stamp (file_stamps.py:
a `stat`, never a read) says whether its last parse stands, so the catalog,
the templates, the tool registry and the CLI asking about one file cost one
parse between them; a file that does not parse keeps its error the same way.

A file changed within the last `RECENT_SECS` is parsed again on each read
until it is older: a second save within one tick of the file system's clock
(two seconds on FAT) can leave the stamp as it was, which is what git calls
a "racily clean" file. The value read is shared by every reader until the
file changes, so no reader may change it (`json_safe_yaml` makes the copy a
script receives).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from agentkernel.errors import ConfigError
from agentkernel.util.file_stamps import Stamp, stamp_of
from agentkernel.util.yaml_source import NO_LINES, YamlLines, load_yaml

RECENT_SECS = 2.0
MAX_KEPT_BYTES = 8 << 20  # the source bytes of the files kept parsed; the least recently read go first
_ENTRY_BYTES = 1024  # what an entry costs besides its file's bytes, as that count sees it


@dataclass(frozen=True)
class _Parsed:
    """One parse of one file: its value and lines, or the reason (and line) it did not parse."""

    stamp: Stamp
    read_at_ns: int  # the wall clock just before the file was read
    value: object
    lines: YamlLines
    failure: tuple[str, int | None] | None
    parses: int  # of this file, this one included, while it stayed kept

    @property
    def size(self) -> int:
        return (self.stamp[1] if self.stamp is not None else 0) + _ENTRY_BYTES

    def stands(self, stamp: Stamp) -> bool:
        """Whether this parse still says what the file holds: same stamp, and not changed near the read."""
        if self.stamp is None or stamp != self.stamp:
            return False
        return self.stamp[0] < self.read_at_ns - int(RECENT_SECS * 1e9)

    def result(self, path: Path) -> tuple[object, YamlLines]:
        if self.failure is not None:
            raise ConfigError(path, *self.failure)
        return self.value, self.lines


class YamlFiles:
    """Parsed YAML files by absolute path, each kept until its stamp changes (or room runs out)."""

    def __init__(self, max_kept_bytes: int = MAX_KEPT_BYTES) -> None:
        self.max_kept_bytes = max_kept_bytes
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, _Parsed] = OrderedDict()
        self._kept_bytes = 0

    def read(self, path: Path) -> tuple[object, YamlLines]:
        """The file's value and key lines; ConfigError naming the file (and line) when it does not parse."""
        key = os.path.abspath(path)
        stamp = stamp_of(path)
        with self._lock:
            known = self._kept.get(key)
            if known is not None and known.stands(stamp):
                self._kept.move_to_end(key)
                return known.result(path)
        parsed = _parse(path, stamp, known.parses + 1 if known is not None else 1)
        self._keep(key, parsed)
        return parsed.result(path)

    def parses(self, path: Path) -> int:
        """How many times `path` was parsed while kept (0 when it is not): the tests' count."""
        with self._lock:
            known = self._kept.get(os.path.abspath(path))
            return known.parses if known is not None else 0

    def _keep(self, key: str, parsed: _Parsed) -> None:
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._kept_bytes -= old.size
            if parsed.stamp is None or parsed.size > self.max_kept_bytes:
                return
            self._kept[key] = parsed
            self._kept_bytes += parsed.size
            while self._kept_bytes > self.max_kept_bytes:
                _, gone = self._kept.popitem(last=False)
                self._kept_bytes -= gone.size


def _parse(path: Path, stamp: Stamp, parses: int) -> _Parsed:
    read_at = time.time_ns()
    try:
        value, lines = load_yaml(path)
    except ConfigError as exc:
        return _Parsed(stamp, read_at, None, NO_LINES, (exc.reason, exc.line), parses)
    return _Parsed(stamp, read_at, value, lines, None, parses)


YAML_FILES = YamlFiles()
"""The process's one reader: every YAML file of the kernel is read through it."""


def read_yaml_file(path: Path) -> tuple[object, YamlLines]:
    """Parse one YAML file (once per change) into its value and key lines; every failure is a ConfigError."""
    return YAML_FILES.read(path)


def read_yaml(path: Path) -> object:
    """The value of one YAML file (parsed once per change); ConfigError naming it (and its line)."""
    return YAML_FILES.read(path)[0]


__all__ = ["MAX_KEPT_BYTES", "RECENT_SECS", "YAML_FILES", "YamlFiles", "read_yaml", "read_yaml_file"]
