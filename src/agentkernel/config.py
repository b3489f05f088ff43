"""Kernel and script YAML → typed, validated specs.

Every error names the file, the line and the field at fault (S2.5). Specs
keep the raw YAML mapping because a script receives it whole as `config`
(S3.2, S7.4), and the line of each key, for the checks made after loading.

Custom fields are legal in tool and hook YAML (S2.1, S2.2), but one that is
a near miss of a known field (`paramaters`, `event`, `scirpt`) is taken for
the typo it almost surely is: as written, the field would be silently unused.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError

from agentkernel.errors import ConfigError
from agentkernel.near_miss import close_match, did_you_mean
from agentkernel.parameters import describe as describe_parameters_problem
from agentkernel.parameters import parameters_problem
from agentkernel.types import JSONObject
from agentkernel.yaml_source import NO_LINES, KeyPath, YamlLines, dotted, load_yaml

CONFIG_ENV = "AGENTKERNEL_CONFIG"
DEFAULT_CONFIG = Path("config/kernel.yaml")
HOOK_EVENTS = ("before_user_message", "after_turn", "after_loop")
TOOL_NAME_PATTERN = "^[A-Za-z0-9_-]{1,64}$"
YAML_SUFFIXES = (".yaml", ".yml")

_LIMIT_FIELDS: dict[str, Any] = {
    "max_operations": {"type": "integer", "minimum": 1},
    "timeout_secs": {"type": "number", "exclusiveMinimum": 0},
    "memory_limit_mb": {"type": "integer", "minimum": 1},
}
"""The limits a tool or hook YAML may set for itself (S2.3), up to `limits.ceilings`."""

_KERNEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "root": {"type": "string"},
        "scripts": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "tools": {"type": "array", "items": {"type": "string"}},
                "hooks": {"type": "array", "items": {"type": "string"}},
                "env_deny": {"type": "array", "items": {"type": "string"}},
            },
        },
        "limits": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                **_LIMIT_FIELDS,
                "ceilings": {"type": "object", "additionalProperties": False, "properties": _LIMIT_FIELDS},
                "stack_limit_kb": {"type": "integer", "minimum": 64},
                "max_result_chars": {"type": "integer", "minimum": 100},
                "max_visual_chars": {"type": "integer", "minimum": 100},
                "max_log_lines": {"type": "integer", "minimum": 0},
                "max_log_line_chars": {"type": "integer", "minimum": 100},
                "max_log_chars": {"type": "integer", "minimum": 100},
                "history_per_tool": {"type": "integer", "minimum": 1},
                "history_sessions": {"type": "integer", "minimum": 1},
            },
        },
        "paths": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "temp_root": {"type": "string"},
                "data_dir": {"type": "string"},
                "templates": {"type": "string"},
            },
        },
        # sections validated by the modules that own them (llm/config.py, services/*.py)
        "llm": {"type": "object"},
        "logging": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "messages_db_path": {"type": "string", "minLength": 1},
                "state_db_path": {"type": "string", "minLength": 1},
            },
        },
        "server": {"type": "object"},
        "http": {"type": "object"},
        "shell": {"type": "object"},
        "files": {"type": "object"},
        "state": {"type": "object"},
        "duckdb": {"type": "object"},
    },
}

_WARNING_RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["message"],
    "properties": {
        "message": {"type": "string"},
        "failed": {"type": "boolean"},
        "contains": {"type": "string"},
    },
}

_COMMON_SPEC_PROPERTIES: dict[str, Any] = {
    "kind": {"enum": ["script_tool", "script_hook"]},
    "name": {"type": "string", "pattern": TOOL_NAME_PATTERN},
    "script": {"type": "string", "minLength": 1},
    **_LIMIT_FIELDS,
}

_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "name", "script"],
    "properties": {
        **_COMMON_SPEC_PROPERTIES,
        "description": {"type": "string"},
        "parameters": {"type": "object"},
        "ui": {"type": "object"},
        "warnings": {"type": "array", "items": _WARNING_RULE_SCHEMA},
    },
}

_HOOK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "name", "script"],
    "properties": {
        **_COMMON_SPEC_PROPERTIES,
        "events": {"type": "array", "items": {"enum": list(HOOK_EVENTS)}, "uniqueItems": True},
        "priority": {"type": "integer"},
    },
}


@dataclass(frozen=True)
class Ceilings:
    """`limits.ceilings`: the most a tool or hook YAML may ask for, limit by limit.

    A script's YAML may lower the kernel's limits for itself, and raise them
    only up to these, so an operator's bound holds whatever a script's author
    writes. None means the default ceiling: the kernel's own value for
    `timeout_secs` and `memory_limit_mb` (nothing may be raised unless the
    operator allows it), and none for `max_operations`, which only ends
    runaway loops early: every call is still bounded by its `timeout_secs`.
    """

    max_operations: int | None = None
    timeout_secs: float | None = None
    memory_limit_mb: int | None = None


@dataclass(frozen=True)
class Limits:
    """Bounds on one script call and on what its result may carry."""

    max_operations: int = 100_000_000
    timeout_secs: float = 30.0
    memory_limit_mb: int = 64
    stack_limit_kb: int = 1024
    max_result_chars: int = 50_000
    max_visual_chars: int = 2_000_000
    max_log_lines: int = 200
    max_log_line_chars: int = 10_000
    max_log_chars: int = 200_000
    history_per_tool: int = 20
    history_sessions: int = 1000
    ceilings: Ceilings = field(default_factory=Ceilings)

    def ceiling(self, name: str) -> int | float | None:
        """The highest value a script's YAML may give the limit `name`; None: no ceiling."""
        own: int | float | None = getattr(self.ceilings, name)
        if own is not None or name == "max_operations":
            return own
        default: int | float = getattr(self, name)
        return default

    def ceiling_problem(self, name: str, wanted: int | float | None) -> str | None:
        """Why a script's YAML may not set `name: wanted`, or None when it may."""
        top = self.ceiling(name)
        if wanted is None or top is None or wanted <= top:
            return None
        if getattr(self.ceilings, name) is not None:
            where = f"limits.ceilings.{name}: {_number(top)} in kernel.yaml"
        else:
            where = (
                f"the kernel's own limits.{name}: {_number(top)}; an operator allows more "
                f"with limits.ceilings.{name} in kernel.yaml"
            )
        return f"{name}: {_number(wanted)} is above the ceiling ({where})"


