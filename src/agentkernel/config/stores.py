"""Where kernel.yaml puts what scripts may not touch, and the checks that keep it so.

The DuckDB folder may not hold what scripts write (the scratch folders,
the transcript); no read root of the files service may hold (or lie in) a
store. Both depend on several sections at once (`paths`, `logging`,
`state`, `duckdb`, `files`), so they are checked on the whole config.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agentkernel.config.cron import CronSettings
from agentkernel.config.schema import Where
from agentkernel.config.sections import DuckSettings, FilesSettings, StateSettings

SHARED_FOLDER = "shared"  # under paths.data_dir: the default read root for data every user may read
RHAI_CACHE_FOLDER = Path("cache", "rhai")  # under paths.data_dir: compiled Rhai scripts, kept across restarts
TOOL_RESULTS_FILE = "tool_results.db"  # beside the message store: what `get_tool_result` reads (S16.4)


class Placed(Protocol):
    """The settings these checks read, as kernel_yaml.KernelConfig holds them (this module sits below it)."""

    @property
    def root(self) -> Path: ...
    @property
    def tool_dirs(self) -> tuple[Path, ...]: ...
    @property
    def hook_dirs(self) -> tuple[Path, ...]: ...
    @property
    def temp_root(self) -> Path: ...
    @property
    def data_dir(self) -> Path: ...
    @property
    def messages_db(self) -> Path: ...
    @property
    def files(self) -> FilesSettings: ...
    @property
    def state(self) -> StateSettings: ...
    @property
    def duckdb(self) -> DuckSettings: ...
    @property
    def cron(self) -> CronSettings: ...


def rhai_cache_folder(config: Placed) -> Path | None:
    """Where compiled Rhai scripts outlive a restart (rhai/compile_cache.py): under
    `paths.data_dir`; None (no cache) when that lies in `paths.temp_root`, which scripts write."""
    folder = config.data_dir / RHAI_CACHE_FOLDER
    return None if folder.resolve().is_relative_to(config.temp_root.resolve()) else folder


def duck_folder(config: Placed, where: Where) -> Path:
    """The folder of the databases, under `paths.data_dir`; never one that holds what scripts write."""
    root = (config.data_dir / config.duckdb.dir).resolve()
    for name, path in (("paths.temp_root", config.temp_root), ("messages_db_path", config.messages_db)):
        if path.resolve().is_relative_to(root):
            reason = f"{root} holds {name} ({path}), which scripts can write; keep them apart"
            raise where.error(("duckdb", "dir"), reason)
    return root


@dataclass(frozen=True)
class ReadRoot:
    """A folder scripts may read: its absolute path (by text, links kept) and how errors show it."""

    path: Path
    shown: str


def read_roots_of(config: Placed, where: Where) -> tuple[ReadRoot, ...]:
    """The read roots kernel.yaml asks for, refusing one that holds (or lies in) a kernel store.

    Relative roots start at the project folder. A root is kept as written
    (a link the operator made stays a way in); the check against the stores
    compares real paths, so a link cannot hide a store inside a root.
    """
    if config.files.read_roots is None:
        folders = [*config.tool_dirs, *config.hook_dirs, config.data_dir / SHARED_FOLDER]
        given = [(folder, project_path(config, folder)) for folder in folders]
        field = "read_roots (by default the scripts folders and paths.data_dir/shared)"
    else:
        given = [(config.root / root, root) for root in config.files.read_roots]
        field = "read_roots"
    roots = tuple(ReadRoot(Path(os.path.normpath(path)), shown) for path, shown in given)
    stores = _stores(config, where)
    for root in roots:
        _check_holds_no_store(config, where, field, root, stores)
    return roots


def _stores(config: Placed, where: Where) -> list[tuple[str, str, Path]]:
    """What no script may read, the setting that places it, and where it is."""
    stores = [
        ("every session's scratch folder", "paths.temp_root", config.temp_root),
        ("the DuckDB folder", "duckdb.dir", duck_folder(config, where)),
        ("the transcript", "logging.messages_db_path", config.messages_db),
        ("the cron store", "cron.db_path", config.cron.db_path),
        ("the Rhai compile cache", "paths.data_dir", config.data_dir / RHAI_CACHE_FOLDER),
    ]
    if config.state.db_path is not None:
        stores.append(("the state store", "state.db_path", config.state.db_path))
    return stores


def _check_holds_no_store(
    config: Placed, where: Where, field: str, root: ReadRoot, stores: list[tuple[str, str, Path]]
) -> None:
    real = root.path.resolve()
    for what, setting, store in stores:
        place = store.resolve()
        if place.is_relative_to(real) or real.is_relative_to(place):
            relation = "holds" if place.is_relative_to(real) else "lies inside"
            raise where.error(
                ("files", field),
                f"{root.shown!r} {relation} {what} ({setting}: {project_path(config, store)}), "
                "which scripts may not read; keep the stores outside every read root",
            )


def project_path(config: Placed, path: Path) -> str:
    """`path` as the project's people write it: relative to the root when under it."""
    return str(path.relative_to(config.root)) if path.is_relative_to(config.root) else str(path)


__all__ = [
    "RHAI_CACHE_FOLDER",
    "SHARED_FOLDER",
    "TOOL_RESULTS_FILE",
    "ReadRoot",
    "duck_folder",
    "project_path",
    "read_roots_of",
    "rhai_cache_folder",
]
