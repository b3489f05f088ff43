"""Every script tool and hook YAML under the configured folders, kept fresh.

A file that cannot be loaded becomes a `LoadProblem` with its path and reason
and the others still serve (S2.5). Entries are keyed by the YAML's and the
script's modification stamps, so edits apply on the next use (S1.4).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agentkernel.config import YAML_SUFFIXES, HookSpec, ToolSpec, load_script_spec
from agentkernel.errors import ConfigError, LoadProblem, ScriptError
from agentkernel.scripting.host import ScriptHost

log = logging.getLogger("agentkernel.catalog")

Stamp = tuple[int, int] | None


@dataclass(frozen=True)
class _Entry:
    """One YAML file's outcome, valid while neither it nor its script changes."""

    yaml_stamp: Stamp
    script: Path | None
    script_stamp: Stamp
    spec: ToolSpec | HookSpec | None
    problem: LoadProblem | None


def _stamp(path: Path | None) -> Stamp:
    if path is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)


def _yaml_files(folders: Iterable[Path]) -> list[Path]:
    found: set[Path] = set()
    for folder in folders:
        if folder.is_dir():
            found.update(p.resolve() for p in folder.rglob("*") if p.suffix in YAML_SUFFIXES)
    return sorted(found)


class ScriptCatalog:
    """Loads and reloads `kind: script_tool|script_hook` YAML from folders."""

    def __init__(self, folders: Iterable[Path], host: ScriptHost) -> None:
        self.folders = tuple(folders)
        self.host = host
        self._entries: dict[Path, _Entry] = {}
        self._tools: dict[str, ToolSpec] = {}
        self._hooks: dict[str, HookSpec] = {}
        self._problems: list[LoadProblem] = []
        self._lock = threading.RLock()
        self._scanned = False

    # -- loading -------------------------------------------------------------

    def load_file(self, yaml_path: Path) -> ToolSpec | HookSpec:
        """Load one YAML and check that its script compiles; raises ConfigError."""
        spec = load_script_spec(yaml_path)
        self._check_script(yaml_path, spec)
        return spec

    def _check_script(self, yaml_path: Path, spec: ToolSpec | HookSpec) -> None:
        try:
            self.host.compile(spec.script)
        except ScriptError as exc:
            raise ConfigError(yaml_path, f"script {spec.script.name}: {exc}") from exc

    def _entry(self, path: Path) -> _Entry:
        yaml_stamp = _stamp(path)
        spec: ToolSpec | HookSpec | None = None
        try:
            spec = load_script_spec(path)
            script_stamp = _stamp(spec.script)
            self._check_script(path, spec)
        except ConfigError as exc:
            problem = LoadProblem(path, exc.reason)
            log.warning("not loaded: %s", problem)
            script = spec.script if spec is not None else None
            return _Entry(yaml_stamp, script, _stamp(script), None, problem)
        return _Entry(yaml_stamp, spec.script, script_stamp, spec, None)

    @staticmethod
    def _is_fresh(path: Path, entry: _Entry) -> bool:
        if _stamp(path) != entry.yaml_stamp:
            return False
        return entry.script is None or _stamp(entry.script) == entry.script_stamp

    def refresh(self) -> None:
        """Rescan every folder; reload only the files that changed."""
        with self._lock:
            entries: dict[Path, _Entry] = {}
            for path in _yaml_files(self.folders):
                old = self._entries.get(path)
                entries[path] = old if old is not None and self._is_fresh(path, old) else self._entry(path)
            self._entries = entries
            self._index()
            self._scanned = True

    def _index(self) -> None:
        tools: dict[str, ToolSpec] = {}
        hooks: dict[str, HookSpec] = {}
        problems: list[LoadProblem] = []
        for path, entry in self._entries.items():
            spec = entry.spec
            if spec is None:
                if entry.problem is not None:
                    problems.append(entry.problem)
                continue
            existing = tools.get(spec.name) if isinstance(spec, ToolSpec) else hooks.get(spec.name)
            if existing is not None:
                problems.append(
                    LoadProblem(path, f"name: {spec.name!r} is already defined in {existing.yaml_path}")
                )
            elif isinstance(spec, ToolSpec):
                tools[spec.name] = spec
            else:
                hooks[spec.name] = spec
        self._tools, self._hooks, self._problems = tools, hooks, problems

    def _ensure_scanned(self) -> None:
        if not self._scanned:
            self.refresh()

    # -- reading ---------------------------------------------------------------

    def tool(self, name: str) -> ToolSpec | None:
        """The current spec for `name`: re-stats its files, rescans when needed."""
        self._ensure_scanned()
        spec = self._tools.get(name)
        if spec is not None:
            entry = self._entries.get(spec.yaml_path)
            if entry is not None and self._is_fresh(spec.yaml_path, entry):
                return spec
        self.refresh()
        return self._tools.get(name)

    def tools(self) -> dict[str, ToolSpec]:
        self.refresh()
        return dict(self._tools)

    def hooks(self) -> dict[str, HookSpec]:
        self.refresh()
        return dict(self._hooks)

    def problems(self) -> list[LoadProblem]:
        self.refresh()
        return list(self._problems)


__all__ = ["LoadProblem", "ScriptCatalog"]
