"""agentkernel: script tools, the Rhai interpreter and agent chats from the terminal.

    agentkernel init [DIR] [--force]
    agentkernel check [--json]
    agentkernel tool list|hook list|template list [--json]
    agentkernel tool run NAME|PATH.yaml 'JSON'|-|@FILE [--user U] [--session S] [--pretty]
    agentkernel tool test [NAME…] [--junit FILE] | hook test [NAME…] [--junit FILE]
    agentkernel rhai run [--print-result] [--max-operations N] [--max-… N] FILE|-
    agentkernel chat --template NAME [--user U] [--session S] [--llm-url URL] [--model M]
    agentkernel serve [--host 127.0.0.1] [--port 8765] [--workers N|auto]
    agentkernel mcp serve [--template T] [--user U]
    agentkernel cron run [--llm-url URL] [--model M]
    agentkernel cron list [--user U] [--json] | cron cancel NAME --user U
    agentkernel usage [--user U] [--since D] [--until D] [--template T] [--model M] [--json]
    agentkernel token new USER
    agentkernel dev llm [--rules FILE] [--port N]

`-v` and `--config FILE` may come before or after the subcommand. Each
command imports only what it needs, when it runs: building this parser loads
no kernel, no service and no third-party library: start-up stays short.
A command line that names its command is parsed first by a parser of that
command alone (building all of them costs more than some commands do); only
if that parser refuses it, or none is named, is the whole parser built and
asked, so every error and `--help` reads as the whole parser words it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import sys
from collections.abc import Sequence
from types import ModuleType

from agentkernel.cli.common import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    add_global_flags,
    leaf_parsers,
    quiet_broken_pipe,
    setup_logging,
)
from agentkernel.cli.parser import Parser
from agentkernel.util.collector import collector_paused, frozen_after_start_up, uncollected_at_exit
from agentkernel.version import __version__

# subcommand -> the module that adds its parser and runs it (`add_parser`, `run_command`)
COMMANDS = {
    "tool": "agentkernel.cli.tool_cmds",
    "rhai": "agentkernel.cli.rhai_cmd",
    "chat": "agentkernel.cli.chat",
    "check": "agentkernel.cli.project_cmds",
    "hook": "agentkernel.cli.project_cmds",
    "template": "agentkernel.cli.project_cmds",
    "serve": "agentkernel.cli.serve_cmds",
    "token": "agentkernel.cli.serve_cmds",
    "cron": "agentkernel.cli.cron_cmds",
    "dev": "agentkernel.cli.dev_cmds",
    "mcp": "agentkernel.cli.mcp_cmds",
    "init": "agentkernel.cli.init_cmds",
    "usage": "agentkernel.cli.usage_cmd",
    "store": "agentkernel.cli.store_cmd",
    "worker": "agentkernel.cli.worker_cmd",
}

# commands that print an answer and end, having closed what they opened: their exit skips collecting
# the cycles of what they imported (util/collector.py); not the servers, chats and schedulers
ENDS_WITH_ITS_ANSWER = frozenset({"rhai", "tool", "check", "hook", "template"})

# the global flags (common.py add_global_flags), as they may come before the command
_VALUED_FLAGS = ("--config", "--log-format")
_FLAGS = r"-v+|--verbose|(--config|--log-format)=.*"  # compiled (and kept by `re`) if a flag comes first


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (`only`) one with the subcommands of `only`'s module alone (none for "")."""
    parser = Parser(  # subcommands' parsers are of its class
        prog="agentkernel",
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"agentkernel {__version__}")
    add_global_flags(parser, inherited=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = list(dict.fromkeys(COMMANDS.values())) if only is None else [COMMANDS[only]] if only else []
    for module in modules:  # each keeps its heavy imports inside its functions
        importlib.import_module(module).add_parser(commands)
    for leaf in leaf_parsers(parser):
        if leaf is not parser:
            add_global_flags(leaf, inherited=True)
    return parser


def _named_command(args: Sequence[str]) -> str | None:
    """The command `args` name, if known: their first word after nothing but global flags.

    Any other flag before it (`--help`, `--version`, an abbreviation) is the
    whole parser's to read.
    """
    words = iter(args)
    for word in words:
        if word in _VALUED_FLAGS:
            next(words, None)
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
        elif not re.fullmatch(_FLAGS, word):
            return None
    return None


def parse(args: Sequence[str]) -> argparse.Namespace:
    """The options of `args`, as the whole parser reads them.

    A parser of the named command alone accepts only what the whole parser
    accepts, reading it alike (the same flags, the same subparsers); what it
    refuses is handed to the whole parser, which words the error.
    """
    command = "" if list(args) == ["--version"] else _named_command(args)  # "": no command's parser
    if command is not None:
        refused = io.StringIO()
        try:
            with contextlib.redirect_stderr(refused):
                return _parser(command).parse_args(args)
        except SystemExit as exc:
            if exc.code == 0:  # --help or --version, printed as the whole parser prints them
                raise
    return _parser().parse_args(args)


def _class_builders(command: str) -> tuple[ModuleType, ...]:
    """`dataclasses` for the commands whose modules define dataclasses (not for --version,
    --help, nor `rhai`, whose interpreter defines none: its import costs a tenth of `rhai run`)."""
    if command == "rhai":
        return ()
    import dataclasses

    return (dataclasses,)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: the process's own); its exit status.

    Run as the process's own command line (`argv` None: the `agentkernel`
    script, `python -m agentkernel`), a command that ends with its answer
    also freezes what its start-up imported (util/collector.py
    `frozen_after_start_up`): a decision for the whole process, which a
    caller handing its own `argv` (a test, a program) keeps for itself.
    """
    with collector_paused():  # start-up: what is imported lives on (util/collector.py)
        options = parse(sys.argv[1:] if argv is None else argv)
        if options.command in ENDS_WITH_ITS_ANSWER:
            uncollected_at_exit()
            if argv is None:
                frozen_after_start_up()
        setup_logging(options.verbose, options.log_format)
        from agentkernel.rhai.syntax import records
        from agentkernel.util import code_cache

        # before the command imports its modules and defines their classes; a table of its own, one an
        # action (`tool run` reads only the methods of the classes a tool run defines, not `tool list`'s)
        action = getattr(options, "action", None)
        table = options.command if action is None else f"{options.command}-{action}"
        code_cache.install(table, *_class_builders(options.command), records)
        command = importlib.import_module(COMMANDS[options.command])
    return quiet_broken_pipe(lambda: int(command.run_command(options)))


__all__ = ["COMMANDS", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_USAGE", "main"]


if __name__ == "__main__":
    raise SystemExit(main())
