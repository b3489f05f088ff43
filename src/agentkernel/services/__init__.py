"""The services helpers reach (DESIGN rule 4): optional, named, typed, attached per kernel.

A helper asks for its service with `Services.require`, which raises the
contract's text when it is not attached; the `Services` bundle travels inside
every `Caller` (DESIGN rule 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypeAlias, TypedDict, TypeVar, overload

from agentkernel.errors import HelperError
from agentkernel.services.environment import Environment
from agentkernel.services.lazy import Later

if TYPE_CHECKING:  # annotations only: a service's module imports its library (httpx, DuckDB, the LLM layer)
    from agentkernel.agent.subagents import SubagentService
    from agentkernel.services.cron import CronService
    from agentkernel.services.duck import DuckService
    from agentkernel.services.files import FilesService
    from agentkernel.services.http import HttpService
    from agentkernel.services.llm import KernelLLM
    from agentkernel.services.memory import MessageStore
    from agentkernel.services.shell import ShellService
    from agentkernel.services.state import StateStore
    from agentkernel.tools.calls import ToolCallService
    from agentkernel.tools.history import ToolResultHistory

T = TypeVar("T")

Attach: TypeAlias = T | Later[T] | None
"""A local service as `Services` takes it: built, built on first use (`Later`), or None (not attached)."""

LocalName = Literal["http", "state", "duckdb", "files", "shell"]
LiveName = Literal["messages", "tools", "tool_results", "subagents", "cron"]
"""The live services a helper `require`s: those that reach the kernel itself (`LiveServices`)."""

_LIVE_ONLY = "(hook_tool attaches it with --live)"

MISSING: dict[LocalName | LiveName, str] = {
    "http": "no http service attached to this kernel",  # docs/scripts.md, the http_* errors (S8.2)
    "state": "no state store attached (set state.db_path in kernel.yaml, e.g. data/state.db)",  # S11.3
    "duckdb": "no duckdb service attached to this kernel",
    "files": "no files service attached to this kernel",
    "shell": "no shell service attached to this kernel",
    # S18: the transcript helpers speak as `memory: …`
    "messages": f"no message store attached to this kernel {_LIVE_ONLY}",
    "tools": f"no tool-call service attached to this kernel {_LIVE_ONLY}",  # S16.2
    "tool_results": f"no tool-result history attached to this kernel {_LIVE_ONLY}",  # S16.4
    "subagents": f"no subagent service attached to this kernel {_LIVE_ONLY}",  # S17
    "cron": f"no cron service attached to this kernel {_LIVE_ONLY}",  # S10.3
}
"""What a helper says when its service is not attached, after its own name (`state_get: …`)."""


class MissingService(HelperError):
    """A helper's service is not attached; the text is the contract's (`MISSING`)."""


class AttachedServices(TypedDict, total=False):
    """Local services handed to a kernel already built (`extra_services`); None detaches one."""

    http: HttpService | None
    state: StateStore | None
    duckdb: DuckService | None
    files: FilesService | None
    shell: ShellService | None


class LiveServices(TypedDict, total=False):
    """The live services: what reaches the kernel itself, not the machine (issue 12 §6).

    `Kernel._live_services` fills this, the one place a live service is
    attached: the agent loop, `agentkernel tool run`, `hook_tool --live` and
    the server all run scripts on that kernel's `Services`, so a service
    added there reaches every script; a kernel built with `live=False`
    (`hook_tool` without `--live`) attaches none, and each helper throws its
    "no … attached". A key here is a keyword of `Services`.
    """

    llm: KernelLLM | None
    messages: MessageStore | None
    tools: ToolCallService | None  # S16: the one dispatch path, one call deeper
    tool_results: ToolResultHistory | None  # S16.4
    subagents: SubagentService | None  # S17
    cron: CronService | None  # S10


def _later(service: Attach[T]) -> Later[T]:
    return service if isinstance(service, Later) else Later.ready(service)


class Services:
    """Everything a helper may use besides the caller's identity.

    The live ones (`llm`, `messages`, and the kernel's own `tools`,
    `tool_results` and `subagents`) are None when not attached — e.g. in
    `hook_tool` without `--live`. The local ones (`http`, `state`, `duckdb`,
    `files`, `shell`) may be given as `Later`: built when first read, so a
    tool run pays only for the services its script calls (issue 8).
    """

    __slots__ = (
        "_duckdb",
        "_extensions",
        "_files",
        "_http",
        "_shell",
        "_state",
        "cron",
        "environment",
        "llm",
        "messages",
        "subagents",
        "tool_results",
        "tools",
    )

    def __init__(
        self,
        environment: Environment | None = None,
        llm: KernelLLM | None = None,
        messages: MessageStore | None = None,
        *,
        http: Attach[HttpService] = None,
        state: Attach[StateStore] = None,
        duckdb: Attach[DuckService] = None,
        files: Attach[FilesService] = None,
        shell: Attach[ShellService] = None,
        extensions: Mapping[str, object] | None = None,
        tools: ToolCallService | None = None,
        tool_results: ToolResultHistory | None = None,
        subagents: SubagentService | None = None,
        cron: CronService | None = None,
    ) -> None:
        self._extensions = dict(extensions or {})
        self.tools = tools
        self.tool_results = tool_results
        self.subagents = subagents
        self.cron = cron
        self.environment = environment if environment is not None else Environment()
        self.llm = llm
        self.messages = messages
        self._http = _later(http)
        self._state = _later(state)
        self._duckdb = _later(duckdb)
        self._files = _later(files)
        self._shell = _later(shell)

    @property
    def http(self) -> HttpService | None:
        return self._http.get()

    @property
    def state(self) -> StateStore | None:
        return self._state.get()

    @property
    def duckdb(self) -> DuckService | None:
        return self._duckdb.get()

    @property
    def files(self) -> FilesService | None:
        return self._files.get()

    @property
    def shell(self) -> ShellService | None:
        return self._shell.get()

    @overload
    def require(self, name: Literal["http"], helper: str) -> HttpService: ...
    @overload
    def require(self, name: Literal["state"], helper: str) -> StateStore: ...
    @overload
    def require(self, name: Literal["duckdb"], helper: str) -> DuckService: ...
    @overload
    def require(self, name: Literal["files"], helper: str) -> FilesService: ...
    @overload
    def require(self, name: Literal["shell"], helper: str) -> ShellService: ...
    @overload
    def require(self, name: Literal["messages"], helper: str) -> MessageStore: ...
    @overload
    def require(self, name: Literal["tools"], helper: str) -> ToolCallService: ...
    @overload
    def require(self, name: Literal["tool_results"], helper: str) -> ToolResultHistory: ...
    @overload
    def require(self, name: Literal["subagents"], helper: str) -> SubagentService: ...
    @overload
    def require(self, name: Literal["cron"], helper: str) -> CronService: ...

    def require(self, name: LocalName | LiveName, helper: str) -> object:
        """The service `name`, built if need be; MissingService (`helper: no … attached`) without one."""
        service: object = getattr(self, name)
        if service is None:
            raise MissingService(f"{helper}: {MISSING[name]}")
        return service

    def extension(self, name: str, kind: type[T]) -> T | None:
        """Your own service handed to the kernel by name (`Kernel(extensions=…)`), or None.

        The seam for helpers the kernel does not ship: they reach their
        service here, typed, and say "no … attached" themselves on None.
        A service of another type under that name is a programming error.
        """
        service = self._extensions.get(name)
        if service is not None and not isinstance(service, kind):
            raise TypeError(f"service {name!r} is a {type(service).__name__}, not a {kind.__name__}")
        return service

    def built(self) -> list[object]:
        """The local services that exist now; lazy ones never asked for are not built to be closed."""
        made = (later.built() for later in (self._http, self._state, self._duckdb, self._files, self._shell))
        return [service for service in made if service is not None]


__all__ = [
    "MISSING",
    "Attach",
    "AttachedServices",
    "Environment",
    "Later",
    "LiveServices",
    "MissingService",
    "Services",
]
