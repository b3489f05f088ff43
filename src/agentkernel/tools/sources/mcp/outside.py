"""Outside MCP servers' tools as our tools (consuming).

Each tool a server offers becomes an `OutsideToolSpec` named `srv__tool`,
with the server's `inputSchema` as its `parameters`, so it takes the one
dispatch path like a script tool (DESIGN rule 6): access check, argument
validation, limits, truncation, history. Only running it differs: the
dispatcher hands the arguments to `OutsideToolSpec.call`, which asks the
server through the pool (client_pool.py).

A tool name with characters outside `[A-Za-z0-9_-]` has each replaced by
`_` (the server is still called by its own name). A name that then clashes
with another of the server's tools or with a script tool, that passes 64
characters, or whose schema is not a JSON Schema, is not offered: it is
logged, and `agentkernel check` reports it naming the server and the tool.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentkernel.config import KernelLimits, ToolSpec
from agentkernel.config.mcp_servers import SEPARATOR, McpServerSpec, server_of
from agentkernel.errors import LoadProblem
from agentkernel.schemas.bounds import SchemaBounds, schema_problem
from agentkernel.schemas.cost import describe_cost
from agentkernel.schemas.refs import remote_refs_problem
from agentkernel.tools.results import ToolResult
from agentkernel.tools.sources.mcp.nesting import inherited_chain, template_entry
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.json_size import json_length
from agentkernel.util.lazy_log import LazyLogger
from agentkernel.util.valid_unicode import repair_value

if TYPE_CHECKING:
    from agentkernel.tools.sources.mcp.client_pool import ListedTool, ServerPool

log = LazyLogger("agentkernel.mcp")
MAX_TOOL_NAME = 64  # TOOL_NAME_PATTERN's length
# what one outside tool may put in every LLM request: its description is cut past this (a note says
# so), and a tool whose input schema's JSON is longer is not offered (a schema cannot be cut)
MAX_DESCRIPTION_CHARS = 4096
MAX_SCHEMA_CHARS = 32768
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class OutsideToolSpec(ToolSpec):
    """A tool of an outside MCP server; `script` and `yaml_path` are the declaring template's file."""

    server: McpServerSpec = field(default_factory=lambda: McpServerSpec(name="?"))
    remote_name: str = ""  # the tool's own name on its server
    runner: OutsideTools | None = field(default=None, compare=False, repr=False)

    def call(self, args: JSONValue, deadline: float) -> ToolResult:
        """Run it on its server by `deadline` (a `time.monotonic()` value); every failure is a result."""
        if self.runner is None:
            return ToolResult.failure(f"tool {self.name!r}: no MCP connection to server {self.server.name!r}")
        return self.runner.call(self, args, deadline)


def offered_name(server: str, tool: str) -> str:
    """`srv__tool`, each character a tool name may not hold replaced by `_`."""
    return f"{server}{SEPARATOR}{_UNSAFE.sub('_', tool)}"


@dataclass
class _Offer:
    """What one running server offers: its tools by our name, and the ones refused, with why."""

    spec: McpServerSpec
    listed: list[ListedTool]
    tools: dict[str, OutsideToolSpec]
    refused: list[str]


