"""kernel.yaml → `KernelConfig`: found like git finds a repository, checked in one pass, every section typed.

Relative paths resolve against `root`, which defaults to the folder above
the one holding kernel.yaml (the project folder for `config/kernel.yaml`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from agentkernel.config.approvals import APPROVALS_SCHEMA, ApprovalSettings, approval_settings
from agentkernel.config.cron import CRON_SCHEMA, CronSettings, cron_settings
from agentkernel.config.limits import LIMITS_SCHEMA, KernelLimits
from agentkernel.config.quotas import QUOTAS_SCHEMA, QuotaSettings, quota_settings
from agentkernel.config.runs import RUNS_SCHEMA, RunSettings, run_settings
from agentkernel.config.schema import Schema, StrictValidator, Where, first_error, yaml_error
from agentkernel.config.sections import (
    SECTIONS,
    DuckSettings,
    FilesSettings,
    HttpConfig,
    LLMConfig,
    ShellSettings,
    StateSettings,
    duck_settings,
    files_settings,
    http_config,
    llm_config,
    shell_settings,
    state_settings,
)
from agentkernel.config.server import SERVER_SCHEMA, ServerSettings, server_settings
from agentkernel.config.store import STORE_SCHEMA, StoreSettings, store_settings
from agentkernel.config.stores import ReadRoot, duck_folder, read_roots_of
from agentkernel.config.telemetry import TELEMETRY_SCHEMA, TelemetrySettings, telemetry_settings
from agentkernel.config.yaml_files import read_yaml_file
from agentkernel.errors import ConfigError

CONFIG_ENV = "AGENTKERNEL_CONFIG"
DEFAULT_CONFIG = Path("config/kernel.yaml")

SCRIPT_WORKERS = 16
"""`scripts.max_workers`: threads running the tool and hook calls of event loops (fair_pool.py)."""
SCRIPT_WORKERS_PER_USER = 4
"""`scripts.max_workers_per_user`: of them, the most one user's calls take at once (as many as
`server.max_running_turns_per_user`, so each of a user's turns can run a tool)."""

_NAMES: Schema = {"type": "array", "items": {"type": "string"}}
_PLACE: Schema = {"type": "string", "minLength": 1}

KERNEL_SCHEMA: Schema = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "root": {"type": "string"},
        "scripts": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "tools": _NAMES,
                "hooks": _NAMES,
                "env_deny": _NAMES,
                "builtins": {"type": "boolean"},
                "max_workers": {"type": "integer", "minimum": 1},
                "max_workers_per_user": {"type": "integer", "minimum": 1},
                "python_workers": {"type": "integer", "minimum": 1, "maximum": 64},
            },
        },
        "limits": LIMITS_SCHEMA,
        "paths": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "temp_root": {"type": "string"},
                "data_dir": {"type": "string"},
                "templates": {"type": "string"},
            },
        },
        "logging": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"messages_db_path": _PLACE, "state_db_path": _PLACE},
        },
        "server": SERVER_SCHEMA,
        "cron": CRON_SCHEMA,
        "approvals": APPROVALS_SCHEMA,
        "telemetry": TELEMETRY_SCHEMA,
        "quotas": QUOTAS_SCHEMA,
        "store": STORE_SCHEMA,
        "runs": RUNS_SCHEMA,
        **SECTIONS,
    },
}
"""All of kernel.yaml: the kernel's own sections here, the helper sections and `llm` in sections.py."""

_KERNEL_VALIDATOR = StrictValidator(KERNEL_SCHEMA)


