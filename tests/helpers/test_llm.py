"""`llm` and `llm_json` (S9) from JS and Rhai, through the real provider to the scripted LLM server.

Every test runs a script tool through the kernel's one dispatch path, as a
process spawned from a template (so tokens are charged to it and its
budget group) or as a bare caller, against `FakeLLMServer` on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.agent.processes import Process
from agentkernel.budget import BudgetExhausted, BudgetGroup
from agentkernel.config import load_kernel_config
from agentkernel.helpers.llm import DEFAULT_MAX_TOKENS, MAX_TOKENS_CAP
from agentkernel.llm.base import ChatMessage
from agentkernel.llm.token_bound import MESSAGE_MARGIN, prompt_bound
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory, write_kernel_yaml
from tests.fakes import FakeLLMServer, FakeToolCall, HttpError, RecordedRequest, Reply
from tests.fakes.openai_server import Turn
from tests.helpers.probes import probe_source
from tests.schemas.conftest import nested_any_of

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
    "required": ["name", "price"],
}
PERSON_JS = json.dumps(PERSON)
PERSON_RHAI = (
    '#{ type: "object", properties: #{ name: #{ type: "string" }, price: #{ type: "number" } }, '
    'required: ["name", "price"] }'
)


def llm_kernel(project: Path, server: FakeLLMServer | None, extra: str = "") -> Kernel:
    """A kernel whose `llm:` is the scripted server (none when `server` is None)."""
    yaml_text = extra
    if server is not None:
        yaml_text = f"llm:\n  base_url: {server.base_url}\n  model: m\n  max_retries: 0\n" + extra
    return Kernel(load_kernel_config(write_kernel_yaml(project, yaml_text)))


def spawn(kernel: Kernel, project: Path, tools: list[str], budget: int | None = None) -> Process:
    """A process of a template allowed `tools`, with a token budget when given."""
    body = f"name: asker\ninstructions: x\ntools: [{', '.join(tools)}]\n"
    if budget is not None:
        body += f"budget:\n  tokens: {budget}\n"
    path = project / "config" / "templates" / "asker.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return kernel.spawn("asker")


def probe(make_tool: ToolFactory, engine: str, expr: str, name: str = "asks", yaml_extra: str = "") -> str:
    make_tool(name, probe_source(engine, expr), ext=engine, yaml_extra=yaml_extra)
    return name


def run_probe(
    project: Path, make_tool: ToolFactory, engine: str, server: FakeLLMServer, expr: str, *turns: Turn
) -> ToolResult:
    """The scripted `turns` queued, `expr` run once as a bare caller's tool."""
    server.add(*turns)
    with llm_kernel(project, server) as kernel:
        return kernel.run_tool(probe(make_tool, engine, expr), {})


def value(result: ToolResult) -> JSONValue:
    """What the probe's expression returned; fails the test showing the error when it threw."""
    assert result.success, result.content
    data = result.data
    assert isinstance(data, dict) and result.content == "ok", (result.content, data)
    return data["value"]


def error(result: ToolResult) -> str:
    """The message the probe's expression threw (caught inside the script)."""
    data = result.data
    assert result.content == "error" and isinstance(data, dict), (result.content, data)
    return str(data["error"])


def schema_expr(engine: str) -> str:
    return PERSON_JS if engine == ".js" else PERSON_RHAI


def obj(engine: str, **fields: str) -> str:
    """An object literal of already written expressions, in the engine's syntax."""
    inner = ", ".join(f"{k}: {v}" for k, v in fields.items())
    return f"{{ {inner} }}" if engine == ".js" else f"#{{ {inner} }}"


# -- S9.1: the three forms, max_tokens ----------------------------------------------------------------


