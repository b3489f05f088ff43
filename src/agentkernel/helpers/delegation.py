"""Handing work on (S16, S17): `call_tool`, `list_tools`, `get_tool_result` and `run_subagent`.

Each checks what the script gave, naming the helper and the argument at
fault, and hands the rest to a service the kernel attached: `tools` (the
one dispatch path, tools/calls.py), `tool_results` (the session's history
of results, tools/history.py), `subagents` (agent/subagents.py). The
caller is always the script's own: nothing a script passes can name
another user, session, template or process.

In a trace (S26.1) `call_tool` is a span with the tool's name and
`run_subagent` one with the template's (neither the arguments nor the task),
the parents of the nested tool call's and the sub-agent's own spans.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from agentkernel.config.mcp_servers import allows
from agentkernel.errors import HelperError
from agentkernel.helpers.table import HelperTable, ScriptCall, Traced
from agentkernel.llm.structured import SchemaInvalid, check_output_schema
from agentkernel.ports import SUBAGENTS, TOOL_RESULTS, TOOLS, SubagentRequest
from agentkernel.schemas.cost import SchemaBounds
from agentkernel.telemetry.helper_spans import Attributes
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.short_text import shown_value

SUBAGENT_KEYS = ("task", "template", "instructions", "name", "tools", "output_schema")
MAX_NAME_CHARS = 200


def _tool_name(helper: str, argument: str, value: JSONValue) -> str:
    if not isinstance(value, str) or not value:
        raise HelperError(
            f"{helper}: {argument} must be a tool's name (a non-empty string), got {shown_value(value)}"
        )
    return value


def _deadline(call: ScriptCall) -> float | None:
    return None if call.budget is None else call.budget.deadline


# -- S16: tools -------------------------------------------------------------------------------


def call_tool(call: ScriptCall, name: JSONValue, args: JSONValue) -> JSONValue:
    """`{content, success, data, visual}` of tool `name` run with `args`, as the LLM's call would run it."""
    tool = _tool_name("call_tool", "name", name)
    if not isinstance(args, dict):
        raise HelperError(
            f"call_tool: args must be an object (the tool's arguments), got {shown_value(args)}"
        )
    service = call.caller.services.require(TOOLS, "call_tool")
    return service.call(tool, args, call.caller, call.budget).for_script()


def list_tools(call: ScriptCall) -> JSONValue:
    """`[{name, description, parameters}]`: the tools the caller's LLM is offered (S16.3)."""
    tools: list[JSONValue] = list(call.caller.services.require(TOOLS, "list_tools").visible(call.caller))
    return tools


def _index(value: JSONValue) -> int:
    """0, 1, … (a whole float, as a JS number may be, counts)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise HelperError(f"get_tool_result: index must be an integer, 0 or more, got {shown_value(value)}")
    return value


def get_tool_result(call: ScriptCall, tool: JSONValue, index: JSONValue = 0) -> JSONValue:
    """A result `tool` already gave in this session, without running it again (S16.4); 0 is the latest."""
    name = _tool_name("get_tool_result", "tool", tool)
    position = _index(index)
    history = call.caller.services.require(TOOL_RESULTS, "get_tool_result")
    allowed = call.caller.allowed_tools
    if not allows(allowed, name):
        who = call.caller.template or "this caller"
        raise HelperError(f"get_tool_result: tool {name!r} is not allowed for {who}")
    if call.caller.session_id is None:
        raise HelperError(f"get_tool_result: no result of {name!r}: this call has no session")
    result = history.get(call.caller, name, position)
    if result is None:
        raise HelperError(f"get_tool_result: no result of {name!r} at index {position} in this session")
    return result.for_script()


# -- S17: sub-agents --------------------------------------------------------------------------


def _text(value: JSONValue, key: str, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise HelperError(f"run_subagent: {key} must be a non-empty string, got {shown_value(value)}")
    return value


def _tools(value: JSONValue) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise HelperError(f"run_subagent: tools must be a list of tool names, got {shown_value(value)}")
    for position, item in enumerate(value):
        _tool_name("run_subagent", f"tools[{position}]", item)
    return tuple(dict.fromkeys(str(item) for item in value))


def _schema(value: JSONValue, bounds: SchemaBounds) -> JSONObject | None:
    if value is None:
        return None
    try:
        return check_output_schema(value, bounds)
    except SchemaInvalid as exc:  # the words llm_json uses for the same mistake
        raise HelperError(f"run_subagent: output_schema {exc}") from None


def subagent_request(options: JSONValue, bounds: SchemaBounds | None = None) -> SubagentRequest:
    """`run_subagent`'s argument, checked for shape; what it names (a template, tools) the service checks.

    An `output_schema` is held to `bounds` (the kernel's `limits.max_schema_*`).
    """
    if not isinstance(options, dict):
        raise HelperError(
            "run_subagent: expected an object {task, template | instructions, name?, tools?, "
            f"output_schema?}}, got {shown_value(options)}"
        )
    unknown = [key for key in options if key not in SUBAGENT_KEYS]
    if unknown:
        raise HelperError(f"run_subagent: unknown key {unknown[0]!r} (expected: {', '.join(SUBAGENT_KEYS)})")
    template, instructions = (
        _text(options.get("template"), "template"),
        _text(options.get("instructions"), "instructions"),
    )
    if (template is None) == (instructions is None):
        raise HelperError(
            "run_subagent: give either template (a template's name) or instructions, not both or neither"
        )
    name = _text(options.get("name"), "name")
    if name is not None and len(name) > MAX_NAME_CHARS:
        raise HelperError(f"run_subagent: name is {len(name):,} characters, more than {MAX_NAME_CHARS}")
    return SubagentRequest(
        task=str(_text(options.get("task"), "task", required=True)),
        template=template,
        instructions=instructions,
        name=name,
        tools=_tools(options.get("tools")),
        output_schema=_schema(options.get("output_schema"), bounds or SchemaBounds()),
    )


def run_subagent(call: ScriptCall, options: JSONValue) -> JSONValue:
    """`{pid, answer, data}` of a child agent run once on `task` (S17); it is ended afterwards, always."""
    request = subagent_request(options, call.schema_bounds)
    service = call.caller.services.require(SUBAGENTS, "run_subagent")
    return service.run(call.caller, request, _deadline(call)).for_script()


def _tool_span(_: ScriptCall, args: Sequence[JSONValue]) -> Attributes:
    name = args[0] if args else None
    return {"gen_ai.tool.name": name} if isinstance(name, str) else {}


def _subagent_span(_: ScriptCall, args: Sequence[JSONValue]) -> Attributes:
    options = args[0] if args else None
    template = options.get("template") if isinstance(options, dict) else None
    return {"gen_ai.agent.name": template} if isinstance(template, str) else {}


def register(table: HelperTable) -> None:
    """Add the helpers of S16 and S17 to `table`."""
    table.register("call_tool", call_tool, traced=Traced(_tool_span))
    table.register("list_tools", list_tools)
    table.register("get_tool_result", get_tool_result)
    table.register("run_subagent", run_subagent, traced=Traced(_subagent_span))


__all__ = ["call_tool", "get_tool_result", "list_tools", "register", "run_subagent", "subagent_request"]
