"""`agentkernel rhai run [--print-result] [--max-… N] FILE|-`: the reference runner's contract."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentkernel.scripting.rhai.runner import LIMIT_FLAGS, limits_from_flags, run_source


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rhai = commands.add_parser("rhai", help="the Rhai interpreter").add_subparsers(
        dest="action", required=True
    )
    run = rhai.add_parser("run", help="run a Rhai script (FILE, or - for stdin)")
    run.add_argument("file", help="the script, or - to read standard input")
    run.add_argument("--print-result", action="store_true", help="print `<type_of>: <value>` last")
    for flag in LIMIT_FLAGS:
        run.add_argument(flag, type=int, metavar="N")


def run_command(options: argparse.Namespace) -> int:
    flags: list[str] = []
    for flag, attribute in LIMIT_FLAGS.items():
        value = getattr(options, attribute)
        if value is not None:
            flags += [flag, str(value)]
    try:
        source = sys.stdin.read() if options.file == "-" else Path(options.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"agentkernel rhai: cannot read {options.file}: {exc}", file=sys.stderr)
        return 2
    outcome = run_source(source, limits_from_flags(flags), echo=lambda line: print(line, flush=False))
    if outcome.error is not None:
        sys.stdout.flush()
        print(outcome.error, file=sys.stderr)
    elif options.print_result:
        print(outcome.result)
    return outcome.exit_code
