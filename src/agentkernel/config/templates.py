"""Agent templates (S23.1): `config/templates/*.yaml` → validated `TemplateSpec`s.

A template says what an agent is: its instructions, model settings, the tools
it may call, the hooks it passes through, its token budget and how many LLM
calls one run may make. Loading is forgiving per file (a bad file becomes a
`LoadProblem`, the others still load) and strict per field: the validator of
kernel.yaml (config/schema.py) refuses unknown keys and wrong types, naming
the file, the line and the field (S2.5).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkernel.config import TOOL_NAME_PATTERN, YAML_SUFFIXES, json_safe_yaml, read_yaml_file, yaml_error
from agentkernel.config.mcp_servers import (
    MCP_SERVERS_SCHEMA,
    McpServerSpec,
    grant,
    parse_servers,
    repeated_name,
)
from agentkernel.config.schema import StrictValidator, first_error
from agentkernel.errors import ConfigError, LoadProblem, name_clash
from agentkernel.types import JSONObject
from agentkernel.util.file_stamps import Stamp, stamp_of
from agentkernel.util.folder_watch import RESCAN_SECS, FolderWatch
from agentkernel.util.near_miss import did_you_mean
from agentkernel.util.yaml_source import NO_LINES, YamlLines, dotted

DEFAULT_MAX_TURNS = 8
_KNOWN_SHOWN = 20  # names listed in an "unknown tool" message before "… and N more"

_NAME: dict[str, Any] = {"type": "string", "pattern": TOOL_NAME_PATTERN}
_NAME_LIST: dict[str, Any] = {"type": "array", "items": _NAME, "uniqueItems": True}

_PROVIDER_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9_.-]{1,64}$"}  # as kernel.yaml's llm names one
_TEMPLATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "instructions"],
    "properties": {
        "name": _NAME,
        "description": {"type": "string"},
        "instructions": {"type": "string", "minLength": 1},
        "model": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "max_tokens": {"type": "integer", "minimum": 1},
                "temperature": {"type": "number", "minimum": 0, "maximum": 2},
                "provider": _PROVIDER_NAME,
                "providers": {"type": "array", "items": _PROVIDER_NAME, "uniqueItems": True},
            },
        },
        "tools": _NAME_LIST,
        "hooks": _NAME_LIST,
        "budget": {
            "type": "object",
            "additionalProperties": False,
            "required": ["tokens"],
            "properties": {"tokens": {"type": "integer", "minimum": 1}},
        },
        "max_turns": {"type": "integer", "minimum": 1},
        "mcp_servers": MCP_SERVERS_SCHEMA,
    },
}
_TEMPLATE_VALIDATOR = StrictValidator(_TEMPLATE_SCHEMA)


@dataclass(frozen=True)
class ModelSettings:
    """The template's model choice; None everywhere means the kernel's defaults.

    `provider` names the provider of kernel.yaml's `llm:` its LLM calls ask
    first (its scripts' `llm()` too); `providers` are the others its
    scripts may name in `llm({provider})` (S26.4).
    """

    name: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    provider: str | None = None
    providers: tuple[str, ...] = ()


@dataclass(frozen=True)
class TemplateSpec:
    """One agent template, as loaded (or built in code, then `yaml_path` is None).

    `tools` is an explicit list because a template is an access list: a
    wildcard would silently grant every tool added later. `budget_tokens`
    None means unlimited; it bounds a process spawned from the template
    together with all of its children (S17). `raw` is the YAML mapping as
    JSON, kept for tooling and for hooks that want to read it.
    `mcp_servers` are the outside MCP servers whose tools (`srv__tool`) it
    may call too (tools/sources/mcp/).
    """

    name: str
    instructions: str
    description: str = ""
    model: ModelSettings = field(default_factory=ModelSettings)
    tools: tuple[str, ...] = ()
    hooks: tuple[str, ...] = ()
    budget_tokens: int | None = None
    max_turns: int = DEFAULT_MAX_TURNS
    yaml_path: Path | None = None
    raw: JSONObject = field(default_factory=dict)
    lines: YamlLines = field(default=NO_LINES, compare=False, repr=False)
    mcp_servers: tuple[McpServerSpec, ...] = ()

    def allowed_tools(self) -> frozenset[str]:
        """The allow list of a process of this template: the one place it is made.

        Its `tools`, and a grant (`srv__*`) per MCP server, which lets it
        call whichever tools that server offers (their names are known only
        once the server runs: nothing is started to build this list).
        """
        return frozenset((*self.tools, *(grant(s.name) for s in self.mcp_servers)))


# -- one file ------------------------------------------------------------------------


def _refuse_wildcards(path: Path, data: Mapping[str, Any], lines: YamlLines) -> None:
    """`"*"` gets its own message: the schema's pattern error would not say why."""
    for key in ("tools", "hooks"):
        names = data.get(key)
        if isinstance(names, list) and "*" in names:
            index = names.index("*")
            reason = f"{key}[{index}]: '*' is not allowed; list each {key[:-1]} by name"
            raise ConfigError(path, reason, lines.of(key, index))


def _validate(path: Path, data: object, lines: YamlLines) -> dict[str, Any]:
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise ConfigError(path, f"expected a mapping with `name` and `instructions`, got {got}")
    _refuse_wildcards(path, data, lines)
    error = first_error(_TEMPLATE_VALIDATOR, data)
    if error is not None:
        raise yaml_error(path, lines, error, _TEMPLATE_SCHEMA, data)
    twice = repeated_name(data.get("mcp_servers", ()))
    if twice is not None:
        name = data["mcp_servers"][twice]["name"]
        reason = f"mcp_servers[{twice}].name: server {name!r} is listed twice"
        raise ConfigError(path, reason, lines.of("mcp_servers", twice, "name"))
    return data


def load_template(path: Path) -> TemplateSpec:
    """Load and validate one template YAML; raises ConfigError naming file, line and field."""
    raw, lines = read_yaml_file(path)
    data = _validate(path, json_safe_yaml(path, raw), lines)
    model = data.get("model", {})
    temperature = model.get("temperature")
    return TemplateSpec(
        name=data["name"],
        instructions=data["instructions"],
        description=data.get("description", ""),
        model=ModelSettings(
            name=model.get("name"),
            max_tokens=model.get("max_tokens"),
            temperature=float(temperature) if temperature is not None else None,
            provider=model.get("provider"),
            providers=tuple(model.get("providers", ())),
        ),
        tools=tuple(data.get("tools", ())),
        hooks=tuple(data.get("hooks", ())),
        budget_tokens=data.get("budget", {}).get("tokens"),
        max_turns=data.get("max_turns", DEFAULT_MAX_TURNS),
        yaml_path=path.resolve(),
        raw=data,
        lines=lines,
        mcp_servers=parse_servers(
            data.get("mcp_servers", ()), template=data["name"], yaml_path=path.resolve(), lines=lines
        ),
    )


# -- a folder ------------------------------------------------------------------------


def _template_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in YAML_SUFFIXES and p.is_file())


