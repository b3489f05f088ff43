"""`agentkernel cron run | list | cancel NAME`: the cron store (S10) from the terminal.

`cron run` is a scheduler alone, for a worker apart from `agentkernel
serve`: it fires the store's jobs until Ctrl-C or SIGTERM (exit 0), then
gives the runs under way `server.shutdown_grace_secs`, as `serve` does; a
run stopped then is given back to the store and runs at the next start. A
static job of kernel.yaml that is wrong stops it with exit 1 and the
field at fault. `cron list` shows every user's jobs (one user's with
`--user`); `cron cancel NAME --user U` removes one, exit 1 when U had none.
Building the parser imports nothing beyond argparse.
"""

from __future__ import annotations

import argparse
import json
import sys

from agentkernel.cli.common import EXIT_NOT_FOUND, EXIT_OK, load_kernel

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~5 ms at start-up)

if TYPE_CHECKING:
    from agentkernel.kernel import Kernel
    from agentkernel.types import JSONObject

COLUMNS = ("OWNER", "NAME", "TIMING", "NEXT RUN", "LAST RUN", "OK", "RUNS")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cron = commands.add_parser("cron", help="cron jobs: run a scheduler, list or cancel jobs")
    actions = cron.add_subparsers(dest="action", required=True, metavar="{run,list,cancel}")
    run = actions.add_parser("run", help="fire the jobs of the cron store until Ctrl-C (a worker)")
    run.add_argument("--llm-url", help="override llm.base_url, e.g. http://127.0.0.1:8000/v1")
    run.add_argument("--model", help="override llm.model")
    listing = actions.add_parser("list", help="list the jobs and their statuses")
    listing.add_argument("--user", help="only this user's jobs (default: every user's)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    cancel = actions.add_parser("cancel", help="remove a user's job")
    cancel.add_argument("name", metavar="NAME", help="the job's name")
    cancel.add_argument("--user", required=True, help="the job's owner")


def run_command(options: argparse.Namespace) -> int:
    if options.action == "run":
        return _run(options)
    if options.action == "list":
        return _list(options)
    return _cancel(options)


# -- cron run -------------------------------------------------------------------------------------


def _run(options: argparse.Namespace) -> int:
    import asyncio
    import logging

    from agentkernel.cli.problems import shown_path
    from agentkernel.errors import HelperError

    logging.getLogger("agentkernel.cron").setLevel(min(logging.INFO, logging.getLogger().level))
    kernel = load_kernel("agentkernel cron run", options.config, llm_url=options.llm_url, model=options.model)
    if kernel.config.runs.temporal:
        kernel.close()
        print(
            "agentkernel cron run: kernel.yaml's runs.engine is `temporal`: the jobs fire from Temporal "
            "Schedules on `agentkernel worker` processes (docs/kernel.md section 14)",
            file=sys.stderr,
        )
        return EXIT_NOT_FOUND
    store = shown_path(kernel.config.cron.db_path)
    print(f"agentkernel: scheduling the jobs of {store} (Ctrl-C stops)", flush=True)
    try:
        asyncio.run(_schedule(kernel))
    except HelperError as exc:  # a static job of kernel.yaml: `cron.jobs[0].schedule: …`
        print(f"agentkernel cron run: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    return EXIT_OK


async def _schedule(kernel: Kernel) -> None:
    """The scheduler on this loop until SIGINT or SIGTERM; the kernel closed on the same loop."""
    import asyncio
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with kernel:
        await kernel.cron_scheduler().run(stop, grace=kernel.config.server.shutdown_grace_secs)


# -- cron list, cron cancel -----------------------------------------------------------------------


def _list(options: argparse.Namespace) -> int:
    from agentkernel.cli.problems import shown_path

    with load_kernel("agentkernel cron list", options.config, live=False) as kernel:
        path = kernel.config.cron.db_path
        jobs = kernel.cron_jobs(options.user) if path.is_file() else []  # listing makes no store
    if options.json:
        print(json.dumps(jobs, ensure_ascii=False, indent=2))
        return EXIT_OK
    if not jobs:
        whose = f" of {options.user!r}" if options.user else ""
        print(f"no cron jobs{whose} in {shown_path(path)}")
        return EXIT_OK
    rows = [COLUMNS, *(_row(job) for job in jobs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


def _row(job: JSONObject) -> tuple[str, ...]:
    ok = {True: "yes", False: "no", None: "-"}[job["last_ok"]]  # type: ignore[index]
    next_run = str(job["next_run"])
    if job["running"] or job["done"] or job.get("waiting"):  # waiting: due, its owner at the cap
        next_run = "running" if job["running"] else "done" if job["done"] else "waiting"
    return (
        str(job["owner"]),
        str(job["name"]),
        _timing(job["timing"]),
        next_run,
        str(job["last_run"] or "-"),
        ok,
        str(job["runs"]),
    )


def _timing(timing: object) -> str:
    """`every 60 s`, `0 0 9 * * * Europe/Moscow`, `once at 2026-12-31T18:00:00.000Z`."""
    assert isinstance(timing, dict)
    if "interval_secs" in timing:
        return f"every {timing['interval_secs']:g} s"
    if "oneshot_at" in timing:
        return f"once at {timing['oneshot_at']}"
    return f"{timing['schedule']} {timing['timezone']}"


def _cancel(options: argparse.Namespace) -> int:
    from agentkernel.cli.problems import shown_path

    with load_kernel("agentkernel cron cancel", options.config, live=False) as kernel:
        path = kernel.config.cron.db_path
        gone = path.is_file() and kernel.cancel_cron_job(options.user, options.name)
    if not gone:
        print(
            f"agentkernel cron cancel: {options.user!r} has no job named {options.name!r} "
            f"in {shown_path(path)}",
            file=sys.stderr,
        )
        return EXIT_NOT_FOUND
    print(f"cancelled {options.user}/{options.name}")
    return EXIT_OK


__all__ = ["add_parser", "run_command"]
