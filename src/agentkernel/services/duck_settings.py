"""kernel.yaml's `duckdb:` section → `DuckSettings`, checked without importing DuckDB.

The kernel checks every section when it starts, so a typo is refused at
once; DuckDB itself (a tenth of a second to import) is loaded only when a
script first opens a database (issue 8).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkernel.config import KernelConfig
from agentkernel.errors import ConfigError

SECTION = "duckdb"
MAX_TIMEOUT_SECS = 86_400.0  # a day; also keeps timers and lock waits within what threading accepts


@dataclass(frozen=True)
class DuckSettings:
    """The `duckdb:` section of kernel.yaml."""

    dir: str = "duckdb"  # under paths.data_dir
    max_rows: int = 10_000  # the cap on db_query's limit
    max_result_bytes: int = 10_000_000  # the rows of one db_query as JSON text
    max_open_files: int = 64
    query_timeout_secs: float = 30.0
    memory_limit_mb: int = 256  # per open database
    threads: int = 2  # per open database
    max_file_bytes: int = 1 << 30  # what one database file may hold (services/duck_quota.py)


_INTEGER_FIELDS = (
    "max_rows",
    "max_result_bytes",
    "max_open_files",
    "memory_limit_mb",
    "threads",
    "max_file_bytes",
)


def parse_settings(section: object, where: Path | None) -> DuckSettings:
    """Validate the `duckdb:` mapping; every error names `duckdb.<field>`."""
    if section is None:
        return DuckSettings()
    if not isinstance(section, Mapping):
        raise ConfigError(where, f"{SECTION}: expected a mapping, got {type(section).__name__}")
    known = DuckSettings.__dataclass_fields__
    values: dict[str, Any] = {}
    for key, value in section.items():
        field = f"{SECTION}.{key}"
        if key not in known:
            raise ConfigError(where, f"{field}: unknown field (known: {', '.join(known)})")
        if key == "dir":
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(where, f"{field}: expected a non-empty folder name, got {value!r}")
        elif key in _INTEGER_FIELDS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(where, f"{field}: expected an integer of at least 1, got {value!r}")
        elif not _positive_seconds(value):
            raise ConfigError(
                where, f"{field}: expected seconds, more than 0 and at most a day, got {value!r}"
            )
        values[key] = value
    return DuckSettings(**values)


def _positive_seconds(value: object) -> bool:
    """More than 0 and at most a day (NaN and infinity are neither)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return 0 < value <= MAX_TIMEOUT_SECS


def duck_root(config: KernelConfig, settings: DuckSettings) -> Path:
    """The folder of the databases, under `paths.data_dir`; never one that holds what scripts write."""
    root = (config.data_dir / settings.dir).resolve()
    for name, path in (("paths.temp_root", config.temp_root), ("messages_db_path", config.messages_db)):
        if path.resolve().is_relative_to(root):
            reason = f"{root} holds {name} ({path}), which scripts can write; keep them apart"
            raise ConfigError(config.path, f"{SECTION}.dir: {reason}")
    return root


__all__ = ["MAX_TIMEOUT_SECS", "SECTION", "DuckSettings", "duck_root", "parse_settings"]
