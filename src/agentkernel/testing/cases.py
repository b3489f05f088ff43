"""A tool's `tests:` block: read, checked, and typed as cases the runner executes.

    tests:
      - name: counts words            # optional; `case N` otherwise
        args: {text: "a b a"}
        user: alice                   # optional; the case runs as `test-user` otherwise
        llm: ["an answer", {json: {ok: true}}, {error: 503}]   # optional: the LLM's replies, in order
        expect:
          success: true               # default: true, or false when `error_contains` is given
          content: "exact content"
          contains: ["a", "b"]
          matches: "^\\d+ words"      # a regular expression searched in the content
          error_contains: "text"
          visual: {type: table, rows: 3}

A hook's block has the same form around other inputs and expectations
(hook_cases.py), read by the same `read_block`.

`agentkernel check` reports every case that breaks the format (unknown
keys, wrong types, a bad regular expression, a name given twice) as a
problem naming the file, the line, the field and the case; `agentkernel tool
test` refuses to run a block with problems. The block is not part of the
tool: a tool with a broken `tests:` still loads and serves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentkernel.config.schema import StrictValidator, error_text, expect
from agentkernel.config.server import USER_ID
from agentkernel.errors import LoadProblem
from agentkernel.util.yaml_source import KeyPath, dotted

if TYPE_CHECKING:
    from agentkernel.config import ScriptSpec, ToolSpec
    from agentkernel.testing.openai_server import Turn
    from agentkernel.types import JSONValue

DEFAULT_USER = "test-user"
TESTS_FIELD = "tests"

REPLY_SCHEMA = expect(
    "a scripted reply: a string, {json: VALUE} or {error: STATUS} (400-599)",
    anyOf=[
        {"type": "string"},
        {"type": "object", "required": ["json"], "additionalProperties": False, "properties": {"json": {}}},
        {
            "type": "object",
            "required": ["error"],
            "additionalProperties": False,
            "properties": {"error": {"type": "integer", "minimum": 400, "maximum": 599}},
        },
    ],
)

_EXPECT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "success": expect("true or false", type="boolean"),
        "content": expect("a string (the whole content)", type="string"),
        "contains": expect("a list of strings", type="array", items={"type": "string"}),
        "matches": expect("a regular expression (a string)", type="string"),
        "error_contains": expect("a string", type="string"),
        "visual": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "type": expect("a block type (a string)", type="string", minLength=1),
                "rows": expect("an integer >= 0", type="integer", minimum=0),
            },
        },
    },
}

CASE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["args", "expect"],
    "properties": {
        "name": expect("a non-empty string", type="string", minLength=1),
        "args": {},
        "user": expect("a user id (1-128 of letters, digits, _ . @ -)", type="string", pattern=USER_ID),
        "llm": {"type": "array", "items": REPLY_SCHEMA},  # an item's error names the item (its own wording)
        "expect": _EXPECT,
    },
}
_CASE_VALIDATOR = StrictValidator(CASE_SCHEMA)


@dataclass(frozen=True)
class Expectation:
    """What a case's result must show; a field left None is not checked."""

    success: bool
    content: str | None = None
    contains: tuple[str, ...] = ()
    matches: re.Pattern[str] | None = None
    error_contains: str | None = None
    visual_type: str | None = None
    visual_rows: int | None = None
    checks_visual: bool = False


@dataclass(frozen=True)
class ToolCase:
    """One case of one tool's `tests:` block, checked."""

    tool: str
    index: int  # 0-based, in the block
    name: str
    args: JSONValue
    user: str
    llm: tuple[JSONValue, ...]
    expect: Expectation
    yaml_path: Path
    line: int | None = None

    @property
    def subject(self) -> str:
        """The tool the case is of (a hook case's is its hook)."""
        return self.tool

    def llm_turns(self) -> list[Turn]:
        """The scripted server's answers, in order."""
        return scripted_turns(self.llm)


CaseT = TypeVar("CaseT")


@dataclass(frozen=True)
class Block(Generic[CaseT]):
    """A tool's or hook's cases and the problems of its `tests:` block (the cases run only without any)."""

    cases: tuple[CaseT, ...]
    problems: tuple[LoadProblem, ...]


CaseBlock = Block[ToolCase]


def case_name(data: object, index: int) -> str:
    name = data.get("name") if isinstance(data, Mapping) else None
    return name if isinstance(name, str) and name else f"case {index + 1}"


def read_cases(spec: ToolSpec) -> CaseBlock:
    """The cases of `spec`'s `tests:` (none when it has no block), and every problem in it."""
    return read_block(spec, _case_problems, _case)


