"""cli/parser.py: help as wide as the terminal, measured as `shutil` measures it, without `shutil`."""

from __future__ import annotations

import argparse
import copy
import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from agentkernel.cli.common import leaf_parsers
from agentkernel.cli.main import _parser
from agentkernel.cli.parser import Parser
from tests.cli.test_cli_basics import modules_after

BOTH = (
    "import shutil; from agentkernel.cli.parser import terminal_columns; "
    "print(terminal_columns(), shutil.get_terminal_size().columns)"
)


def widths(columns: str | None, *, terminal: int | None = None) -> list[str]:
    """What `terminal_columns()` and `shutil.get_terminal_size().columns` say, in a process with
    `$COLUMNS` set to `columns` (None: unset) and standard output a pipe, or a terminal `terminal`
    columns wide."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = columns
    if terminal is None:
        done = subprocess.run(
            [sys.executable, "-c", BOTH], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()
    leader, follower = pty.openpty()
    try:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, terminal, 0, 0))
        shown = subprocess.run(
            [sys.executable, "-c", BOTH], env=env, stdout=follower, stderr=subprocess.PIPE, timeout=60
        )
        assert shown.returncode == 0, shown.stderr
        return os.read(leader, 1024).decode().split()
    finally:
        os.close(leader)
        os.close(follower)


@pytest.mark.parametrize("columns", [None, "50", "200", "0", "-3", "wide", ""])
def test_the_width_is_shutils(columns: str | None) -> None:
    first, second = widths(columns)
    assert first == second
    first, second = widths(columns, terminal=67)
    assert first == second
    if columns in ("50", "200"):
        assert first == columns
    elif columns is not None:
        assert first == "67"


def test_help_is_argparses_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every help and usage text reads as argparse words it with its own formatter (which asks
    `shutil` for the width), at any width."""
    (run,) = leaf_parsers(_parser("rhai"))  # `rhai run`: a subcommand's parser, of the same class
    assert isinstance(run, Parser)
    stock: argparse.ArgumentParser = copy.copy(run)
    stock.__class__ = argparse.ArgumentParser
    texts = []
    for columns in ("52", "120"):
        monkeypatch.setenv("COLUMNS", columns)
        assert run.format_help() == stock.format_help()
        assert run.format_usage() == stock.format_usage()
        texts.append(run.format_help())
    assert texts[0] != texts[1]
    assert "exit\n1 on a runtime error" in texts[0]  # wrapped at 50: the columns less 2


def test_parsing_imports_no_shutil(tmp_path: Path) -> None:
    script = tmp_path / "one.rhai"
    script.write_text("print(1)")
    assert "shutil" not in modules_after(["rhai", "run", str(script)], tmp_path)
    assert "shutil" not in modules_after(["--version"], tmp_path)
