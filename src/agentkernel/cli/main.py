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
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from agentkernel.cli.common import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    add_global_flags,
    leaf_parsers,
    quiet_broken_pipe,
    setup_logging,
)
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentkernel",
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"agentkernel {__version__}")
    add_global_flags(parser, inherited=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in dict.fromkeys(COMMANDS.values()):  # each keeps its heavy imports inside its functions
        importlib.import_module(module).add_parser(commands)
    for leaf in leaf_parsers(parser):
        if leaf is not parser:
            add_global_flags(leaf, inherited=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    setup_logging(options.verbose, options.log_format)
    command = importlib.import_module(COMMANDS[options.command])
    return quiet_broken_pipe(lambda: int(command.run_command(options)))


__all__ = ["COMMANDS", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_USAGE", "main"]


if __name__ == "__main__":
    raise SystemExit(main())