class OutsideTools:
    """The outside tools of the servers templates declare, by name; the servers start on first need.

    `servers` gives the current declarations (server name → spec, read
    from the templates); `script_tools` the names of the script tools, which
    an outside tool may not take. Both are called when a server's tools
    are (re)listed, not on every call.
    """

    def __init__(
        self,
        servers: Callable[[], Mapping[str, McpServerSpec]],
        script_tools: Callable[[], Iterable[str]],
        limits: KernelLimits,
        cwd: Path | None = None,
    ) -> None:
        self._servers = servers
        self._cwd = cwd  # where stdio servers run (the project folder)
        self._script_tools = script_tools
        self._limits = limits
        self._lock = threading.Lock()
        self._known: dict[str, McpServerSpec] = {}
        self._offers: dict[str, _Offer] = {}
        self._failures: dict[str, str] = {}
        self._pool: ServerPool | None = None
        self._inherited = inherited_chain()  # what started this kernel, if an MCP client of ours did

    def _server_pool(self) -> ServerPool:
        from agentkernel.tools.sources.mcp.client_pool import ServerPool  # mcp: by the first server start

        with self._lock:
            if self._pool is None:
                self._pool = ServerPool(self._cwd, self._chain_for)
            return self._pool

    def _chain_for(self, spec: McpServerSpec) -> tuple[str, ...]:
        """What server `spec` is told it serves: this kernel's chain, then each template declaring it."""
        return (*self._inherited, *(template_entry(self._cwd, t) for t in spec.templates or (spec.template,)))

    def _declared(self, name: str, *, fresh: bool) -> McpServerSpec | None:
        """Server `name`'s spec: as last read unless `fresh` or never read (then the templates are read)."""
        if fresh or name not in self._known:
            self._known = dict(self._servers())
        return self._known.get(name)

    # -- listing ---------------------------------------------------------------------------

    def for_servers(self, names: Iterable[str]) -> list[OutsideToolSpec]:
        """The tools of servers `names` (each started if needed); a server that fails offers none."""
        self._known = dict(self._servers())
        found: list[OutsideToolSpec] = []
        for name in names:
            spec = self._known.get(name)
            offer = self._offer(spec) if spec is not None else None
            found += offer.tools.values() if offer is not None else ()
        return found

    def _offer(self, spec: McpServerSpec) -> _Offer | None:
        """What `spec`'s server offers now; None (the reason kept for `unavailable`) when it fails."""
        from agentkernel.tools.sources.mcp.client_pool import ServerFailure  # mcp: only once one is used

        try:
            listed = self._server_pool().tools(spec)
        except ServerFailure as exc:
            log.warning("%s", exc)
            self._failures[spec.name] = str(exc)
            return None
        self._failures.pop(spec.name, None)
        offer = self._offers.get(spec.name)
        if offer is None or offer.listed is not listed or offer.spec != spec:
            offer = self._build(spec, listed)
            self._offers[spec.name] = offer
        return offer

    def _build(self, spec: McpServerSpec, listed: list[ListedTool]) -> _Offer:
        script_tools = set(self._script_tools())
        chosen = [t for t in listed if spec.offers(t.name)]
        by_name: dict[str, list[ListedTool]] = {}
        for tool in chosen:
            by_name.setdefault(offered_name(spec.name, tool.name), []).append(tool)
        tools: dict[str, OutsideToolSpec] = {}
        refused = [
            f"MCP server {spec.name!r}: tools: {n!r} is not a tool it lists"
            for n in spec.tools or ()
            if n not in {t.name for t in listed}
        ]
        for name, same in by_name.items():
            reason = _refusal(spec, name, same, script_tools, self._limits.schema_bounds)
            if reason is None:
                tools[name] = self._spec(spec, name, same[0])
            else:
                refused.append(reason)
        for reason in refused:
            log.warning("%s", reason)
        return _Offer(spec, listed, tools, refused)

    def _spec(self, server: McpServerSpec, name: str, tool: ListedTool) -> OutsideToolSpec:
        where = server.yaml_path or Path(server.template or server.name)
        return OutsideToolSpec(
            name=name,
            script=where,
            yaml_path=where,
            raw={"name": name, "mcp_server": server.name, "tool": tool.name},
            timeout_secs=server.timeout_secs,
            origin="mcp",
            description=_bounded_description(tool.description),
            parameters=tool.input_schema,
            server=server,
            remote_name=tool.name,
            runner=self,
        )

    # -- lookup ----------------------------------------------------------------------------

    def tool(self, name: str) -> OutsideToolSpec | None:
        """The outside tool `name` (`srv__tool`), its server started if needed; None if there is none."""
        server = server_of(name)
        spec = self._declared(server, fresh=False) if server is not None else None
        if spec is None:
            return None
        offer = self._offer(spec)
        return offer.tools.get(name) if offer is not None else None

    def offered(self, name: str) -> OutsideToolSpec | None:
        """Outside tool `name` if its server is running and offers it; never starts or reads anything."""
        server = server_of(name)
        offer = self._offers.get(server) if server is not None else None
        if offer is None or self._pool is None or not self._pool.running(offer.spec.name):
            return None
        return offer.tools.get(name)

    def unavailable(self, name: str) -> str | None:
        """Why outside tool `name` cannot be called: its server failed to start (the cause), or None."""
        server = server_of(name)
        failure = self._failures.get(server) if server is not None else None
        return f"tool {name!r} is not available: {failure}" if failure else None

    def problems(self, spec: McpServerSpec) -> list[str]:
        """Start `spec`'s server and list its tools: what is wrong (failure to start, tools refused)."""
        offer = self._offer(spec)
        if offer is None:
            return [self._failures.get(spec.name, f"MCP server {spec.name!r} failed to start")]
        return list(offer.refused)

    def offered_count(self, name: str) -> int | None:
        """How many tools server `name` offered when last listed; None when it has not been listed."""
        offer = self._offers.get(name)
        return len(offer.tools) if offer is not None and name not in self._failures else None

    def running(self, name: str) -> bool:
        """Whether server `name` is running now."""
        return self._pool is not None and self._pool.running(name)

    def stop(self, name: str) -> None:
        """Stop server `name` if it runs (`agentkernel check` starts each server only to look)."""
        if self._pool is not None:
            self._pool.stop(name)

    def check(
        self, servers: Mapping[str, McpServerSpec], folder: Path
    ) -> tuple[list[LoadProblem], dict[str, int]]:
        """Start each of `servers`, list its tools, stop it: what fails, at its template (else `folder`),
        and how many tools each server that started offers.

        For `agentkernel check`: a server that cannot start (command not
        found, exits at once, handshake timeout, HTTP refused) is a problem
        naming the template, the server and the cause, and so is a tool it
        cannot offer. A server running already is left running. The servers
        start side by side: a start takes seconds, and `check` waits for
        the slowest, not for the sum.
        """
        from concurrent.futures import ThreadPoolExecutor  # only `agentkernel check` starts servers to look

        ordered = sorted(servers.items())
        running = {name for name, _ in ordered if self.running(name)}
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(ordered)))) as starting:  # all at once
            reasons = list(starting.map(lambda item: self.problems(item[1]), ordered))
        found: list[LoadProblem] = []
        offered: dict[str, int] = {}
        for (name, spec), said in zip(ordered, reasons, strict=True):
            where = spec.yaml_path or folder
            found += [LoadProblem(where, f"template {spec.template}: {r}", spec.line) for r in said]
            count = self.offered_count(name)
            if count is not None:
                offered[name] = count
            if name not in running:
                self.stop(name)
        return found, offered

    # -- calling ---------------------------------------------------------------------------

    def call(self, spec: OutsideToolSpec, args: JSONValue, deadline: float) -> ToolResult:
        """One call of `spec` on its server, by `deadline`; timeouts and crashes are failed results."""
        from agentkernel.tools.sources.mcp.client_pool import ServerFailure  # mcp: only once one is used
        from agentkernel.tools.sources.mcp.results import outside_result

        # a lone surrogate (a JS string may hold one) cannot be written as UTF-8 JSON: it would end the
        # connection, not the call; it crosses as U+FFFD, as script values entering the kernel do
        repaired, _ = repair_value(args)
        arguments: JSONObject = repaired if isinstance(repaired, dict) else {}
        timeout = max(0.0, deadline - time.monotonic())
        try:
            result = self._server_pool().call(spec.server, spec.remote_name, arguments, timeout)
        except ServerFailure as exc:
            return ToolResult.failure(f"tool {spec.name!r}: {exc}")
        return outside_result(
            result,
            max_visual_chars=self._limits.max_visual_chars,
            max_result_chars=self._limits.max_result_chars,
        )

    @property
    def started(self) -> bool:
        """Whether any server was ever started (so `close` has processes to stop)."""
        return self._pool is not None

    def close(self) -> None:
        """Stop every server started (their processes end)."""
        if self._pool is not None:
            self._pool.close()


