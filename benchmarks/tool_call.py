"""How long one script tool call takes, against starting a process per call.

Why: agentkernel runs tools as JavaScript on embedded QuickJS, with a fresh
runtime and context per call (S3.3). The claim to check is that this whole
dispatch path - tool lookup, access check, argument validation against the
YAML `parameters`, a fresh QuickJS runtime and context, the script's `run`,
result normalisation, warning rules and truncation - costs well under a
millisecond, where the usual alternative (a shell-command hook that starts
`node` per call) costs tens of milliseconds.

What it measures:

1. `kernel.run_tool("text_stats", {...}, caller)` on the repo's
   `config/kernel.yaml`, after a warm-up: p50, p95 and mean per call;
2. the same `text_stats` logic (the very source of `text_stats.js`) run by
   starting `node -e` per call, arguments as JSON on stdin and the result as
   JSON on stdout: p50, p95, and the ratio node / agentkernel at p50
   (skipped, with a message, when `node` is not on PATH);
3. a rough cost split by means: `argument_problem` validation alone and
   `normalize` + `finish` alone; the rest is lookup plus the QuickJS run.

The target, p50 <= 0.5 ms per dispatched call, is printed with PASS or MISS;
it is informational and never changes the exit status.

Run it by hand from anywhere (it resolves the config relative to this file):

    .venv/bin/python benchmarks/tool_call.py
    .venv/bin/python benchmarks/tool_call.py --calls 5000 --node-calls 20
    .venv/bin/python benchmarks/tool_call.py --json
    .venv/bin/python benchmarks/tool_call.py --rhai-only   # only the Rhai call / Python ratio (issue 31)

The exit status is 0 when every measured call succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import agentkernel_quickjs as quickjs
from agentkernel.errors import ConfigError
from agentkernel.kernel import Kernel
from agentkernel.tools.dispatch import argument_problem
from agentkernel.tools.results import ToolResult, finish, normalize
from agentkernel.types import JSONValue

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "config" / "kernel.yaml"
TOOL = "text_stats"
RHAI_TOOL = "text_stats_rhai"  # the same tool in Rhai (config/scripts/tools/text_stats.rhai)
TARGET_P50_MS = 0.5
RHAI_TARGET = 6.0  # a Rhai tool call / the same logic in Python (issue 31)
NODE_TIMEOUT_SECS = 30.0

# A short mixed-language paragraph, the size of a typical tool argument.
SAMPLE_TEXT = (
    "Привет, мир! Это небольшой текст для проверки скорости вызова инструмента. "
    "Agent runtimes call tools many times per turn, so the fixed cost of one call matters. "
    "Каждый вызов получает свежий контекст QuickJS, а аргументы проверяются по схеме из YAML. "
    "Nothing here is cached between calls except the compiled bytecode."
)

# Appended to the tool's own source: read JSON args on stdin, print the result as JSON.
NODE_WRAPPER = """
const __args = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(run(__args)));
"""


@dataclass(frozen=True)
class Stats:
    """Per-call figures for one measured loop, in milliseconds."""

    n: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float


@dataclass(frozen=True)
class Machine:
    """Where the figures came from."""

    nproc: int | None
    cpu_model: str
    python: str
    platform: str
    quickjs_bindings: str
    node: str | None


def percentile(sorted_values: Sequence[int], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, linearly interpolated."""
    if not sorted_values:
        raise ValueError("no values")
    rank = (len(sorted_values) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = rank - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def summarize(samples_ns: Sequence[int]) -> Stats:
    """Nanosecond samples as millisecond figures, kept to the nanosecond."""
    ordered = sorted(samples_ns)

    def ms(ns: float) -> float:
        return round(ns / 1e6, 6)

    return Stats(
        n=len(ordered),
        p50_ms=ms(percentile(ordered, 50)),
        p95_ms=ms(percentile(ordered, 95)),
        mean_ms=ms(sum(ordered) / len(ordered)),
        min_ms=ms(ordered[0]),
        max_ms=ms(ordered[-1]),
    )


def time_calls(fn: Callable[[], bool], calls: int, warmup: int) -> tuple[Stats, int]:
    """Run `fn` `warmup` times untimed, then `calls` times timed; return stats and failures.

    `fn` returns whether the call succeeded; the check runs outside the timed span.
    """
    for _ in range(warmup):
        fn()
    gc.collect()
    samples: list[int] = []
    failures = 0
    clock = time.perf_counter_ns
    for _ in range(calls):
        start = clock()
        ok = fn()
        samples.append(clock() - start)
        if not ok:
            failures += 1
    return summarize(samples), failures


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def node_version(node: str | None) -> str | None:
    if node is None:
        return None
    try:
        done = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=NODE_TIMEOUT_SECS, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def machine(node: str | None) -> Machine:
    quickjs_version = f"agentkernel_quickjs (QuickJS {quickjs.quickjs_version})"
    return Machine(
        nproc=os.cpu_count(),
        cpu_model=cpu_model(),
        python=platform.python_version(),
        platform=platform.platform(),
        quickjs_bindings=quickjs_version,
        node=node_version(node),
    )


def expected_content(text: str) -> str:
    """What text_stats.js returns for `text`: characters, words, sentences (its own rules)."""
    words = text.split()
    sentences, open_sentence = 0, False
    for word in words:
        open_sentence = open_sentence or any(c not in ".!?…" for c in word)
        if open_sentence and word[-1] in ".!?…":
            sentences, open_sentence = sentences + 1, False
    sentences += open_sentence
    return f"Символов: {len(text)}, слов: {len(words)}, предложений: {sentences}"


def bench_kernel(
    kernel: Kernel, args: dict[str, JSONValue], calls: int, warmup: int, tool: str = TOOL
) -> tuple[Stats, int]:
    caller = kernel.caller(user_id="bench", agent="benchmarks/tool_call.py")

    def one() -> bool:
        return kernel.run_tool(tool, args, caller).success

    return time_calls(one, calls, warmup)


def python_text_stats(args: dict[str, JSONValue]) -> dict[str, JSONValue]:
    """text_stats.rhai's logic as a plain Python function: the floor a Rhai tool call is held to."""
    text = args.get("text") or ""
    assert isinstance(text, str)
    words = [w for w in text.split() if len(w) > 0]
    if not words:
        return {"content": "текст пуст", "success": False, "error": "empty text"}
    ends = ".!?…"
    sentences, open_sentence = 0, False
    for word in words:
        for c in word:
            if c not in ends:
                open_sentence = True
        if open_sentence and word[-1] in ends:
            sentences += 1
            open_sentence = False
    if open_sentence:
        sentences += 1
    content = f"Символов: {len(text)}, слов: {len(words)}, предложений: {sentences}"
    return {"content": content, "success": True}


def rhai_over_python(
    kernel: Kernel, args: dict[str, JSONValue], rounds: int, calls: int
) -> tuple[float, float, float]:
    """The Rhai tool call through `run_tool` over the same logic as a Python function: in
    interleaved rounds of `calls` each, the ratio of their median times; the median ratio of
    the rounds and its spread (medians: a loaded machine's outliers do not count)."""
    caller = kernel.caller(user_id="bench", agent="benchmarks/tool_call.py")
    if python_text_stats(args)["content"] != kernel.run_tool(RHAI_TOOL, args, caller).content:
        raise SystemExit("the Python twin of text_stats.rhai disagrees with it; not benchmarking")

    def median_ns(call: Callable[[], object]) -> int:
        samples = []
        for _ in range(calls):
            started = time.perf_counter_ns()
            call()
            samples.append(time.perf_counter_ns() - started)
        return sorted(samples)[len(samples) // 2]

    ratios = []
    for _ in range(rounds):
        gc.collect()
        rhai = median_ns(lambda: kernel.run_tool(RHAI_TOOL, args, caller))
        ratios.append(rhai / max(1, median_ns(lambda: python_text_stats(args))))
    ratios.sort()
    return ratios[len(ratios) // 2], ratios[0], ratios[-1]


def bench_split(kernel: Kernel, args: dict[str, JSONValue], calls: int, warmup: int) -> dict[str, Stats]:
    """The pure-Python pieces of the dispatch path, each timed on its own."""
    spec = kernel.tool(TOOL)
    limits = kernel.config.limits
    returned: JSONValue = {"content": expected_content(SAMPLE_TEXT), "success": True}

    def validate() -> bool:
        return argument_problem(spec, args) is None

    def shape() -> bool:
        result = normalize(returned, max_visual_chars=limits.max_visual_chars)
        return finish(result, spec.warnings, limits).success

    return {
        "argument_problem": time_calls(validate, calls, warmup)[0],
        "normalize+finish": time_calls(shape, calls, warmup)[0],
    }


def bench_node(node: str, source: str, args: dict[str, JSONValue], calls: int) -> tuple[Stats, int]:
    script = source + NODE_WRAPPER
    payload = json.dumps(args, ensure_ascii=False)
    want = expected_content(SAMPLE_TEXT)

    def one() -> bool:
        done = subprocess.run(
            [node, "-e", script],
            input=payload,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=NODE_TIMEOUT_SECS,
            check=False,
        )
        if done.returncode != 0:
            return False
        try:
            result = json.loads(done.stdout)
        except ValueError:
            return False
        return isinstance(result, dict) and result.get("content") == want

    return time_calls(one, calls, min(3, calls))


def build_kernel() -> Kernel:
    """The kernel of a server past its first turns: each turn lists the tools, and from the second
    listing on the watch of the tool folders vouches for them (a call's lookup then asks no file)."""
    kernel = Kernel.from_config_file(CONFIG)
    try:
        kernel.tool(TOOL)
    except ConfigError as exc:
        kernel.close()
        raise SystemExit(f"tool {TOOL!r} is not loaded from {CONFIG}: {exc}") from exc
    for _ in range(2):
        kernel.list_tools()
    return kernel


def check_result(result: ToolResult) -> None:
    want = expected_content(SAMPLE_TEXT)
    if not result.success or result.content != want:
        raise SystemExit(f"{TOOL} returned {result.to_json()!r}, expected content {want!r}; not benchmarking")


def row(label: str, stats: Stats) -> str:
    return (
        f"  {label:<34} p50 {stats.p50_ms:9.3f}   p95 {stats.p95_ms:9.3f}   "
        f"mean {stats.mean_ms:9.3f}   (n={stats.n})"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Time one script tool call through the kernel, against node-per-call."
    )
    parser.add_argument("--calls", type=int, default=2000, help="timed kernel calls (default 2000)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed kernel calls first (default 200)")
    parser.add_argument(
        "--node-calls", type=int, default=50, help="timed node-per-call runs; 0 skips them (default 50)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument(
        "--rounds", type=int, default=9, help="interleaved rounds of Rhai / Python (default 9)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    parser.add_argument(
        "--rhai-only",
        action="store_true",
        help="only the Rhai tool call / the same logic in Python (the rounds of --rounds, --calls in all)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.calls, args.warmup, args.node_calls, args.rounds = 5, 1, 1, 1
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    if args.warmup < 0 or args.node_calls < 0:
        parser.error("--warmup and --node-calls cannot be negative")
    return args


def rhai_only(options: argparse.Namespace) -> int:
    """`--rhai-only`: the ratio issue 31 holds a Rhai tool call to, and nothing else."""
    kernel = build_kernel()
    tool_args: dict[str, JSONValue] = {"text": SAMPLE_TEXT}
    try:
        for _ in range(options.warmup):
            kernel.run_tool(RHAI_TOOL, tool_args, kernel.caller())
        calls = max(1, options.calls // options.rounds)
        median, low, high = rhai_over_python(kernel, tool_args, options.rounds, calls)
    finally:
        kernel.close()
    print(
        f"Rhai tool call / the same logic as a Python function: {median:.1f}x "
        f"(rounds {low:.1f}-{high:.1f}x; target <= {RHAI_TARGET:g}x)"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    if options.rhai_only:
        return rhai_only(options)
    node = shutil.which("node")
    host = machine(node)
    kernel = build_kernel()
    spec = kernel.tool(TOOL)  # build_kernel checked that it loads
    tool_args: dict[str, JSONValue] = {"text": SAMPLE_TEXT}
    check_result(kernel.run_tool(TOOL, tool_args, kernel.caller()))

    kernel_stats, kernel_failures = bench_kernel(kernel, tool_args, options.calls, options.warmup)
    check_result(kernel.run_tool(RHAI_TOOL, tool_args, kernel.caller()))
    rhai_stats, rhai_failures = bench_kernel(kernel, tool_args, options.calls, options.warmup, RHAI_TOOL)
    split = bench_split(kernel, tool_args, options.calls, options.warmup)
    rhai_ratio = rhai_over_python(kernel, tool_args, options.rounds, max(1, options.calls // options.rounds))
    kernel.close()

    node_stats: Stats | None = None
    node_failures = 0
    node_note: str | None = None
    if options.node_calls == 0:
        node_note = "skipped (--node-calls 0)"
    elif node is None:
        node_note = "skipped: `node` is not on PATH"
    else:
        source = spec.script.read_text(encoding="utf-8")
        node_stats, node_failures = bench_node(node, source, tool_args, options.node_calls)
    ratio = round(node_stats.p50_ms / kernel_stats.p50_ms, 1) if node_stats is not None else None
    verdict = "PASS" if kernel_stats.p50_ms <= TARGET_P50_MS else "MISS"

    if options.json:
        figures: dict[str, Any] = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "machine": asdict(host),
            "tool": TOOL,
            "text_chars": len(SAMPLE_TEXT),
            "kernel": asdict(kernel_stats) | {"failures": kernel_failures, "warmup": options.warmup},
            "kernel_rhai": asdict(rhai_stats) | {"failures": rhai_failures, "tool": RHAI_TOOL},
            "rhai_over_python": {"median": rhai_ratio[0], "min": rhai_ratio[1], "max": rhai_ratio[2]},
            "split_ms": {name: asdict(stats) for name, stats in split.items()},
            "node_per_call": (
                asdict(node_stats) | {"failures": node_failures} if node_stats is not None else None
            ),
            "node_note": node_note,
            "ratio_node_over_kernel_p50": ratio,
            "target_p50_ms": TARGET_P50_MS,
            "target": verdict,
        }
        print(json.dumps(figures, ensure_ascii=False, indent=2))
    else:
        print(f"machine: {host.nproc} cpu, {host.cpu_model}; Python {host.python}; {host.platform}")
        print(f"         {host.quickjs_bindings}; node {host.node or 'not found'}")
        print(f"tool:    {TOOL} on a {len(SAMPLE_TEXT)}-character text; all figures in ms per call")
        print()
        print(row("agentkernel run_tool", kernel_stats))
        print(row(f"  same tool in Rhai ({RHAI_TOOL})", rhai_stats))
        if kernel_failures:
            print(f"  !! {kernel_failures} kernel calls did not succeed")
        print(f"  target p50 <= {TARGET_P50_MS} ms: {verdict} (informational)")
        median, low, high = rhai_ratio
        print(
            f"  Rhai tool call / the same logic as a Python function: {median:.1f}x "
            f"(rounds {low:.1f}-{high:.1f}x; target <= {RHAI_TARGET:g}x)"
        )
        print()
        print("cost split (each timed alone; means add up, medians do not):")
        for name, stats in split.items():
            print(row(name, stats))
        rest = kernel_stats.mean_ms - sum(s.mean_ms for s in split.values())
        print(f"  {'rest: lookup + QuickJS run (mean)':<34} ~{rest:.3f}")
        print()
        if node_stats is None:
            print(f"node per call: {node_note}")
        else:
            print(row("node -e per call", node_stats))
            if node_failures:
                print(f"  !! {node_failures} node runs failed or returned the wrong content")
            print(f"  ratio node / agentkernel at p50: {ratio:.0f}x")
    return 0 if kernel_failures == 0 and node_failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
