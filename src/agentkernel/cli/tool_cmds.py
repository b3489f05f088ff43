"""`agentkernel tool list`, `tool run` and `tool test`: script tools from the terminal.

`tool test` runs the tools' `tests:` cases (cli/tool_test.py). `tool run`
prints the normalised result as JSON and exits 0 even when the tool
failed: the failure is in the JSON. Exit 1 means the tool could not be
found or loaded; exit 2 means the command line itself was wrong.
"""

from __future__ import annotations

import argparse
import json
import sys

from agentkernel.cli.common import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    load_kernel,
    names_a_file,
    path_argument,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms at start-up)

if TYPE_CHECKING:
    from agentkernel.config import ToolSpec
    from agentkernel.kernel import Kernel
    from agentkernel.tools.results import ToolResult
    from agentkernel.types import JSONValue

ARGS_HELP = "the arguments: a JSON object, - to read it from standard input, or @FILE to read it from FILE"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tool = commands.add_parser("tool", help="script tools: list them, run one, run their tests")
    actions = tool.add_subparsers(dest="action", required=True, metavar="{list,run,test}")

    listing = actions.add_parser("list", help="list the loaded tools and any load problems")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.add_argument(
        "--template",
        metavar="T",
        help="only the tools an agent of template T may call, its MCP servers' tools too (they are started)",
    )

    run = actions.add_parser("run", help="run one tool and print its result as JSON")
    run.add_argument("tool", metavar="NAME|PATH.yaml", help="a tool name, or the path of a tool's YAML file")
    run.add_argument("args", nargs="?", default="{}", metavar="ARGS", help=ARGS_HELP + " (default: {})")
    run.add_argument("--user", help="user id of the caller (caller().user_id)")
    run.add_argument("--session", help="session id of the caller; gives the tool a scratch folder")
    run.add_argument(
        "--pretty", action="store_true", help="show the content and visual blocks as the chat does"
    )

    test = actions.add_parser("test", help="run the `tests:` cases of the tools' YAML; exit 1 on any failure")
    test.add_argument("names", nargs="*", metavar="NAME", help="the tools to test (default: every tool)")
    test.add_argument(
        "--junit", type=path_argument, metavar="FILE", help="also write the outcomes to FILE as JUnit XML"
    )


def run_command(options: argparse.Namespace) -> int:
    if options.action == "list":
        from agentkernel.cli import project_cmds

        return project_cmds.run_command(options)
    if options.action == "test":
        from agentkernel.cli import tool_test

        return tool_test.run(options)
    return tool_run(options)


# -- tool run ---------------------------------------------------------------------------


class UsageError(Exception):
    """The command line is wrong (exit 2)."""


def read_args(raw: str) -> JSONValue:
    """The arguments from the command line, standard input (`-`) or a file (`@FILE`)."""
    from pathlib import Path

    where = "ARGS"
    if raw == "-":
        raw, where = sys.stdin.read(), "standard input"
    elif raw.startswith("@"):
        path = Path(raw[1:])
        try:
            raw, where = path.read_text(encoding="utf-8"), str(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the arguments from {path}: {exc}") from exc
    try:
        value: JSONValue = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where} is not valid JSON: {exc}") from exc
    return value


def _find_tool(kernel: Kernel, name_or_path: str) -> ToolSpec:
    from pathlib import Path

    from agentkernel.config import ToolSpec
    from agentkernel.errors import ConfigError

    if not names_a_file(name_or_path):
        return kernel.tool(name_or_path)
    spec = kernel.load_spec(Path(name_or_path))
    if not isinstance(spec, ToolSpec):
        raise ConfigError(name_or_path, "kind: this is a script_hook; try hook_tool")
    return spec


def tool_run(options: argparse.Namespace) -> int:
    from pathlib import Path

    from agentkernel.errors import ConfigError

    try:
        args = read_args(options.args)
    except UsageError as exc:
        print(f"agentkernel: {exc}", file=sys.stderr)
        return EXIT_USAGE
    start = None
    if names_a_file(options.tool):  # a YAML path brings its own project: search upward from the file
        yaml_path = Path(options.tool)
        if not yaml_path.is_file():
            print(f"agentkernel: {yaml_path}: no such file", file=sys.stderr)
            return EXIT_NOT_FOUND
        start = yaml_path.resolve().parent
    # one call: its script runs in a new QuickJS context, as its check did (none made to keep)
    with load_kernel("agentkernel", options.config, start=start, kept_contexts=False) as kernel:
        try:
            spec = _find_tool(kernel, options.tool)
        except ConfigError as exc:
            print(f"agentkernel: {exc}", file=sys.stderr)
            return EXIT_NOT_FOUND
        caller = kernel.caller(user_id=options.user, session_id=options.session)
        result = kernel.run_tool(spec, args, caller, approved=True)  # who runs it, approves it
    if options.pretty:
        show_pretty(spec.name, result)
    else:
        print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    return EXIT_OK


def show_pretty(name: str, result: ToolResult) -> None:
    """The result as `agentkernel chat` draws it: a mark, the content, tables, charts, warnings."""
    from rich.console import Console
    from rich.text import Text

    from agentkernel.agent.loop import LoopEvent
    from agentkernel.cli.render import ChatRenderer

    console = Console(highlight=False, soft_wrap=True)
    mark, style = ("✓", "green") if result.success else ("✗", "red")
    console.print(Text(f"{mark} {name}", style=f"bold {style}"))
    console.print(Text(result.content))
    if result.error and result.error != result.content:
        console.print(Text(f"error: {result.error}", style="red"))
    renderer = ChatRenderer(console)
    for block in result.visual or ():
        renderer.show(LoopEvent("visual", {"tool": name, "block": block}))
    for warning in result.warnings:
        renderer.show(LoopEvent("warning", {"tool": name, "message": warning}))


__all__ = ["add_parser", "read_args", "run_command", "show_pretty", "tool_run"]
