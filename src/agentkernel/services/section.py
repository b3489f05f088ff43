"""Reading one top-level section of kernel.yaml (`shell:`, `files:`, …) into checked values.

The kernel schema accepts these sections as any mapping and leaves their
fields to the module that owns them; this is the small, shared way to read
them, so every bad value fails the same way: a ConfigError naming the file
and `section.field`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from agentkernel.config import KernelConfig
from agentkernel.errors import ConfigError


class Section:
    """The `name:` mapping of a kernel.yaml, checked against the fields its owner knows."""

    def __init__(self, config: KernelConfig, name: str, fields: Iterable[str]) -> None:
        self.name = name
        self.path: Path | None = config.path
        raw = config.raw.get(name, {})
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigError(self.path, f"{name}: expected a mapping, got {type(raw).__name__}")
        known = tuple(fields)
        for key in raw:
            if key not in known:
                raise self.fail(str(key), f"unknown field (known: {', '.join(known)})")
        self.values: Mapping[str, object] = raw

    def fail(self, field: str, reason: str) -> ConfigError:
        return ConfigError(self.path, f"{self.name}.{field}: {reason}")

    def boolean(self, field: str, default: bool) -> bool:
        value = self.values.get(field, default)
        if not isinstance(value, bool):
            raise self.fail(field, f"expected true or false, got {value!r}")
        return value

    def integer(self, field: str, default: int, minimum: int) -> int:
        value = self.values.get(field, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(field, f"expected an integer >= {minimum}, got {value!r}")
        return value

    def names(self, field: str) -> tuple[str, ...]:
        """A list of non-empty strings (names, globs); none when the field is absent."""
        value = self.values.get(field, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise self.fail(field, f"expected a list of names, got {value!r}")
        return tuple(value)

    def seconds(self, field: str, default: float) -> float:
        return self.positive(field, default, "seconds")

    def positive(self, field: str, default: float, unit: str) -> float:
        """A finite number above 0 (`unit` names what it counts, for the error)."""
        value = self.values.get(field, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise self.fail(field, f"expected a number of {unit} > 0, got {value!r}")
        return float(value)

    def strings(self, field: str) -> tuple[str, ...] | None:
        """A list of non-empty strings, or None when the field is not given."""
        value = self.values.get(field)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self.fail(field, f"expected a list of non-empty strings, got {value!r}")
        return tuple(value)


__all__ = ["Section"]
