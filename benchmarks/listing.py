"""What reading the project again costs: a template looked up, an agent's tools listed (hot reload, S2.4).

    .venv/bin/python benchmarks/listing.py [--tools 60] [--templates 12] [--calls 300] [--smoke]

Nothing is cached across edits: every new chat, continuation page, cron
firing and MCP listing asks for a template, and every user message lists
the agent's tools afresh, so that a saved YAML shows at once. This measures
those two calls, p50 over `--calls` (after a warm-up), on a temporary
project of `--tools` JavaScript tools and `--templates` templates (each
naming ten tools), and on the shipped project, in this process.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agentkernel import Kernel  # noqa: E402
from agentkernel.config import load_kernel_config  # noqa: E402

WARMUP = 20


def p50_ms(call: Callable[[], object], calls: int) -> float:
    for _ in range(WARMUP):
        call()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def make_project(root: Path, tools: int, templates: int) -> Path:
    """`tools` one-line JS tools and `templates` templates of ten tools each, in `root`."""
    tool_dir = root / "config" / "scripts" / "tools"
    tool_dir.mkdir(parents=True)
    for n in range(tools):
        (tool_dir / f"t{n}.yaml").write_text(
            f"kind: script_tool\nname: t{n}\ndescription: Tool {n}.\nscript: t{n}.js\n"
            "parameters: {type: object, properties: {text: {type: string}}}\n",
            encoding="utf-8",
        )
        (tool_dir / f"t{n}.js").write_text(f"function run(args) {{ return 'tool {n}'; }}\n", encoding="utf-8")
    template_dir = root / "config" / "templates"
    template_dir.mkdir(parents=True)
    for n in range(templates):
        names = ", ".join(f"t{(n * 10 + k) % tools}" for k in range(min(10, tools)))
        (template_dir / f"agent{n}.yaml").write_text(
            f"name: agent{n}\ndescription: Agent {n}.\ninstructions: You are agent {n}.\ntools: [{names}]\n",
            encoding="utf-8",
        )
    (root / "config" / "kernel.yaml").write_text("{}\n", encoding="utf-8")
    return root / "config" / "kernel.yaml"


def measure(label: str, config: Path, template: str, calls: int) -> None:
    with Kernel(load_kernel_config(config)) as kernel:
        process = kernel.spawn(template)
        looked_up = p50_ms(lambda: kernel.template(template), calls)
        listed = p50_ms(lambda: kernel.list_tools(process), calls)
        tools, templates = len(kernel.list_tools()), len(kernel.list_templates())
    print(f"{label} ({tools} tools, {templates} templates):")
    print(f"  Kernel.template(name)        p50 {looked_up:8.3f} ms")
    print(f"  Kernel.list_tools(process)   p50 {listed:8.3f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=60, help="JavaScript tools in the generated project")
    parser.add_argument("--templates", type=int, default=12, help="templates in the generated project")
    parser.add_argument("--calls", type=int, default=300, help="measured calls of each (after a warm-up)")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args()
    calls = 3 if options.smoke else options.calls
    with tempfile.TemporaryDirectory() as folder:
        shipped = Path(folder) / "shipped"
        shutil.copytree(REPO / "config", shipped / "config")
        measure("shipped project", shipped / "config" / "kernel.yaml", "hello-agent", calls)
        generated = make_project(Path(folder) / "generated", options.tools, options.templates)
        measure("generated project", generated, "agent0", calls)


if __name__ == "__main__":
    main()
