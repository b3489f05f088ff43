"""`agentkernel mcp serve`: the project's tools for any MCP client (Claude Desktop, Cursor, …) over stdio.

stdout carries nothing but MCP; logs go to stderr. Building the parser
imports nothing; the SDK, slow to import, is loaded when `mcp serve`
runs.
"""

from __future__ import annotations

import argparse
import sys

from agentkernel.cli.common import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, load_kernel


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = commands.add_parser("mcp", help="the Model Context Protocol: serve the tools to MCP clients")
    actions = mcp.add_subparsers(dest="action", required=True, metavar="ACTION")
    serve = actions.add_parser(
        "serve", help="serve the tools over stdio to an MCP client that starts this command (docs/mcp.md)"
    )
    serve.add_argument("--template", help="offer only the tools this template lists (default: every tool)")
    serve.add_argument(
        "--user", help="the user id the tools run as (caller().user_id; default: local, as `serve` has)"
    )


def run_command(options: argparse.Namespace) -> int:
    import contextlib
    import re
    import uuid

    from agentkernel.config.server import LOCAL_USER, USER_ID
    from agentkernel.errors import ConfigError

    user = options.user or LOCAL_USER
    if not re.fullmatch(USER_ID, user):
        print(
            f"agentkernel mcp serve: --user {user!r} is not a user id (1-128 of letters, digits, _ . @ -)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    kernel = load_kernel("agentkernel mcp serve", options.config)
    if options.template is not None:
        try:
            kernel.template(options.template)
        except ConfigError as exc:
            kernel.close()
            print(f"agentkernel mcp serve: --template: {exc}", file=sys.stderr)
            return EXIT_NOT_FOUND
    from agentkernel.tools.sources.mcp.nesting import inherited_chain, loop_problem

    if options.template is not None:  # every tool (no template) offers no outside tool: it cannot loop
        problem = loop_problem(inherited_chain(), kernel.config.root, options.template)
        if problem is not None:
            kernel.close()
            print(f"agentkernel mcp serve: --template {options.template}: {problem}", file=sys.stderr)
            return EXIT_USAGE
    import anyio

    from agentkernel.mcp_serve.serving import Identity, serve_stdio

    identity = Identity(user, str(uuid.uuid4()), options.template)  # one session for the connection
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C in a terminal: the client is gone anyway
        anyio.run(serve_stdio, kernel, identity)
    return EXIT_OK


__all__ = ["add_parser", "run_command"]