@dataclass(frozen=True)
class KernelConfig:
    """The kernel's settings (S2.4), one typed value per section; relative paths are already resolved."""

    root: Path
    tool_dirs: tuple[Path, ...]
    hook_dirs: tuple[Path, ...]
    limits: KernelLimits = field(default_factory=KernelLimits)
    temp_root: Path = Path("data/tmp")
    data_dir: Path = Path("data")
    templates_dir: Path = Path("config/templates")
    messages_db: Path = Path("data/messages.db")
    llm: LLMConfig | None = None
    env_deny: tuple[str, ...] = ()
    builtins: bool = True  # the package's built-in tools and hooks load after the project's
    script_workers: int = SCRIPT_WORKERS  # `scripts.max_workers`
    script_workers_per_user: int = SCRIPT_WORKERS_PER_USER  # `scripts.max_workers_per_user`
    python_workers: int = 2  # worker processes python_tool built-ins run in, at most (tools/isolated.py)
    path: Path | None = None
    http: HttpConfig = field(default_factory=HttpConfig)
    shell: ShellSettings = field(default_factory=ShellSettings)
    files: FilesSettings = field(default_factory=FilesSettings)
    state: StateSettings = field(default_factory=StateSettings)
    duckdb: DuckSettings = field(default_factory=DuckSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    cron: CronSettings = field(default_factory=CronSettings)
    approvals: ApprovalSettings = field(default_factory=ApprovalSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    quotas: QuotaSettings = field(default_factory=QuotaSettings)
    store: StoreSettings = field(default_factory=StoreSettings)  # S27.2: PostgreSQL, or the SQLite files
    runs: RunSettings = field(default_factory=RunSettings)  # S27.2: runs here, or on Temporal

    @cached_property
    def duckdb_dir(self) -> Path:
        """The folder of the DuckDB files, under `paths.data_dir` (ConfigError if it holds a store)."""
        return duck_folder(self, Where(self.path))

    @cached_property
    def read_roots(self) -> tuple[ReadRoot, ...]:
        """The folders scripts may read (ConfigError if one holds a store)."""
        return read_roots_of(self, Where(self.path))


def find_kernel_config(explicit: Path | None = None, start: Path | None = None) -> Path:
    """The project's kernel.yaml, found the way git finds its repository.

    `explicit` (`--config`), else $AGENTKERNEL_CONFIG, else the nearest
    `config/kernel.yaml` in `start` (default: the working directory) or any
    folder above it. Commands given a file (`tool run PATH.yaml`, `hook_tool
    PATH.yaml`) start from that file's folder, so they use the file's own
    project wherever they are run from — and never invent a project (and its
    `data/` folder) beside a stray YAML. Nothing found is a ConfigError that
    says where it looked.
    """
    if explicit is not None:
        return _existing_config(explicit, "--config")
    from_env = os.environ.get(CONFIG_ENV)
    if from_env:
        return _existing_config(Path(from_env), f"${CONFIG_ENV}")
    here = Path.cwd().resolve()
    origin = (start or here).resolve()
    for folder in (origin, *origin.parents):
        candidate = folder / DEFAULT_CONFIG
        if candidate.is_file():  # shown as people typed it: relative when under the working directory
            _refuse_foreign_owner(candidate)
            return candidate.relative_to(here) if candidate.is_relative_to(here) else candidate
    raise ConfigError(
        None,
        f"no project found: looked for {DEFAULT_CONFIG} in {origin} and every folder above it; "
        f"run from inside a project, pass --config FILE, or set {CONFIG_ENV}; "
        "to make a project, run `agentkernel init` (here) or `agentkernel init DIR`",
    )


def _refuse_foreign_owner(candidate: Path) -> None:
    """A project found by searching upward must belong to you (or root), as git requires of a repository.

    Otherwise anyone who can write `/tmp/config/kernel.yaml` chooses which
    scripts run when you type `agentkernel tool run …` anywhere under /tmp.
    `--config` and $AGENTKERNEL_CONFIG name a file on purpose and skip this.
    """
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # no owners to compare (Windows)
        return
    owner = candidate.stat().st_uid
    if owner not in (getuid(), 0):
        raise ConfigError(
            candidate,
            f"found by searching upward, but owned by another user (uid {owner}); "
            "use it on purpose with --config or $AGENTKERNEL_CONFIG",
        )


def _existing_config(path: Path, given_by: str) -> Path:
    if not path.is_file():
        raise ConfigError(path, f"kernel config not found (given by {given_by})")
    return path


def load_kernel_config(path: Path | None) -> KernelConfig:
    """Load kernel.yaml, every section checked; with no file, the embedded defaults rooted at the cwd.

    The whole file is checked now — the helper sections too, although each
    service is built only when a script first uses it — so a mistake stops
    the kernel at once, with the file, the line and the field (S2.4).
    """
    if path is None:
        return _kernel_config_from({}, Path.cwd(), None, Where(None))
    data, lines = read_yaml_file(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(path, f"expected a mapping at the top, got {type(data).__name__}")
    error = first_error(_KERNEL_VALIDATOR, data)
    if error is not None:
        raise yaml_error(path, lines, error, KERNEL_SCHEMA, data)
    base = path.resolve().parent.parent
    root = (base / data["root"]).resolve() if "root" in data else base
    where = Where(path, lines)
    config = _kernel_config_from(data, root, path, where)
    low = config.limits.low_ceiling()
    if low is not None:
        raise ConfigError(path, low[1], lines.of("limits", "ceilings", low[0]))
    read_roots_of(config, where)  # no read root may hold a store; the DuckDB folder none either
    return config


def _kernel_config_from(data: Mapping[str, Any], root: Path, path: Path | None, where: Where) -> KernelConfig:
    scripts = data.get("scripts", {})
    paths = data.get("paths", {})
    logging = data.get("logging", {})
    state = state_settings(data.get("state", {}), where)
    state_file = _state_db_path(data, root, where)
    return KernelConfig(
        root=root,
        tool_dirs=tuple(root / d for d in scripts.get("tools", ["config/scripts/tools"])),
        hook_dirs=tuple(root / d for d in scripts.get("hooks", ["config/scripts/hooks"])),
        limits=KernelLimits.from_section(data.get("limits", {})),
        temp_root=root / paths.get("temp_root", "data/tmp"),
        data_dir=root / paths.get("data_dir", "data"),
        templates_dir=root / paths.get("templates", "config/templates"),
        messages_db=root / logging.get("messages_db_path", "data/messages.db"),
        llm=llm_config(data["llm"], where) if "llm" in data else None,
        env_deny=tuple(scripts.get("env_deny", [])),
        builtins=scripts.get("builtins", True),
        script_workers=scripts.get("max_workers", SCRIPT_WORKERS),
        script_workers_per_user=scripts.get("max_workers_per_user", SCRIPT_WORKERS_PER_USER),
        python_workers=scripts.get("python_workers", 2),
        path=path,
        http=http_config(data.get("http", {}), where),
        shell=shell_settings(data.get("shell", {}), where),
        files=files_settings(data.get("files", {}), where),
        state=replace(state, db_path=state_file),
        duckdb=duck_settings(data.get("duckdb", {}), where),
        server=server_settings(data.get("server", {}), where),
        cron=cron_settings(data.get("cron", {}), root, where),
        approvals=approval_settings(data.get("approvals", {}), where),
        telemetry=telemetry_settings(data.get("telemetry"), where),
        quotas=quota_settings(data.get("quotas", {}), where),
        store=store_settings(data.get("store"), where),
        runs=run_settings(data.get("runs"), where),
    )


def _state_db_path(data: Mapping[str, Any], root: Path, where: Where) -> Path | None:
    """The state store's file: `state.db_path`, or the manual's `logging.state_db_path`; not both.

    Two places for one setting is how two files come to exist, so naming
    both is an error. Relative paths resolve against the kernel's root.
    """
    given = {
        "state.db_path": data.get("state", {}).get("db_path"),
        "logging.state_db_path": data.get("logging", {}).get("state_db_path"),
    }
    named = {field: value for field, value in given.items() if value is not None}
    if len(named) > 1:
        shown = " and ".join(f"{field} ({value!r})" for field, value in named.items())
        raise ConfigError(where.path, f"{shown} both name the state store's file; keep one of them")
    if not named:
        return None
    ((field, value),) = named.items()
    text = str(value)  # the schema let only strings through
    if not text.strip():
        raise where.error(tuple(field.split(".")), f"expected a non-empty string, got {value!r}")
    return root / text


__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG",
    "KERNEL_SCHEMA",
    "KernelConfig",
    "find_kernel_config",
    "load_kernel_config",
]
