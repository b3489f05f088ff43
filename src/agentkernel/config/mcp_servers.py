"""A template's `mcp_servers:`: the outside MCP servers whose tools it may call.

Kept free of the `mcp` package (a heavy import, docs/benchmarks.md): templates
are read on paths that never speak MCP. Each entry is stdio (`command`,
`args`, `env`) or streamable HTTP (`url`, `headers_env`). Secrets are never
written in a template: `env` and `headers_env` map a name the server sees
to the *name* of a variable in the kernel's environment, read when the
server starts.

The tools of server `srv` are offered as `srv__tool` (tool names must match
TOOL_NAME_PATTERN, which has no dot); a server name has no underscore, so
the first `__` splits a name unambiguously.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentkernel.errors import LoadProblem
from agentkernel.util.yaml_source import NO_LINES, YamlLines

SERVER_NAME_PATTERN = "^[A-Za-z][A-Za-z0-9-]{0,31}$"
SEPARATOR = "__"
GRANT_SUFFIX = f"{SEPARATOR}*"  # `srv__*` in an allow list: every tool server `srv` offers
DEFAULT_TIMEOUT_SECS = 30.0  # a call's, unless `timeout_secs` says otherwise
MIN_START_SECS = 30.0  # a start (process, handshake, tool list) may take this long even if calls may not
_ENV_NAME = "^[A-Za-z_][A-Za-z0-9_]*$"
_HEADER_NAME = "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"  # an HTTP token (RFC 9110)
_COMMON: dict[str, Any] = {
    "name": {"type": "string", "pattern": SERVER_NAME_PATTERN},
    "tools": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True},
    "timeout_secs": {"type": "number", "exclusiveMinimum": 0},
}
_NAME_MAP = {"type": "object", "additionalProperties": {"type": "string", "pattern": _ENV_NAME}}
STDIO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "command"],
    "properties": {
        **_COMMON,
        "command": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
        "env": {**_NAME_MAP, "propertyNames": {"pattern": _ENV_NAME}},
    },
}
HTTP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "url"],
    "properties": {
        **_COMMON,
        "url": {"type": "string", "pattern": "^https?://"},
        "headers_env": {**_NAME_MAP, "propertyNames": {"pattern": _HEADER_NAME}},
    },
}
# `command` or `url` picks the shape, so an error names the fields of the one meant
MCP_SERVERS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "if": {"type": "object", "required": ["url"]},
        "then": HTTP_SCHEMA,
        "else": STDIO_SCHEMA,
    },
}


class ServerEnvError(Exception):
    """A variable `env` or `headers_env` names is not set in the kernel's environment."""


@dataclass(frozen=True)
class McpServerSpec:
    """One `mcp_servers:` entry; `url` None means stdio (`command`, `args`, `env`).

    `env` and `headers` are pairs of (name the server sees, name of the
    kernel's variable holding the value). `tools` None offers every tool the
    server lists. `template` and `yaml_path` say where it was declared (for
    errors); they are not part of its settings (`settings`).
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    tools: tuple[str, ...] | None = None
    timeout_secs: float = DEFAULT_TIMEOUT_SECS
    template: str = ""
    yaml_path: Path | None = None
    line: int | None = None
    templates: tuple[str, ...] = ()  # once settled: every template declaring it (nesting.py)

    @classmethod
    def from_yaml(
        cls, data: Mapping[str, Any], *, template: str, yaml_path: Path | None, line: int | None
    ) -> McpServerSpec:
        """An entry the template schema has already validated."""
        tools = data.get("tools")
        return cls(
            name=data["name"],
            command=data.get("command"),
            args=tuple(data.get("args", ())),
            env=tuple(sorted(data.get("env", {}).items())),
            url=data.get("url"),
            headers=tuple(sorted(data.get("headers_env", {}).items())),
            tools=tuple(tools) if tools is not None else None,
            timeout_secs=float(data.get("timeout_secs", DEFAULT_TIMEOUT_SECS)),
            template=template,
            yaml_path=yaml_path,
            line=line,
        )

    @property
    def settings(self) -> tuple[object, ...]:
        """What must agree when two templates declare one server name."""
        return (self.command, self.args, self.env, self.url, self.headers, self.tools, self.timeout_secs)

    @property
    def start_timeout_secs(self) -> float:
        """How long starting may take: `timeout_secs`, but at least MIN_START_SECS (a cold start is slow)."""
        return max(self.timeout_secs, MIN_START_SECS)

    @property
    def where(self) -> str:
        """`template T (path:line)`, for messages."""
        if self.yaml_path is None:
            return f"template {self.template}"
        line = f":{self.line}" if self.line is not None else ""
        return f"template {self.template} ({self.yaml_path}{line})"

    def offers(self, tool: str) -> bool:
        """Whether the outside tool `tool` (its own name) passes the `tools:` filter."""
        return self.tools is None or tool in self.tools

    def child_env(self) -> dict[str, str]:
        """`env` resolved from the kernel's environment; ServerEnvError naming what is missing."""
        return _resolved(self, self.env, "env")

    def header_values(self) -> dict[str, str]:
        """`headers_env` resolved from the kernel's environment; ServerEnvError naming what is missing."""
        return _resolved(self, self.headers, "headers_env")


