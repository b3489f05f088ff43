"""The state store (S11) against Redis: `state_set`/`state_get` per second.

Why: the state helpers keep a script's data in an embedded SQLite file
(DESIGN rule 8) where other runtimes reach for a Redis server. The claim to
check is that the embedded store, called from a script, is in the same
league as a local Redis called from Python, so nobody needs a server for
state on one machine.

What it measures (operations per second, after a warm-up):

1. **script, in one call**: one JS tool call (the whole dispatch path)
   whose `run` does N `state_set` then N `state_get` on the `user` scope;
   ops/s = 2N / the call's time, so the dispatch cost is spread over 2N
   helper calls. The same in Rhai.
2. **script, one call per pair**: N tool calls, each doing one `state_set`
   and one `state_get`: ops/s = 2N / total time, dispatch cost included
   in every pair.
3. **raw store**: `SqliteStateStore.set/get/push/sadd/range` from Python,
   no script.
4. **redis-py**: `SET`/`GET` (and `RPUSH`, `SADD`, `LRANGE`) of the same
   JSON text through `redis-py` against a `redis-server` this script starts
   on a free 127.0.0.1 port (`--save '' --appendonly no`: no persistence;
   the SQLite store commits every write to its WAL file). One round trip
   per operation, no pipelining.

The ratios printed are ours / Redis (above 1 means we are faster). When
`redis-server` or the `redis` package is missing (neither is a dependency
of agentkernel: `apt-get install redis-server`, `pip install redis`) the
benchmark says so and prints our figures alone.

Run it by hand:

    .venv/bin/python benchmarks/state_vs_redis.py
    .venv/bin/python benchmarks/state_vs_redis.py --ops 20000 --json
    .venv/bin/python benchmarks/state_vs_redis.py --smoke   # 20 operations: does it run?

The exit status is 0 when every measured operation returned what it should.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.helpers import default_helper_table
from agentkernel.helpers import state as state_helpers
from agentkernel.services.state import Namespace, SqliteStateStore, from_config

VALUE: dict[str, Any] = {"user": "alice", "count": 42, "tags": ["a", "b"], "ratio": 0.5}
REDIS_START_SECS = 10.0

KERNEL_YAML = """\
scripts:
  tools: [config/scripts/tools]
  hooks: [config/scripts/hooks]
logging:
  state_db_path: data/state.db
limits:
  ceilings:
    timeout_secs: 600        # the benchmark's tools ask for 600 s (issue 9: YAML cannot lift limits)
