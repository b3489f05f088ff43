"""Tool and hook YAML (S2.1, S2.2) → typed, validated specs.

Every error names the file, the line and the field at fault (S2.5). Specs
keep the raw YAML mapping because a script receives it whole as `config`
(S3.2, S7.4), and the line of each key, for the checks made after loading.

Custom fields are legal in tool and hook YAML (S2.1, S2.2), but one that is
a near miss of a known field (`paramaters`, `event`, `scirpt`) is taken for
the typo it almost surely is: as written, the field would be silently unused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from agentkernel.config.limits import LIMIT_FIELDS, CallBudget, KernelLimits, ScriptLimits
from agentkernel.config.schema import StrictValidator, first_error, yaml_error
from agentkernel.config.yaml_files import read_yaml_file
from agentkernel.errors import ConfigError
from agentkernel.schemas.bounds import bounded_validator
from agentkernel.schemas.parameters import describe as describe_parameters_problem
from agentkernel.schemas.parameters import parameters_problem
from agentkernel.types import JSONObject
from agentkernel.util.file_stamps import Stamp
from agentkernel.util.near_miss import close_match, did_you_mean
from agentkernel.util.yaml_source import NO_LINES, YamlLines

HOOK_EVENTS = (
    "before_user_message",
    "after_turn",
    "after_loop",
    "before_tool_call",
    "after_tool_call",
    "before_llm_call",
)
ON_ERROR = ("deny", "allow")  # a hook's `on_error:` (S24.2): what a failing before_tool_call does
TOOL_NAME_PATTERN = "^[A-Za-z0-9_-]{1,64}$"
YAML_SUFFIXES = (".yaml", ".yml")

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

KINDS = ("script_tool", "script_hook", "python_tool")
PYTHON_FUNCTION_PATTERN = r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"

_COMMON_SPEC_PROPERTIES: dict[str, Any] = {
    "kind": {"enum": list(KINDS)},
    "name": {"type": "string", "pattern": TOOL_NAME_PATTERN},
    "script": {"type": "string", "minLength": 1},
    "overrides": {"enum": ["builtin"]},  # this project file replaces the built-in of its name
    **LIMIT_FIELDS,
}

_TOOL_PROPERTIES: dict[str, Any] = {
    **_COMMON_SPEC_PROPERTIES,
    "description": {"type": "string"},
    "parameters": {"type": "object"},
    "ui": {"type": "object"},
    "warnings": {"type": "array", "items": _WARNING_RULE_SCHEMA},
    "idempotent": {"type": "boolean"},  # S25.3: a call cut short by a crash may run again
    "approval": {"enum": ["always", "never"]},  # S24.4: every call waits for a person's decision
    "approvers": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True},
    "tests": {},  # cases for `agentkernel tool test`, checked by testing/cases.py (not needed to load)
}

_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "name", "script"],
    "properties": _TOOL_PROPERTIES,
}

_PYTHON_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "name", "function"],
    "properties": {
        **{k: v for k, v in _TOOL_PROPERTIES.items() if k != "script"},
        "function": {"type": "string", "pattern": PYTHON_FUNCTION_PATTERN},
    },
}

_HOOK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "name", "script"],
    "properties": {
        **_COMMON_SPEC_PROPERTIES,
        "events": {"type": "array", "items": {"enum": list(HOOK_EVENTS)}, "uniqueItems": True},
        "priority": {"type": "integer"},
        "on_error": {"enum": list(ON_ERROR)},
        "tests": {},  # cases for `agentkernel hook test`, checked by testing/hook_cases.py
    },
}

_SCHEMAS: dict[str, dict[str, Any]] = {
    "script_tool": _TOOL_SCHEMA,
    "script_hook": _HOOK_SCHEMA,
    "python_tool": _PYTHON_TOOL_SCHEMA,
}
_VALIDATORS = {kind: StrictValidator(schema) for kind, schema in _SCHEMAS.items()}


@dataclass(frozen=True)
class WarningRule:
    """One `warnings:` rule (S5.1): all given conditions must hold."""

    message: str
    failed: bool | None = None
    contains: str | None = None


@dataclass(frozen=True)
class ScriptSpec:
    """What tools and hooks share: a name, a script and per-call limits.

    `origin` is "builtin" for the package's own (agentkernel/builtins), else
    "project"; `overrides_builtin` is a project file's `overrides: builtin`.
    A python_tool's `script` is its module's file: what is watched for edits.
    """

    name: str
    script: Path
    yaml_path: Path
    raw: JSONObject
    max_operations: int | None = None
    timeout_secs: float | None = None
    memory_limit_mb: int | None = None
    lines: YamlLines = field(default=NO_LINES, compare=False, repr=False)
    origin: str = "project"
    overrides_builtin: bool = False

    def script_limits(self, defaults: KernelLimits) -> ScriptLimits:
        """This spec's own limits where set, the kernel's defaults elsewhere, never above a ceiling.

        Loading refuses a YAML over a ceiling (`ceiling_problem`); the cap here
        keeps that promise for a spec that was built some other way. Asked at
        every call with the kernel's one `defaults`: the answer for the last
        defaults is kept (both are frozen, so it cannot go stale).
        """
        kept = self.__dict__.get("_limits_for")
        if kept is not None and kept[0] is defaults:
            return kept[1]  # type: ignore[no-any-return]
        limits = self._script_limits(defaults)
        object.__setattr__(self, "_limits_for", (defaults, limits))
        return limits

    def _script_limits(self, defaults: KernelLimits) -> ScriptLimits:
        """`script_limits` worked out."""

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

    def call_budget(self, defaults: KernelLimits) -> CallBudget:
        """The budget of one call starting now: `script_limits`, and the deadline they give."""
        return CallBudget.starting_now(self.script_limits(defaults))

    @property
    def script_stamp(self) -> Stamp:
        """The script file's stamp when the tool catalog made this spec, which it hands out only
        while the file still has it (`stamped`); None for a spec made another way."""
        return self.__dict__.get("_script_stamp")

    def stamped(self, stamp: Stamp) -> None:
        """Record `script_stamp` (the spec is frozen: set once, by whoever made it)."""
        object.__setattr__(self, "_script_stamp", stamp)


@dataclass(frozen=True)
class ToolSpec(ScriptSpec):
    """A `kind: script_tool` YAML (S2.1)."""

    description: str = ""
    parameters: JSONObject = field(default_factory=lambda: {"type": "object"})
    ui: JSONObject = field(default_factory=dict)
    warnings: tuple[WarningRule, ...] = ()
    function: str | None = None  # a python_tool's `module:callable`, below agentkernel.builtins
    # S25.3: a call that started but whose process died before its result was recorded runs again
    # only when its tool says so; otherwise the LLM is told it was interrupted
    idempotent: bool = False
    # S24.4: `always`, each call waits for a person's decision first; who may decide besides the
    # session's owner
    approval: str = "never"
    approvers: tuple[str, ...] = ()

    @cached_property
    def validator(self) -> Any:
        """The compiled `parameters` schema (2020-12), built once per loaded spec; it validates only
        through schema_bounds.bounded_errors, by the call's deadline."""
        from jsonschema import Draft202012Validator  # a call whose arguments are surely valid needs none

        return bounded_validator(self.parameters, Draft202012Validator)


