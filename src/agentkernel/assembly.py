"""The kernel's assembly: the parts behind the `Kernel` face, built and closed in one place.

`SERVICES` is the one table of the services a script can reach: each key of
ports.py with the factory that builds its service from the kernel's parts,
on first use (a tool run pays only for the services its script calls). A
live service (the dispatch path, the transcript, the LLM, sub-agents, cron)
is attached only to a live kernel; a local one (the machine's: HTTP, state,
DuckDB, files, shell) may be replaced by one handed to the kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agentkernel.bundle import ServiceKey, Services
from agentkernel.ports import (
    CRON,
    DUCKDB,
    FILES,
    HTTP,
    KEYS,
    LLM,
    MESSAGES,
    SHELL,
    STATE,
    SUBAGENTS,
    TOOL_RESULTS,
    TOOLS,
)
from agentkernel.util.later import Later

if TYPE_CHECKING:
    from agentkernel.kernel import Kernel


def _http(kernel: Kernel) -> object:
    from agentkernel.services.http import HttpService  # httpx: imported by the first HTTP call

    return HttpService.from_config(kernel.config)


def _state(kernel: Kernel) -> object:
    from agentkernel.services.state import from_config  # opens the SQLite file: not before a state_* call

    return from_config(kernel.config)


def _duckdb(kernel: Kernel) -> object:
    from agentkernel.services.duck import DuckService  # duckdb: imported by the first db_* call

    return DuckService.from_config(kernel.config)


def _files(kernel: Kernel) -> object:
    from agentkernel.services.files import FilesService

    return FilesService.from_config(kernel.config)


def _shell(kernel: Kernel) -> object:
    from agentkernel.services.shell import ShellService

    return ShellService.from_config(kernel.config)


SERVICES: Mapping[ServiceKey[Any], Callable[[Kernel], object]] = {
    HTTP: _http,
    STATE: _state,
    DUCKDB: _duckdb,
    FILES: _files,
    SHELL: _shell,
    LLM: lambda kernel: kernel._kernel_llm(),
    MESSAGES: lambda kernel: kernel._store,
    TOOLS: lambda kernel: kernel._tool_calls(),
    TOOL_RESULTS: lambda kernel: kernel._history,
    SUBAGENTS: lambda kernel: kernel._subagent_service(),
    CRON: lambda kernel: kernel._cron,
}
"""Every service a script can reach: its key (ports.py) and its factory. A new service is one of each."""


def build_services(
    kernel: Kernel,
    *,
    live: bool,
    given: Mapping[str, object | None] | None = None,
    extensions: Mapping[str, object] | None = None,
) -> Services:
    """The kernel's `Services`: each built from `kernel` on first use, except those `given` by name.

    A live service is attached only to a live kernel. `given` replaces local
    services (built, or None to detach one); a name that is no local
    service's is a ValueError.
    """
    given = dict(given or {})
    for name in given:
        key = KEYS.get(name)
        if key is None or key.live or key not in SERVICES:
            local = ", ".join(sorted(k.name for k in SERVICES if not k.live))
            raise ValueError(f"extra_services: no local service {name!r} (the kernel's own: {local})")
    attached: dict[ServiceKey[Any], object] = {}
    for key, factory in SERVICES.items():
        if key.live and not live:
            continue
        attached[key] = given[key.name] if key.name in given else Later(_bound(factory, kernel))
    return Services(attached, environment=kernel._environment, extensions=extensions)


def _bound(factory: Callable[[Kernel], object], kernel: Kernel) -> Callable[[], object]:
    return lambda: factory(kernel)


__all__ = ["SERVICES", "build_services"]
