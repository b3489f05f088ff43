"""Every helper section of kernel.yaml checked when a kernel starts, before any service is built.

Services are built on first use (a `tool run` pays only for what its script
calls), but a mistake in `http:`, `shell:`, `files:`, `duckdb:` or `state:`
must still be refused when the kernel starts and by `agentkernel check`, not
when a script first happens to need that service. The parsers used here are
the services' own and import neither httpx nor DuckDB.
"""

from __future__ import annotations

from agentkernel.config import KernelConfig
from agentkernel.services.duck_settings import duck_root, parse_settings
from agentkernel.services.files import FilesSettings, read_roots
from agentkernel.services.http_config import parse_http_config
from agentkernel.services.shell import ShellSettings
from agentkernel.services.state import from_config as state_from_config


def check_sections(config: KernelConfig) -> None:
    """Raise ConfigError (file, line, `section.field`) for the first bad helper section."""
    parse_http_config(config.raw.get("http"), str(config.path) if config.path is not None else None)
    ShellSettings.from_config(config)
    read_roots(config, FilesSettings.from_config(config))  # no read root may hold a store
    duck_root(config, parse_settings(config.raw.get("duckdb"), config.path))
    state_from_config(config)  # a store object only: its file appears on the first operation


__all__ = ["check_sections"]