@dataclass(frozen=True)
class HookSpec(ScriptSpec):
    """A `kind: script_hook` YAML (S2.2); `events` None means every defined one.

    `on_error` is what a failure of its `before_tool_call` does (S24.2):
    `deny` the call (the default), or `allow` it as if the hook had not run.
    """

    events: tuple[str, ...] | None = None
    priority: int = 0
    on_error: str = "deny"


def _yaml_scalar_to_json(value: object) -> str:
    import datetime  # a YAML date: rare, and the only use of the module here

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


def _refuse_nested_limits(
    yaml_path: Path, data: Mapping[str, Any], lines: YamlLines, known: set[str]
) -> None:
    """A custom field holding limit fields (`limits: {timeout_secs: 3}`, as kernel.yaml writes them) is
    a mistake, not a custom field: a tool's limits are top-level fields, and there they would be unused."""
    for key, value in data.items():
        if key in known or not isinstance(value, dict):
            continue
        nested = [name for name in LIMIT_FIELDS if name in value]
        if nested:
            first = nested[0]
            shown = f"{first}: {json.dumps(value[first])}"
            reason = (
                f"{key}.{first}: a tool's or hook's limits are fields of their own at the top of the "
                f"YAML ({shown}), not under `{key}:`; as written it would be unused"
            )
            raise ConfigError(yaml_path, reason, lines.of(key, first))


def _refuse_over_ceilings(
    yaml_path: Path, data: Mapping[str, Any], lines: YamlLines, limits: KernelLimits
) -> None:
    for name in LIMIT_FIELDS:
        problem = limits.ceiling_problem(name, data.get(name))
        if problem is not None:
            raise ConfigError(yaml_path, problem, lines.of(name))


