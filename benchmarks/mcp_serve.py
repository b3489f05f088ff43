"""What serving a tool over MCP costs per call, beyond `kernel.run_tool` (issue 16).

    .venv/bin/python benchmarks/mcp_serve.py [--calls 300] [--smoke]

One tool (`text_stats` of the repo's config, copied to a temporary folder
so nothing is written into the repository) is called `--calls` times, after
a warm-up, four ways:

1. `kernel.run_tool` in process: the dispatch path alone;
2. the official SDK's `Client` against our `ToolServer` in the same process
   (the SDK's direct, in-memory path: no transport, no JSON framing): what
   our MCP layer and the SDK's request handling add (the tool-list check,
   a Caller with its session, the result mapping, pydantic models);
3. the SDK's client against `agentkernel mcp serve` as a subprocess over
   stdio (the JSON-RPC lines through two pipes);
4. the SDK's client against `/mcp` of the real server (uvicorn on
   127.0.0.1, streamable HTTP, in a thread of this process).

Each is shown with p50 and p95 wall time per call, and its overhead at p50
over (1). Wall time, since the stdio case crosses processes; on a shared
machine other programs add noise, so read p50 rather than p95. The exit
status is 0 when every call succeeded.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from agentkernel import Kernel  # noqa: E402
from agentkernel.config import load_kernel_config  # noqa: E402
from agentkernel.mcp_serve.serving import Identity, ToolServer  # noqa: E402
from agentkernel.server.serving import bind, run_server, server_for, url_of  # noqa: E402
from agentkernel.types import JSONValue  # noqa: E402

TOOL = "text_stats"
ARGS: dict[str, JSONValue] = {"text": "Привет, мир! Agent runtimes call tools many times per turn."}
WARMUP = 20


def percentiles(times: list[float]) -> tuple[float, float]:
    """p50 and p95 in milliseconds."""
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def direct(kernel: Kernel, calls: int) -> list[float]:
    caller = kernel.caller(user_id="bench", session_id="bench")
    times = []
    for index in range(WARMUP + calls):
        started = time.perf_counter()
        result = kernel.run_tool(TOOL, ARGS, caller)
        if index >= WARMUP:
            times.append(time.perf_counter() - started)
        if not result.success:
            raise SystemExit(f"run_tool failed: {result.content}")
    return times


async def timed_calls(client: Client, calls: int) -> list[float]:
    times = []
    for index in range(WARMUP + calls):
        started = time.perf_counter()
        result = await client.call_tool(TOOL, ARGS)
        if index >= WARMUP:
            times.append(time.perf_counter() - started)
        if result.is_error:
            raise SystemExit(f"MCP call failed: {result.content}")
    return times


def over_mcp(server: object, calls: int) -> list[float]:
    async def main() -> list[float]:
        async with Client(server) as client:  # type: ignore[arg-type]  # a Server, parameters or a URL
            return await timed_calls(client, calls)

    return anyio.run(main)


def in_process(kernel: Kernel, calls: int) -> list[float]:
    tools = ToolServer(kernel, lambda _ctx: Identity("bench", "bench-mcp"))
    return over_mcp(tools.server, calls)


def over_stdio(config: Path, calls: int) -> list[float]:
    command = str(Path(sys.executable).parent / "agentkernel")
    served = StdioServerParameters(command=command, args=["mcp", "serve", "--config", str(config)])
    return over_mcp(served, calls)


def over_http(kernel: Kernel, calls: int) -> list[float]:
    sock = bind("127.0.0.1", 0)
    server = server_for(kernel, kernel.config.server)
    thread = threading.Thread(target=lambda: asyncio.run(run_server(server, kernel, sock)), daemon=True)
    thread.start()
    try:
        _wait_for(sock)
        return over_mcp(url_of(sock) + "/mcp", calls)
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


def _wait_for(sock: socket.socket) -> None:
    """The socket is bound and listening: a first request waits in its backlog until uvicorn answers."""
    import httpx

    httpx.get(url_of(sock) + "/healthz", timeout=60).raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="measured calls per way (after a warm-up)")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args()
    calls = 5 if options.smoke else options.calls
    with tempfile.TemporaryDirectory() as folder:
        shutil.copytree(REPO / "config", Path(folder) / "config")
        config = Path(folder) / "config" / "kernel.yaml"
        ways: list[tuple[str, Callable[[], list[float]]]] = []
        kernel = Kernel(load_kernel_config(config))
        ways.append(("kernel.run_tool (in process)", lambda: direct(kernel, calls)))
        ways.append(("MCP, SDK client in process", lambda: in_process(kernel, calls)))
        ways.append(("MCP over stdio (mcp serve)", lambda: over_stdio(config, calls)))
        ways.append(("MCP over streamable HTTP (/mcp)", lambda: over_http(kernel, calls)))
        print(f"{TOOL}, {calls} calls each after {WARMUP} warm-up calls (wall time per call)")
        base = None
        for label, measure in ways:
            p50, p95 = percentiles(measure())
            base = p50 if base is None else base
            extra = "" if p50 == base else f"   overhead +{p50 - base:.3f} ms"
            print(f"  {label:<34} p50 {p50:8.3f} ms   p95 {p95:8.3f} ms{extra}")
        kernel.close()


if __name__ == "__main__":
    main()
