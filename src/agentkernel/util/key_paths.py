"""Key paths into a parsed YAML document (`a.b[0].c`), as error texts name a value.

Apart from yaml_source.py (which reads files) so that yaml_parse.py, which it imports on a cache
miss, can name them without importing it back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

KeyPath = tuple[str | int, ...]


def dotted(path: Iterable[str | int]) -> str:
    """`a.b[0].c`: a key path as the error texts show it."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def undotted(text: str) -> KeyPath:
    """The key path `dotted` wrote: `a.b[0].c` → ("a", "b", 0, "c")."""
    return tuple(int(index) if index else key for key, index in _STEP.findall(text))


__all__ = ["KeyPath", "dotted", "undotted"]
