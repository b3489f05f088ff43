"""What calling an outside MCP server's tool costs through our dispatch (issue 16, consuming).

    .venv/bin/python benchmarks/mcp_consume.py [--calls 300] [--smoke]

A template lists a small MCP server (written with the SDK, run over stdio)
whose `echo` tool returns its text. Timed, per call, wall clock:

- a JavaScript script tool doing the same through `Kernel.run_tool`, for scale;
- `Kernel.run_tool("outside__echo")`: the one dispatch path (lookup, access
  check, argument validation against the server's inputSchema, history,
  truncation) plus the hop to the pool's event loop and the MCP round trip;
- the same MCP call made with the SDK's `Client` alone, on its own loop,
  to its own copy of the server: the protocol's own cost.

The difference of the last two medians is what our side adds to an MCP
call. The first call's time (starting the server: spawn, `import mcp` in
the child, handshake, tool list) is shown apart. Wall-clock figures on a
shared machine are noisy: read them as orders of magnitude.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agentkernel import Kernel  # noqa: E402
from agentkernel.config import load_kernel_config  # noqa: E402
from agentkernel.types import JSONObject  # noqa: E402

SERVER = """
from mcp.server.mcpserver import MCPServer

app = MCPServer("bench")


@app.tool()
def echo(text: str) -> str:
    \"\"\"Echo the text back.\"\"\"
    return text


if __name__ == "__main__":
    app.run()
"""


def make_project(root: Path) -> Path:
    config = root / "config"
    (config / "scripts" / "tools").mkdir(parents=True)
    (config / "scripts" / "hooks").mkdir(parents=True)
    (config / "templates").mkdir(parents=True)
    (root / "server.py").write_text(SERVER, encoding="utf-8")
    (config / "kernel.yaml").write_text(
        "scripts: {tools: [config/scripts/tools], hooks: [config/scripts/hooks], builtins: false}\n",
        encoding="utf-8",
    )
    tools = config / "scripts" / "tools"
    (tools / "echo_js.js").write_text("function run(args) { return args.text; }\n", encoding="utf-8")
    (tools / "echo_js.yaml").write_text(
        "kind: script_tool\nname: echo_js\nscript: echo_js.js\n"
        "parameters: {type: object, properties: {text: {type: string}}, required: [text]}\n",
        encoding="utf-8",
    )
    (config / "templates" / "bench.yaml").write_text(
        textwrap.dedent(f"""
            name: bench
            instructions: benchmark
            tools: [echo_js]
            mcp_servers:
              - name: outside
                command: {sys.executable}
                args: [{root / "server.py"}]
            """),
        encoding="utf-8",
    )
    return config / "kernel.yaml"


def timed(call: Callable[[], object], count: int) -> list[float]:
    """Milliseconds of each of `count` calls."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def p(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def sdk_alone(server: Path, count: int) -> list[float]:
    """The same call with the SDK's client alone: the MCP round trip itself."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def run() -> list[float]:
        params = StdioServerParameters(command=sys.executable, args=[str(server)])
        async with Client(params, cache=None) as client:
            await client.list_tools()
            times = []
            for _ in range(count):
                started = time.perf_counter()
                await client.call_tool("echo", {"text": "привет"})
                times.append((time.perf_counter() - started) * 1000)
            return times

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="a few calls: does it still run?")
    options = parser.parse_args()
    calls = 5 if options.smoke else options.calls
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        with Kernel(load_kernel_config(make_project(root))) as kernel:
            process = kernel.spawn("bench", session_id="bench")
            args: JSONObject = {"text": "привет"}
            started = time.perf_counter()
            first = kernel.run_tool("outside__echo", args, process)
            cold = (time.perf_counter() - started) * 1000
            assert first.success, first.content
            kernel.run_tool("echo_js", args, process)
            script = timed(lambda: kernel.run_tool("echo_js", args, process), calls)
            outside = timed(lambda: kernel.run_tool("outside__echo", args, process), calls)
        alone = sdk_alone(root / "server.py", calls)
    print(f"{calls} calls each, wall clock, ms")
    for label, times in (
        ("script tool (JS) through dispatch", script),
        ("outside MCP tool through dispatch", outside),
        ("the same MCP call, SDK client alone", alone),
    ):
        print(f"  {label:<40}p50 {p(times, 0.5):.3f} ms  p99 {p(times, 0.99):.3f} ms")
    overhead = statistics.median(outside) - statistics.median(alone)
    print(f"our overhead on an MCP call (p50 difference): {overhead:.3f} ms")
    print(f"first call, server started lazily (spawn, handshake, tool list): {cold:.0f} ms")


if __name__ == "__main__":
    main()
