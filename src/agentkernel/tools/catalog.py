"""Every script tool and hook YAML under the configured folders, kept fresh.

A file that cannot be loaded becomes a `LoadProblem` with its path, line and
reason, and the others still serve (S2.5). Two files claiming one name are
both refused, each problem naming the other file. Entries are keyed by the
YAML's and the script's modification stamps, so edits apply on the next use
(S1.4); a watch of the folders (util/folder_watch.py) tells when none can have
changed, and then neither a listing nor a tool's lookup asks the file system.

The package's built-in tools and hooks (agentkernel/builtins) are scanned
after the project's folders, as files of origin "builtin". A project file
that claims a built-in's name is refused with a problem naming both, and
the built-in is not served either (a name silently meaning another tool
mid-chat is what the clash rule prevents), unless the project file says
`overrides: builtin`: then it alone is served. `overrides: builtin` with no
built-in of that name is refused too, as the typo or stale intent it is.

Loading has three stages. A scan reads each changed YAML only for the kind
and name it claims (config/scripts.py `spec_claim`: every name must be known
to find clashes, and a file's own parse is kept, yaml_files.py); a file is
checked whole (its fields, its script's path) when a name it claims is asked
for; a script is compiled, and a hook's functions (a tool's `run`) looked up,
only when that file is asked for. So `tool(name)` loads the files that claim
`name` and compiles one script, while listing tools, hooks or problems loads
and compiles all of them. A file that claims a name but does not load claims
nothing: the claims are settled, name by name, among the files that load, as
if every file had been loaded (a file whose script does not compile is never
offered, in either case).

The catalog's lock guards only its tables (the scan); scripts are compiled
outside it, so a slow compile never holds up another thread's
lookup. Two threads may check one file at once: they reach the same
verdict. A check's compile ends at the tool's (or hook's) own
`timeout_secs`; a script cut short that way is a problem for now, and is
tried again at the next lookup.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from agentkernel.config import (
    YAML_SUFFIXES,
    HookSpec,
    KernelLimits,
    ToolSpec,
    load_script_spec,
    read_yaml_file,
)
from agentkernel.config.scripts import spec_claim
from agentkernel.errors import ConfigError, LoadProblem, ScriptError, ScriptLimitError, name_clash
from agentkernel.scripting.host import ScriptHost
from agentkernel.tools.hook_functions import check_hook_functions
from agentkernel.tools.python_tools import python_function
from agentkernel.tools.tool_function import check_tool_function
from agentkernel.util.file_stamps import Stamp, stamp_of
from agentkernel.util.folder_walk import entries_below
from agentkernel.util.folder_watch import RESCAN_SECS, FolderWatch
from agentkernel.util.lazy_log import LazyLogger

log = LazyLogger("agentkernel.tools.catalog")

Kind = Literal["tool", "hook"]
Claim = tuple[str, str]  # (kind, name): config/scripts.py `spec_claim`
SpecT = TypeVar("SpecT", ToolSpec, HookSpec)


@dataclass
class _Entry:
    """One YAML file's outcome, valid while neither it nor its script changes.

    `claim` is what the file claims if it loads (`spec_claim`), known from its
    scan; the rest once it is `loaded`: its spec, or its `problem`, which is
    the YAML's own, or the script's once `checked` (compiled, and for a hook
    its functions found).
    """

    yaml_stamp: Stamp
    claim: Claim | None
    loaded: bool = False
    script_stamp: Stamp = None
    spec: ToolSpec | HookSpec | None = None
    problem: LoadProblem | None = None
    checked: bool = False


@dataclass
class _Walk:
    """What a scan of the folders found: the YAML files, and every folder whose change could change
    what a scan finds (each folder walked, and the real folder of each linked file)."""

    files: list[Path]
    folders: set[Path]
    complete: bool  # False: a configured folder is missing or linked, which a watch cannot follow


def _yaml_files(folders: Iterable[Path]) -> _Walk:
    found: set[Path] = set()
    walk = _Walk([], set(), True)
    for folder in folders:
        if not folder.is_dir():
            walk.complete = False  # made later: noticed by the scans the watch then cannot skip
            continue
        resolved = folder.resolve()
        walk.complete = walk.complete and resolved == folder.absolute()
        walk.folders.add(resolved)
        found.update(_yaml_files_in(resolved, walk.folders))
    walk.files = sorted(found)
    return walk


def _yaml_files_in(folder: Path, walked: set[Path]) -> Iterator[Path]:
    """The YAML files below `folder` (resolved), as their real paths; linked folders are not entered.

    Every listing scans the folders (hot reload), so a path is resolved
    only when it is a link (resolving each cost an `lstat` per component).
    Each folder walked, and the real folder of a linked file, is added to `walked`.
    """
    for entry in entries_below(folder):
        if entry.is_dir(follow_symlinks=False):
            walked.add(Path(entry.path))
        elif os.path.splitext(entry.name)[1] in YAML_SUFFIXES and not entry.is_dir():
            if entry.is_symlink():
                real = Path(entry.path).resolve()
                walked.add(real.parent)
                yield real
            else:
                yield Path(entry.path)


def _kind(spec: ToolSpec | HookSpec) -> Kind:
    return "tool" if isinstance(spec, ToolSpec) else "hook"


class ScriptCatalog:
    """Loads and reloads `kind: script_tool|script_hook` YAML from folders.

    `limits` are the kernel's: a YAML asking for more than their ceilings
    does not load (`limits.ceilings`), and they bound the one run of a
    JavaScript hook's top level that finding its functions takes (see
    hook_functions.py).
    """

    def __init__(
        self,
        folders: Iterable[Path],
        host: ScriptHost,
        limits: KernelLimits | None = None,
        builtin_folders: Iterable[Path] = (),
    ) -> None:
        self.folders = tuple(folders)
        self.builtin_folders = tuple(f.resolve() for f in builtin_folders)
        self.host = host
        self.limits = limits if limits is not None else KernelLimits()
        self._entries: dict[Path, _Entry] = {}
        self._candidates: dict[Claim, list[Path]] = {}  # the files that claim each name if they load
        self._claims: dict[Claim, list[Path]] = {}  # who serves a name, settled since the last scan
        self._clashes: dict[Claim, list[LoadProblem]] = {}  # the files refused over each name settled
        self._clashes_before: dict[Claim, list[LoadProblem]] = {}  # as last settled: each is logged once
        self._lock = threading.RLock()
        self._watch = FolderWatch()
        self._watched: set[Path] = set()  # the folders watched since the last scan
        self._scanned_at = -RESCAN_SECS  # time.monotonic() of the last scan the watch vouches for
        self._looked_at = -RESCAN_SECS  # time.monotonic() of the last scan made, vouched for or not
        self._entries_seen = False  # a scan has been made (the next one sets the watch up)

    # -- loading -------------------------------------------------------------

    def load_file(self, yaml_path: Path) -> ToolSpec | HookSpec:
        """Load one YAML and check its script (compiles; a hook's functions exist); raises ConfigError."""
        spec = load_script_spec(yaml_path, self.limits, origin=self.origin_of(yaml_path))
        self._check_script(yaml_path, spec)
        return spec

    def origin_of(self, yaml_path: Path) -> str:
        """ "builtin" for a file in the package's built-in folders, else "project"."""
        resolved = yaml_path.resolve()
        return "builtin" if any(resolved.is_relative_to(f) for f in self.builtin_folders) else "project"

    def _check_script(self, yaml_path: Path, spec: ToolSpec | HookSpec) -> None:
        if isinstance(spec, ToolSpec) and spec.function is not None:
            try:
                python_function(spec)
            except ScriptError as exc:
                raise ConfigError(yaml_path, str(exc), spec.lines.of("function")) from exc
            return
        try:
            # the engine first: importing it (~0.1-0.5 s, once a process) is not the script's compile, and
            # a tool of `timeout_secs: 0.5` first checked on a busy machine failed to load for it
            self.host.engine_for(spec.script)
            deadline = time.monotonic() + spec.script_limits(self.limits).timeout_secs
            self.host.compile(spec.script, deadline)
        except ScriptError as exc:
            reason = f"script {spec.script.name}: {exc}"
            raise ConfigError(yaml_path, reason, spec.lines.of("script")) from exc
        if isinstance(spec, HookSpec):
            check_hook_functions(self.host, spec, self.limits)
        else:
            check_tool_function(self.host, spec, self.limits)

    def _peek(self, path: Path) -> _Entry:
        """The entry of a new or changed file: what it claims, read off its YAML; a file whose YAML
        does not parse is loaded at once (its problem)."""
        yaml_stamp = stamp_of(path)
        try:
            value, _ = read_yaml_file(path)
        except ConfigError:
            return self._load(path, _Entry(yaml_stamp, None))
        return _Entry(yaml_stamp, spec_claim(value))

    def _load(self, path: Path, entry: _Entry) -> _Entry:
        """`entry` (of `path`) loaded if it was not yet: its spec, or its problem; under the lock."""
        if entry.loaded:
            return entry
        entry.loaded = True
        try:
            spec = load_script_spec(path, self.limits, origin=self.origin_of(path))
        except ConfigError as exc:
            entry.problem = LoadProblem.from_error(path, exc)
            log.warning("not loaded: %s", entry.problem)
            return entry
        entry.script_stamp = stamp_of(spec.script)
        spec.stamped(entry.script_stamp)  # the tool's call asks its script no more (ScriptHost.compile)
        entry.spec = spec
        if self._entries_seen and not _script_folders(spec) <= self._watched:
            self._scanned_at = -RESCAN_SECS  # the next lookup scans, and watches the script's folder
        return entry

    def _checked(self, path: Path, entry: _Entry) -> _Entry:
        """`entry` (of `path`), its script compiled first if it was not yet; takes no lock."""
        if entry.spec is None or entry.checked:
            return entry
        try:
            self._check_script(path, entry.spec)
        except ConfigError as exc:
            entry.problem = LoadProblem.from_error(path, exc)
            log.warning("not loaded: %s", entry.problem)
            # a compile cut short by its deadline may finish another time
            entry.checked = not isinstance(exc.__cause__, ScriptLimitError)
            return entry
        entry.problem = None
        entry.checked = True
        return entry

    @staticmethod
    def _is_fresh(path: Path, entry: _Entry) -> bool:
        if stamp_of(path) != entry.yaml_stamp:
            return False
        return entry.spec is None or stamp_of(entry.spec.script) == entry.script_stamp

    def _stands(self, path: Path, entry: _Entry) -> bool:
        """Whether the entry of `path` is as its files are now: the last scan still stands (no `stat`),
        or, while that scan is younger than RESCAN_SECS, the YAML and its script are as it saw them."""
        if self._scan_stands():
            return True
        return time.monotonic() - self._looked_at < RESCAN_SECS and self._is_fresh(path, entry)

    def _scan_stands(self) -> bool:
        """Whether the last scan is what a scan now would find: the watch vouches for it, it is younger
        than RESCAN_SECS (the watch cannot see every change: util/folder_watch.py), and the watch has
        seen no change since. A change seen is the next scan's to find: that scan is not skipped."""
        if time.monotonic() - self._scanned_at >= RESCAN_SECS:
            return False
        if self._watch.changed():
            self._scanned_at = -RESCAN_SECS
            return False
        return True

    def _scan(self) -> None:
        """Re-stat every file, read what each YAML that changed claims, and forget who serves which
        name (settled again when asked: `_settled`); skipped while the last scan stands."""
        if self._scan_stands():
            return
        self._watch.changed()  # the changes seen so far are this scan's: only later ones mark the watch
        now = self._looked_at = time.monotonic()
        entries: dict[Path, _Entry] = {}
        walk = _yaml_files((*self.folders, *self.builtin_folders))
        for path in walk.files:
            old = self._entries.get(path)
            entries[path] = old if old is not None and self._is_fresh(path, old) else self._peek(path)
        candidates: dict[Claim, list[Path]] = {}
        for path, entry in entries.items():
            if entry.claim is not None:
                candidates.setdefault(entry.claim, []).append(path)
        self._clashes_before.update(self._clashes)
        self._entries, self._candidates, self._claims, self._clashes = entries, candidates, {}, {}
        self._watch_what(walk, entries, now)

    def _settled(self, claim: Claim) -> list[Path]:
        """The one file that serves `claim` (a list of it), else none: its candidates loaded, and
        the name settled among those that load (`_settle`); under the lock, after a scan."""
        served = self._claims.get(claim)
        if served is not None:
            return served
        paths = [
            p for p in self._candidates.get(claim, []) if _claims(self._load(p, self._entries[p]), claim)
        ]
        served, found = self._settle(*claim, paths, self._entries) if paths else ([], [])
        for problem in found:
            if problem not in self._clashes_before.get(claim, []):
                log.warning("not loaded: %s", problem)
        self._claims[claim], self._clashes[claim] = served, found
        return served

    def _settle_all(self, kind: Kind | None = None) -> list[Claim]:
        """Every name (of `kind`) settled, by kind and name; under the lock, after a scan."""
        claims = sorted(c for c in self._candidates if kind is None or c[0] == kind)
        for claim in claims:
            self._settled(claim)
        return claims

    def _watch_what(self, walk: _Walk, entries: dict[Path, _Entry], now: float) -> None:
        """Watch the folders the scan walked and those of the scripts (a script may live anywhere).

        A folder watched for the first time may have changed between the scan's look and its watch:
        the next lookup scans again, by when every folder is watched. The first scan watches nothing:
        a process that looks once (`agentkernel tool run`) never pays for a watch.
        """
        if not self._entries_seen:
            self._entries_seen = True
            return
        folders = set(walk.folders)
        for entry in entries.values():
            if entry.spec is not None:
                folders.update(_script_folders(entry.spec))
        new = not folders <= self._watched
        if walk.complete:
            self._watch.watch(folders)
            self._watched = folders
        self._scanned_at = now if walk.complete and not new else -RESCAN_SECS
        if new and walk.complete:  # the next lookup (a tool's too) scans again: then the watch may vouch
            self._looked_at = -RESCAN_SECS

    def close(self) -> None:
        """Stop watching the folders (lookups after this scan every time)."""
        self._watch.close()

    def _settle(
        self, kind: str, name: str, paths: list[Path], entries: dict[Path, _Entry]
    ) -> tuple[list[Path], list[LoadProblem]]:
        """Who serves `name` (one path, else nobody) and the problems of the files refused."""
        builtin = [p for p in paths if _origin(entries[p]) == "builtin"]  # as loaded: no second look
        project = [p for p in paths if p not in builtin]
        problems = []
        if len(project) > 1:
            problems += name_clash([(p, self._line_of_name(entries[p])) for p in project], name)
        if len(builtin) > 1:  # two files of the package: a packaging bug, refused alike
            problems += name_clash([(p, self._line_of_name(entries[p])) for p in builtin], name)
        overriding = [p for p in project if _overrides(entries[p])]
        if builtin and project and overriding == project and len(project) == 1:
            refused = _function_problems(name, project[0], entries[project[0]], [entries[p] for p in builtin])
            return ([] if refused else project), problems + refused
        for path in project:
            problems += self._builtin_problems(kind, name, path, entries[path], builtin)
        return ([] if problems else paths), problems

    def _builtin_problems(
        self, kind: str, name: str, path: Path, entry: _Entry, builtin: list[Path]
    ) -> list[LoadProblem]:
        if builtin and not _overrides(entry):
            where = self._shown_builtin(builtin[0])
            reason = (
                f"name: {name!r} is also a built-in {kind} ({where}); rename yours,"
                f" or add `overrides: builtin` to this file to replace the built-in"
            )
            return [LoadProblem(path, reason, self._line_of_name(entry))]
        if not builtin and _overrides(entry):
            reason = f"overrides: builtin, but there is no built-in {kind} named {name!r} to replace"
            line = entry.spec.lines.of("overrides") if entry.spec is not None else None
            return [LoadProblem(path, reason, line)]
        return []

    def _shown_builtin(self, path: Path) -> str:
        """A built-in's file as `agentkernel/builtins/tools/x.yaml`, wherever the package is installed."""
        folder = next(f for f in self.builtin_folders if path.is_relative_to(f))
        return str(Path("agentkernel", "builtins", folder.name, path.relative_to(folder)))

    @staticmethod
    def _line_of_name(entry: _Entry) -> int | None:
        return entry.spec.lines.of("name") if entry.spec is not None else None

    def _claimed(self, kind: str, name: str) -> tuple[Path, _Entry] | None:
        """The only file claiming `name` as a `kind`, and its entry (under the lock)."""
        paths = self._settled((kind, name))
        return (paths[0], self._entries[paths[0]]) if len(paths) == 1 else None

    def _usable(self, claimed: tuple[Path, _Entry] | None) -> ToolSpec | HookSpec | None:
        """The claimed file's spec, if its script checks out (compiled outside the lock)."""
        if claimed is None:
            return None
        entry = self._checked(*claimed)
        return entry.spec if entry.problem is None else None

    def _every(self, kind: Kind, spec_type: type[SpecT]) -> dict[str, SpecT]:
        with self._lock:
            self._scan()
            claimed = [(name, self._claimed(k, name)) for k, name in self._settle_all(kind)]
        return self._usable_specs(claimed, spec_type)

    def _usable_specs(
        self, claimed: list[tuple[str, tuple[Path, _Entry] | None]], spec_type: type[SpecT]
    ) -> dict[str, SpecT]:
        found: dict[str, SpecT] = {}
        for name, claim in claimed:
            spec = self._usable(claim)
            if isinstance(spec, spec_type):
                found[name] = spec
        return found

    # -- reading ---------------------------------------------------------------

    def tool(self, name: str) -> ToolSpec | None:
        """The current spec for `name`, compiling only its script.

        A tool found at the last scan is returned at once while the watch of
        the folders vouches that nothing changed since (this is every tool
        call's lookup), else after two `stat` calls say its files have not
        changed; otherwise, or when the last scan is older than RESCAN_SECS,
        the folders are scanned again. A name claimed by a file added since
        is noticed by the next scan, which every listing makes (an agent's
        tool list is made afresh for each user message). Only the files that
        claim `name` are loaded (the module docstring).
        """
        with self._lock:
            claimed = self._claimed("tool", name)
            if claimed is None or not self._stands(*claimed):
                self._scan()
                claimed = self._claimed("tool", name)
        spec = self._usable(claimed)
        return spec if isinstance(spec, ToolSpec) else None

    def tools(self) -> dict[str, ToolSpec]:
        """Every loadable tool by name; compiles every tool script not compiled yet."""
        return self._every("tool", ToolSpec)

    def hooks(self) -> dict[str, HookSpec]:
        """Every loadable hook by name; compiles every hook script not compiled yet."""
        return self._every("hook", HookSpec)

    def tools_and_hooks(self) -> tuple[dict[str, ToolSpec], dict[str, HookSpec]]:
        """`tools()` and `hooks()` from one scan of the folders (a template's names are checked
        against both each time one is looked up)."""
        with self._lock:
            self._scan()
            claims = self._settle_all()
            tools = [(name, self._claimed(kind, name)) for kind, name in claims if kind == "tool"]
            hooks = [(name, self._claimed(kind, name)) for kind, name in claims if kind == "hook"]
        return self._usable_specs(tools, ToolSpec), self._usable_specs(hooks, HookSpec)

    def problems(self) -> list[LoadProblem]:
        """Every file that does not load, and why; compiles every script to know."""
        with self._lock:
            self._scan()
            entries = [(path, self._load(path, entry)) for path, entry in self._entries.items()]
            self._settle_all()
            clashes = [p for found in self._clashes.values() for p in found]
        own = [self._checked(path, entry).problem for path, entry in entries]
        found = [p for p in own if p is not None] + clashes
        return sorted(found, key=lambda p: (str(p.path), p.line or 0))


def _function_problems(name: str, path: Path, entry: _Entry, builtin: list[_Entry]) -> list[LoadProblem]:
    """A project's python_tool replaces a built-in's settings only: it must call the built-in's function.

    Otherwise a project YAML could point a tool at any callable of the
    package, Python no script may reach (config/scripts.py).
    """
    mine = entry.spec.function if isinstance(entry.spec, ToolSpec) else None
    if mine is None:
        return []
    theirs = builtin[0].spec if builtin else None
    wanted = theirs.function if isinstance(theirs, ToolSpec) else None
    if mine == wanted:
        return []
    reason = (
        f"function: {mine!r}: a project's python_tool may only change the settings of the built-in"
        f" {name!r}, whose function is {wanted!r}"
        if wanted is not None
        else f"function: {mine!r}: the built-in {name!r} is not a python_tool; write a script_tool"
    )
    line = entry.spec.lines.of("function") if entry.spec is not None else None
    return [LoadProblem(path, reason, line)]


def _claims(entry: _Entry, claim: Claim) -> bool:
    """Whether the loaded `entry` claims `claim` (a file changed since its scan may not)."""
    return entry.spec is not None and (_kind(entry.spec), entry.spec.name) == claim


def _script_folders(spec: ToolSpec | HookSpec) -> set[Path]:
    """The folders whose change can change the spec's script: its own, and a linked file's real one."""
    script = spec.script
    return {script.parent, script.resolve().parent} if script.is_symlink() else {script.parent}


def _origin(entry: _Entry) -> str | None:
    return entry.spec.origin if entry.spec is not None else None


def _overrides(entry: _Entry) -> bool:
    return entry.spec is not None and entry.spec.overrides_builtin


__all__ = ["LoadProblem", "ScriptCatalog"]
