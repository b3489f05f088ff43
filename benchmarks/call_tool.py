"""What `call_tool` (S16) costs beyond the tool it calls (issue 12, speed).

    .venv/bin/python benchmarks/call_tool.py [--calls 2000] [--rounds 7] [--smoke]

One script tool, in JavaScript and in Rhai, calls `call_tool("inner", …)`
`--calls` times in a loop; the same script with the call left out gives
the loop's own time. Their difference, per call, is what one `call_tool`
takes. The inner tool's own time is its dispatch (lookup, access check,
argument validation, budget, a fresh QuickJS runtime, normalising,
history), timed around the dispatcher's `call` during the same loop. What
`call_tool` adds beyond that — the crossing from the script into Python
and back, the argument checks, the caller one level deeper, the result as
a script value — is the overhead. Target: ≤ 0.1 ms. (`Kernel.run_tool` of
the inner tool from Python is shown too, for scale.)

Times are CPU time of the thread (`time.thread_time`: everything runs on
it), so other programs on a shared machine barely move them; each figure
is the median of `--rounds` rounds. Timing the inner dispatch from inside
the same run cancels most of the noise of the inner tool's own ~1 ms,
which a separate run would add to a 0.05 ms difference. The caller has a
session, so every call is recorded in the history, as in a chat.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agentkernel import Kernel  # noqa: E402
from agentkernel.config import load_kernel_config  # noqa: E402
from agentkernel.identity import Caller  # noqa: E402
from agentkernel.ports import TOOLS  # noqa: E402
from agentkernel.testing.parts import kernel_parts  # noqa: E402
from agentkernel.tools.calls import ToolCallService  # noqa: E402
from agentkernel.tools.dispatch import Dispatcher  # noqa: E402
from agentkernel.tools.results import ToolResult  # noqa: E402
from agentkernel.types import JSONValue  # noqa: E402

INNER_JS = "function run(args) { return {content: args.text.toUpperCase(), data: {n: args.text.length}}; }"
OUTER = {
    "js": """
function run(args) {
    let total = 0;
    for (let i = 0; i < args.calls; i++) {
        const r = CALL;
        total += r.data.n;
    }
    return String(total);
}
""",
    "rhai": """
fn run(args) {
    let total = 0;
    for i in 0..args.calls {
        let r = CALL;
        total += r.data.n;
    }
    `${total}`
}
""",
}
CALLS = {
    "js": ('call_tool("inner", {text: "привет"})', '({content: "ПРИВЕТ", data: {n: 6}})'),
    "rhai": ('call_tool("inner", #{text: "привет"})', '#{content: "ПРИВЕТ", data: #{n: 6}}'),
}


class TimedDispatch:
    """The dispatcher `call_tool` uses, with the CPU time of its calls added up."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.spent = 0.0

    def call(self, name: str, args: JSONValue, caller: Caller) -> ToolResult:
        started = time.thread_time()
        result = self.dispatcher.call(name, args, caller)
        self.spent += time.thread_time() - started
        return result


def write_tool(folder: Path, name: str, script: str, source: str) -> None:
    (folder / script).write_text(source, encoding="utf-8")
    (folder / f"{name}.yaml").write_text(
        f"kind: script_tool\nname: {name}\nscript: {script}\n", encoding="utf-8"
    )


def make_project(root: Path) -> Path:
    tools = root / "config" / "scripts" / "tools"
    tools.mkdir(parents=True)
    write_tool(tools, "inner", "inner.js", INNER_JS)
    for engine, source in OUTER.items():
        ext = ".js" if engine == "js" else ".rhai"
        calling, inline = CALLS[engine]
        write_tool(tools, f"outer_{engine}", f"outer_{engine}{ext}", source.replace("CALL", calling))
        write_tool(tools, f"bare_{engine}", f"bare_{engine}{ext}", source.replace("CALL", inline))
    kernel_yaml = root / "config" / "kernel.yaml"
    kernel_yaml.write_text("scripts:\n  tools: [config/scripts/tools]\n", encoding="utf-8")
    return kernel_yaml


def seconds(kernel: Kernel, tool: str, calls: int, caller: Caller) -> float:
    started = time.thread_time()
    result = kernel.run_tool(tool, {"calls": calls}, caller)
    elapsed = time.thread_time() - started
    assert result.success and result.content == str(6 * calls), result
    return elapsed


def inner_seconds(kernel: Kernel, calls: int, caller: Caller) -> float:
    started = time.thread_time()
    for _ in range(calls):
        result = kernel.run_tool("inner", {"text": "привет"}, caller)
    elapsed = time.thread_time() - started
    assert result.success and result.content == "ПРИВЕТ", result
    return elapsed / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args()
    if options.smoke:
        options.calls, options.rounds = 5, 1
    with (
        tempfile.TemporaryDirectory() as folder,
        Kernel(load_kernel_config(make_project(Path(folder)))) as kernel,
    ):
        caller = kernel.caller(user_id="bench", session_id="bench")
        for tool in ("outer_js", "bare_js", "outer_rhai", "bare_rhai"):  # compile, warm up
            seconds(kernel, tool, 5, caller)
        service = kernel_parts(kernel).services.get(
            TOOLS
        )  # the benchmark times the service's dispatch from inside
        assert isinstance(service, ToolCallService)
        timed = TimedDispatch(service.dispatcher)
        service.dispatcher = timed  # type: ignore[assignment]
        print(f"call_tool, {options.calls:,} calls a round, CPU time, median of {options.rounds} rounds:")
        for engine in ("js", "rhai"):
            rounds = [one_round(kernel, timed, engine, options.calls, caller) for _ in range(options.rounds)]
            alone, inner, per_call, overhead = (statistics.median(r[i] for r in rounds) for i in range(4))
            name = "JavaScript" if engine == "js" else "Rhai"
            print(f"  {name}: inner tool by Kernel.run_tool     {alone * 1e3:8.4f} ms a call")
            print(f"  {name}: inner tool's dispatch in call_tool {inner * 1e3:8.4f} ms a call")
            print(f"  {name}: call_tool of it from the script   {per_call * 1e3:8.4f} ms a call")
            print(f"  {name}: overhead beyond the inner tool   {overhead * 1e3:8.4f} ms (target <= 0.1 ms)")


def one_round(
    kernel: Kernel, timed: TimedDispatch, engine: str, calls: int, caller: Caller
) -> tuple[float, float, float, float]:
    """Per call, in seconds: run_tool of the inner tool, its dispatch inside call_tool, one
    call_tool, and the overhead (the last two's difference)."""
    alone = inner_seconds(kernel, calls, caller)
    timed.spent = 0.0
    with_calls = seconds(kernel, f"outer_{engine}", calls, caller)
    inner = timed.spent / calls
    without = seconds(kernel, f"bare_{engine}", calls, caller)
    per_call = (with_calls - without) / calls
    return alone, inner, per_call, per_call - inner


if __name__ == "__main__":
    main()
