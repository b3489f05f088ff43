"""The one way the kernel's YAML is checked: JSON Schema, and errors that name the file, line and field.

Each section declares its fields as JSON Schema (`section`, `expect`);
`Draft202012Validator`, with the stricter types below, checks the whole
document in one pass, and `yaml_error` turns the first error into a
ConfigError with the file, the line of the key and the key path.

Two annotations, ignored by the validator, choose the wording:

- `x-expected` on a field: any error inside it reads `field: expected
  <text>, got <value>`, the field's whole value (`files.read_roots:
  expected a list of non-empty strings, got ['']`); `x-message` gives the
  whole text instead (`{value!r}` is the value). The innermost such field
  speaks; a closed mapping (`additionalProperties: false`) inside one
  speaks for itself (a job of `cron.jobs`, a rule of a rules file).
- `x-unknown: field` on a section: an unknown key reads `section.key:
  unknown field (known: …)` and a missing one `section.key: required`, the
  helper sections' wording; `x-refused` names keys refused with a reason of
  their own (a secret pasted into `llm:`). Elsewhere an unknown key reads
  `unknown key 'x' (allowed: …); did you mean …`.

kernel.yaml, the tool and hook YAML, the templates (their `mcp_servers:`
included), kernel.yaml's `cron.jobs`, a tool's `tests:` and the scripted
LLM's rules files are all checked this way.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkernel.errors import ConfigError
from agentkernel.schemas.plain import surely_valid
from agentkernel.util.near_miss import did_you_mean
from agentkernel.util.yaml_source import NO_LINES, KeyPath, YamlLines, dotted

if TYPE_CHECKING:
    from jsonschema.exceptions import SchemaError, ValidationError

Schema = dict[str, Any]


def _integer(_: object, value: object) -> bool:
    """An int, never a bool and never a float: `64.0 << 20` is a TypeError at the first call."""
    return isinstance(value, int) and not isinstance(value, bool)


def _number(_: object, value: object) -> bool:
    """An int or a float, never a bool, never NaN (every comparison with NaN is false)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


@functools.cache
def _strict_class() -> Any:
    """Draft 2020-12 with the types above: jsonschema is imported here, when a document needs it."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    types = Draft202012Validator.TYPE_CHECKER.redefine_many({"integer": _integer, "number": _number})
    return extend(Draft202012Validator, type_checker=types)  # type: ignore[no-untyped-call]


class StrictValidator:
    """The validator of the kernel's own YAML (not of a tool's `parameters`, which stay standard JSON Schema).

    A document schemas/plain.py proves valid has no errors to find; any
    other is validated by jsonschema, built on first need, whose errors
    give the texts. So a valid project is read without importing jsonschema.
    """

    def __init__(self, schema: Schema) -> None:
        self.schema = schema

    @functools.cached_property
    def _jsonschema(self) -> Any:
        return _strict_class()(self.schema)

    def iter_errors(self, instance: object) -> Iterator[ValidationError]:
        """jsonschema's errors of `instance`: none when it is surely valid."""
        if surely_valid(self.schema, instance, strict=True):
            return iter(())
        errors: Iterator[ValidationError] = self._jsonschema.iter_errors(instance)
        return errors


def expect(text: str, **schema: Any) -> Schema:
    """A field whose every error reads `expected <text>, got <value>`."""
    return {**schema, "x-expected": text}


def section(properties: Mapping[str, Schema], **extra: Any) -> Schema:
    """A helper section: a mapping of these fields only, in the helper sections' wording."""
    return {
        "type": "object",
        "additionalProperties": False,
        "x-unknown": "field",
        "properties": dict(properties),
        **extra,
    }


def first_error(validator: Any, data: object) -> ValidationError | None:
    """The shallowest error (then the first by path): the one nearest the cause."""
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), str(e.path)))
    return errors[0] if errors else None


