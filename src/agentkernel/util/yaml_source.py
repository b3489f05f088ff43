"""Reading a YAML file together with the line of every key in it.

Errors about a YAML file should read like a compiler's, `file:line: field:
what is wrong`, so a file's value comes with the line of each key path
(`YamlLines`). PyYAML parses it (yaml_parse.py, which also refuses a key
given twice and aliases that expand without end) unless the parse cache
(yaml_cache.py) holds the same text already.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agentkernel.errors import ConfigError
from agentkernel.util import yaml_cache
from agentkernel.util.key_paths import KeyPath, dotted, undotted


@dataclass(frozen=True)
class YamlLines:
    """The 1-based line of each key and sequence item of a document, by key path."""

    by_path: Mapping[KeyPath, int] = field(default_factory=dict)

    def of(self, *path: str | int) -> int | None:
        """The line of `path`, else of its nearest known ancestor; None at the top."""
        key: KeyPath = tuple(path)
        while key:
            line = self.by_path.get(key)
            if line is not None:
                return line
            key = key[:-1]
        return None

    def of_reason(self, reason: str) -> int | None:
        """The line of the field a `field.path: what is wrong` text starts with."""
        field_path, colon, _ = reason.partition(": ")
        return self.of(*undotted(field_path)) if colon and " " not in field_path else None


NO_LINES = YamlLines()


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from exc


def load_yaml(path: Path) -> tuple[object, YamlLines]:
    """Parse one YAML file into its value and its key lines; every failure is a ConfigError.

    A text parsed before (by any process of this user) is taken from the parse
    cache, keyed by the whole text (yaml_cache.py); else PyYAML parses it.
    """
    text = _read_text(path)
    cached = yaml_cache.lookup(text)
    if cached is not None:
        value, lines = cached
        return value, YamlLines(lines)
    from agentkernel.util.yaml_parse import parse_yaml

    value, lines = parse_yaml(path, text)
    yaml_cache.store(text, value, lines)
    return value, YamlLines(lines)


__all__ = ["NO_LINES", "KeyPath", "YamlLines", "dotted", "load_yaml", "undotted"]