def load_templates(folder: Path) -> tuple[dict[str, TemplateSpec], list[LoadProblem]]:
    """Every template in `folder` (not its subfolders), and a problem per bad file.

    A missing folder is simply empty: a kernel without templates is valid
    (tools can still be called). Two files claiming one name are both
    refused, each naming the other: which one would win is an accident of
    file names, and renaming a copy must never silently swap an agent.
    """
    return TemplateFolder(folder).load()


class TemplateFolder:
    """`load_templates` of one folder, again and again: a file is parsed again only when it changed, and
    the folder is looked at again only when its watch saw a change or its last look is RESCAN_SECS old.

    The kernel asks for its templates on every new session, new chat,
    continuation page, cron firing and MCP listing, so that an edit shows at
    once (S2.4); parsing and validating every file each time cost about 1 ms
    a file. A `stat` a file (file_stamps.py) says whether its last parse
    stands; the folder's watch (util/folder_watch.py) says whether the last
    look does, so a lookup while nothing changed asks no file, as the tool
    catalog's does.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._parsed: dict[Path, tuple[Stamp, TemplateSpec | LoadProblem]] = {}
        self._watch: FolderWatch | None = FolderWatch()
        self._looked_at = -RESCAN_SECS  # time.monotonic() of the last look the watch vouches for

    def load(self) -> tuple[dict[str, TemplateSpec], list[LoadProblem]]:
        """The templates and a problem per bad file, as `load_templates` says."""
        claims: dict[str, list[tuple[Path, TemplateSpec]]] = {}
        problems: list[LoadProblem] = []
        for path, parsed in self._current():
            if isinstance(parsed, LoadProblem):
                problems.append(parsed)
            else:
                claims.setdefault(parsed.name, []).append((path, parsed))
        templates: dict[str, TemplateSpec] = {}
        for name, claimants in claims.items():
            if len(claimants) == 1:
                templates[name] = claimants[0][1]
                continue
            problems += name_clash([(path, spec.lines.of("name")) for path, spec in claimants], name)
        return templates, problems

    def close(self) -> None:
        """Stop watching the folder (a later `load` looks at the files each time)."""
        with self._lock:
            if self._watch is not None:
                self._watch.close()
                self._watch = None

    def _current(self) -> list[tuple[Path, TemplateSpec | LoadProblem]]:
        """Each file's template or problem, parsing only the files that changed since their last parse."""
        with self._lock:
            if not self._look_stands():
                self._look()
            return [(path, result) for path, (_, result) in self._parsed.items()]

    def _look_stands(self) -> bool:
        """Whether the last look is what a look now would find: younger than RESCAN_SECS (the watch cannot
        see every change) and no change seen by the watch since."""
        watch = self._watch
        return watch is not None and time.monotonic() - self._looked_at < RESCAN_SECS and not watch.changed()

    def _look(self) -> None:
        if self._watch is not None:
            self._watch.watch([self.folder])  # watched before it is read: no change between goes unseen
            self._watch.changed()  # the changes seen so far are this look's: only later ones mark it
        now = time.monotonic()
        parsed: dict[Path, tuple[Stamp, TemplateSpec | LoadProblem]] = {}
        for path in _template_files(self.folder):
            stamp = stamp_of(path)
            known = self._parsed.get(path)
            parsed[path] = known if known is not None and known[0] == stamp else (stamp, _parse(path))
        self._parsed = parsed
        self._looked_at = now


