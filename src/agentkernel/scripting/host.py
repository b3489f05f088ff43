"""ScriptHost: picks the engine, caches compiled scripts, runs one function per call.

Compiled scripts are cached by path, modification time and size (S1.4): an
edited file is recompiled on its next call, with no restart. Compiling holds
no lock: two threads may compile one file at once, and the last one's
result stays in the cache. A script is at most `MAX_SCRIPT_SIZE`
bytes, and a call's compile ends at the call's deadline.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkernel.config import CallBudget
from agentkernel.errors import ScriptError
from agentkernel.helpers.table import HelperTable, ScriptCall
from agentkernel.scripting.contract import MAX_SCRIPT_SIZE, LoadedScript, ScriptEngine
from agentkernel.scripting.js import JS_EXTENSIONS, JsEngine
from agentkernel.services.confined import read_module
from agentkernel.telemetry import metrics
from agentkernel.types import JSONValue, NoValue
from agentkernel.util.file_stamps import Stamp


class TableBinding:
    """The helper table bound to one call: what an engine gets (contract.py `HelperBinding`)."""

    def __init__(self, table: HelperTable, call: ScriptCall) -> None:
        self.table = table
        self.call = call

    @property
    def names(self) -> tuple[str, ...]:
        return self.table.names()

    def invoke(self, name: str, args: Sequence[JSONValue]) -> JSONValue:
        return self.table.invoke(name, self.call, args)

    def log_line(self, level: str, text: str) -> None:
        self.call.log_line(level, text)


@dataclass(frozen=True)
class _Compiled:
    stamp: Stamp
    engine: ScriptEngine[Any]
    script: LoadedScript


def default_engines(*, kept_contexts: bool = True) -> dict[str, ScriptEngine[Any]]:
    """Extension → engine for the JS files (S1.1); every other extension is Rhai's. `kept_contexts`:
    whether JavaScript calls may run in kept contexts (js/engine.py `JsEngine`)."""
    # ES imports read as the file helpers read, below the script's folder
    js = JsEngine(read_module, kept_contexts=kept_contexts)
    return dict.fromkeys(JS_EXTENSIONS, js)


def rhai_engine(script_folders: Sequence[Path] = (), compile_cache: Path | None = None) -> ScriptEngine[Any]:
    """The Rhai engine, imported when a kernel first meets a Rhai script; its scripts import
    modules from `script_folders` (the kernel's tools and hooks folders).

    The interpreter is imported here, at the first Rhai script: a kernel
    that only runs JavaScript never pays for its import. `compile_cache`
    is the folder where compiled scripts outlive a restart (None: nowhere).
    """
    from agentkernel.scripting.rhai_adapter import RhaiEngine  # the interpreter: at the first Rhai script

    return RhaiEngine(script_folders, compile_cache)


class ScriptHost:
    """Runs script functions with the helper table bound, a fresh scope per call."""

    def __init__(
        self,
        helpers: HelperTable,
        engines: Mapping[str, ScriptEngine[Any]] | None = None,
        fallback: ScriptEngine[Any] | None = None,
        script_folders: Sequence[Path] = (),
        *,
        rhai_compile_cache: Path | None = None,
    ) -> None:
        self.helpers = helpers
        self.script_folders = tuple(script_folders)
        self._rhai_compile_cache = rhai_compile_cache
        self.engines = dict(engines) if engines is not None else default_engines()
        self._fallback = fallback
        self._cache: dict[Path, _Compiled] = {}
        self._lock = threading.Lock()

    @property
    def fallback(self) -> ScriptEngine[Any]:
        """The engine of every extension not in `engines`: Rhai unless one was given (S1.1)."""
        if self._fallback is None:
            with self._lock:
                if self._fallback is None:
                    self._fallback = rhai_engine(self.script_folders, self._rhai_compile_cache)
        return self._fallback

    def engine_for(self, path: Path) -> ScriptEngine[Any]:
        engine = self.engines.get(path.suffix.lower()) or self.fallback
        if engine is None:
            known = ", ".join(sorted(self.engines))
            raise ScriptError(
                f"{path.name}: no script engine for {path.suffix or 'files without an extension'!r}"
                f" (this kernel runs {known})"
            )
        return engine

    def compile(
        self, path: Path, deadline: float | None = None, known: Stamp = None
    ) -> tuple[ScriptEngine[Any], LoadedScript]:
        """The compiled script, from the cache unless the file changed; a compile that
        passes `deadline` (a `time.monotonic()` value) raises ScriptLimitError. `known`: the
        file's stamp as its caller has just seen it (the tool catalog, at the call's lookup):
        when the cache holds that one, the file is not asked again."""
        cached = self._cache.get(path)
        if known is not None and cached is not None and cached.stamp == known:
            return cached.engine, cached.script
        try:
            info = os.stat(path)
        except OSError as exc:
            raise ScriptError(f"cannot read script {path}: {exc.strerror or exc}") from exc
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        if cached is not None and cached.stamp == stamp:
            return cached.engine, cached.script
        engine = self.engine_for(path)
        compiled = engine.compile(path, _read_source(path, info.st_size), deadline)
        with self._lock:
            self._cache[path] = _Compiled(stamp, engine, compiled)
        return engine, compiled

    def call(
        self,
        path: Path,
        function: str,
        args: Sequence[JSONValue],
        optional: Sequence[JSONValue],
        call: ScriptCall,
        known: Stamp = None,
    ) -> JSONValue | NoValue:
        """Run `function` of the script at `path` for `call`, within its budget; raises ScriptError.

        `timeout_secs` covers compiling the script (when it is not cached) and running it;
        `known`: the file's stamp as the caller has just seen it (`compile`)."""
        budget = _budget_of(call)
        engine, compiled = self.compile(path, budget.deadline, known)
        binding = TableBinding(self.helpers, call)
        started = time.perf_counter()
        try:
            return engine.call(compiled, function, args, optional, binding, budget)
        finally:
            metrics.script_ran(engine.name, time.perf_counter() - started)

    def defined_functions(self, path: Path, names: Iterable[str], call: ScriptCall) -> frozenset[str]:
        """Which of `names` the script defines; its top level runs within the call's budget."""
        budget = _budget_of(call)
        engine, compiled = self.compile(path)
        binding = TableBinding(self.helpers, call)
        return engine.defined_functions(compiled, names, binding, budget)


def _budget_of(call: ScriptCall) -> CallBudget:
    if call.budget is None:
        raise ValueError(f"{call.script}: a script runs only within a CallBudget")
    return call.budget


def _read_source(path: Path, size: int) -> str:
    if size > MAX_SCRIPT_SIZE:
        raise ScriptError(f"{path}: script is {size:,} bytes, more than the maximum of {MAX_SCRIPT_SIZE:,}")
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"cannot read script {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ScriptError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


__all__ = ["ScriptHost", "TableBinding", "default_engines"]
