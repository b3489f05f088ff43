"""`agentkernel worker`: drive the project's runs on Temporal (`runs.engine: temporal`, S27.2).

Building the parser imports nothing beyond argparse; the Temporal SDK and
the server's parts are imported when the worker runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from agentkernel.cli.common import EXIT_NOT_FOUND, EXIT_OK, load_kernel

if TYPE_CHECKING:  # the kernel is imported when the worker runs, not to build the parser
    from agentkernel.kernel import Kernel


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser(
        "worker", help="drive runs on Temporal (runs.engine: temporal; docs/kernel.md section 14)"
    )
    worker.add_argument("--llm-url", help="override llm.base_url, e.g. http://127.0.0.1:8000/v1")
    worker.add_argument("--model", help="override llm.model")
    worker.add_argument(
        "--metrics-port",
        type=int,
        help="serve this worker's metrics at http://HOST:PORT/metrics (0: a free port, printed; default off)",
    )
    worker.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="the address the metrics page binds to (default 127.0.0.1)",
    )


def run_command(options: argparse.Namespace) -> int:
    """Work, then leave at once: the Temporal SDK's native threads (its Rust core, grpc) may still call
    into Python while the interpreter finalizes, which aborts it now and then ("PyGILState_Release");
    the kernel is closed and the output flushed before, so nothing is lost by skipping finalization."""
    code = _worker(options)
    if "temporalio" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _worker(options: argparse.Namespace) -> int:
    import asyncio

    kernel = load_kernel("agentkernel worker", options.config, llm_url=options.llm_url, model=options.model)
    with kernel:
        runs = kernel.config.runs
        if not runs.temporal:
            print(
                "agentkernel worker: kernel.yaml's runs.engine is not `temporal`: the server runs the turns "
                "itself and there is nothing for a worker to do (docs/kernel.md section 14)",
                file=sys.stderr,
            )
            return EXIT_NOT_FOUND
        try:
            asyncio.run(_work(kernel, options))
        except Exception as exc:  # Temporal unreachable: say where, not a traceback
            from agentkernel.errors import AgentKernelError

            if not isinstance(exc, AgentKernelError):
                raise
            print(f"agentkernel worker: {exc}", file=sys.stderr)
            return EXIT_NOT_FOUND
    return EXIT_OK


async def _work(kernel: Kernel, options: argparse.Namespace) -> None:
    """Work until SIGINT or SIGTERM; say once it polls (and where its metrics page is, if asked)."""
    import asyncio
    import signal

    from agentkernel.server.run_worker import work
    from agentkernel.server.worker_metrics import MetricsPage

    page = None
    if options.metrics_port is not None:
        page = MetricsPage(
            options.metrics_host,
            options.metrics_port,
            kernel.config.server,
            kernel.config.telemetry,
            lambda: kernel.approvals().count_pending(),
        )

    stop, ready = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    working = asyncio.create_task(work(kernel, stop, ready))
    await asyncio.wait({working, asyncio.create_task(ready.wait())}, return_when=asyncio.FIRST_COMPLETED)
    if ready.is_set():
        runs = kernel.config.runs
        print(
            f"agentkernel: worker on {runs.address} (namespace {runs.namespace}, task queue "
            f"{runs.task_queue}) (Ctrl-C stops)",
            flush=True,
        )
        if page is not None:
            print(f"agentkernel: worker metrics on {page.url}", flush=True)
    try:
        await working
    finally:
        if page is not None:
            page.close()


__all__ = ["add_parser", "run_command"]
