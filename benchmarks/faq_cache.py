"""The built-in `faq_cache` hook's hit path: a question asked before, answered without the LLM (issue 15).

    .venv/bin/python benchmarks/faq_cache.py [--turns 2000] [--entries 500] [--smoke]

A temporary project whose template `faq` uses the built-in hook (loaded
with the kernel's other built-ins), its state store in SQLite
holding `--entries` cached answers (the YAML's default bound), one of them
asked by the measured turns:

1. The hooks of one turn, hit: `before_user_message` (normalise the text,
   one `state_get`, the `reply` verdict) then `after_turn` (which keeps
   nothing: the reply was a hook's) through the kernel's hook pipeline
   (`Kernel.run_hooks`), with no transcript. Target: p50 <= 1 ms.
2. The same hit as a whole turn of the agent loop (`ChatSession.send`): the
   hooks plus the transcript records (the user's message, the hook's
   verdict, the notice, the answer, the end) in SQLite; no LLM call.
Run from the project folder (it imports tests.fakes for the one turn that fills the cache).
"""

from __future__ import annotations

import argparse
import asyncio
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
from agentkernel.services.state import Namespace, SqliteStateStore  # noqa: E402
from agentkernel.types import JSONObject  # noqa: E402

QUESTION = "Когда вы открыты?"
ANSWER = "Мы открыты с 9 до 18, без выходных. " * 10
WARM_UP = 50


def make_project(root: Path, base_url: str) -> Path:
    (root / "config" / "scripts" / "tools").mkdir(parents=True)
    (root / "config" / "templates").mkdir()
    (root / "config" / "templates" / "faq.yaml").write_text(
        "name: faq\ninstructions: Answer briefly.\nhooks: [faq_cache]\n", encoding="utf-8"
    )
    kernel_yaml = root / "config" / "kernel.yaml"
    kernel_yaml.write_text(
        "scripts:\n  tools: [config/scripts/tools]\n  hooks: []\n"  # the built-in hooks load by themselves
        f"llm:\n  base_url: {base_url}\n  model: fake\n  max_retries: 0\n"
        "state:\n  db_path: data/state.db\n",
        encoding="utf-8",
    )
    return kernel_yaml


def fill(kernel: Kernel, entries: int) -> None:
    """`entries - 1` other answers, as earlier turns would have left them; then one real turn."""
    now = int(time.time() * 1000)
    with SqliteStateStore(kernel.config.root / "data" / "state.db") as store:
        where = Namespace("agent", "faq", "bench")
        for n in range(entries - 1):
            question = f"вопрос номер {n}"
            store.set(where, f"faq_cache:q:{question}", {"answer": f"ответ {n}", "at": now})
            store.sadd(where, "faq_cache:order", question)
    turn = asyncio.run(kernel.chat("faq", user_id="bench", stream=False).send(QUESTION, quiet))
    assert turn.answer == ANSWER, turn


async def quiet(event: LoopEvent) -> None:
    return None


def milliseconds(work: list[float]) -> tuple[float, float]:
    return statistics.median(work) * 1000, statistics.quantiles(work, n=20)[18] * 1000


def bench_hooks(kernel: Kernel, turns: int) -> tuple[list[float], list[float]]:
    """Wall and CPU time of each turn's hooks (CPU time, this thread's, shows less of a busy machine)."""
    hooks = [kernel.hook("faq_cache")]
    caller = kernel.caller(user_id="bench", template="faq")
    message: JSONObject = {"role": "user", "content": "  когда ВЫ открыты?! "}
    wall, cpu = [], []
    for index in range(turns + WARM_UP):
        started, started_cpu = time.perf_counter(), time.thread_time()
        run = kernel.run_hooks(hooks, message, caller)
        elapsed, elapsed_cpu = time.perf_counter() - started, time.thread_time() - started_cpu
        assert run.before.reply == ANSWER, run
        if index >= WARM_UP:
            wall.append(elapsed)
            cpu.append(elapsed_cpu)
    return wall, cpu


async def bench_turns(kernel: Kernel, turns: int) -> list[float]:
    chat = kernel.chat("faq", user_id="bench", stream=False)
    timings = []
    for index in range(turns + WARM_UP):
        started = time.perf_counter()
        result = await chat.send("когда вы открыты", quiet)
        elapsed = time.perf_counter() - started
        assert result.answer == ANSWER, result
        chat.history.clear()  # a long conversation is not what is measured
        if index >= WARM_UP:
            timings.append(elapsed)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--entries", type=int, default=500, help="answers in the cache (max_entries)")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args()
    if options.smoke:
        options.turns, options.entries = 5, 5
    with FakeLLMServer() as server, tempfile.TemporaryDirectory() as folder:
        server.add(Reply(text=ANSWER))  # the one turn that fills the cache; any other request gets a 500
        with Kernel(load_kernel_config(make_project(Path(folder), server.base_url))) as kernel:
            fill(kernel, options.entries)
            wall, cpu = bench_hooks(kernel, options.turns)
            p50, p95 = milliseconds(wall)
            verdict = "PASS" if p50 <= 1.0 else "MISS"
            print(
                f"faq_cache hit, hooks of one turn ({options.entries} answers cached): "
                f"p50 {p50:.3f} ms, p95 {p95:.3f} ms (n={options.turns}); target p50 <= 1 ms: {verdict}"
            )
            print(f"  CPU time of the thread: p50 {milliseconds(cpu)[0]:.3f} ms")
            p50, p95 = milliseconds(asyncio.run(bench_turns(kernel, options.turns)))
            print(
                f"faq_cache hit, whole turn of the agent loop with its transcript: "
                f"p50 {p50:.3f} ms, p95 {p95:.3f} ms"
            )
        assert server.unexpected == 0, "a cached question reached the LLM"


if __name__ == "__main__":
    main()
