"""`agentkernel`: list and run script tools from the terminal.

    agentkernel tool list|hook list|template list [--json] [--config FILE]
    agentkernel check [--json] [--config FILE]
    agentkernel tool run NAME|PATH.yaml 'JSON-ARGS' [--config FILE] [--user U] [--session S]
    agentkernel rhai run [--print-result] [--max-operations N] [--max-… N] FILE|-
    agentkernel chat --template NAME [--user U] [--session S] [--llm-url URL] [--model M]

`tool run` prints the normalised result as JSON and exits 0 even when the
tool failed: the failure is in the JSON. Exit 1 means the tool could not be
found or loaded; exit 2 means the command line itself was wrong.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from agentkernel.cli import chat, rhai_cmd
from agentkernel.config import ToolSpec
from agentkernel.errors import ConfigError
from agentkernel.kernel import Kernel

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentkernel", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    commands = parser.add_subparsers(dest="command", required=True)
    tool = commands.add_parser("tool", help="script tools").add_subparsers(dest="action", required=True)

    listing = tool.add_parser("list", help="list the loaded tools and any load problems")
    listing.add_argument("--config", type=Path, help="kernel.yaml (default: ./config/kernel.yaml)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")

    run = tool.add_parser("run", help="run one tool and print its result as JSON")
    run.add_argument("tool", help="a tool name, or the path of a tool's YAML file")
    run.add_argument("args", nargs="?", default="{}", help="the arguments as a JSON object")
    run.add_argument("--config", type=Path, help="kernel.yaml (default: ./config/kernel.yaml)")
    run.add_argument("--user", help="user id of the caller")
    run.add_argument("--session", help="session id (gives the tool a temp_dir)")
    rhai_cmd.add_parser(commands)
    chat.add_parser(commands)
    from agentkernel.cli import project_cmds

    project_cmds.add_parsers(commands)
    return parser


def _setup_logging(verbosity: int) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG,
        format="%(levelname)s %(name)s: %(message)s",
    )
    # console.log output is what a script author runs the CLI to see; debug with -vv.
    logging.getLogger("agentkernel.script").setLevel(logging.DEBUG if verbosity >= 2 else logging.INFO)
    if verbosity == 0:  # the commands print load problems themselves, once
        logging.getLogger("agentkernel.catalog").setLevel(logging.ERROR)


def _load_kernel(config: Path | None) -> Kernel:
    try:
        return Kernel.from_config_file(config)
    except ConfigError as exc:
        print(f"agentkernel: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_NOT_FOUND) from exc


def _find_tool(kernel: Kernel, name_or_path: str) -> ToolSpec:
    looks_like_file = name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path
    if looks_like_file:
        spec = kernel.catalog.load_file(Path(name_or_path))
        if not isinstance(spec, ToolSpec):
            raise ConfigError(name_or_path, "kind: this is a script_hook; try hook_tool")
        return spec
    spec_found = kernel.tools.get(name_or_path)
    if spec_found is not None:
        return spec_found
    problems = [str(p) for p in kernel.catalog.problems()]
    known = ", ".join(s.name for s in kernel.tools.all()) or "none"
    detail = "".join(f"\n  not loaded: {p}" for p in problems)
    raise ConfigError(None, f"unknown tool {name_or_path!r} (loaded: {known}){detail}")


def tool_run(kernel: Kernel, name_or_path: str, raw_args: str, user: str | None, session: str | None) -> int:
    try:
        args = json.loads(raw_args)
    except json.JSONDecodeError as exc:
        print(f"agentkernel: JSON-ARGS is not valid JSON: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        spec = _find_tool(kernel, name_or_path)
    except ConfigError as exc:
        print(f"agentkernel: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    caller = kernel.caller(user_id=user, session_id=session)
    result = kernel.dispatcher.call_spec(spec, args, caller)
    print(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    _setup_logging(options.verbose)
    if options.command == "rhai":
        return rhai_cmd.run_command(options)
    if options.command == "chat":
        return chat.run_command(options)
    if options.command != "tool" or options.action == "list":
        from agentkernel.cli import project_cmds

        return project_cmds.run_command(options)
    kernel = _load_kernel(options.config)
    return tool_run(kernel, options.tool, options.args, options.user, options.session)


if __name__ == "__main__":
    raise SystemExit(main())
