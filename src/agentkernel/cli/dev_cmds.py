"""`agentkernel dev llm [--rules FILE] [--port N]`: the scripted LLM server, for demos and manual tries.

It is the server of the tests (agentkernel.testing): an OpenAI-compatible
`/v1/chat/completions` on 127.0.0.1 answering by the rules of FILE (YAML or
JSON, testing/rules.py), or, without one, with each request's last user
message. It prints its base URL — give it to `agentkernel chat --llm-url`
or to kernel.yaml's `llm.base_url` — and serves until Ctrl-C or SIGTERM
(exit 0). A rules file that does not load is exit 2, a port in use exit 1.
"""

from __future__ import annotations

import argparse
import sys

from agentkernel.cli.common import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, path_argument, port_number

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms at start-up)

if TYPE_CHECKING:
    from pathlib import Path

    from agentkernel.testing.rules import RuleBook

UNLIMITED_REQUESTS = 1 << 62  # the tests' server stops answering after 500; a demo runs for hours


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = commands.add_parser("dev", help="tools for development: a scripted LLM server")
    actions = dev.add_subparsers(dest="action", required=True, metavar="{llm}")
    llm = actions.add_parser("llm", help="serve a scripted OpenAI-compatible LLM on 127.0.0.1 until Ctrl-C")
    llm.add_argument(
        "--rules",
        type=path_argument,
        metavar="FILE",
        help="YAML or JSON rules to answer by (default: echo the last user message)",
    )
    llm.add_argument(
        "--port", type=port_number, default=0, help="the port to listen on (default: a free one)"
    )


def run_command(options: argparse.Namespace) -> int:
    from agentkernel.testing.rules import Rule, RuleBook, RulesError, load_rules

    try:
        rules = load_rules(options.rules) if options.rules is not None else [Rule(echo=True)]
    except RulesError as exc:
        print(f"agentkernel: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return _serve(RuleBook(rules), options.port, options.rules)


def _serve(book: RuleBook, port: int, rules_file: Path | None) -> int:
    import signal
    import threading

    from agentkernel.testing.openai_server import FakeLLMServer

    server = FakeLLMServer(port=port, max_requests=UNLIMITED_REQUESTS)
    server.respond_with(book)
    try:
        server.start()
    except OSError as exc:
        print(f"agentkernel: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    told = f"{len(book.rules)} rule(s) from {rules_file}" if rules_file else "echoing the last user message"
    print(f"scripted LLM at {server.base_url} ({told}); Ctrl-C stops", flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    print(f"stopped after {len(server.requests)} request(s)", flush=True)
    return EXIT_OK


__all__ = ["add_parser", "run_command"]
