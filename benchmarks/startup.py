"""Start-up time of the command line, beside `python3 -c pass` (issues 8 and 31).

    .venv/bin/python benchmarks/startup.py [--runs 10] [--bin DIR] [--project DIR] [--smoke]

Each round runs every command once, in turn (so a busy moment hurts all of
them alike). A command's ratio is taken in each round against that round's
`python -c pass`; the figures are the medians over the rounds, and the
spread is the lowest and highest of the per-round ratios. Bytecode is allowed
(PYTHONDONTWRITEBYTECODE is removed) and a first untimed round warms it up,
as a user's second command would find it; the caches it fills (parsed YAML,
compiled dataclass methods, `rhai run`'s compiled scripts: "rhai run print(1)"
is a hit, "… --no-cache" compiles each time) are this run's own (`XDG_CACHE_HOME` in a
temporary folder; `--before` has its own, as a cache entry records the
code that made it), so other processes on the machine cannot evict them
between rounds. Targets (issue 31): `rhai run` of
`print(1)` ≤ 3×, `tool run text_stats` ≤ 6×.
The tool commands run in `--project` (default: this repository) and use its
config/kernel.yaml; `--bin` (default: this venv's bin folder) picks the
installation, so an older checkout in its own venv can be measured the same
way. `--before SRC` also times every command on the package in SRC (the
`src` folder of another commit, e.g. `git archive COMMIT src | tar -x -C
DIR`, put first on PYTHONPATH) in the same rounds, each line under its
"after". A command that installation lacks prints `n/a`.

`--instructions` also counts the instructions each command executes, once,
under valgrind (cachegrind, no cache simulation): a figure the machine's
load does not move, where the times on a busy shared machine spread wide.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def commands(script: Path, bin_dir: Path) -> dict[str, list[str]]:
    cli = str(bin_dir / "agentkernel")
    return {
        "python -c pass": [str(bin_dir / "python"), "-c", "pass"],
        "agentkernel --version": [cli, "--version"],
        "agentkernel --help": [cli, "--help"],
        "rhai run print(1)": [cli, "rhai", "run", str(script)],
        "rhai run print(1) --no-cache": [cli, "rhai", "run", "--no-cache", str(script)],
        "tool run text_stats (JS)": [cli, "tool", "run", "text_stats", '{"text": "Привет, мир"}'],
        "tool run text_stats_rhai": [cli, "tool", "run", "text_stats_rhai", '{"text": "Привет, мир"}'],
        "tool list": [cli, "tool", "list"],
    }


FLOOR = "python -c pass"
BEFORE = " (before)"
# command → the most its median ratio to `python -c pass` may be (issue 31)
TARGETS = {"rhai run print(1)": 3.0, "tool run text_stats (JS)": 6.0}


def run_once(argv: list[str], env: dict[str, str], project: Path) -> float | None:
    """Seconds the command took, or None when it failed (a command this installation lacks)."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=project, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    return elapsed if done.returncode == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="rounds to take the median of")
    parser.add_argument("--bin", type=Path, default=BIN, help="the bin folder of the installation to time")
    parser.add_argument("--project", type=Path, default=REPO, help="where the tool commands run")
    parser.add_argument(
        "--before",
        type=Path,
        metavar="SRC",
        help="also time the package in SRC (another commit's src folder)",
    )
    parser.add_argument(
        "--instructions", action="store_true", help="also count each command's instructions under valgrind"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args()
    if options.smoke:
        options.runs = 1
    with tempfile.TemporaryDirectory() as tmp:
        dropped = ("PYTHONDONTWRITEBYTECODE", "AGENTKERNEL_CONFIG")
        env = {k: v for k, v in os.environ.items() if k not in dropped}
        env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        envs = {"": env}
        if options.before is not None:  # caches of its own: an entry records the code that made it
            source = str(options.before.resolve())
            envs[BEFORE] = {**env, "PYTHONPATH": source, "XDG_CACHE_HOME": str(Path(tmp) / "cache-before")}
        script = Path(tmp) / "print1.rhai"
        script.write_text("print(1)\n", encoding="utf-8")
        table = {
            name + suffix: (argv, run_env)
            for name, argv in commands(script, options.bin).items()
            for suffix, run_env in envs.items()
            if not (suffix and name == FLOOR)
        }
        # warm-up: bytecode written, files in the page cache; drop what this installation lacks
        table = {name: run for name, run in table.items() if run_once(*run, options.project) is not None}
        times: dict[str, list[float]] = {name: [] for name in table}
        for _ in range(options.runs):
            for name, (argv, run_env) in table.items():
                elapsed = run_once(argv, run_env, options.project)
                if elapsed is None:
                    raise SystemExit(f"{' '.join(argv)} failed after the warm-up")
                times[name].append(elapsed)
        counts = (
            {name: instructions(*run, options.project) for name, run in table.items()}
            if options.instructions
            else {}
        )
    report(times, options.runs, options.bin, list(envs))
    if options.instructions:
        report_instructions(counts)


def instructions(argv: list[str], env: dict[str, str], project: Path) -> int | None:
    """The instructions `argv` executes (valgrind's `I refs`), or None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    tool = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    done = subprocess.run([*tool, *argv], cwd=project, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    return int(found.group(1).replace(",", "")) if found else None


def report_instructions(counts: dict[str, int | None]) -> None:
    """Each command's instructions, in millions and as a ratio to `python -c pass`'s."""
    floor = counts.get(FLOOR)
    if floor is None:
        print("instructions: skipped (no valgrind)")
        return
    print(f"instructions (valgrind), ratio to python -c pass ({floor / 1e6:.0f} M):")
    for name, count in counts.items():
        if count is not None:
            print(f"  {name:<37} {count / 1e6:7.0f} M  {count / floor:5.1f}x")


def report(times: dict[str, list[float]], runs: int, bin_dir: Path, suffixes: list[str]) -> None:
    """Each command's median time and its per-round ratio to `python -c pass`: median, lowest, highest."""
    base = times[FLOOR]
    base_ms = statistics.median(base) * 1000
    print(
        f"{bin_dir}: medians of {runs} runs; ratio to python -c pass ({base_ms:.1f} ms),"
        " per round: median [lowest-highest]"
    )
    for command in commands(Path("x"), bin_dir):
        for suffix in suffixes if command != FLOOR else [""]:
            name = command + suffix
            if name not in times:
                print(f"  {name:<37}     n/a")
                continue
            ratios = [took / floor for took, floor in zip(times[name], base, strict=True)]
            median = statistics.median(ratios)
            line = f"  {name:<37} {statistics.median(times[name]) * 1000:7.1f} ms  {median:5.1f}x"
            line += f"  [{min(ratios):.1f}-{max(ratios):.1f}]"
            target = TARGETS.get(name)
            if target is not None:
                line += f"  target <= {target:g}x: {'PASS' if median <= target else 'MISS'}"
            print(line)


if __name__ == "__main__":
    main()
