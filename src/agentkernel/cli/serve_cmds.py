"""`agentkernel serve` and `agentkernel token new USER`: the HTTP API, and the tokens it accepts.

Building the parser imports nothing beyond argparse; FastAPI and uvicorn
are imported when `serve` runs, so every other command starts without them.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from agentkernel.cli.common import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, load_kernel, port_number

if TYPE_CHECKING:  # the kernel is imported when serve runs, not to build the parser
    import socket

    from agentkernel.kernel import Kernel

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="serve the HTTP API (docs/server.md)")
    serve.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    serve.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)"
    )
    serve.add_argument("--llm-url", help="override llm.base_url, e.g. http://127.0.0.1:8000/v1")
    serve.add_argument("--model", help="override llm.model")
    serve.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="server processes on the one port (default 1; auto: one per core); docs/server.md section 13",
    )
    for hidden in ("--listen-fd", "--link-fd", "--worker-index"):  # a worker's, given by its parent
        serve.add_argument(hidden, type=int, help=argparse.SUPPRESS)
    token = commands.add_parser("token", help="make a bearer token for the server")
    actions = token.add_subparsers(dest="action", required=True, metavar="ACTION")
    new = actions.add_parser("new", help="print a fresh token and the kernel.yaml line for it")
    new.add_argument("user", metavar="USER", help="the user id the token stands for")


def _workers(text: str) -> int:
    """argparse's `type=` for `--workers`: a usage error naming the value when it is not 1+ or auto."""
    from agentkernel.server.workers import worker_count  # no server import to build the parser

    try:
        return worker_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def run_command(options: argparse.Namespace) -> int:
    if options.command == "token":
        return _new_token(options.user)
    if options.listen_fd is not None:
        return _serve_worker(options)
    return _serve(options)


def _new_token(user: str) -> int:
    import re
    import secrets

    from agentkernel.config.server import USER_ID, token_hash

    if not re.fullmatch(USER_ID, user):
        print(
            f"agentkernel token new: {user!r} is not a user id (1-128 of letters, digits, _ . @ -)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    token = secrets.token_urlsafe(32)
    print(f"token for {user} (give it to them; it is shown only now):\n  {token}")
    print("add this line under `server: tokens:` in kernel.yaml:")
    print(f'    "{token_hash(token)}": {user}')
    return EXIT_OK


def _serve(options: argparse.Namespace) -> int:
    from agentkernel.server.serving import (
        ServeRefused,
        bind,
        check_binding,
        serve_until_stopped,
        server_for,
        url_of,
    )

    kernel = load_kernel("agentkernel serve", options.config, llm_url=options.llm_url, model=options.model)
    settings = kernel.config.server
    try:
        check_binding(options.host, settings)
        sock = bind(options.host, options.port)
    except ServeRefused as exc:
        kernel.close()
        print(f"agentkernel serve: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    with sock:
        _warn_of_problems(kernel)
        if options.workers > 1:
            return _supervise(options, kernel, sock)
        server = server_for(kernel, settings, check_llm=True)  # a warning if the LLM does not answer
        print(f"agentkernel: serving on {url_of(sock)} (Ctrl-C stops)", flush=True)
        serve_until_stopped(server, kernel, sock)
    return EXIT_OK


def _supervise(options: argparse.Namespace, kernel: Kernel, sock: socket.socket) -> int:
    """`--workers N`: the kernel that checked the project is closed; N workers serve on `sock`."""
    from agentkernel.server.serving import url_of
    from agentkernel.server.workers import Supervisor, WorkerFailed

    config_path, data_dir = kernel.config.path, kernel.config.data_dir
    stop_secs = 2 * kernel.config.server.shutdown_grace_secs
    if not kernel.config.server.mcp_stateless:
        print(
            "agentkernel serve: server.mcp_stateless is false, so an MCP client's session (/mcp) lives in "
            "the worker that opened it and another worker answers it 404; set it true with --workers "
            "(docs/server.md section 13)",
            file=sys.stderr,
        )
    kernel.close()

    def command(index: int, listen_fd: int, link_fd: int) -> list[str]:
        argv = [sys.executable, "-m", "agentkernel", "--log-format", options.log_format]
        argv += ["-v"] * options.verbose + ["serve"]
        if config_path is not None:
            argv += ["--config", str(config_path)]
        for flag, value in (("--llm-url", options.llm_url), ("--model", options.model)):
            if value is not None:
                argv += [flag, value]
        return [*argv, "--listen-fd", str(listen_fd), "--link-fd", str(link_fd), "--worker-index", str(index)]

    supervisor = Supervisor(sock, options.workers, command, stop_secs)
    with _shared_metrics(data_dir):
        try:
            supervisor.start()
        except WorkerFailed as exc:
            print(f"agentkernel serve: {exc}", file=sys.stderr)
            return EXIT_NOT_FOUND
        shown = f"agentkernel: serving on {url_of(sock)} with {options.workers} workers (Ctrl-C stops)"
        print(shown, flush=True)
        return supervisor.run()


@contextlib.contextmanager
def _shared_metrics(data_dir: Path) -> Iterator[None]:
    """The workers' metrics folder (S26.2), named to them in PROMETHEUS_MULTIPROC_DIR, so /metrics shows
    every worker's figures; one the environment names already is the operator's, used as it is."""
    import os

    from agentkernel.telemetry.metrics_folder import MULTIPROCESS_ENV, metrics_folder

    if os.environ.get(MULTIPROCESS_ENV):
        yield
        return
    with metrics_folder(data_dir) as folder:
        os.environ[MULTIPROCESS_ENV] = str(folder)
        try:
            yield
        finally:
            del os.environ[MULTIPROCESS_ENV]


def _serve_worker(options: argparse.Namespace) -> int:
    """One worker of `--workers N`: its own kernel, serving on the parent's socket until told to stop."""
    import signal
    import socket

    from agentkernel.server.serving import serve_until_stopped, server_for
    from agentkernel.server.workers import watch_parent

    # a stop asked before uvicorn catches the signals itself (a Ctrl-C just after start-up) is kept
    asked: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda signum, frame: asked.append(signum))
    kernel = load_kernel("agentkernel serve", options.config, llm_url=options.llm_url, model=options.model)
    with socket.socket(fileno=options.listen_fd) as sock:
        # the LLM is probed by the first worker only: one warning, not one a worker
        server = server_for(kernel, kernel.config.server, check_llm=options.worker_index == 0)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, server.handle_exit)
        if asked:
            server.handle_exit(asked[0], None)
        watch_parent(socket.socket(fileno=options.link_fd), lambda: server.handle_exit(signal.SIGTERM, None))
        serve_until_stopped(server, kernel, sock)
    return EXIT_OK


SHOWN_PROBLEMS = 10
"""Files that did not load named at start-up; `agentkernel check` lists them all."""


def _warn_of_problems(kernel: Kernel) -> None:
    """Say on stderr which tools, hooks and templates did not load: the rest are served without (S2.5)."""
    from agentkernel.cli.problems import problem_text  # reads YAML: imported when serve runs

    problems = kernel.problems()
    if not problems:
        return
    print(
        f"agentkernel serve: {len(problems)} file(s) did not load and are not served"
        " (`agentkernel check` lists them all):",
        file=sys.stderr,
    )
    for problem in problems[:SHOWN_PROBLEMS]:
        print(f"  {problem_text(problem)}", file=sys.stderr)
    if len(problems) > SHOWN_PROBLEMS:
        print(f"  … and {len(problems) - SHOWN_PROBLEMS} more", file=sys.stderr)
