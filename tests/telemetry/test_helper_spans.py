"""Helper calls inside scripts as spans (S26.1), through the real dispatch path, in JS and in Rhai.

The real OpenTelemetry SDK records into an `InMemorySpanExporter`; the test
opens a span around a tool call and finds the helpers' spans below it, with
their attributes, the `traceparent` a 127.0.0.1 server received, and no
secret anywhere: the value of an environment variable the script reads with
`env_var` and sends in a URL path, a query string, an Authorization header,
a cookie, SQL, a command line and a tool's arguments.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

from agentkernel import Kernel
from agentkernel.bundle import Services
from agentkernel.config import load_kernel_config
from agentkernel.helpers import http as http_helpers
from agentkernel.helpers.table import HelperTable, ScriptCall, Traced
from agentkernel.identity import Caller
from agentkernel.telemetry import helper_spans
from agentkernel.telemetry.helper_spans import REDACTED, Attributes
from agentkernel.types import JSONValue
from agentkernel.util.environment import Environment
from tests.conftest import write_kernel_yaml
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.helpers.http_server import LocalHTTPServer

ENGINES = [".js", ".rhai"]
SECRET_VARIABLE = "AK_SPAN_TEST_SECRET"

OUTER_JS = """
function run(args) {
    const secret = env_var("AK_SPAN_TEST_SECRET");
    const echo = http_get(args.base + "/echo/" + secret + "?token=" + secret,
        {Authorization: "Bearer " + secret, Cookie: "c=" + secret, "X-Api-Key": secret});
    db_execute("spans.duckdb", "CREATE TABLE t (v VARCHAR)");
    db_execute("spans.duckdb", "INSERT INTO t VALUES ('" + secret + "')");
    const rows = db_query("spans.duckdb", "SELECT v FROM t WHERE v = '" + secret + "'");
    const sh = shell("echo " + secret);
    const ex = exec("/bin/echo", [secret]);
    const inner = call_tool("inner", {base: args.base, word: secret});
    return {content: "done", data: {echo: echo.body, rows: rows.count, sh: sh.exit_code,
        ex: ex.exit_code, inner: inner.content}};
}
"""
OUTER_RHAI = """
fn run(args) {
    let secret = env_var("AK_SPAN_TEST_SECRET");
    let echo = http_get(args.base + "/echo/" + secret + "?token=" + secret,
        #{Authorization: "Bearer " + secret, Cookie: "c=" + secret, "X-Api-Key": secret});
    db_execute("spans.duckdb", "CREATE TABLE t (v VARCHAR)");
    db_execute("spans.duckdb", "INSERT INTO t VALUES ('" + secret + "')");
    let rows = db_query("spans.duckdb", "SELECT v FROM t WHERE v = '" + secret + "'");
    let sh = shell("echo " + secret);
    let ex = exec("/bin/echo", [secret]);
    let inner = call_tool("inner", #{base: args.base, word: secret});
    #{content: "done", data: #{echo: echo.body, rows: rows.count, sh: sh.exit_code,
        ex: ex.exit_code, inner: inner.content}}
}
"""
INNER_JS = """
function run(args) { return "inner " + http_get(args.base + "/status/204").status; }
"""
INNER_RHAI = """
fn run(args) { "inner " + http_get(args.base + "/status/204").status }
"""
ECHO_JS = """
function run(args) {
    return {content: "echo", data: JSON.parse(http_get(args.base + "/echo", args.headers).body)};
}
"""
ECHO_RHAI = """
fn run(args) { #{content: "echo", data: parse_json(http_get(args.base + "/echo", args.headers).body)} }
"""
FAILING_JS = """
function run(args) {
    const refused = http_get("http://" + args.secret + ".invalid/?token=" + args.secret);
    try { db_query("spans.duckdb", "SELEC nonsense '" + args.secret + "'"); } catch (e) { }
    return refused.error;
}
"""
FAILING_RHAI = """
fn run(args) {
    let refused = http_get("http://" + args.secret + ".invalid/?token=" + args.secret);
    try { db_query("spans.duckdb", "SELEC nonsense '" + args.secret + "'"); } catch (e) { }
    refused.error
}
"""
SOURCES = {
    ".js": {"outer": OUTER_JS, "inner": INNER_JS, "echo": ECHO_JS, "failing": FAILING_JS},
    ".rhai": {"outer": OUTER_RHAI, "inner": INNER_RHAI, "echo": ECHO_RHAI, "failing": FAILING_RHAI},
}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The real SDK as this process's TracerProvider for one test, then the one before it again.

    OpenTelemetry lets the global provider be set once (`_TRACER_PROVIDER_SET_ONCE`): the
    fixture swaps the guard and the provider and puts both back, so no test depends on
    which provider another test (this file's or another's, under xdist) set before it.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    saved = trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = Once(), None
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = saved
        provider.shutdown()


@pytest.fixture
def no_provider() -> Iterator[None]:
    """No TracerProvider at all for one test: telemetry off, as in a kernel without `telemetry:`."""
    saved = trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = Once(), None
    try:
        yield
    finally:
        trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = saved


@pytest.fixture(scope="module")
def server() -> Iterator[LocalHTTPServer]:
    with LocalHTTPServer() as running:
        yield running


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    value = f"s3cret-{uuid.uuid4().hex}"
    monkeypatch.setenv(SECRET_VARIABLE, value)
    return value


@pytest.fixture(params=ENGINES)
def kernel(request: pytest.FixtureRequest, project: Path) -> Iterator[Kernel]:
    """A kernel whose tools (in one engine) reach 127.0.0.1 and run programs."""
    tools = project / "config" / "scripts" / "tools"
    engine = str(request.param)
    for name, source in SOURCES[engine].items():
        (tools / f"{name}{engine}").write_text(textwrap.dedent(source), encoding="utf-8")
        (tools / f"{name}.yaml").write_text(
            f"kind: script_tool\nname: {name}\ndescription: {name}\nscript: {name}{engine}\n",
            encoding="utf-8",
        )
    config = write_kernel_yaml(project, "http: {allow_private: true}\nshell: {enabled: true}\n")
    with Kernel(load_kernel_config(config)) as built:
        yield built


def helper_spans_of(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if "agentkernel.helper" in (span.attributes or {})]


def ancestors(span: ReadableSpan, exporter: InMemorySpanExporter) -> list[int]:
    """The span ids above `span`, nearest first, as far as the exported spans reach."""
    by_id = {s.context.span_id: s for s in exporter.get_finished_spans()}
    chain: list[int] = []
    parent = span.parent
    while parent is not None:
        chain.append(parent.span_id)
        above = by_id.get(parent.span_id)
        parent = above.parent if above is not None else None
    return chain


def texts_of(span: ReadableSpan) -> list[str]:
    """Every text a span carries: its name, attributes, events, links and status."""
    found = [span.name, str(span.status.description or "")]
    found += [f"{key}={value!r}" for key, value in (span.attributes or {}).items()]
    for event in span.events:
        found += [event.name, *(f"{key}={value!r}" for key, value in (event.attributes or {}).items())]
    for link in span.links:
        found += [f"{key}={value!r}" for key, value in (link.attributes or {}).items()]
    return found


def traceparent(header: str) -> tuple[int, int, bool]:
    """W3C `traceparent`: the trace id, the parent span id, whether it was sampled."""
    version, trace_id, span_id, flags = header.split("-")
    assert version == "00"
    return int(trace_id, 16), int(span_id, 16), bool(int(flags, 16) & 1)


def run_traced(kernel: Kernel, tool: str, args: dict[str, JSONValue]) -> tuple[Any, int]:
    """Run `tool` inside a span the test opens; the result and the test span's trace id."""
    with trace.get_tracer("tests").start_as_current_span("test") as root:
        result = kernel.run_tool(tool, args, kernel.caller(user_id="alice"))
    return result, root.get_span_context().trace_id


def test_helper_calls_are_spans_below_the_callers_span_with_no_secret(
    kernel: Kernel, server: LocalHTTPServer, spans: InMemorySpanExporter, secret: str
) -> None:
    result, trace_id = run_traced(kernel, "outer", {"base": server.base})
    assert result.success, result.content
    assert result.data["rows"] == 1 and result.data["sh"] == 0 and result.data["ex"] == 0
    assert result.data["inner"] == "inner 204"

    root = next(s for s in spans.get_finished_spans() if s.name == "test")
    made = helper_spans_of(spans)
    assert sorted(s.name for s in made) == sorted(
        ["http_get", "db_execute", "db_execute", "db_query", "shell", "exec", "call_tool", "http_get"]
    )
    for span in made:
        assert span.context.trace_id == trace_id
        assert root.context.span_id in ancestors(span, spans), span.name

    by_name = {s.name: s for s in made}
    call_tool = by_name["call_tool"]
    assert call_tool.attributes == {"agentkernel.helper": "call_tool", "gen_ai.tool.name": "inner"}
    outer_http, inner_http = sorted(
        (s for s in made if s.name == "http_get"),
        key=lambda s: call_tool.context.span_id in ancestors(s, spans),
    )
    assert call_tool.context.span_id in ancestors(inner_http, spans)
    assert outer_http.kind is SpanKind.CLIENT
    assert dict(outer_http.attributes or {}) == {
        "agentkernel.helper": "http_get",
        "http.request.method": "GET",
        "server.address": "127.0.0.1",
        "server.port": server.port,
        "url.scheme": "http",
        "url.full": f"{server.base}/echo/{REDACTED}",
        "http.response.status_code": 200,
    }
    assert inner_http.attributes["http.response.status_code"] == 204  # type: ignore[index]

    seen = json.loads(result.data["echo"])
    assert traceparent(seen["headers"]["traceparent"]) == (trace_id, outer_http.context.span_id, True)
    assert seen["headers"]["authorization"] == f"Bearer {secret}"  # the request itself is the script's

    queries = [s for s in made if s.name.startswith("db_")]
    for span in queries:
        attributes = span.attributes or {}
        assert span.kind is SpanKind.CLIENT
        assert attributes["db.system"] == "duckdb" and attributes["db.namespace"] == "spans.duckdb"
        assert "db.query.text" not in attributes  # telemetry.capture_content is off
    assert by_name["db_query"].attributes["db.operation.name"] == "query"  # type: ignore[index]
    assert by_name["db_query"].attributes["db.response.returned_rows"] == 1  # type: ignore[index]
    assert by_name["shell"].attributes == {
        "agentkernel.helper": "shell",
        "process.executable.name": "sh",
        "process.exit.code": 0,
    }
    assert by_name["exec"].attributes["process.executable.name"] == "echo"  # type: ignore[index]

    for span in spans.get_finished_spans():
        for text in texts_of(span):
            assert secret not in text, (span.name, text)
            assert "Bearer" not in text and "token=" not in text and "c=" not in text, (span.name, text)


def test_a_script_on_the_kernels_worker_threads_nests_under_the_callers_span(
    kernel: Kernel, server: LocalHTTPServer, spans: InMemorySpanExporter
) -> None:
    async def called() -> tuple[Any, int]:
        with trace.get_tracer("tests").start_as_current_span("test") as root:
            done = await kernel.arun_tool("echo", {"base": server.base}, kernel.caller(user_id="bob"))
        return done, root.get_span_context().trace_id

    result, trace_id = asyncio.run(called())
    seen: Any = result.data
    (http,) = helper_spans_of(spans)
    root = next(s for s in spans.get_finished_spans() if s.name == "test")
    assert http.context.trace_id == trace_id
    assert root.context.span_id in ancestors(http, spans)
    assert traceparent(seen["headers"]["traceparent"]) == (trace_id, http.context.span_id, True)


def test_a_scripts_own_traceparent_is_sent_as_it_gave_it(
    kernel: Kernel, server: LocalHTTPServer, spans: InMemorySpanExporter
) -> None:
    ours, trace_id = run_traced(kernel, "echo", {"base": server.base})
    assert traceparent(ours.data["headers"]["traceparent"])[0] == trace_id
    theirs = f"00-{'ab' * 16}-{'cd' * 8}-01"
    result, _ = run_traced(kernel, "echo", {"base": server.base, "headers": {"TraceParent": theirs}})
    assert result.data["headers"]["traceparent"] == theirs
    assert "tracestate" not in result.data["headers"]


def test_without_telemetry_no_span_and_no_traceparent(
    kernel: Kernel, server: LocalHTTPServer, no_provider: None
) -> None:
    result = kernel.run_tool("echo", {"base": server.base}, kernel.caller(user_id="carol"))
    assert result.success, result.content
    seen: Any = result.data
    assert "traceparent" not in seen["headers"]


def test_failed_helper_calls_are_error_spans_naming_only_the_kind_of_failure(
    kernel: Kernel, spans: InMemorySpanExporter, secret: str
) -> None:
    result, _ = run_traced(kernel, "failing", {"secret": secret})
    assert result.success and "invalid" in result.content
    query, http = sorted(helper_spans_of(spans), key=lambda s: s.name)
    assert http.status.status_code is StatusCode.ERROR and http.attributes["error.type"] == "_OTHER"  # type: ignore[index]
    assert query.status.status_code is StatusCode.ERROR
    assert query.attributes["error.type"] == "HelperError"  # type: ignore[index]
    assert not query.events  # no exception event: its message quotes the SQL
    for span in spans.get_finished_spans():
        for text in texts_of(span):
            assert secret not in text, (span.name, text)


@pytest.fixture
def contents_captured() -> Iterator[None]:
    """`telemetry.capture_content: true`, as a kernel with it sets it for the process."""
    helper_spans.capture_content(True)
    try:
        yield
    finally:
        helper_spans.capture_content(False)


def test_sql_text_reaches_a_span_only_when_contents_are_captured_and_never_a_secret(
    kernel: Kernel, server: LocalHTTPServer, spans: InMemorySpanExporter, secret: str, contents_captured: None
) -> None:
    result, _ = run_traced(kernel, "outer", {"base": server.base})
    assert result.success, result.content
    query = next(s for s in helper_spans_of(spans) if s.name == "db_query")
    assert query.attributes["db.query.text"] == f"SELECT v FROM t WHERE v = '{REDACTED}'"  # type: ignore[index]


ASKS_JS = """
function run(args) {
    const secret = env_var("AK_SPAN_TEST_SECRET");
    const said = llm("Say hello to " + secret);
    const done = run_subagent({task: "Fetch for " + secret, template: "reviewer", tools: ["echo"]});
    return said + " / " + done.answer;
}
"""
ASKS_RHAI = """
fn run(args) {
    let secret = env_var("AK_SPAN_TEST_SECRET");
    let said = llm("Say hello to " + secret);
    let done = run_subagent(#{task: "Fetch for " + secret, template: "reviewer", tools: ["echo"]});
    said + " / " + done.answer
}
"""


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as running:
        yield running


@pytest.mark.parametrize("engine", ENGINES)
def test_llm_and_subagent_calls_are_spans_and_the_subagents_helpers_nest_below(
    engine: str,
    project: Path,
    server: LocalHTTPServer,
    llm_server: FakeLLMServer,
    spans: InMemorySpanExporter,
    secret: str,
) -> None:
    tools = project / "config" / "scripts" / "tools"
    for name, source in (
        ("asks", ASKS_JS if engine == ".js" else ASKS_RHAI),
        ("echo", SOURCES[engine]["echo"]),
    ):
        (tools / f"{name}{engine}").write_text(source, encoding="utf-8")
        (tools / f"{name}.yaml").write_text(
            f"kind: script_tool\nname: {name}\ndescription: {name}\nscript: {name}{engine}\n",
            encoding="utf-8",
        )
    templates = project / "config" / "templates"
    templates.mkdir(parents=True)
    (templates / "reviewer.yaml").write_text("name: reviewer\ninstructions: Review.\ntools: [echo]\n")
    (templates / "boss.yaml").write_text("name: boss\ninstructions: Lead.\ntools: [asks, echo]\n")
    config = write_kernel_yaml(
        project,
        f"llm:\n  base_url: {llm_server.base_url}\n  model: fake\n  max_retries: 0\n"
        "http: {allow_private: true}\n",
    )
    llm_server.add(
        Reply(text="hello"),
        Reply(tool_calls=(FakeToolCall("echo", json.dumps({"base": server.base})),)),
        Reply(text="fetched"),
    )
    with Kernel(load_kernel_config(config)) as kernel:
        boss = kernel.spawn("boss", user_id="anna")
        with trace.get_tracer("tests").start_as_current_span("test") as root:
            result = kernel.run_tool("asks", {}, boss)
    assert result.content == "hello / fetched", result.content
    made = {span.name: span for span in helper_spans_of(spans)}
    assert set(made) == {"llm", "run_subagent", "http_get"}
    for span in made.values():
        assert root.get_span_context().span_id in ancestors(span, spans), span.name
    assert made["llm"].attributes == {
        "agentkernel.helper": "llm"
    }  # the prompt is the chat span's, if captured
    assert made["run_subagent"].attributes == {
        "agentkernel.helper": "run_subagent",
        "gen_ai.agent.name": "reviewer",
    }
    assert made["run_subagent"].context.span_id in ancestors(made["http_get"], spans)
    for span in spans.get_finished_spans():
        for text in texts_of(span):
            assert secret not in text, (span.name, text)


def test_a_bug_in_a_helpers_span_attributes_costs_the_attributes_never_the_call(
    spans: InMemorySpanExporter,
) -> None:
    def broken(_: ScriptCall, __: Sequence[JSONValue]) -> Attributes:
        raise KeyError("a bug of ours")

    table = HelperTable()
    table.register("twice", lambda _, value: value * 2, traced=Traced(broken))
    call = ScriptCall(Caller(services=Services(environment=Environment(source={}))), "probe")
    with trace.get_tracer("tests").start_as_current_span("test"):
        assert table.invoke("twice", call, [21]) == 42
    (span,) = helper_spans_of(spans)
    assert span.attributes == {"agentkernel.helper": "twice"}


def test_every_environment_value_long_enough_to_be_a_secret_is_hidden_denied_ones_too() -> None:
    environment = Environment(
        deny=("*_KEY",), source={"A_KEY": "sk-live-1234", "LANG": "C", "T": "tok-5678a"}
    )
    hidden = environment.values()
    assert sorted(hidden) == [
        "sk-live-1234",
        "tok-5678a",
    ]  # `C` is no secret, and hiding it would mangle text
    assert helper_spans.redacted("https://h/bot-tok-5678a/x?C", hidden) == f"https://h/bot-{REDACTED}/x?C"


@pytest.mark.parametrize(
    ("method", "url", "expected"),
    [
        (
            "get",
            "https://user:pass@api.example.org/v1/items?key=abc#frag",
            {
                "server.address": "api.example.org",
                "server.port": 443,
                "url.full": "https://api.example.org/v1/items",
            },
        ),
        (
            "POST",
            "http://[::1]:8080?token=x",
            {"server.address": "::1", "server.port": 8080, "url.full": "http://[::1]:8080/"},
        ),
        ("BREW", "ftp://example.org/file", {}),
    ],
)
def test_an_http_span_names_the_host_and_path_never_the_query_credentials_or_fragment(
    method: str, url: str, expected: dict[str, object]
) -> None:
    attributes = dict(http_helpers.traced(None).before(ScriptCall(Caller(), "probe"), [method, url]))
    shown = method.upper() if method.upper() in http_helpers.METHODS else "_OTHER"
    assert attributes.pop("http.request.method") == shown
    attributes.pop("url.scheme", None)
    assert attributes == expected