def _refusal(
    spec: McpServerSpec, name: str, same: list[ListedTool], script_tools: set[str], bounds: SchemaBounds
) -> str | None:
    """Why the outside tool(s) offered as `name` are not offered, or None when it can be.

    The input schema is measured (schemas/bounds.py) before the metaschema
    check, which would recurse through a schema nested without end.
    """
    own = ", ".join(repr(t.name) for t in same)
    where = f"MCP server {spec.name!r}: tool {own}"
    if len(same) > 1:
        return f"{where}: their names all become {name!r}; none of them is offered"
    if len(name) > MAX_TOOL_NAME:
        return f"{where}: its name {name!r} is longer than {MAX_TOOL_NAME} characters; not offered"
    if name in script_tools:
        return f"{where}: {name!r} is also a script tool's name; not offered"
    if json_length(same[0].input_schema, MAX_SCHEMA_CHARS) is None:
        return f"{where}: its inputSchema is longer than {MAX_SCHEMA_CHARS:,} characters of JSON; not offered"
    costly = schema_problem(same[0].input_schema, bounds)
    if costly is not None:
        return f"{where}: its inputSchema {describe_cost(costly)}; not offered"
    from jsonschema import Draft202012Validator  # only where an outside server's tools are offered
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(same[0].input_schema)
    except SchemaError as exc:
        return f"{where}: its inputSchema is not a valid JSON Schema ({exc.message}); not offered"
    remote = remote_refs_problem(same[0].input_schema)
    if remote is not None:
        return f"{where}: its inputSchema's {remote}; not offered"
    return None


def _bounded_description(text: str) -> str:
    """A server's tool description as the LLM sees it: cut past MAX_DESCRIPTION_CHARS, saying so."""
    if len(text) <= MAX_DESCRIPTION_CHARS:
        return text
    return text[:MAX_DESCRIPTION_CHARS] + f" … [cut: the server's description has {len(text):,} characters]"


__all__ = ["OutsideToolSpec", "OutsideTools", "offered_name"]