def _number(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


@dataclass(frozen=True)
class ScriptLimits:
    """The limits an engine enforces on one call (S21.1, S2.3)."""

    max_operations: int
    timeout_secs: float
    memory_limit_bytes: int
    stack_limit_bytes: int


@dataclass(frozen=True)
class CallBudget(ScriptLimits):
    """The limits of one script call and the moment it must end, fixed once when the call starts.

    The dispatcher (or the hook runner) makes it; compiling the script, the
    engine's clock and a helper's own timeout all read this one `deadline`
    (a `time.monotonic()` value), so `timeout_secs` bounds the whole call.
    """

    deadline: float

    @classmethod
    def starting_now(cls, limits: ScriptLimits) -> CallBudget:
        return cls(
            max_operations=limits.max_operations,
            timeout_secs=limits.timeout_secs,
            memory_limit_bytes=limits.memory_limit_bytes,
            stack_limit_bytes=limits.stack_limit_bytes,
            deadline=time.monotonic() + limits.timeout_secs,
        )

    def remaining_secs(self) -> float:
        """Seconds left before the deadline; 0 once it passed."""
        return max(0.0, self.deadline - time.monotonic())


@dataclass(frozen=True)
class KernelConfig:
    """The kernel's settings (S2.4); relative paths are already resolved."""

    root: Path
    tool_dirs: tuple[Path, ...]
    hook_dirs: tuple[Path, ...]
    limits: Limits = field(default_factory=Limits)
    temp_root: Path = Path("data/tmp")
    data_dir: Path = Path("data")
    templates_dir: Path = Path("config/templates")
    messages_db: Path = Path("data/messages.db")
    llm: JSONObject | None = None
    raw: JSONObject = field(default_factory=dict)  # the whole kernel.yaml, for sections owned elsewhere
    env_deny: tuple[str, ...] = ()
    path: Path | None = None


@dataclass(frozen=True)
class WarningRule:
    """One `warnings:` rule (S5.1): all given conditions must hold."""

    message: str
    failed: bool | None = None
    contains: str | None = None


@dataclass(frozen=True)
class ScriptSpec:
    """What tools and hooks share: a name, a script and per-call limits."""

    name: str
    script: Path
    yaml_path: Path
    raw: JSONObject
    max_operations: int | None = None
    timeout_secs: float | None = None
    memory_limit_mb: int | None = None
    lines: YamlLines = field(default=NO_LINES, compare=False, repr=False)

    def script_limits(self, defaults: Limits) -> ScriptLimits:
        """This spec's own limits where set, the kernel's defaults elsewhere, never above a ceiling.

        Loading refuses a YAML over a ceiling (`ceiling_problem`); the cap here
        keeps that promise for a spec that was built some other way.
        """

        def own(name: str, value: int | float | None) -> Any:
            chosen = value or getattr(defaults, name)
            top = defaults.ceiling(name)
            return chosen if top is None else min(chosen, top)

        return ScriptLimits(
            max_operations=own("max_operations", self.max_operations),
            timeout_secs=own("timeout_secs", self.timeout_secs),
            memory_limit_bytes=own("memory_limit_mb", self.memory_limit_mb) << 20,
            stack_limit_bytes=defaults.stack_limit_kb << 10,
        )

    def call_budget(self, defaults: Limits) -> CallBudget:
        """The budget of one call starting now: `script_limits`, and the deadline they give."""
        return CallBudget.starting_now(self.script_limits(defaults))


@dataclass(frozen=True)
class ToolSpec(ScriptSpec):
    """A `kind: script_tool` YAML (S2.1)."""

    description: str = ""
    parameters: JSONObject = field(default_factory=lambda: {"type": "object"})
    ui: JSONObject = field(default_factory=dict)
    warnings: tuple[WarningRule, ...] = ()

    @cached_property
    def validator(self) -> Draft202012Validator:
        """The compiled `parameters` schema, built once per loaded spec."""
        return Draft202012Validator(self.parameters)


@dataclass(frozen=True)
class HookSpec(ScriptSpec):
    """A `kind: script_hook` YAML (S2.2); `events` None means every defined one."""

    events: tuple[str, ...] | None = None
    priority: int = 0


def _first_error(validator: Draft202012Validator, data: object) -> ValidationError | None:
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), str(e.path)))
    return errors[0] if errors else None


