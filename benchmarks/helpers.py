"""Helpers' speed from script tools (issue: helpers I, speed).

    .venv/bin/python benchmarks/helpers.py [--calls 200] [--state-ops 5000] [--smoke]

1. `db_query` of 10,000 rows through a script tool (JS and Rhai), the whole
   dispatch path, warm; and the DuckDB service alone.
2. `http_get` through a script tool against a local HTTP server on
   127.0.0.1 (tests/helpers/http_server.py), one call per tool run.
3. `state_set`/`state_get` from script tools against redis-py on a local
   Redis server when one can be started: see benchmarks/state_vs_redis.py,
   which this runs with `--state-ops`.
4. What a helper's span costs (S26.1): one helper call through the helper
   table, registered traced and untraced, in the same run — with no
   TracerProvider (telemetry off), then with the SDK's (a batch processor
   and an exporter that drops the spans); `traceparent` added to a request's
   headers; carrying the caller's context onto a worker thread.
Run from the project folder.
"""

from __future__ import annotations

import argparse
import contextvars
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.helpers.http_server import LocalHTTPServer  # noqa: E402

from agentkernel import Kernel  # noqa: E402
from agentkernel.config import load_kernel_config  # noqa: E402
from agentkernel.helpers.identity import caller as caller_helper  # noqa: E402
from agentkernel.helpers.table import HelperTable, ScriptCall, Traced  # noqa: E402
from agentkernel.telemetry.helper_spans import add_trace_context  # noqa: E402
from agentkernel.types import JSONValue  # noqa: E402

ROWS = 10_000
DB_SETUP = (
    "CREATE TABLE t AS SELECT i AS id, 'row ' || i AS name, i * 37 % 101 AS score, "
    "TIMESTAMP '2026-01-01' + INTERVAL (i) MINUTE AS at FROM range(10000) r(i)"
)


def project(root: Path) -> Kernel:
    tools = root / "config" / "scripts" / "tools"
    tools.mkdir(parents=True)
    (root / "config" / "scripts" / "hooks").mkdir(parents=True)
    (root / "config" / "kernel.yaml").write_text(
        "scripts:\n  tools: [config/scripts/tools]\n  hooks: [config/scripts/hooks]\n"
        "http:\n  allow_private: true\n"  # the local server is on 127.0.0.1 (off by default, issue 8)
    )
    sources = {
        "q_js.js": 'function run(a) { return String(db_query("bench.duckdb", QUERY, 10000).count); }'.replace(
            "QUERY", '"SELECT * FROM t"'
        ),
        "q_rhai.rhai": 'fn run(a) { db_query("bench.duckdb", "SELECT * FROM t", 10000).count }',
        "h_js.js": "function run(a) { return String(http_get(a.url).status); }",
        "h_rhai.rhai": "fn run(a) { http_get(a.url).status }",
        "setup.js": 'function run(a) { db_execute("bench.duckdb", a.sql); return "ready"; }',
    }
    for file, source in sources.items():
        (tools / file).write_text(source)
        name = file.split(".")[0]
        (tools / f"{name}.yaml").write_text(
            f"kind: script_tool\nname: {name}\nscript: {file}\nmax_operations: 1000000000\n"
        )
    return Kernel(load_kernel_config(root / "config" / "kernel.yaml"))


def time_tool(kernel: Kernel, tool: str, args: dict[str, JSONValue], calls: int, want: str) -> list[float]:
    caller = kernel.caller(user_id="bench")
    timings = []
    for index in range(calls + 5):
        started = time.perf_counter()
        result = kernel.run_tool(tool, args, caller)
        elapsed = (time.perf_counter() - started) * 1000
        if result.content != want:
            raise SystemExit(f"{tool} returned {result.to_json()}, expected {want!r}")
        if index >= 5:
            timings.append(elapsed)
    return timings


