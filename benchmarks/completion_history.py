"""A chat completion's earlier messages: vetting them through the hooks, and refusing a flood (issue 24).

    .venv/bin/python benchmarks/completion_history.py [--messages 1000] [--flood 240000] [--smoke]

The real server on 127.0.0.1 (uvicorn in a thread, as the tests run it), a
template with the hooks a demanding operator ships (the project's
`moderation`, the built-in `memory` and `faq_cache`), the scripted LLM
answering. While each request runs, another client polls `GET /healthz`:
its worst latency is what the request costs everyone else.

1. A completion whose conversation has `--messages` messages (the default
   server.max_completion_messages): each earlier one passes
   `before_user_message` of the three hooks before the LLM is asked.
2. A body of `--flood` empty messages under server.max_body_bytes (8 MiB):
   refused 413 by server.max_completion_messages before any message is read.
Run from the project folder (it imports tests.fakes and the test server).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.builtins.hook_project import kernel_on, make_project  # noqa: E402
from tests.fakes import FakeLLMServer, Reply  # noqa: E402
from tests.server.conftest import LiveServer  # noqa: E402


def timed(url: str, body: dict[str, Any]) -> tuple[httpx.Response, float, float]:
    """The response, its wall time, and the worst `/healthz` latency another client saw meanwhile."""
    worst, polling, done = [0.0], threading.Event(), threading.Event()
    content = json.dumps(body).encode()  # encoded before: the client's own work is not measured

    def poll() -> None:
        with httpx.Client() as client:
            while not done.is_set():
                started = time.perf_counter()
                client.get(f"{url}/healthz")
                worst[0] = max(worst[0], time.perf_counter() - started)
                polling.set()

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        polling.wait()
        started = time.perf_counter()
        headers = {"content-type": "application/json"}
        response = httpx.post(f"{url}/v1/chat/completions", content=content, headers=headers, timeout=300)
        wall = time.perf_counter() - started
    finally:
        done.set()
        poller.join()  # its last poll may be the one the request held up
    return response, wall, worst[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--flood", type=int, default=240_000)
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks that it runs; no figures")
    options = parser.parse_args()
    if options.smoke:
        options.messages, options.flood = 5, 1_001
    with FakeLLMServer() as llm, tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        make_project(root, llm, {"shop": ["moderation", "memory", "faq_cache"]})
        for name in ("moderation.yaml", "moderation.rhai"):
            shutil.copy(
                REPO / "config" / "scripts" / "hooks" / name, root / "config" / "scripts" / "hooks" / name
            )
        llm.add(Reply(text="ok"), Reply(text='{"facts": []}'))  # the answer, then memory's question
        talk = [
            {"role": ("user", "assistant")[n % 2], "content": f"сообщение {n} про погоду"}
            for n in range(options.messages - 1)
        ]
        with kernel_on(root / "config" / "kernel.yaml") as kernel, LiveServer(kernel) as live:
            messages = [*talk, {"role": "user", "content": "go"}]
            answer, wall, worst = timed(live.url, {"model": "shop", "messages": messages})
            assert answer.status_code == 200, answer.text
            print(
                f"{options.messages:,} messages vetted by 3 hooks: {wall:.3f} s; /healthz worst {worst:.3f} s"
            )
            flood = [{"role": "user", "content": ""}] * options.flood
            answer, wall, worst = timed(live.url, {"model": "shop", "messages": flood})
            assert answer.status_code == 413, answer.text
            print(f"{options.flood:,} empty messages refused 413: {wall:.3f} s; /healthz worst {worst:.3f} s")


if __name__ == "__main__":
    main()
