"""The command line's argument parser: argparse's, with its help as wide as the terminal measured
without `shutil`.

argparse makes a help formatter for every argument it adds (to check its
metavar), and the formatter imports `shutil` to ask the terminal's width;
`shutil` brings `fnmatch`, `zlib`, `bz2` and `lzma`: about 3 % of `agentkernel
rhai run`'s start-up (docs/benchmarks.md), for a width that only `--help` and
a usage error print. `Parser` hands its formatters the width
`shutil.get_terminal_size()` would give (`terminal_columns`), so help and
errors wrap exactly as before; the parsers of subcommands are `Parser`s too
(argparse makes them of their parent's class).
"""

from __future__ import annotations

import argparse
import os
import sys


def terminal_columns() -> int:
    """`shutil.get_terminal_size().columns`: `$COLUMNS` if a positive number, else the width of the
    terminal on standard output, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        size = os.get_terminal_size(sys.__stdout__.fileno())  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80
    return size.columns or 80


class Parser(argparse.ArgumentParser):
    """An `ArgumentParser` whose formatters are given the terminal's width (argparse's default:
    the columns less 2) rather than importing `shutil` to measure it."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        make = self.formatter_class
        return make(prog=self.prog, width=terminal_columns() - 2)  # type: ignore[call-arg]


__all__ = ["Parser", "terminal_columns"]
