"""What counting the metrics (S26.2) costs: per event, and per turn of the agent loop (issue 29 item 2).

    .venv/bin/python benchmarks/metrics.py [--events 200000] [--turns 300] [--rounds 5] [--smoke]

Why: every turn, LLM call, tool call, hook call and script call counts
itself once the server has started; the issue asks that counting add
nothing measurable to a turn.

1. **Per event**: each recording function of telemetry/metrics.py called
   `--events` times (the labels bounded as in a real run), CPU per call:
   one process (counts in memory), then the same in a child process with
   `PROMETHEUS_MULTIPROC_DIR` set (`serve --workers N`: each count written
   into a memory-mapped file).
2. **Per turn**: a kernel with an instant LLM (a `Provider` in this process
   that answers at once: no HTTP) and a template whose turn calls one JS
   tool and passes one JS hook (`before_tool_call`, `after_turn`): a turn
   counts 1 turn, 2 LLM calls, 1 tool call, 2 hook verdicts and 3 script
   calls. `--turns` turns with the metrics off, then on, alternately for
   `--rounds` rounds; CPU per turn (`time.process_time`, every thread), the
   median of the rounds, and the ratio on/off.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agentkernel import Kernel  # noqa: E402
from agentkernel.config import load_kernel_config  # noqa: E402
from agentkernel.llm import Completion, CompletionRequest, StreamDone, TextDelta, ToolCall, Usage  # noqa: E402
from agentkernel.telemetry import metrics  # noqa: E402

EVENTS: dict[str, Callable[[], None]] = {
    "turn_ended": lambda: metrics.turn_ended("bench", "job_done", 0.8),
    "llm_called": lambda: metrics.llm_called("bench", "model-a", 0.4, 120, 30),
    "tool_called": lambda: metrics.tool_called("upper", True),
    "hook_called": lambda: metrics.hook_called("before_tool_call", {"notice": "x"}, False),
    "script_ran": lambda: metrics.script_ran("javascript", 0.002),
}
TOOL_JS = "function run(args) { return args.text.toUpperCase(); }"
HOOK_JS = """
function before_tool_call(ctx, call) { return {notice: 'checked ' + call.tool}; }
function after_turn(ctx, question, answer) { return null; }
"""


class ToolThenAnswer:
    """A model that calls `upper` when the last message is the user's, and answers once it has the result."""

    async def complete(self, request: CompletionRequest) -> Completion:
        if request.messages[-1].role == "tool":
            return Completion("done", (), Usage(40, 2), "stop", "instant")
        call = ToolCall(f"c{len(request.messages)}", "upper", '{"text": "hi"}')
        return Completion(None, (call,), Usage(30, 8), "tool_calls", "instant")

    async def stream(self, request: CompletionRequest) -> AsyncIterator[TextDelta | StreamDone]:
        completion = await self.complete(request)
        if completion.text:
            yield TextDelta(completion.text)
        yield StreamDone(completion)

    async def aclose(self) -> None:
        return None


def per_event(count: int) -> dict[str, float]:
    """µs of CPU per call of each recording function, in this process."""
    metrics.start()
    spent = {}
    for name, record in EVENTS.items():
        record()  # the labels' first use (a new series) is not what is measured
        began = time.process_time()
        for _ in range(count):
            record()
        spent[name] = (time.process_time() - began) / count * 1e6
    return spent


def per_event_multiprocess(count: int) -> dict[str, float]:
    """`per_event` in a child process with PROMETHEUS_MULTIPROC_DIR set (read as prometheus_client loads)."""
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": folder}
        child = [sys.executable, __file__, "--child", str(count)]
        done = subprocess.run(child, env=env, capture_output=True, text=True, check=True)
    return {name: float(value) for name, value in (line.split() for line in done.stdout.splitlines())}


def make_kernel(root: Path) -> Kernel:
    config = root / "config"
    tools, hooks = config / "scripts" / "tools", config / "scripts" / "hooks"
    for folder in (tools, hooks, config / "templates"):
        folder.mkdir(parents=True)
    (tools / "upper.js").write_text(TOOL_JS)
    schema = "parameters:\n  type: object\n  properties:\n    text: {type: string}\n"
    (tools / "upper.yaml").write_text(f"kind: script_tool\nname: upper\nscript: upper.js\n{schema}")
    (hooks / "check.js").write_text(HOOK_JS)
    (hooks / "check.yaml").write_text("kind: script_hook\nname: check\nscript: check.js\n")
    template = "name: bench\ninstructions: Use the tool.\ntools: [upper]\nhooks: [check]\nmax_turns: 4\n"
    (config / "templates" / "bench.yaml").write_text(template)
    (config / "kernel.yaml").write_text("scripts:\n  builtins: false\n")
    return Kernel(load_kernel_config(config / "kernel.yaml"), provider=ToolThenAnswer())


async def turns_cpu(kernel: Kernel, turns: int) -> float:
    """ms of CPU per turn, `turns` turns in one session."""

    async def quiet(event: object) -> None:
        return None

    chat = kernel.chat("bench", stream=False)
    began = time.process_time()
    for index in range(turns):
        result = await chat.send(f"message {index}", quiet)
        assert result.answer == "done", result
    return (time.process_time() - began) / turns * 1e3


async def per_turn(turns: int, rounds: int) -> tuple[float, float]:
    """Median ms of CPU a turn with the metrics off, and on."""
    with tempfile.TemporaryDirectory() as folder:
        async with make_kernel(Path(folder)) as kernel:
            await turns_cpu(kernel, 5)  # warm: scripts compiled, threads started
            off: list[float] = []
            on: list[float] = []
            for _ in range(rounds):
                metrics._recorder = metrics._Off()
                off.append(await turns_cpu(kernel, turns))
                metrics._recorder = metrics._Off()
                metrics.start()
                on.append(await turns_cpu(kernel, turns))
    return statistics.median(off), statistics.median(on)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks the benchmark runs")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        for name, micros in per_event(options.child).items():
            print(name, micros)
        return 0
    if options.smoke:
        options.events, options.turns, options.rounds = 1000, 5, 1
    print(f"Python {platform.python_version()}, {os.cpu_count()} cores")
    one, many = per_event(options.events), per_event_multiprocess(options.events)
    print(f"per event, CPU ({options.events:,} calls each):      one process   multiprocess")
    for name in EVENTS:
        print(f"  {name:<14}{one[name]:>28.2f} µs {many[name]:>10.2f} µs")
    off, on = asyncio.run(per_turn(options.turns, options.rounds))
    print(f"per turn (1 tool call, 1 hook, 2 LLM calls), CPU, median of {options.rounds} rounds:")
    print(f"  metrics off {off:.3f} ms; on {on:.3f} ms; on/off {on / off:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
