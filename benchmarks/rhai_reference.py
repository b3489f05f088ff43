"""The reference Rust Rhai against the CPython twins: rhai_speed.py's REFERENCE_RATIO (issue 32).

    .venv/bin/python benchmarks/rhai_reference.py --binary PATH/rhai-run [--repeat 7] [--cpu]
                                                  [--only strings,textops] [--smoke]

By hand, for anyone with a built reference (`rhai-run` of Rhai 1.25.0, its
default features, release profile; benchmarks/rhai/README.md says how it was
built offline). Each `benchmarks/rhai/X.rhai` runs through the binary as a
process, minus the binary's start-up on an empty script; its twin `X.py` runs
in this process (`runpy`), so neither side counts an interpreter's start-up.
Medians of `--repeat`; the spread is the lowest and highest ratio of the
rounds (round i pairs the i-th run of each side). `--cpu` counts CPU time
instead of wall time: the child's user + system time (`os.wait4`) against
this process's `time.process_time`, which leaves out the time spent waiting
for a core on a busy machine.

Before timing, each script runs once with its final expression printed, and
its output must equal the twin's: a ratio of two programs that do different
work would mean nothing. `rhai-run` exits 0 even when the script fails and
reports the failure on stderr, so anything on stderr is a failure too.

`--smoke` (CI) runs each pair once with the big counts cut a hundredfold; with
no `--binary` it times only the CPython side and says the reference was
skipped. Its figures mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rhai_speed import HERE, REFERENCE_RATIO, workload

SCRIPTS = tuple(REFERENCE_RATIO)


@dataclass(frozen=True)
class Clock:
    """How both sides are timed: wall time, or CPU time (`--cpu`)."""

    cpu: bool

    def child(self, binary: Path, script: Path) -> float:
        """Seconds `binary script` takes as a process; fails on a non-zero exit or any stderr."""
        started = time.perf_counter()
        with tempfile.TemporaryFile() as errors:
            process = subprocess.Popen([str(binary), str(script)], stdout=subprocess.DEVNULL, stderr=errors)
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            wall = time.perf_counter() - started
            errors.seek(0)
            problem = errors.read().decode(errors="replace")
        if process.returncode != 0 or problem:
            sys.exit(f"{binary} {script}: exit {process.returncode}: {problem.strip()}")
        return usage.ru_utime + usage.ru_stime if self.cpu else wall

    def twin(self, script: Path) -> float:
        """Seconds the CPython twin `script` takes in this process (its print captured)."""
        now: Callable[[], float] = time.process_time if self.cpu else time.perf_counter
        started = now()
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(str(script), run_name="__main__")
        return now() - started


def printing(source: str, script: str) -> str:
    """`source` with its final expression printed (rhai-run prints no result), to compare outputs."""
    lines = source.rstrip("\n").split("\n")
    last = lines[-1].rstrip()
    if last.endswith((";", "}")):
        raise SystemExit(f"{script}: its last line {last!r} is no final expression to print")
    return "\n".join([*lines[:-1], f"print({last});"]) + "\n"


def stage(names: list[str], smoke: bool, into: Path) -> None:
    """Writes each script, its printing variant and its twin (counts cut with `smoke`) into `into`."""
    (into / "empty.rhai").write_text("")
    for name in names:
        source = workload(f"{name}.rhai", smoke)
        (into / f"{name}.rhai").write_text(source)
        (into / f"{name}.print.rhai").write_text(printing(source, f"{name}.rhai"))
        (into / f"{name}.py").write_text(workload(f"{name}.py", smoke))


def check_same_output(binary: Path, name: str, staged: Path) -> None:
    """Stops unless the reference prints what the CPython twin prints for `name`."""
    ours = subprocess.run([str(binary), str(staged / f"{name}.print.rhai")], capture_output=True, text=True)
    twin = io.StringIO()
    with contextlib.redirect_stdout(twin):
        runpy.run_path(str(staged / f"{name}.py"), run_name="__main__")
    if ours.returncode != 0 or ours.stderr or ours.stdout.split() != twin.getvalue().split():
        sys.exit(
            f"{HERE / name}.rhai: the reference printed {ours.stdout.strip()!r} "
            f"(stderr {ours.stderr.strip()!r}), its twin {name}.py {twin.getvalue().strip()!r}"
        )


def median_and_spread(reference: list[float], python: list[float]) -> tuple[float, float, float, float]:
    """Medians of both sides and the lowest and highest per-round ratio."""
    rounds = [ref / py for ref, py in zip(reference, python, strict=True)]
    return statistics.median(reference), statistics.median(python), min(rounds), max(rounds)


def measure(binary: Path, names: list[str], staged: Path, clock: Clock, repeat: int) -> None:
    """Prints the table: reference and CPython seconds, their ratio, its spread, the figure in use."""
    startup = statistics.median([clock.child(binary, staged / "empty.rhai") for _ in range(repeat)])
    kind = "CPU" if clock.cpu else "wall"
    print(f"reference Rhai: {binary} ({kind} time; start-up on an empty script {startup * 1000:.1f} ms)")
    print(f"{'script':<8} {'Rhai s':>8} {'CPython s':>10} {'Rhai/Py':>8} {'spread':>13} {'in use':>7}")
    for name in names:
        check_same_output(binary, name, staged)
        reference = [clock.child(binary, staged / f"{name}.rhai") - startup for _ in range(repeat)]
        python = [clock.twin(staged / f"{name}.py") for _ in range(repeat)]
        ref, py, low, high = median_and_spread(reference, python)
        spread = f"[{low:.2f}-{high:.2f}]"
        print(f"{name:<8} {ref:8.3f} {py:10.3f} {ref / py:8.2f} {spread:>13} {REFERENCE_RATIO[name]:7.2f}")


def python_only(names: list[str], staged: Path, clock: Clock) -> None:
    """The smoke run without a binary: the CPython side alone, so the staging and twins still run."""
    print("reference Rhai: skipped (no --binary; see benchmarks/rhai/README.md to build rhai-run 1.25.0)")
    print(f"{'script':<8} {'Rhai s':>8} {'CPython s':>10}")
    for name in names:
        print(f"{name:<8} {'-':>8} {clock.twin(staged / f'{name}.py'):10.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", type=Path, help="the reference rhai-run (Rhai 1.25.0, release build)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cpu", action="store_true", help="CPU time of each side, not wall time")
    parser.add_argument("--only", help="comma-separated subset of " + ",".join(SCRIPTS))
    parser.add_argument("--smoke", action="store_true", help="tiny counts, once: checks that it runs (CI)")
    options = parser.parse_args()
    names = options.only.split(",") if options.only else list(SCRIPTS)
    unknown = sorted(set(names) - set(SCRIPTS))
    if unknown:
        parser.error(f"--only: no benchmarks/rhai script {', '.join(unknown)}; known: {', '.join(SCRIPTS)}")
    if options.binary is None and not options.smoke:
        parser.error("--binary PATH (the reference rhai-run) is required outside --smoke")
    if options.binary is not None and not os.access(options.binary, os.X_OK):
        parser.error(f"--binary {options.binary}: no executable file there")
    repeat = 1 if options.smoke else options.repeat
    clock = Clock(cpu=options.cpu)
    with tempfile.TemporaryDirectory(prefix="rhai-reference-") as directory:
        staged = Path(directory)
        stage(names, options.smoke, staged)
        if options.binary is None:
            python_only(names, staged, clock)
        else:
            measure(options.binary, names, staged, clock, repeat)


if __name__ == "__main__":
    main()