def read_block(
    spec: ScriptSpec,
    problems_of: Callable[[object, str, Mapping[str, int]], list[tuple[str, KeyPath]]],
    make: Callable[[Any, int, str, Mapping[str, Any]], CaseT],
) -> Block[CaseT]:
    """A tool's or hook's `tests:` block: each case checked by `problems_of`, made by `make` when sound.

    A problem names the file, the line of the key at fault, its key path and the case.
    """
    block = spec.raw.get(TESTS_FIELD)
    if block is None:
        return Block((), ())
    if not isinstance(block, list):
        reason = f"{TESTS_FIELD}: expected a list of test cases, got {type(block).__name__}"
        return Block((), (LoadProblem(spec.yaml_path, reason, spec.lines.of(TESTS_FIELD)),))
    cases: list[CaseT] = []
    problems: list[LoadProblem] = []
    seen: dict[str, int] = {}
    for index, data in enumerate(block):
        name = case_name(data, index)
        found = problems_of(data, name, seen)
        if not found:
            cases.append(make(spec, index, name, data))  # type: ignore[arg-type]  # checked: a mapping
        located = [(spec.lines.of(TESTS_FIELD, index, *path), reason, path) for reason, path in found]
        for line, reason, path in sorted(located, key=lambda item: item[0] or 0):  # in the file's order
            where = dotted((TESTS_FIELD, index, *path))
            problems.append(LoadProblem(spec.yaml_path, f"{where} (case {name!r}): {reason}", line))
        seen.setdefault(name, index)
    return Block(tuple(cases), tuple(problems))


def schema_problems(data: object, validator: Any, schema: Mapping[str, Any]) -> list[tuple[str, KeyPath]]:
    """Each schema error of one case (one per field), its text without the field it names."""
    found: dict[KeyPath, str] = {}
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), str(e.path)))
    for error in errors:
        text, path = error_text(error, schema, data)
        if any(path[: len(known)] == known for known in found):
            continue  # one problem per field: its first, nearest the cause
        for depth in range(len(path), 0, -1):
            text = text.removeprefix(dotted(path[:depth]) + ": ")
        found[path] = text
    return [(text, path) for path, text in found.items()]


def name_problem(name: str, seen: Mapping[str, int]) -> list[tuple[str, KeyPath]]:
    """A case named as an earlier one of the block is a problem (names are unique within a block)."""
    if name not in seen:
        return []
    return [
        (f"a case named {name!r} comes first at tests[{seen[name]}]; give each case its own name", ("name",))
    ]


def scripted_turns(replies: tuple[JSONValue, ...]) -> list[Turn]:
    """A case's `llm:` as the scripted server's answers, in order; an error asks for no wait to retry."""
    from agentkernel.testing.openai_server import HttpError, Reply

    turns: list[Turn] = []
    for reply in replies:
        if isinstance(reply, str):
            turns.append(Reply(text=reply))
        elif isinstance(reply, Mapping) and "json" in reply:
            turns.append(Reply(text=json.dumps(reply["json"], ensure_ascii=False)))
        elif isinstance(reply, Mapping):
            turns.append(HttpError(int(reply["error"]), retry_after="0"))  # type: ignore[arg-type]
    return turns


def _case_problems(data: object, name: str, seen: Mapping[str, int]) -> list[tuple[str, KeyPath]]:
    """What is wrong with one case (nothing: an empty list), each with the key path at fault."""
    found = schema_problems(data, _CASE_VALIDATOR, CASE_SCHEMA)
    if found:
        return found
    assert isinstance(data, Mapping)
    pattern = data["expect"].get("matches")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            found.append((f"not a valid regular expression {pattern!r}: {exc}", ("expect", "matches")))
    return found + name_problem(name, seen)


def _case(spec: ToolSpec, index: int, name: str, data: Mapping[str, Any]) -> ToolCase:
    wanted: Mapping[str, Any] = data["expect"]
    visual: Mapping[str, Any] | None = wanted.get("visual")
    pattern = wanted.get("matches")
    expectation = Expectation(
        success=wanted.get("success", "error_contains" not in wanted),
        content=wanted.get("content"),
        contains=tuple(wanted.get("contains", ())),
        matches=re.compile(pattern) if pattern is not None else None,
        error_contains=wanted.get("error_contains"),
        visual_type=visual.get("type") if visual else None,
        visual_rows=visual.get("rows") if visual else None,
        checks_visual=visual is not None,
    )
    return ToolCase(
        tool=spec.name,
        index=index,
        name=name,
        args=data["args"],
        user=data.get("user", DEFAULT_USER),
        llm=tuple(data.get("llm", ())),
        expect=expectation,
        yaml_path=spec.yaml_path,
        line=spec.lines.of(TESTS_FIELD, index),
    )


__all__ = [
    "CASE_SCHEMA",
    "DEFAULT_USER",
    "REPLY_SCHEMA",
    "Block",
    "CaseBlock",
    "Expectation",
    "ToolCase",
    "name_problem",
    "read_block",
    "read_cases",
    "schema_problems",
    "scripted_turns",
]
