"""One DuckDB file used by one process, then by two at once (`serve --workers 2`): the cost of taking turns.

    .venv/bin/python benchmarks/duckdb_processes.py [--calls 300] [--rounds 3] [--smoke]

Each call is a script's pair as a tool makes it: `db_execute` (INSERT one
row) then `db_query` (count the rows), through `DuckService` on a fresh
folder. It prints, per round: the median ms per pair in one process (the
file stays open: the pool's cost), the median ms per pair when two processes
run their pairs at the same time on one file (each handing the file over
when the other waits: services/file_turns.py), and the floor of a handover,
DuckDB's own open and close of the file, measured in the same round. No
assertion: the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from agentkernel.services.duck import DuckService

FILE = "bench.duckdb"


def pairs(root: Path, calls: int) -> float:
    """Median ms of `calls` insert+count pairs through one service."""
    service = DuckService(root)
    try:
        service.execute(FILE, "CREATE TABLE IF NOT EXISTS t (n INTEGER)")
        spent = []
        for n in range(calls):
            started = time.perf_counter()
            service.execute(FILE, "INSERT INTO t VALUES (?)", [n])
            service.query(FILE, "SELECT count(*) FROM t", 1)
            spent.append((time.perf_counter() - started) * 1000)
        return statistics.median(spent)
    finally:
        service.close()


def open_close(root: Path, times: int = 30) -> float:
    """Median ms of DuckDB opening and closing the file (what each handover pays at least)."""
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        duckdb.connect(str(root / FILE)).close()
        spent.append((time.perf_counter() - started) * 1000)
    return statistics.median(spent)


def two_at_once(root: Path, calls: int) -> list[float]:
    """Each of two processes' median ms per pair, both running at once on one file."""
    command = [sys.executable, __file__, "--one", str(root), "--calls", str(calls)]
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    return [float(child.communicate()[0]) for child in children]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="pairs per process and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # a child: its median, printed
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks that it runs (CI)")
    options = parser.parse_args()
    if options.smoke:
        options.calls, options.rounds = 5, 1
    if options.one is not None:
        print(pairs(options.one, options.calls))
        return
    for round_ in range(1, options.rounds + 1):
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            alone = pairs(root, options.calls)
            both = two_at_once(root, options.calls)
            floor = open_close(root)
        print(
            f"round {round_}: one process {alone:.2f} ms a pair; two at once {both[0]:.2f} / "
            f"{both[1]:.2f} ms a pair ({max(both) / alone:.1f}x); "
            f"DuckDB's open+close of the file {floor:.2f} ms"
        )


if __name__ == "__main__":
    main()