"""

TOOLS = {
    "bench_loop.js": """
        function run(args) {
            for (let i = 0; i < args.n; i++) state_set("user", "k" + (i % 100), args.value);
            let ok = 0;
            for (let i = 0; i < args.n; i++) if (state_get("user", "k" + (i % 100)).count === 42) ok++;
            return { content: String(ok) };
        }
    """,
    "bench_loop_rhai.rhai": """
        fn run(args) {
            for i in 0..args.n { state_set("user", `k${i % 100}`, args.value); }
            let ok = 0;
            for i in 0..args.n { if state_get("user", `k${i % 100}`).count == 42 { ok += 1; } }
            #{ content: `${ok}` }
        }
    """,
    "bench_pair.js": """
        function run(args) {
            state_set("user", "pair", args.value);
            return { content: String(state_get("user", "pair").count) };
        }
    """,
}


def rate(ops: int, seconds: float) -> float:
    return ops / seconds if seconds > 0 else float("inf")


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# -- our side ---------------------------------------------------------------------------------


def write_project(root: Path) -> Path:
    config = root / "config" / "kernel.yaml"
    tools = root / "config" / "scripts" / "tools"
    tools.mkdir(parents=True)
    (root / "config" / "scripts" / "hooks").mkdir(parents=True)
    config.write_text(KERNEL_YAML, encoding="utf-8")
    for filename, source in TOOLS.items():
        (tools / filename).write_text(textwrap.dedent(source), encoding="utf-8")
        name = filename.rsplit(".", 1)[0]
        (tools / f"{name}.yaml").write_text(
            f"kind: script_tool\nname: {name}\nscript: {filename}\ntimeout_secs: 600\n"
            "max_operations: 1000000000\n",
            encoding="utf-8",
        )
    return config


def script_figures(root: Path, ops: int, problems: list[str]) -> dict[str, float]:
    """Rows 1 and 2: state_set/state_get from script tools through the dispatch path."""
    config = load_kernel_config(write_project(root))
    table = default_helper_table()
    if "state_get" not in table:  # until the default table holds the state helpers
        state_helpers.register(table)
    store = from_config(config)
    assert store is not None
    kernel = Kernel(config, helpers=table, extra_services={"state": store})
    caller = kernel.caller(user_id="bench", session_id="bench")
    figures: dict[str, float] = {}
    try:
        for tool, label in (
            ("bench_loop", "script_js_one_call"),
            ("bench_loop_rhai", "script_rhai_one_call"),
        ):
            kernel.run_tool(tool, {"n": 200, "value": VALUE}, caller)  # warm-up
            result = None

            def call(tool: str = tool) -> None:
                nonlocal result
                result = kernel.run_tool(tool, {"n": ops, "value": VALUE}, caller)

            seconds = timed(call)
            if result is None or result.content != str(ops):
                problems.append(f"{tool}: {result.content if result else 'no result'}")
            figures[label] = rate(2 * ops, seconds)
        pairs = max(ops // 5, 100)
        for _ in range(50):
            kernel.run_tool("bench_pair", {"value": VALUE}, caller)

        def pair_calls() -> None:
            for _ in range(pairs):
                if kernel.run_tool("bench_pair", {"value": VALUE}, caller).content != "42":
                    problems.append("bench_pair: wrong result")
                    return

        figures["script_js_call_per_pair"] = rate(2 * pairs, timed(pair_calls))
    finally:
        store.close()
    return figures


def raw_figures(root: Path, ops: int, problems: list[str]) -> dict[str, float]:
    """Row 3: the store's own methods, no script."""
    ns = Namespace("user", "bench")
    figures: dict[str, float] = {}
    with SqliteStateStore(root / "raw.db") as store:
        store.set(ns, "warm", VALUE)

        def set_all() -> None:
            for i in range(ops):
                store.set(ns, f"k{i % 100}", VALUE)

        figures["raw_set"] = rate(ops, timed(set_all))
        got: list[Any] = []
        figures["raw_get"] = rate(
            ops, timed(lambda: got.extend(store.get(ns, f"k{i % 100}") for i in range(ops)))
        )
        if any(value != VALUE for value in got):
            problems.append("raw get returned another value")
        figures["raw_push"] = rate(ops, timed(lambda: [store.push(ns, "list", VALUE) for _ in range(ops)]))
        figures["raw_sadd"] = rate(ops, timed(lambda: [store.sadd(ns, "set", i) for i in range(ops)]))
        figures["raw_range_10"] = rate(
            ops, timed(lambda: [store.range(ns, "list", -10, -1) for _ in range(ops)])
        )
    return figures


# -- Redis ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def redis_server() -> Iterator[Any]:
    """A redis-py client on a redis-server of our own; raises RuntimeError saying why not."""
    try:
        import redis  # not a dependency of agentkernel: the benchmark runs without it
    except ImportError:
        raise RuntimeError("the `redis` package is not installed (pip install redis)") from None
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not on PATH (apt-get install redis-server)")
    port = free_port()
    server = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
        deadline = time.monotonic() + REDIS_START_SECS
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"redis-server did not answer on port {port}") from None
                time.sleep(0.05)
        yield client
        client.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def redis_figures(client: Any, ops: int, problems: list[str]) -> dict[str, float]:
    """Row 4: the same operations through redis-py, values as the same JSON text."""
    text = json.dumps(VALUE, separators=(",", ":"))
    client.flushdb()
    client.set("warm", text)
    figures: dict[str, float] = {}
    figures["redis_set"] = rate(ops, timed(lambda: [client.set(f"k{i % 100}", text) for i in range(ops)]))
    got: list[Any] = []
    figures["redis_get"] = rate(
        ops, timed(lambda: got.extend(json.loads(client.get(f"k{i % 100}")) for i in range(ops)))
    )
    if any(value != VALUE for value in got):
        problems.append("redis get returned another value")
    figures["redis_push"] = rate(ops, timed(lambda: [client.rpush("list", text) for _ in range(ops)]))
    figures["redis_sadd"] = rate(ops, timed(lambda: [client.sadd("set", json.dumps(i)) for i in range(ops)]))
    figures["redis_range_10"] = rate(
        ops, timed(lambda: [[json.loads(v) for v in client.lrange("list", -10, -1)] for _ in range(ops)])
    )
    return figures


