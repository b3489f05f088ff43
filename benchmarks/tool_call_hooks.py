"""What the tool-call hooks (S24) add to a tool call, measured in one run, interleaved.

Why: every tool call now passes the dispatcher's guard. The targets: with no
hook taking part in tool calls the path costs what it does without hooks
(one check), and an allowing JavaScript `before_tool_call` hook adds at most
0.3 ms to a call. Rhai is measured beside it.

What it measures, on a throw-away project with one JS tool (`upper`) and
four templates, `Kernel.run_tool` for a caller of each (the panel's path,
`Kernel.caller(spec=template)`), in interleaved rounds so drift on a shared
machine hits every variant alike:

- `none`: a template with no hooks;
- `message_only`: a template whose hook takes part in messages only
  (`before_user_message`): the guard's one check;
- `js`: an allowing JS `before_tool_call` hook;
- `rhai`: the same hook in Rhai.

It prints p50 per call of each, the p50 added over `none`, the spread of
the per-round medians, and PASS/MISS against the targets (informational;
the exit status is 1 only when a call failed).

    .venv/bin/python benchmarks/tool_call_hooks.py [--calls 2000] [--rounds 7] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agentkernel.config import load_kernel_config
from agentkernel.kernel import Kernel
from agentkernel.types import JSONValue

TARGET_ADDED_MS = 0.3
VARIANTS = ("none", "message_only", "js", "rhai")
HOOKS = {
    "message_only": ("js", "function before_user_message(ctx, msg) { return null; }"),
    "js": ("js", "function before_tool_call(ctx, call) { if (call.tool === 'shell') return {deny: 'no'}; }"),
    "rhai": ("rhai", 'fn before_tool_call(ctx, tc) { if tc.tool == "shell" { return #{deny: "no"}; } () }'),
}


def make_project(root: Path) -> Path:
    (root / "config" / "scripts" / "tools").mkdir(parents=True)
    (root / "config" / "scripts" / "hooks").mkdir(parents=True)
    (root / "config" / "templates").mkdir(parents=True)
    (root / "config" / "kernel.yaml").write_text("scripts:\n  builtins: false\n", encoding="utf-8")
    tools = root / "config" / "scripts" / "tools"
    (tools / "upper.yaml").write_text(
        "kind: script_tool\nname: upper\nscript: upper.js\n"
        "parameters: {type: object, properties: {text: {type: string}}, required: [text]}\n",
        encoding="utf-8",
    )
    (tools / "upper.js").write_text(
        "function run(args) { return args.text.toUpperCase(); }", encoding="utf-8"
    )
    for name, (ext, source) in HOOKS.items():
        hooks = root / "config" / "scripts" / "hooks"
        (hooks / f"{name}.yaml").write_text(
            f"kind: script_hook\nname: {name}\nscript: {name}.{ext}\n", encoding="utf-8"
        )
        (hooks / f"{name}.{ext}").write_text(source, encoding="utf-8")
    for variant in VARIANTS:
        hooks_line = "" if variant == "none" else f"hooks: [{variant}]\n"
        (root / "config" / "templates" / f"{variant}.yaml").write_text(
            f"name: t_{variant}\ninstructions: x\ntools: [upper]\n{hooks_line}", encoding="utf-8"
        )
    return root / "config" / "kernel.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per variant per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks that it runs (CI)")
    options = parser.parse_args()
    calls, rounds = (20, 2) if options.smoke else (options.calls, options.rounds)
    failed = 0
    with (
        tempfile.TemporaryDirectory() as folder,
        Kernel(load_kernel_config(make_project(Path(folder)))) as kernel,
    ):
        callers = {v: kernel.caller(user_id="bench", spec=kernel.template(f"t_{v}")) for v in VARIANTS}
        args: JSONValue = {"text": "hello, hooks"}
        medians: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for variant in VARIANTS:  # warm-up: compile each script once
            for _ in range(20):
                kernel.run_tool("upper", args, callers[variant])
        for _ in range(rounds):
            for variant in VARIANTS:
                samples = []
                for _ in range(calls):
                    started = time.perf_counter_ns()
                    result = kernel.run_tool("upper", args, callers[variant])
                    samples.append(time.perf_counter_ns() - started)
                    failed += not result.success
                medians[variant].append(statistics.median(samples) / 1e6)
    load = os.getloadavg()[0]
    print(f"tool call through the hooks: {calls} calls x {rounds} rounds per variant, load {load:.2f}")
    base = statistics.median(medians["none"])
    for variant in VARIANTS:
        p50 = statistics.median(medians[variant])
        spread = max(medians[variant]) / min(medians[variant])
        added = p50 - base
        print(f"  {variant:13} p50 {p50:.3f} ms  added {added:+.3f} ms  (rounds' spread {spread:.2f}x)")
    js_added = statistics.median(medians["js"]) - base
    check_added = statistics.median(medians["message_only"]) - base
    print(
        f"an allowing JS hook adds {js_added:.3f} ms: {'PASS' if js_added <= TARGET_ADDED_MS else 'MISS'} "
        f"(target <= {TARGET_ADDED_MS} ms)"
    )
    print(f"no tool-call hook taking part adds {check_added:+.3f} ms to a call ({check_added / base:+.1%})")
    if failed:
        print(f"{failed} calls failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