def per_call_ns(work: Callable[[], object], calls: int, rounds: int = 7) -> float:
    """The fastest round's time per call, in nanoseconds."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter_ns()
        for _ in range(calls):
            work()
        best = min(best, (time.perf_counter_ns() - started) / calls)
    return best


def span_costs(kernel: Kernel, calls: int) -> None:
    """Part 4: the same helper traced and untraced, telemetry off, then on (the SDK, spans dropped)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropped(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    traced, plain = HelperTable(), HelperTable()
    traced.register("caller", caller_helper, traced=Traced())
    plain.register("caller", caller_helper)
    call = ScriptCall(kernel.caller(user_id="bench"), "bench")

    def figures(label: str) -> None:
        untraced = per_call_ns(lambda: plain.invoke("caller", call, ()), calls)
        spanned = per_call_ns(lambda: traced.invoke("caller", call, ()), calls)
        extra = spanned - untraced
        print(f"  {label:<40} untraced {untraced:8.0f} ns   traced {spanned:8.0f} ns   (+{extra:.0f} ns)")

    print(f"a helper call (`caller`) through the helper table, best of 7 rounds of {calls:,}:")
    figures("telemetry off (no TracerProvider)")
    headers: dict[str, str] = {}
    injected = per_call_ns(lambda: add_trace_context(headers), calls)
    print(f"  {'traceparent, telemetry off':<40} {injected:8.0f} ns")
    context_hop = per_call_ns(lambda: contextvars.copy_context().run(int), calls)
    print(f"  {'a worker call in the caller context':<40} {context_hop:8.0f} ns (copy_context + run)")
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    trace.set_tracer_provider(provider)
    with trace.get_tracer("bench").start_as_current_span("tool"):  # a helper's span is a tool span's child
        figures("telemetry on (SDK, batch, dropped)")
    provider.shutdown()


def line(label: str, timings: list[float]) -> str:
    p50, low = statistics.median(timings), min(timings)
    return f"  {label:<40} p50 {p50:8.2f} ms   min {low:8.2f} ms   (n={len(timings)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="tool calls per http figure")
    parser.add_argument("--query-calls", type=int, default=20, help="tool calls per db_query figure")
    parser.add_argument("--state-ops", type=int, default=5000, help="0 skips the state/Redis part")
    parser.add_argument("--span-calls", type=int, default=20_000, help="helper calls per span figure")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args()
    if options.smoke:
        options.calls, options.query_calls, options.state_ops, options.span_calls = 2, 1, 20, 10
    with (
        tempfile.TemporaryDirectory() as folder,
        LocalHTTPServer() as server,
        project(Path(folder)) as kernel,
    ):
        ready = kernel.run_tool("setup", {"sql": DB_SETUP}, kernel.caller(user_id="bench"))
        if ready.content != "ready":
            raise SystemExit(f"the table was not made: {ready.to_json()}")
        print(f"db_query of {ROWS:,} rows (id, name, score, TIMESTAMP), warm:")
        print(line("JS tool", time_tool(kernel, "q_js", {}, options.query_calls, str(ROWS))))
        print(line("Rhai tool", time_tool(kernel, "q_rhai", {}, options.query_calls, str(ROWS))))
        print(f"http_get against {server.base} (a small JSON echo), one tool call each:")
        url: dict[str, JSONValue] = {"url": f"{server.base}/echo"}
        print(line("JS tool", time_tool(kernel, "h_js", url, options.calls, "200")))
        print(line("Rhai tool", time_tool(kernel, "h_rhai", url, options.calls, "200")))
        span_costs(kernel, options.span_calls)  # last: it sets the process's TracerProvider
    if options.state_ops:
        print("state_set/state_get vs Redis (benchmarks/state_vs_redis.py):", flush=True)
        done = subprocess.run(
            [sys.executable, str(REPO / "benchmarks" / "state_vs_redis.py"), "--ops", str(options.state_ops)],
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"benchmarks/state_vs_redis.py failed (exit status {done.returncode})")


if __name__ == "__main__":
    main()
