"""Start-up time of the command line, beside `python3 -c pass` (issue 8, point 1).

    .venv/bin/python benchmarks/startup.py [--runs 10]

Each round runs every command once, in turn (so a busy moment hurts all of
them alike); the figures are medians over the rounds, and each command's
ratio to `python -c pass` measured in the same run. Bytecode is allowed
(PYTHONDONTWRITEBYTECODE is removed) and a first untimed round warms it up,
as a user's second command would find it. Targets: `rhai run` of
`print(1)` and `--version` ≤ 3×; `tool run text_stats` ≤ 6×.
Run from the project folder: the tool commands use its config/kernel.yaml.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def commands(script: Path) -> dict[str, list[str]]:
    cli = str(BIN / "agentkernel")
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "agentkernel --version": [cli, "--version"],
        "agentkernel --help": [cli, "--help"],
        "rhai run print(1)": [cli, "rhai", "run", str(script)],
        "tool run text_stats (JS)": [cli, "tool", "run", "text_stats", '{"text": "Привет, мир"}'],
        "tool run text_stats_rhai": [cli, "tool", "run", "text_stats_rhai", '{"text": "Привет, мир"}'],
        "tool list": [cli, "tool", "list"],
    }


def run_once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="rounds to take the median of")
    runs = parser.parse_args().runs
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "print1.rhai"
        script.write_text("print(1)\n", encoding="utf-8")
        table = commands(script)
        for argv in table.values():  # warm-up: bytecode written, files in the page cache
            run_once(argv, env)
        times: dict[str, list[float]] = {name: [] for name in table}
        for _ in range(runs):
            for name, argv in table.items():
                times[name].append(run_once(argv, env))
    base = statistics.median(times["python -c pass"])
    print(f"medians of {runs} runs; ratio = command / python -c pass ({base * 1000:.1f} ms)")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"  {name:<28} {median * 1000:7.1f} ms  {median / base:5.1f}x")


if __name__ == "__main__":
    main()
