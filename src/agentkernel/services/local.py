"""The `Services` of a kernel: the local services built on first use, the ones handed over, the live ones.

Each local service imports its module (and its library: httpx, DuckDB) only
when a helper first asks for it, so a tool run pays only for the services its
script calls (issue 8: start-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from agentkernel.services import AttachedServices, Environment, Later, Services

if TYPE_CHECKING:
    from agentkernel.config import KernelConfig
    from agentkernel.llm.base import Provider
    from agentkernel.services.duck import DuckService
    from agentkernel.services.files import FilesService
    from agentkernel.services.http import HttpService
    from agentkernel.services.memory import MessageStore
    from agentkernel.services.shell import ShellService
    from agentkernel.services.state import StateStore
    from agentkernel.services.subagents import SubagentService
    from agentkernel.tools.calls import ToolCallService
    from agentkernel.tools.history import ToolResultHistory


def _http(config: KernelConfig) -> HttpService:
    from agentkernel.services.http import HttpService

    return HttpService.from_config(config)


def _state(config: KernelConfig) -> StateStore | None:
    from agentkernel.services.state import from_config

    return from_config(config)


def _duckdb(config: KernelConfig) -> DuckService:
    from agentkernel.services.duck import DuckService

    return DuckService.from_config(config)


def _files(config: KernelConfig) -> FilesService:
    from agentkernel.services.files import FilesService

    return FilesService.from_config(config)


def _shell(config: KernelConfig) -> ShellService:
    from agentkernel.services.shell import ShellService

    return ShellService.from_config(config)


def kernel_services(
    config: KernelConfig,
    *,
    environment: Environment,
    llm: Provider | None = None,
    messages: MessageStore | None = None,
    given: AttachedServices | None = None,
    extensions: Mapping[str, object] | None = None,
    tools: ToolCallService | None = None,
    tool_results: ToolResultHistory | None = None,
    subagents: SubagentService | None = None,
) -> Services:
    """Every local service built from `config` on first use, except those `given` (built, or None).

    `tools`, `tool_results` and `subagents` are made of the kernel's own parts
    (its dispatch path, its history of results, its processes and agent loop),
    so the kernel hands them over built; a kernel that is not live passes none.
    """
    given = given or {}
    return Services(
        environment,
        llm,
        messages,
        http=given["http"] if "http" in given else Later(lambda: _http(config)),
        state=given["state"] if "state" in given else Later(lambda: _state(config)),
        duckdb=given["duckdb"] if "duckdb" in given else Later(lambda: _duckdb(config)),
        files=given["files"] if "files" in given else Later(lambda: _files(config)),
        shell=given["shell"] if "shell" in given else Later(lambda: _shell(config)),
        extensions=extensions,
        tools=tools,
        tool_results=tool_results,
        subagents=subagents,
    )


__all__ = ["kernel_services"]