# -- report -----------------------------------------------------------------------------------

ROWS = [
    ("script_js_one_call", "state_set+state_get from one JS tool call"),
    ("script_rhai_one_call", "state_set+state_get from one Rhai tool call"),
    ("script_js_call_per_pair", "one JS tool call per set+get pair"),
    ("raw_set", "SqliteStateStore.set"),
    ("raw_get", "SqliteStateStore.get"),
    ("raw_push", "SqliteStateStore.push"),
    ("raw_sadd", "SqliteStateStore.sadd"),
    ("raw_range_10", "SqliteStateStore.range (10 items)"),
    ("redis_set", "redis-py SET"),
    ("redis_get", "redis-py GET"),
    ("redis_push", "redis-py RPUSH"),
    ("redis_sadd", "redis-py SADD"),
    ("redis_range_10", "redis-py LRANGE (10 items)"),
]

RATIOS = [
    ("script_js_one_call", "redis_set+get", "JS script set+get / redis-py SET+GET"),
    ("script_rhai_one_call", "redis_set+get", "Rhai script set+get / redis-py SET+GET"),
    ("script_js_call_per_pair", "redis_set+get", "JS tool call per pair / redis-py SET+GET"),
    ("raw_set", "redis_set", "raw set / redis-py SET"),
    ("raw_get", "redis_get", "raw get / redis-py GET"),
    ("raw_push", "redis_push", "raw push / redis-py RPUSH"),
    ("raw_sadd", "redis_sadd", "raw sadd / redis-py SADD"),
    ("raw_range_10", "redis_range_10", "raw range / redis-py LRANGE"),
]


def ratios(figures: dict[str, float]) -> dict[str, float]:
    if "redis_set" in figures:  # a set and a get, one after the other, as the scripts do
        figures["redis_set+get"] = 2 / (1 / figures["redis_set"] + 1 / figures["redis_get"])
    return {label: figures[ours] / figures[theirs] for ours, theirs, label in RATIOS if theirs in figures}


def report(figures: dict[str, float], why_no_redis: str | None, ops: int) -> None:
    print(
        f"state store vs Redis: {ops} operations per figure; Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, SQLite {__import__('sqlite3').sqlite_version}"
    )
    for key, label in ROWS:
        if key in figures:
            print(f"  {label:<48} {figures[key]:>12,.0f} ops/s")
    if why_no_redis is not None:
        print(f"  Redis unavailable: {why_no_redis}; our figures only.")
        return
    print("ratios (ours / Redis; above 1 = faster than Redis):")
    for label, value in ratios(figures).items():
        print(f"  {label:<48} {value:>12.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--ops", type=int, default=5000, help="operations per figure (default 5000)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args(argv)
    if options.smoke:
        options.ops = 20
    problems: list[str] = []
    figures: dict[str, float] = {}
    why_no_redis: str | None = None
    with tempfile.TemporaryDirectory(prefix="state-bench-") as folder:
        figures.update(script_figures(Path(folder), options.ops, problems))
        figures.update(raw_figures(Path(folder), options.ops, problems))
    try:
        with redis_server() as client:
            figures.update(redis_figures(client, options.ops, problems))
    except RuntimeError as exc:
        why_no_redis = str(exc)
    if options.json:
        print(
            json.dumps(
                {
                    "ops": options.ops,
                    "figures": figures,
                    "ratios": ratios(figures),
                    "redis_unavailable": why_no_redis,
                    "problems": problems,
                },
                indent=2,
            )
        )
    else:
        report(figures, why_no_redis, options.ops)
        for problem in problems:
            print(f"PROBLEM: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
