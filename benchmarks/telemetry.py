"""What tracing costs a turn (S26.1): the kernel's CPU per turn, traces off and the OTLP exporter on.

    .venv/bin/python benchmarks/telemetry.py [--turns 40] [--rounds 20] [--smoke]

Each turn is a run of the agent loop with a tool call its hook watches:
two LLM calls (the real OpenAI-compatible provider over HTTP to the
scripted server of the tests on 127.0.0.1), one JavaScript tool call, one
JavaScript `before_tool_call` hook, the transcript in SQLite. Traced, that
is one `invoke_agent`, two `chat`, one `execute_tool` and one `hook` span,
batched (BatchSpanProcessor) and posted over OTLP/HTTP to a receiver that
decodes every request.

The kernel runs in a child process, measuring its own CPU time
(`time.process_time`, every thread: the exporter's included, the final
flush too); the scripted LLM and the receiver run in this process, so
their work is not counted. The child alternates blocks of turns, traces
off then on (started before the block, once, as a server starts them;
closed after it, the flush of the last spans counted), so both blocks of
a pair see the same machine; the figure is the median of the pairs'
ratios. Target: on ≤ 1.10 × off. Run from the
project folder (it imports tests.fakes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakes import FakeLLMServer, FakeToolCall, RecordedRequest, Reply  # noqa: E402
from tests.fakes.openai_server import Turn  # noqa: E402
from tests.fakes.otlp import http_receiver  # noqa: E402

TARGET = 1.10
WATCH = "function before_tool_call(ctx, call) { return {notice: 'watched ' + call.tool}; }\n"
UPPER = "function run(args) { return args.text.toUpperCase(); }\n"


def answer(request: RecordedRequest) -> Turn:
    messages = (request.body or {}).get("messages", [])
    if messages and messages[-1].get("role") == "tool":
        return Reply(text="the answer is HI")
    return Reply(tool_calls=(FakeToolCall("upper", '{"text": "hi"}'),))


def make_project(root: Path, base_url: str, endpoint: str | None) -> Path:
    config = root / "config"
    tools, hooks = config / "scripts" / "tools", config / "scripts" / "hooks"
    tools.mkdir(parents=True)
    hooks.mkdir(parents=True)
    (tools / "upper.js").write_text(UPPER)
    (tools / "upper.yaml").write_text(
        "kind: script_tool\nname: upper\nscript: upper.js\n"
        "parameters: {type: object, properties: {text: {type: string}}}\n"
    )
    (hooks / "watch.js").write_text(WATCH)
    (hooks / "watch.yaml").write_text("kind: script_hook\nname: watch\nscript: watch.js\n")
    (config / "templates").mkdir()
    (config / "templates" / "bench.yaml").write_text(
        "name: bench\ninstructions: Answer briefly.\ntools: [upper]\nhooks: [watch]\nmax_turns: 4\n"
    )
    telemetry = "" if endpoint is None else f"telemetry:\n  endpoint: {endpoint}\n"
    (config / "kernel.yaml").write_text(
        "scripts:\n  tools: [config/scripts/tools]\n  hooks: [config/scripts/hooks]\n  builtins: false\n"
        f"llm:\n  base_url: {base_url}\n  model: fake\n  max_retries: 0\n{telemetry}"
    )
    return config / "kernel.yaml"


# -- the child: the kernel, measuring itself ------------------------------------------------------------


async def blocks(config: Path, rounds: int, count: int, warmup: int) -> dict[str, object]:
    """`rounds` pairs of blocks of `count` turns, traces off then on (started before the block, once as
    a server does, not counted; closed after it, the close's flush of the last spans counted), each
    block's CPU a turn."""
    from agentkernel import Kernel
    from agentkernel.agent.loop import EndReason, LoopEvent
    from agentkernel.telemetry import tracing

    async def quiet(event: LoopEvent) -> None:
        return None

    async def turns(kernel: Kernel, how_many: int) -> None:
        for index in range(how_many):
            chat = kernel.chat("bench", user_id=f"user{index % 10}", stream=False)
            result = await chat.send("say hi", quiet)
            assert result.reason is EndReason.JOB_DONE, result
            kernel.end_chat(chat)

    kernel = Kernel.from_config_file(config)
    off: list[float] = []
    on: list[float] = []
    loaded_off = True
    async with kernel:
        await turns(kernel, warmup)
        for _ in range(rounds):
            started = time.process_time()
            await turns(kernel, count)
            off.append((time.process_time() - started) * 1000 / count)
            if not on:  # before the first block traced: off never imported the SDK
                loaded_off = any(m.startswith("opentelemetry.sdk") for m in sys.modules)
            assert tracing.start(kernel.config.telemetry)  # once a process, as a server starts: not counted
            started = time.process_time()
            await turns(kernel, count)
            tracing.close()  # the spans still queued are exported: counted
            on.append((time.process_time() - started) * 1000 / count)
    return {"off": off, "on": on, "sdk_loaded_off": loaded_off}


# -- the parent: the LLM, the receiver ------------------------------------------------------------------


def child(base_url: str, endpoint: str, options: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as folder:
        config = make_project(Path(folder), base_url, endpoint)
        command = [sys.executable, __file__, "--child", str(config)]
        command += ["--turns", str(options.turns), "--rounds", str(options.rounds)]
        command += ["--warmup", str(options.warmup)]
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=40, help="turns a block")
    parser.add_argument("--rounds", type=int, default=20, help="pairs of blocks, off then on")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--smoke", action="store_true", help="a few turns, one round: that it runs")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child is not None:
        found = asyncio.run(blocks(options.child, options.rounds, options.turns, options.warmup))
        print(json.dumps(found))
        return
    if options.smoke:
        options.turns, options.rounds, options.warmup = 5, 1, 2
    with FakeLLMServer(max_requests=10**7) as llm, http_receiver() as (endpoint, received):
        llm.respond_with(answer)
        found = child(llm.base_url, endpoint, options)
        spans = len(received.spans)
    assert found["sdk_loaded_off"] is False, "the SDK was imported with traces off"
    off, on = cast(list[float], found["off"]), cast(list[float], found["on"])
    # the blocks of a pair ran back to back, on the same machine state: the median of the pairs' ratios
    ratio = statistics.median(b / a for a, b in zip(off, on, strict=True))
    print(f"{options.rounds} pair(s) of blocks of {options.turns} turns (a tool call and a hook each):")
    print(f"  telemetry off                      CPU p50 {statistics.median(off):.2f} ms a turn")
    print(f"  OTLP exporter on (HTTP, batching)  CPU p50 {statistics.median(on):.2f} ms a turn")
    print(f"  off, by block: {_shown(off)}")
    print(f"  on, by block:  {_shown(on)}")
    print(f"  spans received: {spans} ({spans / (options.rounds * options.turns):.1f} a turn)")
    print(f"  fastest block on / fastest off: {min(on) / min(off):.3f}x")
    verdict = "PASS" if ratio <= TARGET else "MISS"
    print(f"exporter on / off, p50 of the pairs: {ratio:.3f}x (target <= {TARGET:.2f}x): {verdict}")


def _shown(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    main()