def load_script_spec(
    yaml_path: Path, limits: KernelLimits | None = None, *, origin: str = "project"
) -> ToolSpec | HookSpec:
    """Load one `kind: script_tool|script_hook|python_tool` YAML, validated, script found.

    With the kernel's `limits`, a YAML that raises a limit over its ceiling
    is refused too (`limits.ceilings`). `python_tool` loads only with
    `origin="builtin"`: it runs Python inside the kernel, which a project's
    YAML never may (scripts are the sandboxed way), except a project's copy
    of a built-in marked `overrides: builtin`, to change its settings: the
    catalog then holds it to the built-in's own `function`.
    """
    raw, lines = read_yaml_file(yaml_path)
    data = json_safe_yaml(yaml_path, raw)
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise ConfigError(yaml_path, f"expected a mapping with `kind`, got {got}")
    kind = _kind_of(yaml_path, data, lines, origin)
    schema = _SCHEMAS[kind]
    _refuse_near_misses(yaml_path, data, lines, set(schema["properties"]))
    _refuse_nested_limits(yaml_path, data, lines, set(schema["properties"]))
    error = first_error(_VALIDATORS[kind], data)
    if error is not None:
        raise yaml_error(yaml_path, lines, error, schema, data)
    if limits is not None:
        _refuse_over_ceilings(yaml_path, data, lines, limits)
    if kind == "python_tool":
        script = python_module_file(yaml_path, data["function"], lines)
    else:
        script = _script_file(yaml_path, data, lines)
    common: dict[str, Any] = {
        "name": data["name"],
        "script": script,
        "yaml_path": yaml_path.resolve(),
        "raw": data,
        "max_operations": data.get("max_operations"),
        "timeout_secs": data.get("timeout_secs"),
        "memory_limit_mb": data.get("memory_limit_mb"),
        "lines": lines,
        "origin": origin,
        "overrides_builtin": data.get("overrides") == "builtin",
    }
    if kind == "script_hook":
        events = data.get("events")
        return HookSpec(
            **common,
            events=tuple(events) if events is not None else None,
            priority=data.get("priority", 0),
            on_error=data.get("on_error", "deny"),
        )
    return _tool_spec(yaml_path, data, common, limits or KernelLimits())


def spec_claim(data: object) -> tuple[str, str] | None:
    """("tool" or "hook", name): what a YAML of value `data` claims if it loads; None if it cannot.

    Read off the parsed YAML without checking it, so that finding one tool's
    file need not load every file (tools/catalog.py): a file that loads
    claims exactly this (`load_script_spec` takes the spec's kind and name
    from these fields, the name made JSON as `json_safe_yaml` makes it); one
    that does not load claims nothing, whatever this says.
    """
    if not isinstance(data, dict):
        return None
    kind = data.get("kind")
    name = data.get("name")
    if not isinstance(name, str):
        try:
            name = _yaml_scalar_to_json(name)
        except TypeError:
            return None
    if kind == "script_hook":
        return ("hook", name)
    return ("tool", name) if kind in KINDS else None


def _kind_of(yaml_path: Path, data: Mapping[str, Any], lines: YamlLines, origin: str) -> str:
    kind = data.get("kind")
    overriding = data.get("overrides") == "builtin"  # a copy of a built-in, held to its function (catalog)
    offered = KINDS if origin == "builtin" or overriding else ("script_tool", "script_hook")
    if kind == "python_tool" and origin != "builtin" and not overriding:
        reason = (
            "kind: 'python_tool' runs Python inside the kernel and is only for its built-in tools"
            " (a copy of one with `overrides: builtin` may change its settings);"
            " write a script_tool (JavaScript or Rhai) instead"
        )
        raise ConfigError(yaml_path, reason, lines.of("kind"))
    if kind not in offered:
        reason = f"kind: expected {' or '.join(repr(k) for k in offered)}, got {kind!r}"
        if isinstance(kind, str):
            reason += did_you_mean(kind, offered)
        raise ConfigError(yaml_path, reason, lines.of("kind"))
    return str(kind)


def _script_file(yaml_path: Path, data: Mapping[str, Any], lines: YamlLines) -> Path:
    script: Path = (yaml_path.parent / data["script"]).resolve()
    if not script.is_file():
        reason = f"script: file {data['script']!r} not found (looked at {script})"
        raise ConfigError(yaml_path, reason, lines.of("script"))
    return script


def python_module_file(yaml_path: Path, function: str, lines: YamlLines = NO_LINES) -> Path:
    """The file of a python_tool's module (`office:make_docx` → agentkernel/builtins/office.py).

    Found without importing it: loading a YAML runs no code. The module is
    always below agentkernel.builtins, so `function` cannot name any other.
    """
    import importlib.util

    from agentkernel.config.python_package import PACKAGE

    module = f"{PACKAGE}.{function.partition(':')[0]}"
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None or found.origin is None:
        reason = f"function: no module {module!r} for {function!r}"
        raise ConfigError(yaml_path, reason, lines.of("function"))
    return Path(found.origin).resolve()


def _tool_spec(
    yaml_path: Path, data: Mapping[str, Any], common: dict[str, Any], limits: KernelLimits
) -> ToolSpec:
    parameters = data.get("parameters", {"type": "object"})
    problem = parameters_problem(parameters, limits.schema_bounds)
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
        function=data.get("function"),
        idempotent=data.get("idempotent", False),
        approval=data.get("approval", "never"),
        approvers=tuple(data.get("approvers", ())),
    )


__all__ = [
    "HOOK_EVENTS",
    "KINDS",
    "ON_ERROR",
    "TOOL_NAME_PATTERN",
    "YAML_SUFFIXES",
    "HookSpec",
    "ScriptSpec",
    "ToolSpec",
    "WarningRule",
    "json_safe_yaml",
    "load_script_spec",
    "python_module_file",
    "spec_claim",
]