def test_llm_with_user_only_returns_the_answer_text(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    reply = Reply(text="Фотосинтез — это…")
    result = run_probe(project, make_tool, engine, llm_server, 'llm("Что такое фотосинтез?")', reply)
    assert value(result) == "Фотосинтез — это…"
    body = llm_server.bodies[0]
    assert body["messages"] == [{"role": "user", "content": "Что такое фотосинтез?"}]
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS and "temperature" not in body
    assert "response_format" not in body and not body.get("stream")


def test_llm_with_system_and_user(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    expr = 'llm("Ты — краткий ассистент.", "Вопрос")'
    result = run_probe(project, make_tool, engine, llm_server, expr, Reply(text="Кратко."))
    assert value(result) == "Кратко."
    assert llm_server.bodies[0]["messages"] == [
        {"role": "system", "content": "Ты — краткий ассистент."},
        {"role": "user", "content": "Вопрос"},
    ]


@pytest.mark.parametrize(("given", "sent"), [("500", 500), ("100000", MAX_TOKENS_CAP), ("1", 1)])
def test_llm_with_an_object_sends_its_settings_and_caps_max_tokens(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer, given: str, sent: int
) -> None:
    llm_server.add(Reply(text="ok"))
    expr = (
        "llm("
        + obj(engine, user='"Вопрос"', system='"Инструкция"', max_tokens=given, temperature="0.3")
        + ")"
    )
    with llm_kernel(project, llm_server) as kernel:
        assert value(kernel.run_tool(probe(make_tool, engine, expr), {})) == "ok"
    body = llm_server.bodies[0]
    assert body["max_tokens"] == sent and body["temperature"] == 0.3
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


# -- bad input: named by helper and argument, and no request made -------------------------------------

BAD_INPUT = [
    ("llm(42)", "llm: user must be a string, got 42"),
    ('llm("sys", 7)', "llm: user must be a string, got 7"),
    ('llm(1, "q")', "llm: system must be a string, got 1"),
    ('llm("  ")', "llm: user must not be empty"),
    ("llm({OBJ_MAX_NEG})", "llm: max_tokens must be a whole number from 1 up, got -1"),
    ("llm({OBJ_MAX_LOTS})", "llm: max_tokens must be a whole number from 1 up, got 'lots'"),
    ("llm({OBJ_MAX_HALF})", "llm: max_tokens must be a whole number from 1 up, got 2.5"),
    ("llm({OBJ_TEMP})", "llm: temperature must be a number from 0 to 2, got 5"),
    ("llm({OBJ_NO_USER})", "llm: user must be a string, got null"),
    ("llm({OBJ_TYPO})", "llm: unknown option 'max_token'; expected: user, system, max_tokens, temperature"),
    ("llm({OBJ_SCHEMA})", "llm: unknown option 'output_schema' (llm_json takes output_schema)"),
    ('llm_json("q")', "llm_json: expected an object {user, output_schema, …}, got 'q'"),
    ("llm_json({OBJ_NO_SCHEMA})", "llm_json: output_schema is required (a JSON Schema object)"),
    ("llm_json({OBJ_STR_SCHEMA})", "llm_json: output_schema must be a JSON Schema object, got 'object'"),
    ("llm_json({OBJ_LIST_SCHEMA})", "llm_json: output_schema must be a JSON Schema object, got [1]"),
    ("llm_json({OBJ_BAD_SCHEMA})", "llm_json: output_schema is not a valid JSON Schema: "),
    ("llm_json({OBJ_BAD_USER})", "llm_json: user must be a string, got true"),
]


def bad_input_expr(engine: str, expr: str) -> str:
    fields = {
        "OBJ_MAX_NEG": {"user": '"q"', "max_tokens": "-1"},
        "OBJ_MAX_LOTS": {"user": '"q"', "max_tokens": '"lots"'},
        "OBJ_MAX_HALF": {"user": '"q"', "max_tokens": "2.5"},
        "OBJ_TEMP": {"user": '"q"', "temperature": "5"},
        "OBJ_NO_USER": {"system": '"s"'},
        "OBJ_TYPO": {"user": '"q"', "max_token": "5"},
        "OBJ_SCHEMA": {"user": '"q"', "output_schema": schema_expr(engine)},
        "OBJ_NO_SCHEMA": {"user": '"q"'},
        "OBJ_STR_SCHEMA": {"user": '"q"', "output_schema": '"object"'},
        "OBJ_LIST_SCHEMA": {"user": '"q"', "output_schema": "[1]"},
        "OBJ_BAD_SCHEMA": {"user": '"q"', "output_schema": obj(engine, type='"strnig"')},
        "OBJ_BAD_USER": {"user": "true", "output_schema": schema_expr(engine)},
    }
    for marker, given in fields.items():
        expr = expr.replace("{" + marker + "}", obj(engine, **given))
    return expr


@pytest.mark.parametrize(("expr", "message"), BAD_INPUT)
def test_bad_input_is_refused_naming_helper_and_argument_before_any_inference(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer, expr: str, message: str
) -> None:
    with llm_kernel(project, llm_server) as kernel:
        result = kernel.run_tool(probe(make_tool, engine, bad_input_expr(engine, expr)), {})
    assert error(result).startswith(message)
    assert llm_server.requests == []


def test_an_invalid_schema_names_the_keyword_at_fault(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    schema = obj(engine, type='"object"', properties=obj(engine, name=obj(engine, type='"strnig"')))
    expr = "llm_json(" + obj(engine, user='"q"', output_schema=schema) + ")"
    with llm_kernel(project, llm_server) as kernel:
        message = error(kernel.run_tool(probe(make_tool, engine, expr), {}))
    assert message.startswith("llm_json: output_schema is not a valid JSON Schema: 'strnig' is not valid")
    assert message.endswith("(at properties/name/type); did you mean 'string'?")
    assert llm_server.requests == []


# -- S9.2: no provider, provider failures ---------------------------------------------------------------


def test_without_a_provider_the_call_throws_a_catchable_error(
    project: Path, make_tool: ToolFactory, engine: str
) -> None:
    with llm_kernel(project, None) as kernel:
        first = kernel.run_tool(probe(make_tool, engine, 'llm("q")'), {})
        second = kernel.run_tool(
            probe(
                make_tool,
                engine,
                "llm_json(" + obj(engine, user='"q"', output_schema=schema_expr(engine)) + ")",
                "asks2",
            ),
            {},
        )
    assert (
        error(first)
        == "llm: no LLM attached to this kernel (set `llm:` in kernel.yaml; hook_tool needs --live)"
    )
    assert error(second).startswith("llm_json: no LLM attached to this kernel")


def test_uncaught_it_ends_the_call_as_a_failed_result(
    project: Path, make_tool: ToolFactory, engine: str
) -> None:
    source = 'function run(args) { return llm("q"); }' if engine == ".js" else 'fn run(args) { llm("q") }'
    make_tool("bare", source, ext=engine)
    with llm_kernel(project, None) as kernel:
        result = kernel.run_tool("bare", {})
    assert not result.success and "llm: no LLM attached to this kernel" in result.content


def test_a_server_failure_is_a_catchable_error_naming_the_server(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    message = error(
        run_probe(project, make_tool, engine, llm_server, 'llm("q")', HttpError(503, "overloaded"))
    )
    assert message.startswith(f"llm: LLM server {llm_server.base_url}") and "HTTP 503" in message


# -- S9.2: tokens charged, budget exhausted -------------------------------------------------------------


def test_tokens_are_charged_to_the_process_and_its_group_and_max_tokens_shrinks_to_what_is_left(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(text="a", prompt_tokens=30, completion_tokens=12))
    with llm_kernel(project, llm_server) as kernel:
        tool = probe(make_tool, engine, 'llm("q")')
        process = spawn(kernel, project, [tool], budget=500)
        assert value(kernel.run_tool(tool, {}, process)) == "a"
        assert process.tokens_used == 42 and process.budget.used == 42 and process.budget.held == 0
    assert llm_server.bodies[0]["max_tokens"] == 500 - prompt_bound([ChatMessage.user("q")])


def test_a_spent_budget_gives_caller_budget_exhausted_and_asks_nothing(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    with llm_kernel(project, llm_server) as kernel:
        tool = probe(make_tool, engine, 'llm("q")')
        process = spawn(kernel, project, [tool], budget=100)
        process.charge(100)
        assert error(kernel.run_tool(tool, {}, process)) == "caller budget exhausted"
    assert llm_server.requests == []


def test_a_budget_shared_by_20_parallel_scripts_is_never_overspent(
    project: Path, make_tool: ToolFactory, llm_server: FakeLLMServer
) -> None:
    """Each answer costs all that its request could: without holding tokens first, 20 would overspend."""
    started = threading.Barrier(20, timeout=5)

    def costly(request: RecordedRequest) -> Reply:
        bound = prompt_bound([ChatMessage(m["role"], m["content"]) for m in request.body["messages"]])
        return Reply(text="x", prompt_tokens=bound, completion_tokens=request.body["max_tokens"], delay=0.05)

    llm_server.respond_with(costly)
    source = """
    function run(args) {
        try { return { content: llm({ user: "q", max_tokens: 300 }) }; }
        catch (e) { return { content: e.message }; }
    }
    """
    make_tool("spender", source)
    with llm_kernel(project, llm_server) as kernel:
        parent = spawn(kernel, project, ["spender"], budget=2_000)
        children = [kernel.spawn("asker", parent=parent) for _ in range(4)]  # same group (S17)

        def one(n: int) -> str:
            started.wait()
            return kernel.run_tool("spender", {}, (parent, *children)[n % 5]).content

        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(one, range(20)))
        group = parent.budget
        assert group.used <= 2_000 and group.held == 0
        assert group.used == sum(p.tokens_used for p in (parent, *children))
    assert results.count("x") == len(llm_server.requests) >= 1
    assert set(results) == {"x", "caller budget exhausted"}


def test_reserve_holds_in_every_enclosing_group() -> None:
    outer = BudgetGroup(100)
    inner = BudgetGroup(1000, outer=outer)
    assert inner.reserve(10, 500) == 100 and outer.held == 100 and inner.held == 100
    with pytest.raises(BudgetExhausted):
        inner.reserve(1, 1)
    assert inner.held == 100  # the refused hold was undone
    inner.release(100)
    assert outer.held == inner.held == 0 and outer.remaining == 100


# -- the kernel-wide concurrency limit, the script's wall clock -----------------------------------------


def test_the_concurrency_limit_holds_for_20_parallel_scripts(
    project: Path, make_tool: ToolFactory, llm_server: FakeLLMServer
) -> None:
    """The first three requests are held until all three are in: a fourth then would be over the limit."""
    gate = threading.Event()
    arrived = threading.Semaphore(0)

    def held(request: RecordedRequest) -> Reply:
        arrived.release()
        gate.wait(5)
        return Reply(text="done", delay=0.02)

    llm_server.respond_with(held)
    make_tool("ask", 'function run(args) { return llm("q"); }')
    started = threading.Barrier(21, timeout=5)
    with llm_kernel(project, llm_server, "  max_concurrency: 3\n") as kernel:

        def one(n: int) -> ToolResult:
            started.wait()
            return kernel.run_tool("ask", {})

        with ThreadPoolExecutor(20) as pool:
            futures = [pool.submit(one, n) for n in range(20)]
            started.wait()
            for _ in range(3):
                assert arrived.acquire(timeout=5)
            gate.set()
            results = [f.result() for f in futures]
    assert all(r.success and r.content == "done" for r in results)
    assert llm_server.max_in_flight == 3 and len(llm_server.requests) == 20


def test_a_script_calling_llm_in_a_loop_stops_at_its_wall_clock(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    llm_server.respond_with(lambda request: Reply(text="again", delay=0.1))
    source = (
        "function run(args) { let n = 0; while (true) { llm('more'); n += 1; } }"
        if engine == ".js"
        else 'fn run(args) { let n = 0; loop { llm("more"); n += 1; } }'
    )
    make_tool("looper", source, ext=engine, yaml_extra="timeout_secs: 0.5\n")
    with llm_kernel(project, llm_server) as kernel:
        result = kernel.run_tool("looper", {})
    assert not result.success
    assert "time limit" in result.content or "timed out" in result.content, result.content


# -- S9.3: llm_json ---------------------------------------------------------------------------------


def json_call(engine: str, user: str = '"Извлеки имя и цену"') -> str:
    return "llm_json(" + obj(engine, user=user, output_schema=schema_expr(engine)) + ")"


INVALID = ['{"name": "чайник"}', "not json at all", '{"name": 5, "price": 10}']


@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_llm_json_succeeds_at_attempt(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer, attempt: int
) -> None:
    llm_server.add(
        *(Reply(text=t) for t in INVALID[: attempt - 1]), Reply(text='{"name": "чайник", "price": 990}')
    )
    with llm_kernel(project, llm_server) as kernel:
        result = kernel.run_tool(probe(make_tool, engine, json_call(engine)), {})
    assert value(result) == {"name": "чайник", "price": 990}
    bodies = llm_server.bodies
    assert len(bodies) == attempt
    assert all(b["response_format"]["json_schema"]["schema"] == PERSON for b in bodies)
    assert "JSON Schema" in bodies[0]["messages"][0]["content"]  # the schema is in the instructions too
    if attempt >= 2:
        fed = bodies[1]["messages"]
        assert fed[-2] == {"role": "assistant", "content": INVALID[0]}
        assert "'price' is a required property" in fed[-1]["content"]
    if attempt == 3:
        assert "the answer is not JSON" in bodies[2]["messages"][-1]["content"]


def test_llm_json_throws_after_three_invalid_answers_with_the_last_error(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    replies = (Reply(text=t) for t in INVALID)
    message = error(run_probe(project, make_tool, engine, llm_server, json_call(engine), *replies))
    assert message == (
        "llm: structured output did not validate after 3 attempts: 5 is not of type 'string' (at $.name)"
    )
    assert len(llm_server.requests) == 3


def test_llm_json_a_hostile_pattern_stops_at_the_scripts_time(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    """Python's `re` would backtrack for hours holding the GIL; the kernel's match ends with the script."""
    schema = '{"type": "string", "pattern": "^(a|aa)+$"}'
    expr = f'llm_json({{user: "say a lot of a", output_schema: {schema}}})'
    if engine == ".rhai":
        expr = 'llm_json(#{user: "say a lot of a", output_schema: #{type: "string", pattern: "^(a|aa)+$"}})'
    llm_server.add(Reply(text=json.dumps("a" * 80 + "!")))
    with llm_kernel(project, llm_server) as kernel:
        result = kernel.run_tool(probe(make_tool, engine, expr, yaml_extra="timeout_secs: 2\n"), {})
    expected = "llm_json: output_schema: the pattern '^(a|aa)+$' was still matching when the time ran out"
    # the script catches the error, unless its own 2 s ran out in the same instant (a loaded machine)
    assert result.data == {"error": expected} or (not result.success and "2 s" in result.content), result


def test_llm_json_refuses_an_output_schema_too_complex_before_asking(
    project: Path, make_tool: ToolFactory, llm_server: FakeLLMServer
) -> None:
    """The issue's 16 nested anyOf pairs: 2^16 applications against the answer `5` (7 s, +391 MiB);
    refused by a bound counted from the schema alone (schemas/cost.py), naming output_schema."""
    expr = f'llm_json({{user: "a number?", output_schema: {json.dumps(nested_any_of(16))}}})'
    llm_server.add(*(Reply(text="5") for _ in range(3)))
    with llm_kernel(project, llm_server) as kernel:
        by_depth = kernel.run_tool(probe(make_tool, ".js", expr), {})
    with llm_kernel(project, llm_server, "limits:\n  max_schema_depth: 100\n") as kernel:
        by_size = kernel.run_tool(probe(make_tool, ".js", expr), {})
    assert by_depth.data == {
        "error": "llm_json: output_schema at $defs.l15.anyOf[1]: subschemas nest more than 32 deep, counting "
        "each $ref followed (limits.max_schema_depth: 32 in kernel.yaml)"
    }
    assert by_size.data == {
        "error": "llm_json: output_schema is too complex to validate: with its $refs expanded it holds more "
        "than 2,000 subschemas and enum values (limits.max_schema_nodes: 2,000 in kernel.yaml)"
    }
    assert llm_server.requests == []


def test_llm_json_a_schema_under_the_bound_still_ends_with_the_script(
    project: Path, make_tool: ToolFactory, llm_server: FakeLLMServer
) -> None:
    """Two branches a level, each recursing into the answer: 2^40 applications for a list 40 deep."""
    node = {"anyOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "array", "items": {"$ref": "#"}}]}
    expr = f'llm_json({{user: "nest", output_schema: {json.dumps(node)}}})'
    llm_server.add(Reply(text="[" * 40 + "5" + "]" * 40))
    with llm_kernel(project, llm_server) as kernel:
        result = kernel.run_tool(probe(make_tool, ".js", expr, yaml_extra="timeout_secs: 2\n"), {})
    expected = "llm_json: output_schema: validating was still going on when the time ran out"
    # the script catches the error, unless its own 2 s ran out in the same instant (a loaded machine)
    assert result.data == {"error": expected} or (not result.success and "2 s" in result.content), result


def test_llm_json_takes_a_fenced_answer_and_charges_every_attempt(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    llm_server.add(
        Reply(text="{}", prompt_tokens=20, completion_tokens=1),
        Reply(text='```json\n{"name": "a", "price": 1}\n```', prompt_tokens=30, completion_tokens=9),
    )
    with llm_kernel(project, llm_server) as kernel:
        tool = probe(make_tool, engine, json_call(engine))
        process = spawn(kernel, project, [tool], budget=100_000)
        assert value(kernel.run_tool(tool, {}, process)) == {"name": "a", "price": 1}
        assert process.tokens_used == 60


def test_llm_json_asks_without_response_format_when_the_server_refuses_it(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    llm_server.add(
        HttpError(400, "response_format json_schema is not supported"),
        Reply(text="{}"),
        Reply(text='{"name": "a", "price": 2}'),
    )
    with llm_kernel(project, llm_server) as kernel:
        assert value(kernel.run_tool(probe(make_tool, engine, json_call(engine)), {})) == {
            "name": "a",
            "price": 2,
        }
    bodies = llm_server.bodies
    assert "response_format" in bodies[0]
    assert all("response_format" not in b for b in bodies[1:])
    assert "JSON Schema" in bodies[1]["messages"][0]["content"]


def test_llm_json_keeps_the_system_text_and_options(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    llm_server.add(Reply(text='{"name": "a", "price": 2}'))
    expr = (
        "llm_json("
        + obj(engine, user='"q"', system='"Будь точен."', max_tokens="64", output_schema=schema_expr(engine))
        + ")"
    )
    with llm_kernel(project, llm_server) as kernel:
        value(kernel.run_tool(probe(make_tool, engine, expr), {}))
    body: dict[str, Any] = llm_server.bodies[0]
    assert body["max_tokens"] == 64
    assert body["messages"][0]["content"].startswith("Будь точен.\n\nAnswer with only a JSON value")


def test_prompt_bound_counts_bytes_and_a_margin_a_message() -> None:
    assert prompt_bound([ChatMessage.user("ab"), ChatMessage.system("щ")]) == 2 + 2 + MESSAGE_MARGIN * 3


def test_a_tool_the_agent_calls_asks_the_llm_as_that_agent(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    """The script's `llm()` runs on the agent loop's event loop: one provider, its limit and the budget."""
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("summarize", "{}", id="c1"),), prompt_tokens=10, completion_tokens=5),
        Reply(text="коротко", prompt_tokens=7, completion_tokens=3),
        Reply(text="Итог: коротко", prompt_tokens=20, completion_tokens=4),
    )
    probe(make_tool, engine, 'llm("Сократи текст")', name="summarize")
    with llm_kernel(project, llm_server, "  max_concurrency: 1\n") as kernel:
        spawn(kernel, project, ["summarize"], budget=10_000)
        chat = kernel.chat("asker", session_id="s1")

        async def quiet(event: object) -> None:
            return None

        result = asyncio.run(chat.send("сократи", quiet))
        assert result.answer == "Итог: коротко"
        assert chat.process.tokens_used == 15 + 10 + 24 and chat.process.budget.used == 49
    assert llm_server.bodies[1]["messages"] == [{"role": "user", "content": "Сократи текст"}]
    assert llm_server.bodies[2]["messages"][-1] == {
        "role": "tool",
        "content": "ok",
        "tool_call_id": "c1",
        "name": "summarize",
    }


def test_a_kernel_that_is_not_live_attaches_no_llm(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    """`hook_tool` without --live: the LLM of kernel.yaml is not attached, so the call throws (S22.1)."""
    config = load_kernel_config(
        write_kernel_yaml(project, f"llm:\n  base_url: {llm_server.base_url}\n  model: m\n")
    )
    with Kernel(config, live=False) as kernel:
        message = error(kernel.run_tool(probe(make_tool, engine, 'llm("q")'), {}))
    assert message.startswith("llm: no LLM attached to this kernel")
    assert llm_server.requests == []


# -- S26.4: a script names a provider its template allows -----------------------------------------------


def routed_kernel(project: Path, first: FakeLLMServer, second: FakeLLMServer, model: str) -> Kernel:
    """`llm:` with two providers, `main` and `spare`; the template `asker` with `model` settings."""
    yaml_text = (
        f"llm:\n  base_url: {first.base_url}\n  model: m\n  name: main\n  max_retries: 0\n"
        f"  fallback:\n    - base_url: {second.base_url}\n      model: s\n      name: spare\n"
    )
    kernel = Kernel(load_kernel_config(write_kernel_yaml(project, yaml_text)))
    path = project / "config" / "templates" / "asker.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"name: asker\ninstructions: x\ntools: [asks]\nmodel: {model}\n", encoding="utf-8")
    return kernel


def test_a_script_asks_the_provider_its_template_allows_and_no_other(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    with FakeLLMServer() as spare:
        spare.add(Reply(text="from the spare"))
        ask_spare = f"llm({obj(engine, user=chr(34) + 'q' + chr(34), provider=chr(34) + 'spare' + chr(34))})"
        tool = probe(make_tool, engine, ask_spare)
        with routed_kernel(project, llm_server, spare, "{providers: [spare]}") as kernel:
            assert value(kernel.run_tool(tool, {}, kernel.spawn("asker"))) == "from the spare"
        with routed_kernel(project, llm_server, spare, "{}") as kernel:
            refused = error(kernel.run_tool(tool, {}, kernel.spawn("asker")))
            bare = error(kernel.run_tool(tool, {}))
    assert refused == "llm: provider 'spare' is not allowed for template 'asker' (its model.providers: none)"
    assert (
        bare
        == "llm: provider 'spare' is not allowed for a caller with no template (its model.providers: none)"
    )
    assert not llm_server.bodies  # nothing was asked of the main provider either


def test_a_template_s_provider_is_its_scripts_provider_too(
    project: Path, make_tool: ToolFactory, engine: str, llm_server: FakeLLMServer
) -> None:
    with FakeLLMServer() as spare:
        spare.add(Reply(text="spare"))
        tool = probe(make_tool, engine, 'llm("q")')
        with routed_kernel(project, llm_server, spare, "{provider: spare}") as kernel:
            assert value(kernel.run_tool(tool, {}, kernel.spawn("asker"))) == "spare"
    assert not llm_server.bodies