def _resolved(spec: McpServerSpec, pairs: Iterable[tuple[str, str]], key: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for name, variable in pairs:
        value = os.environ.get(variable)
        if value is None:
            raise ServerEnvError(
                f"{key}.{name} names the environment variable {variable!r}, "
                f"which is not set in the kernel's environment"
            )
        values[name] = value
    return values


def parse_servers(
    items: Iterable[Mapping[str, Any]], *, template: str, yaml_path: Path | None, lines: YamlLines = NO_LINES
) -> tuple[McpServerSpec, ...]:
    """The validated `mcp_servers:` list of one template, as specs."""
    return tuple(
        McpServerSpec.from_yaml(item, template=template, yaml_path=yaml_path, line=lines.of("mcp_servers", i))
        for i, item in enumerate(items)
    )


def repeated_name(items: Iterable[Mapping[str, Any]]) -> int | None:
    """The index of the first `mcp_servers:` entry whose name an earlier entry has, or None."""
    seen: set[object] = set()
    for index, item in enumerate(items):
        if item.get("name") in seen:
            return index
        seen.add(item.get("name"))
    return None


def settle_servers(
    declared: Iterable[McpServerSpec],
) -> tuple[dict[str, McpServerSpec], list[LoadProblem]]:
    """Every server name → its one spec; a name two templates declare differently is refused.

    A server is one process (or one connection) shared by every template
    that names it, so its settings must agree; when they do not, neither
    template gets it, and each is told of the other.
    """
    claims: dict[str, list[McpServerSpec]] = {}
    for spec in declared:
        claims.setdefault(spec.name, []).append(spec)
    settled: dict[str, McpServerSpec] = {}
    problems: list[LoadProblem] = []
    for name, specs in claims.items():
        differing = [s for s in specs if s.settings != specs[0].settings]
        if not differing:
            settled[name] = replace(specs[0], templates=tuple(dict.fromkeys(s.template for s in specs)))
            continue
        for spec in specs:
            others = ", ".join(o.where for o in specs if o.settings != spec.settings)
            reason = (
                f"mcp_servers: server {name!r} is declared with other settings in {others}; "
                f"one name is one server: give them the same settings or different names"
            )
            problems.append(LoadProblem(spec.yaml_path or Path(spec.template), reason, spec.line))
    return settled, problems


def grant(server: str) -> str:
    """The allow-list entry granting every tool of `server` (`srv__*`)."""
    return f"{server}{GRANT_SUFFIX}"


def server_of(tool_name: str) -> str | None:
    """The server a consumed tool's name (`srv__tool`) belongs to; None for any other name."""
    server, separator, rest = tool_name.partition(SEPARATOR)
    if not separator or not rest or re.fullmatch(SERVER_NAME_PATTERN, server) is None:
        return None
    return server


def allows(allowed: frozenset[str] | None, tool_name: str) -> bool:
    """Whether an allow list (None: every tool) lets a caller call `tool_name`, server grants included."""
    if allowed is None or tool_name in allowed:
        return True
    server = server_of(tool_name)
    return server is not None and grant(server) in allowed


__all__ = [
    "DEFAULT_TIMEOUT_SECS",
    "MCP_SERVERS_SCHEMA",
    "SEPARATOR",
    "SERVER_NAME_PATTERN",
    "McpServerSpec",
    "ServerEnvError",
    "allows",
    "grant",
    "parse_servers",
    "repeated_name",
    "server_of",
    "settle_servers",
]
