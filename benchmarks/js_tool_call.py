"""A JavaScript tool call against a fresh bare QuickJS context running the same logic, in one run.

Why: a fresh QuickJS runtime and context is the floor any engine pays that
isolates calls by making a new one each time. The kernel isolates a call
otherwise (S3.3): a script runs in a context kept on its thread, its builtins
checked unchanged after every call (scripting/js/reuse.py), so its
helper prelude (the helpers, console, the guards that keep builtins within
timeout_secs) is paid once per context, not per call. What it adds per call is
the tool lookup, the access check, argument validation, normalisation and
that check. The target (issue 31) is a JS tool call at most 1.3x the bare
context.

What it measures, in rounds that alternate which side goes first (the
machine is shared and noisy):

1. `kernel.run_tool("text_stats", {...}, caller)` on the repository's
   `config/kernel.yaml`: p50 per call;
2. the floor: a fresh `quickjs.Runtime()` with the same memory, stack and
   interrupt limits, a context, the same compiled `text_stats.js`
   bytecode evaluated, `run` called with the arguments parsed from JSON
   and its result read back as JSON: p50 per call;
3. the same floor plus the kernel's prelude evaluated in the context (no
   helper table behind it): what the prelude alone costs a call.

It prints each round's ratio run_tool / floor and their median and spread.

    .venv/bin/python benchmarks/js_tool_call.py
    .venv/bin/python benchmarks/js_tool_call.py --calls 2000 --rounds 9

The exit status is 0 when every measured call gave the right content.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import agentkernel_quickjs as quickjs
from agentkernel.helpers import default_helper_table
from agentkernel.kernel import Kernel
from agentkernel.scripting.js.engine import JS_VALUE_BYTES, _prelude_source
from agentkernel.types import JSONValue

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "config" / "kernel.yaml"
TOOL = "text_stats"
SCRIPT = REPO / "config" / "scripts" / "tools" / "text_stats.js"
TARGET_RATIO = 1.3
SAMPLE_TEXT = (
    "Привет, мир! Это небольшой текст для проверки скорости вызова инструмента. "
    "Agent runtimes call tools many times per turn, so the fixed cost of one call matters. "
    "Каждый вызов получает свежий контекст QuickJS, а аргументы проверяются по схеме из YAML. "
    "Nothing here is cached between calls except the compiled bytecode."
)

Call = Callable[[], str | None]  # one call; its result's content


def p50_ms(call: Call, calls: int, want: str) -> tuple[float, int]:
    """The median of `calls` timed calls in milliseconds, and how many gave other content than `want`."""
    gc.collect()
    samples: list[int] = []
    wrong = 0
    clock = time.perf_counter_ns
    for _ in range(calls):
        start = clock()
        got = call()
        samples.append(clock() - start)
        wrong += got != want
    return statistics.median(samples) / 1e6, wrong


def kernel_call(kernel: Kernel, args: dict[str, JSONValue]) -> Call:
    caller = kernel.caller(user_id="bench", agent="benchmarks/js_tool_call.py")

    def one() -> str | None:
        return kernel.run_tool(TOOL, args, caller).content

    return one


def bare_call(kernel: Kernel, args: dict[str, JSONValue], prelude: bytes | None) -> Call:
    """A fresh runtime and context with the tool's limits, `text_stats.js` run in it (after the
    kernel's prelude, when given): the floor every isolated call pays."""
    limits = kernel.tool(TOOL).call_budget(kernel.config.limits)
    code = quickjs.Runtime().new_context().compile(SCRIPT.read_text("utf-8"), filename=str(SCRIPT))
    bytecode = code.write_object()
    payload = json.dumps(args)

    def one() -> str | None:
        runtime = quickjs.Runtime()
        runtime.set_memory_limit(limits.memory_limit_bytes)
        runtime.set_max_stack_size(limits.stack_limit_bytes)
        runtime.set_interrupt_handler(lambda: False)
        ctx = runtime.new_context()
        if prelude is not None:
            ctx.set("__ak_call", lambda name, payload: "vnull")
            ctx.set("__ak_log", lambda level, text: None)
            ctx.set("__ak_poll", lambda: False)
            ctx.set("__ak_walk_limit", limits.memory_limit_bytes // JS_VALUE_BYTES)
            ctx.eval_function(ctx.read_object(prelude))
        ctx.eval_function(ctx.read_object(bytecode))
        result = ctx.get("run").call(ctx.parse_json(payload))
        content = json.loads(result.json()).get("content")
        return content if isinstance(content, str) else None

    return one


def prelude_bytecode() -> bytes:
    """The prelude as the engine compiles it, for the default helper table's names."""
    names = default_helper_table().names()
    ctx = quickjs.Runtime().new_context()
    return bytes(ctx.compile(_prelude_source(names), filename="<agentkernel>").write_object())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A JS tool call against a fresh bare QuickJS context.")
    parser.add_argument(
        "--calls", type=int, default=1000, help="timed calls of each side a round (default 1000)"
    )
    parser.add_argument("--rounds", type=int, default=7, help="rounds, sides alternating first (default 7)")
    parser.add_argument(
        "--warmup", type=int, default=200, help="untimed calls of each side first (default 200)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks that it runs (CI)")
    options = parser.parse_args(argv)
    if options.smoke:
        options.calls, options.rounds, options.warmup = 5, 2, 1
    if options.calls < 1 or options.rounds < 1 or options.warmup < 0:
        parser.error("--calls and --rounds must be at least 1, --warmup not negative")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    kernel = Kernel.from_config_file(CONFIG)
    args: dict[str, JSONValue] = {"text": SAMPLE_TEXT}
    sides: dict[str, Call] = {
        "run_tool": kernel_call(kernel, args),
        "bare": bare_call(kernel, args, None),
        "bare+prelude": bare_call(kernel, args, prelude_bytecode()),
    }
    want = sides["run_tool"]()
    if want is None or not want.startswith("Символов:"):
        raise SystemExit(f"{TOOL} answered {want!r}; not benchmarking")
    for call in sides.values():
        for _ in range(options.warmup):
            call()
    figures: dict[str, list[float]] = {name: [] for name in sides}
    wrong = 0
    for round_ in range(options.rounds):
        order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
        for name in order:
            p50, bad = p50_ms(sides[name], options.calls, want)
            figures[name].append(p50)
            wrong += bad
    kernel.close()

    ratios = [tool / bare for tool, bare in zip(figures["run_tool"], figures["bare"], strict=True)]
    prelude = [full - bare for full, bare in zip(figures["bare+prelude"], figures["bare"], strict=True)]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rounds = f"{options.rounds} rounds of {options.calls} calls a side"
    print(f"{TOOL} on a {len(SAMPLE_TEXT)}-character text; {rounds}")
    print(f"load average (1 min) {load:.2f}; p50 ms per call, each round:")
    for name, values in figures.items():
        print(f"  {name:<14} " + " ".join(f"{v:7.3f}" for v in values))
    print(f"  {'prelude alone':<14} " + " ".join(f"{v:7.3f}" for v in prelude))
    median = statistics.median(ratios)
    verdict = "PASS" if median <= TARGET_RATIO else "MISS"
    print(
        f"JS tool call / fresh bare QuickJS context: {median:.2f}x "
        f"(rounds {min(ratios):.2f}-{max(ratios):.2f}); target <= {TARGET_RATIO}x: {verdict}"
    )
    spread = f"{min(prelude):.3f}-{max(prelude):.3f}"
    print(f"the prelude alone: {statistics.median(prelude):.3f} ms a call (rounds {spread})")
    if wrong:
        print(f"!! {wrong} calls gave other content than {want!r}")
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
