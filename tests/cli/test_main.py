"""cli/main.py: a command line is read by a parser of its command alone, as the whole parser reads it.

Building every command's parser costs more than `rhai run` of a small
script does (issue 31), so `parse` builds only the named command's; these
tests hold that it reads every command line exactly as the whole parser
does, and that what it refuses is worded by the whole parser.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from agentkernel.cli.main import COMMANDS, _parser, parse
from tests.cli.test_cli_basics import modules_after

ACCEPTED = [
    ["tool", "run", "text_stats", '{"text": "a"}'],
    ["-v", "--config", "k.yaml", "tool", "list"],
    ["-vv", "--config=k.yaml", "--log-format", "json", "tool", "run", "x", "--pretty", "--user", "u"],
    ["tool", "list", "-v", "--config", "k.yaml"],
    ["--log-format=json", "rhai", "run", "--print-result", "x.rhai"],
    ["rhai", "run", "--max-operations", "5", "-"],
    ["check", "--json"],
    ["hook", "list"],
    ["template", "list", "--json"],
    ["serve", "--port", "9000"],
    ["mcp", "serve", "--template", "t"],
    ["cron", "list", "--user", "u"],
    ["usage", "--json"],
    ["token", "new", "u"],
    ["init", "somewhere"],
    ["--verbose", "tool", "test", "a", "b"],
]
REFUSED = [
    ["tool", "bogus"],
    ["tool", "run"],
    ["--config", "x", "tool", "list", "--bogus"],
    ["rhai", "run", "--max-operations", "many", "x.rhai"],
    ["bogus"],
    [],
    ["--config"],
    ["serve", "--port", "-1"],
]


@pytest.mark.parametrize("argv", ACCEPTED, ids=" ".join)
def test_a_command_line_is_read_as_the_whole_parser_reads_it(argv: list[str]) -> None:
    assert parse(argv) == _parser().parse_args(argv)


def _outcome(read: object, argv: list[str]) -> tuple[object, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit:
        read(argv)  # type: ignore[operator]
    return exit.value.code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv", REFUSED, ids=" ".join)
def test_what_it_refuses_the_whole_parser_words(argv: list[str]) -> None:
    assert _outcome(parse, argv) == _outcome(_parser().parse_args, argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--help", "tool"],
        ["tool", "--help"],
        ["tool", "run", "-h"],
        ["--version"],
        ["--version", "rhai"],
    ],
)
def test_help_and_version_read_as_the_whole_parser_prints_them(argv: list[str]) -> None:
    code, out, err = _outcome(parse, argv)
    assert (code, out, err) == _outcome(_parser().parse_args, argv)
    assert code == 0 and out


def test_version_builds_no_commands_parser(tmp_path: Path) -> None:
    assert not modules_after(["--version"], tmp_path) & set(COMMANDS.values())


def test_rhai_run_builds_no_other_commands_parser(tmp_path: Path) -> None:
    script = tmp_path / "one.rhai"
    script.write_text("print(1)")
    loaded = modules_after(["rhai", "run", str(script)], tmp_path)
    others = {module for name, module in COMMANDS.items() if name != "rhai"}
    assert not loaded & others, loaded & others