def _parse(path: Path) -> TemplateSpec | LoadProblem:
    try:
        return load_template(path)
    except ConfigError as exc:
        return LoadProblem.from_error(path, exc)


# -- references ----------------------------------------------------------------------


def _known(names: set[str]) -> str:
    if not names:
        return "none"
    shown = sorted(names)[:_KNOWN_SHOWN]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f", … and {more} more" if more else "")


def _unknown_names(
    template: TemplateSpec, key: str, names: tuple[str, ...], known: set[str]
) -> list[LoadProblem]:
    """`tools[1]: unknown tool 'nope' (known: …)` for each name not in `known`, at its line."""
    where = template.yaml_path or Path(template.name)
    return [
        LoadProblem(
            where,
            f"template {template.name}: {key}[{i}]: unknown {key[:-1]} {n!r} (known: {_known(known)})"
            + did_you_mean(n, known),
            template.lines.of(key, i),
        )
        for i, n in enumerate(names)
        if n not in known
    ]


def check_references(
    templates: Mapping[str, TemplateSpec],
    tool_names: Iterable[str],
    hook_names: Iterable[str],
    provider_names: Iterable[str] | None = None,
) -> list[LoadProblem]:
    """A problem for every tool or hook a template names that is not loaded, and every LLM provider it
    names that kernel.yaml's `llm:` does not (`provider_names` None: no `llm:`, nothing to check).

    Run after tools and hooks are loaded: a typo in a template would
    otherwise surface only when the LLM first tries the tool, mid-chat.
    """
    tools, hooks = set(tool_names), set(hook_names)
    problems: list[LoadProblem] = []
    for template in templates.values():
        problems += _unknown_names(template, "tools", template.tools, tools)
        problems += _unknown_names(template, "hooks", template.hooks, hooks)
        if provider_names is not None:
            problems += _unknown_providers(template, set(provider_names))
    return problems


def _unknown_providers(template: TemplateSpec, known: set[str]) -> list[LoadProblem]:
    """`model.provider: unknown LLM provider 'x' (known: …)` for each provider name `llm:` lacks (S26.4)."""
    where = template.yaml_path or Path(template.name)
    named: list[tuple[tuple[str | int, ...], str]] = []
    if template.model.provider:
        named.append((("model", "provider"), template.model.provider))
    named += [(("model", "providers", i), n) for i, n in enumerate(template.model.providers)]
    return [
        LoadProblem(
            where,
            f"template {template.name}: {dotted(at)}: unknown LLM provider {n!r} "
            f"(kernel.yaml `llm:` names: {_known(known)})" + did_you_mean(n, known),
            template.lines.of(*at),
        )
        for at, n in named
        if n not in known
    ]


__all__ = [
    "DEFAULT_MAX_TURNS",
    "ModelSettings",
    "TemplateFolder",
    "TemplateSpec",
    "check_references",
    "load_template",
    "load_templates",
]
