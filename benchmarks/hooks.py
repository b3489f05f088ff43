"""The hook pipeline's cost per message, and whole-loop throughput (issue: the kernel, speed).

    .venv/bin/python benchmarks/hooks.py [--messages 2000] [--sessions 50] [--turns 10] [--smoke]

1. Overhead of a turn's hooks: two script hooks, one JavaScript and one Rhai
   (the shipped `audit.rhai` and the same hook in JS), through the kernel's
   HookPipeline (`Kernel.run_hooks`) — `before_user_message`, `after_turn`
   and `after_loop` for one message, each hook in a fresh scope; the caller
   has no session, so nothing is written to the transcript. Target: p50 ≤ 1 ms.
2. Turns per second through the whole agent loop — hooks, the real
   OpenAI-compatible provider over HTTP to the scripted server of the tests
   (tests/fakes) on 127.0.0.1, the transcript in SQLite — with `--sessions`
   chats sending `--turns` messages each, concurrently.
Run from the project folder (it imports tests.fakes).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakes import FakeLLMServer, Reply  # noqa: E402

from agentkernel import Kernel  # noqa: E402
from agentkernel.agent.loop import LoopEvent  # noqa: E402
from agentkernel.config import load_kernel_config  # noqa: E402
from agentkernel.types import JSONObject  # noqa: E402

JS_AUDIT = """
function before_user_message(ctx, msg) {
    return { notice: `🔍 audit: ${msg.content.length} символов` };
}
function after_turn(ctx, question, answer) {
    const answered = answer ? answer.content.length : 0;
    return { notice: `✅ audit: ${question.content.length} → ${answered} символов` };
}
"""


def make_project(root: Path, base_url: str, concurrency: int) -> Path:
    config = root / "config"
    (config / "scripts" / "tools").mkdir(parents=True)
    hooks = config / "scripts" / "hooks"
    hooks.mkdir(parents=True)
    shutil.copy(REPO / "config/scripts/hooks/audit.rhai", hooks / "audit.rhai")
    (hooks / "audit.yaml").write_text("kind: script_hook\nname: audit\nscript: audit.rhai\n")
    (hooks / "audit_js.js").write_text(JS_AUDIT)
    (hooks / "audit_js.yaml").write_text("kind: script_hook\nname: audit_js\nscript: audit_js.js\n")
    (config / "templates").mkdir()
    (config / "templates" / "bench.yaml").write_text(
        "name: bench\ninstructions: Answer briefly.\nhooks: [audit, audit_js]\nmax_turns: 2\n"
    )
    (config / "kernel.yaml").write_text(
        "scripts:\n  tools: [config/scripts/tools]\n  hooks: [config/scripts/hooks]\n"
        f"llm:\n  base_url: {base_url}\n  model: fake\n  max_retries: 0\n  max_concurrency: {concurrency}\n"
    )
    return config / "kernel.yaml"


def bench_pipeline(kernel: Kernel, messages: int) -> list[float]:
    hooks = [h for h in kernel.list_hooks() if h.origin == "project"]  # the two above, not the built-ins
    caller = kernel.caller(user_id="bench")
    question: JSONObject = {"role": "user", "content": "Привет, как посчитать слова в тексте?"}
    timings = []
    for index in range(messages + 100):
        started = time.perf_counter_ns()
        run = kernel.run_hooks(hooks, question, caller)
        elapsed = time.perf_counter_ns() - started
        assert len(run.before.notices) == 2 and len(run.after_notices) == 2, run
        if index >= 100:  # warm-up
            timings.append(elapsed / 1e6)
    return timings


async def bench_loop(kernel: Kernel, sessions: int, turns: int) -> float:
    chats = [kernel.chat("bench", user_id=f"u{i}", stream=False) for i in range(sessions)]

    async def quiet(event: LoopEvent) -> None:
        return None

    async def talk(chat: object) -> None:
        for turn in range(turns):
            result = await chat.send(f"сообщение {turn}", quiet)  # type: ignore[attr-defined]
            assert result.reason.value == "job_done", result

    started = time.perf_counter()
    await asyncio.gather(*(talk(chat) for chat in chats))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=16, help="llm.max_concurrency")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args()
    if options.smoke:
        options.messages, options.sessions, options.turns = 5, 2, 2
    with FakeLLMServer(max_requests=10**9) as server, tempfile.TemporaryDirectory() as folder:
        server.respond_with(
            lambda request: Reply(text="Хорошо, готово.", prompt_tokens=30, completion_tokens=5)
        )
        config = load_kernel_config(make_project(Path(folder), server.base_url, options.concurrency))
        asyncio.run(run_benchmarks(Kernel(config), options))


async def run_benchmarks(kernel: Kernel, options: argparse.Namespace) -> None:
    """Both figures, on one kernel closed at the end (its LLM client on this event loop)."""
    async with kernel:
        timings = bench_pipeline(kernel, options.messages)
        p50 = statistics.median(timings)
        p95 = statistics.quantiles(timings, n=20)[18]
        verdict = "PASS" if p50 <= 1.0 else "MISS"
        print(
            f"hook pipeline, 1 JS + 1 Rhai hook, 3 events per message: p50 {p50:.3f} ms, p95 {p95:.3f} ms "
            f"(n={len(timings)}); target p50 <= 1 ms: {verdict}"
        )
        total = options.sessions * options.turns
        elapsed = await bench_loop(kernel, options.sessions, options.turns)
        print(
            f"agent loop: {total} turns in {elapsed:.2f} s with {options.sessions} concurrent sessions "
            f"= {total / elapsed:.0f} turns/s (hooks + HTTP to the scripted LLM + SQLite transcript)"
        )


if __name__ == "__main__":
    main()
