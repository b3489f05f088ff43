"""What keeping a tool call's result for `get_tool_result` costs, now that it is in the store (issue 27).

    .venv/bin/python benchmarks/tool_results.py [--calls 2000] [--rounds 5] [--smoke]

Every tool call made in a session is recorded (tools/history.py): one short
SQLite transaction in `tool_results.db` (the insert and both bounds), where
it was a deque in the process's memory. This records a 200-character result
with a little `data` for 50 sessions in turn, `--calls` times a round, and
prints the CPU and wall microseconds a record, then a read (`get`, index 1).
Run it on the code before (`PYTHONPATH=OLD/src`) for the in-memory figure:
the constructor's arguments tell which one is measured.
"""

from __future__ import annotations

import argparse
import inspect
import tempfile
import time
from pathlib import Path

from agentkernel.identity import Caller
from agentkernel.tools.history import ToolResultHistory
from agentkernel.tools.results import ToolResult


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks that it runs (CI)")
    options = parser.parse_args()
    if options.smoke:
        options.calls, options.rounds = 20, 1
    in_store = "path" in inspect.signature(ToolResultHistory.__init__).parameters
    with tempfile.TemporaryDirectory() as folder:
        history = ToolResultHistory(Path(folder) / "tool_results.db") if in_store else ToolResultHistory()
        callers = [Caller(user_id=f"u{n}", session_id=f"s{n}") for n in range(50)]
        result = ToolResult(content="x" * 200, data={"n": 1})
        for caller in callers:
            history.record(caller, "t", result)
        for round_ in range(1, options.rounds + 1):
            cpu, wall = time.process_time(), time.perf_counter()
            for n in range(options.calls):
                history.record(callers[n % len(callers)], "t", result)
            record_cpu = (time.process_time() - cpu) / options.calls * 1e6
            record_wall = (time.perf_counter() - wall) / options.calls * 1e6
            cpu = time.process_time()
            for n in range(options.calls):
                history.get(callers[n % len(callers)], "t", 1)
            get_cpu = (time.process_time() - cpu) / options.calls * 1e6
            where = "in the store" if in_store else "in memory"
            print(
                f"round {round_} ({where}): record CPU {record_cpu:.1f} µs, wall {record_wall:.1f} µs; "
                f"get CPU {get_cpu:.1f} µs"
            )
        if in_store:
            history.close()


if __name__ == "__main__":
    main()
