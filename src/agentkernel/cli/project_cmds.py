"""`agentkernel check` and `agentkernel tool|hook|template list`: the command line.

    agentkernel check [--json] [--config FILE]
    agentkernel tool list [--json] [--config FILE]
    agentkernel hook list [--json] [--config FILE]
    agentkernel hook test [NAME…] [--junit FILE] [--config FILE]
    agentkernel template list [--json] [--config FILE]

Every `agentkernel` command builds this parser, so only argparse is imported
here; what the commands print is in project_view.py, loaded when one runs.
"""

from __future__ import annotations

import argparse

from agentkernel.cli.common import path_argument

EXIT_OK, EXIT_PROBLEMS = 0, 1
COMMANDS = ("check", "hook", "template")
_JSON_HELP = "print JSON instead of text"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`check`, `hook list` and `template list` (`tool list` is declared beside `tool run`)."""
    check = commands.add_parser(
        "check", help="check kernel.yaml, every tool, hook and template; exit 1 on any problem"
    )
    check.add_argument("--json", action="store_true", help=_JSON_HELP)
    for noun in ("hook", "template"):
        actions = commands.add_parser(noun, help=f"{noun}s").add_subparsers(dest="action", required=True)
        listing = actions.add_parser("list", help=f"list the loaded {noun}s and any load problems")
        listing.add_argument("--json", action="store_true", help=_JSON_HELP)
        if noun == "hook":
            _add_hook_test(actions)


def _add_hook_test(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`hook test`, as `tool test` (cli/tool_test.py runs both)."""
    test = actions.add_parser("test", help="run the `tests:` cases of the hooks' YAML; exit 1 on any failure")
    test.add_argument("names", nargs="*", metavar="NAME", help="the hooks to test (default: every hook)")
    test.add_argument(
        "--junit", type=path_argument, metavar="FILE", help="also write the outcomes to FILE as JUnit XML"
    )


def run_command(options: argparse.Namespace) -> int:
    """`check`, or one of the `… list` commands (`tool list` included)."""
    from agentkernel.cli import project_view

    if options.command == "check":
        return project_view.check(options.config, options.json)
    if options.action == "test":  # `hook test`
        from agentkernel.cli import tool_test

        return tool_test.run(options)
    template = getattr(options, "template", None)  # `tool list --template T`
    return project_view.list_command(options.command, options.config, options.json, template)


__all__ = ["COMMANDS", "EXIT_OK", "EXIT_PROBLEMS", "add_parser", "run_command"]