def describe_validation_error(error: ValidationError | SchemaError) -> str:
    """`field.sub[0]: message` — the field path first, so the culprit is obvious."""
    where = dotted(error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def _unknown_keys(error: ValidationError) -> tuple[str, KeyPath] | None:
    """`unknown key 'x' (allowed: …); did you mean …`, and the first unknown key's path."""
    schema, instance = error.schema, error.instance
    if error.validator != "additionalProperties" or not isinstance(schema, Mapping):
        return None
    if not isinstance(instance, Mapping):
        return None
    allowed = sorted(schema.get("properties", {}))
    unknown = [k for k in sorted(map(str, instance)) if k not in allowed]
    noun = "key" if len(unknown) == 1 else "keys"
    text = f"unknown {noun} {', '.join(map(repr, unknown))} (allowed: {', '.join(allowed)})"
    text += did_you_mean(unknown[0], set(allowed) - set(instance)) if unknown else ""
    where = dotted(error.absolute_path)
    return (f"{where}: {text}" if where else text), (*error.absolute_path, *unknown[:1])


def yaml_error(path: Path, lines: YamlLines, error: ValidationError) -> ConfigError:
    """A schema error in a YAML file as a ConfigError with the line of the key at fault.

    Unknown keys of a closed mapping are listed with the allowed ones, and a
    value outside an `enum` of names gets the closest name as a suggestion.
    """
    unknown = _unknown_keys(error)
    if unknown is not None:
        return ConfigError(path, unknown[0], lines.of(*unknown[1]))
    text = describe_validation_error(error)
    names = error.validator_value
    if error.validator == "enum" and isinstance(error.instance, str) and isinstance(names, list):
        text += did_you_mean(error.instance, [str(v) for v in names])
    return ConfigError(path, text, lines.of(*error.absolute_path))


def read_yaml(path: Path) -> object:
    """Parse one YAML file, turning every failure into a ConfigError naming it (and its line)."""
    return load_yaml(path)[0]


_KERNEL_VALIDATOR = Draft202012Validator(_KERNEL_SCHEMA)
_TOOL_VALIDATOR = Draft202012Validator(_TOOL_SCHEMA)
_HOOK_VALIDATOR = Draft202012Validator(_HOOK_SCHEMA)


def find_kernel_config(explicit: Path | None = None, start: Path | None = None) -> Path:
    """The project's kernel.yaml, found the way git finds its repository.

    `explicit` (`--config`), else $AGENTKERNEL_CONFIG, else the nearest
    `config/kernel.yaml` in `start` (default: the working directory) or any
    folder above it. Commands given a file (`tool run PATH.yaml`, `hook_tool
    PATH.yaml`) start from that file's folder, so they use the file's own
    project wherever they are run from — and never invent a project (and its
    `data/` folder) beside a stray YAML. Nothing found is a ConfigError that
    says where it looked.
    """
    if explicit is not None:
        return _existing_config(explicit, "--config")
    from_env = os.environ.get(CONFIG_ENV)
    if from_env:
        return _existing_config(Path(from_env), f"${CONFIG_ENV}")
    here = Path.cwd().resolve()
    origin = (start or here).resolve()
    for folder in (origin, *origin.parents):
        candidate = folder / DEFAULT_CONFIG
        if candidate.is_file():  # shown as people typed it: relative when under the working directory
            _refuse_foreign_owner(candidate)
            return candidate.relative_to(here) if candidate.is_relative_to(here) else candidate
    raise ConfigError(
        None,
        f"no project found: looked for {DEFAULT_CONFIG} in {origin} and every folder above it; "
        f"run from inside a project, pass --config FILE, or set {CONFIG_ENV}",
    )


def _refuse_foreign_owner(candidate: Path) -> None:
    """A project found by searching upward must belong to you (or root), as git requires of a repository.

    Otherwise anyone who can write `/tmp/config/kernel.yaml` chooses which
    scripts run when you type `agentkernel tool run …` anywhere under /tmp.
    `--config` and $AGENTKERNEL_CONFIG name a file on purpose and skip this.
    """
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # no owners to compare (Windows)
        return
    owner = candidate.stat().st_uid
    if owner not in (getuid(), 0):
        raise ConfigError(
            candidate,
            f"found by searching upward, but owned by another user (uid {owner}); "
            "use it on purpose with --config or $AGENTKERNEL_CONFIG",
        )


def _existing_config(path: Path, given_by: str) -> Path:
    if not path.is_file():
        raise ConfigError(path, f"kernel config not found (given by {given_by})")
    return path


def load_kernel_config(path: Path | None) -> KernelConfig:
    """Load kernel.yaml; with no file, the embedded defaults rooted at the cwd.

    Relative paths resolve against `root`, which defaults to the folder above
    the one holding kernel.yaml (the project folder for `config/kernel.yaml`).
    """
    if path is None:
        return _kernel_config_from({}, Path.cwd(), None)
    data, lines = load_yaml(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(path, f"expected a mapping at the top, got {type(data).__name__}")
    error = _first_error(_KERNEL_VALIDATOR, data)
    if error is not None:
        raise yaml_error(path, lines, error)
    base = path.resolve().parent.parent
    root = (base / data["root"]).resolve() if "root" in data else base
    config = _kernel_config_from(data, root, path)
    _refuse_low_ceilings(path, lines, config.limits)
    return config


def _refuse_low_ceilings(path: Path, lines: YamlLines, limits: Limits) -> None:
    """A ceiling below the kernel's own default would refuse every script that sets nothing."""
    for name in _LIMIT_FIELDS:
        top = getattr(limits.ceilings, name)
        default = getattr(limits, name)
        if top is not None and top < default:
            raise ConfigError(
                path,
                f"limits.ceilings.{name}: {_number(top)} is below limits.{name} ({_number(default)}), "
                "the value every script gets unless its YAML says otherwise",
                lines.of("limits", "ceilings", name),
            )


def _limits(section: Mapping[str, Any]) -> Limits:
    own = dict(section)
    ceilings = Ceilings(**own.pop("ceilings", {}))
    return Limits(**own, ceilings=ceilings)


def _kernel_config_from(data: dict[str, Any], root: Path, path: Path | None) -> KernelConfig:
    scripts = data.get("scripts", {})
    paths = data.get("paths", {})
    return KernelConfig(
        root=root,
        tool_dirs=tuple(root / d for d in scripts.get("tools", ["config/scripts/tools"])),
        hook_dirs=tuple(root / d for d in scripts.get("hooks", ["config/scripts/hooks"])),
        limits=_limits(data.get("limits", {})),
        temp_root=root / paths.get("temp_root", "data/tmp"),
        data_dir=root / paths.get("data_dir", "data"),
        templates_dir=root / paths.get("templates", "config/templates"),
        messages_db=root / data.get("logging", {}).get("messages_db_path", "data/messages.db"),
        llm=data.get("llm"),
        raw=data,
        env_deny=tuple(scripts.get("env_deny", [])),
        path=path,
    )


def _yaml_scalar_to_json(value: object) -> str:
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"value {value!r} of type {type(value).__name__} has no JSON form")


def json_safe_yaml(path: Path, data: object) -> Any:
    """The YAML value as plain JSON: dates become ISO text; cycles are refused.

    Scripts receive `config` as JSON (S3.2), so anything YAML can express and
    JSON cannot (recursive aliases, NaN, binary) is settled here, at load.
    """
    try:
        return json.loads(json.dumps(data, default=_yaml_scalar_to_json, allow_nan=False))
    except (ValueError, TypeError, RecursionError) as exc:
        raise ConfigError(path, f"value cannot be passed to a script as JSON: {exc}") from exc


def _refuse_near_misses(yaml_path: Path, data: Mapping[str, Any], lines: YamlLines, known: set[str]) -> None:
    """A custom field is fine; one a letter or two away from an absent known field is a typo."""
    absent = known - set(data)
    for key in data:
        match = close_match(key, absent) if key not in known else None
        if match is not None:
            raise ConfigError(yaml_path, f"{key}: unknown field; did you mean {match!r}?", lines.of(key))


def _refuse_over_ceilings(yaml_path: Path, data: Mapping[str, Any], lines: YamlLines, limits: Limits) -> None:
    for name in _LIMIT_FIELDS:
        problem = limits.ceiling_problem(name, data.get(name))
        if problem is not None:
            raise ConfigError(yaml_path, problem, lines.of(name))


def load_script_spec(yaml_path: Path, limits: Limits | None = None) -> ToolSpec | HookSpec:
    """Load one `kind: script_tool|script_hook` YAML, validated, script found.

    With the kernel's `limits`, a YAML that raises a limit over its ceiling
    is refused too (`limits.ceilings`).
    """
    raw, lines = load_yaml(yaml_path)
    data = json_safe_yaml(yaml_path, raw)
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise ConfigError(yaml_path, f"expected a mapping with `kind`, got {got}")
    kind = data.get("kind")
    if kind not in ("script_tool", "script_hook"):
        reason = f"kind: expected 'script_tool' or 'script_hook', got {kind!r}"
        if isinstance(kind, str):
            reason += did_you_mean(kind, ("script_tool", "script_hook"))
        raise ConfigError(yaml_path, reason, lines.of("kind"))
    schema = _TOOL_SCHEMA if kind == "script_tool" else _HOOK_SCHEMA
    _refuse_near_misses(yaml_path, data, lines, set(schema["properties"]))
    error = _first_error(_TOOL_VALIDATOR if kind == "script_tool" else _HOOK_VALIDATOR, data)
    if error is not None:
        raise yaml_error(yaml_path, lines, error)
    if limits is not None:
        _refuse_over_ceilings(yaml_path, data, lines, limits)
    script = (yaml_path.parent / data["script"]).resolve()
    if not script.is_file():
        reason = f"script: file {data['script']!r} not found (looked at {script})"
        raise ConfigError(yaml_path, reason, lines.of("script"))
    common: dict[str, Any] = {
        "name": data["name"],
        "script": script,
        "yaml_path": yaml_path.resolve(),
        "raw": data,
        "max_operations": data.get("max_operations"),
        "timeout_secs": data.get("timeout_secs"),
        "memory_limit_mb": data.get("memory_limit_mb"),
        "lines": lines,
    }
    if kind == "script_hook":
        events = data.get("events")
        return HookSpec(
            **common,
            events=tuple(events) if events is not None else None,
            priority=data.get("priority", 0),
        )
    return _tool_spec(yaml_path, data, common)


def _tool_spec(yaml_path: Path, data: Mapping[str, Any], common: dict[str, Any]) -> ToolSpec:
    parameters = data.get("parameters", {"type": "object"})
    problem = parameters_problem(parameters)
    if problem is not None:
        line = common["lines"].of("parameters", *problem.path)
        raise ConfigError(yaml_path, describe_parameters_problem(problem), line)
    rules = tuple(
        WarningRule(message=r["message"], failed=r.get("failed"), contains=r.get("contains"))
        for r in data.get("warnings", [])
    )
    return ToolSpec(
        **common,
        description=data.get("description", ""),
        parameters=parameters,
        ui=data.get("ui", {}),
        warnings=rules,
    )


__all__ = [
    "HOOK_EVENTS",
    "CallBudget",
    "Ceilings",
    "HookSpec",
    "KernelConfig",
    "Limits",
    "ScriptLimits",
    "ScriptSpec",
    "ToolSpec",
    "WarningRule",
    "describe_validation_error",
    "find_kernel_config",
    "json_safe_yaml",
    "load_kernel_config",
    "load_script_spec",
    "read_yaml",
    "yaml_error",
]