def describe_validation_error(error: ValidationError | SchemaError) -> str:
    """`field.sub[0]: message` — the field path first, so the culprit is obvious."""
    where = dotted(error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def _value_at(document: object, path: Sequence[str | int]) -> object:
    for step in path:
        document = document[step]  # type: ignore[index]
    return document


def _worded_field(schema: Mapping[str, Any], path: Sequence[str | int]) -> tuple[KeyPath, Schema] | None:
    """The innermost field on `path` with its own wording (`x-expected`, `x-message`), and its path.

    A closed mapping without a wording of its own, deeper than a worded
    field, takes its errors back: `cron.jobs[0].prompt: required`, not
    `cron.jobs: expected a list of jobs, got …`.
    """
    found: tuple[KeyPath, Schema] | None = None
    node: object = schema
    for depth in range(len(path) + 1):
        if not isinstance(node, Mapping):
            break
        if "x-expected" in node or "x-message" in node:
            found = tuple(path[:depth]), dict(node)
        elif node.get("additionalProperties") is False:
            found = None
        if depth < len(path):
            node = _child(node, path[depth])
    return found


def _child(node: Mapping[str, Any], step: str | int) -> object:
    """The schema of `step` in `node`: an item's, a property's, or any other key's (a mapping of names)."""
    if isinstance(step, int):
        return node.get("items")
    named = node.get("properties", {}).get(step)
    return named if named is not None else node.get("additionalProperties")


def _field_text(where: KeyPath, schema: Schema, value: object) -> str:
    text = (
        str(schema["x-message"]).format(value=value)
        if "x-message" in schema
        else f"expected {schema['x-expected']}, got {value!r}"
    )
    names = schema.get("enum")
    if isinstance(value, str) and isinstance(names, list):
        text += did_you_mean(value, [str(name) for name in names])
    return f"{dotted(where)}: {text}" if where else text


def _section_key_text(error: ValidationError) -> tuple[str, KeyPath] | None:
    """An unknown or missing key of a helper section, in their wording (`x-unknown: field`)."""
    schema, instance, where = error.schema, error.instance, tuple(error.absolute_path)
    if (
        not isinstance(schema, Mapping)
        or schema.get("x-unknown") != "field"
        or not isinstance(instance, Mapping)
    ):
        return None
    known = list(schema.get("properties", {}))
    if error.validator == "additionalProperties":
        key = next(str(k) for k in instance if k not in known)
        refused: Mapping[str, str] = schema.get("x-refused", {})
        reason = refused.get(key) or f"unknown field (known: {', '.join(known)}){did_you_mean(key, known)}"
        return f"{dotted((*where, key))}: {reason}", (*where, key)
    if error.validator == "required":
        required: list[str] = schema.get("required", [])
        missing = next(k for k in required if k not in instance)
        return f"{dotted((*where, missing))}: required", where
    return None


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


def error_text(
    error: ValidationError, schema: Mapping[str, Any] | None = None, document: object = None
) -> tuple[str, KeyPath]:
    """The reason a schema error gives, in the wording its schema chose, and the key path it is about.

    `schema` and `document` are the whole ones the error came from: a field's
    own wording (`x-expected`) shows the field's whole value.
    """
    path = tuple(error.absolute_path)
    keyed = _section_key_text(error) or _unknown_keys(error)  # a closed mapping names the key at fault
    if keyed is not None:
        return keyed
    worded = _worded_field(schema, path) if schema is not None else None
    if worded is not None:
        where, field_schema = worded
        return _field_text(where, field_schema, _value_at(document, where)), where
    text = describe_validation_error(error)
    names = error.validator_value
    if error.validator == "enum" and isinstance(error.instance, str) and isinstance(names, list):
        text += did_you_mean(error.instance, [str(v) for v in names])
    return text, path


@dataclass(frozen=True)
class Where:
    """The file a section came from and the lines of its keys, for the errors found after the schema."""

    path: Path | str | None
    lines: YamlLines = NO_LINES

    def error(self, key_path: KeyPath, reason: str) -> ConfigError:
        """`section.field: reason`, at the line of that key."""
        return ConfigError(self.path, f"{dotted(key_path)}: {reason}", self.lines.of(*key_path))


def yaml_error(
    path: Path | str | None,
    lines: YamlLines,
    error: ValidationError,
    schema: Mapping[str, Any] | None = None,
    document: object = None,
) -> ConfigError:
    """A schema error in a YAML file as a ConfigError with the line of the key at fault.

    Unknown keys of a closed mapping are listed with the allowed ones, and a
    value outside an `enum` of names gets the closest name as a suggestion.
    """
    text, where = error_text(error, schema, document)
    return ConfigError(path, text, lines.of(*where))


__all__ = [
    "Schema",
    "StrictValidator",
    "Where",
    "describe_validation_error",
    "error_text",
    "expect",
    "first_error",
    "section",
    "yaml_error",
]
