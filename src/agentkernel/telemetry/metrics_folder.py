"""The folder `serve --workers N` shares its metrics in (S26.2): one a server, under `paths.data_dir/metrics`.

prometheus_client's multiprocess mode: each worker writes its figures to
memory-mapped files in the folder `PROMETHEUS_MULTIPROC_DIR` names, and the
process answering `GET /metrics` sums them all (telemetry/metrics.py). The
parent makes the folder before it starts a worker, and removes it when it
stops; a worker started again (after a crash) writes new files beside the
old ones, whose counts stay part of the server's totals, as counters must.

Each server has a folder of its own (two servers on one project are two
scrape targets, each with its own figures), named at random and held by a
lock on `<name>.lock` beside it for the server's life. A server killed with
-9 leaves its folder behind: the next server to start on the project finds
its lock free and removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

FOLDER = "metrics"  # under paths.data_dir
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's: where a process writes its figures
LOCK_SUFFIX = ".lock"


@contextlib.contextmanager
def metrics_folder(data_dir: Path) -> Iterator[Path]:
    """A fresh folder for this server's metrics, held while the block runs, removed after it; the folders
    of servers that are gone removed first."""
    parent = data_dir / FOLDER
    parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(parent)
    name = uuid.uuid4().hex
    lock = os.open(parent / f"{name}{LOCK_SUFFIX}", os.O_CREAT | os.O_RDWR, 0o600)
    folder = parent / name
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # before the folder exists: no sweep can find it unheld
        folder.mkdir()
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (parent / f"{name}{LOCK_SUFFIX}").unlink()
        os.close(lock)


def _remove_abandoned(parent: Path) -> None:
    """Remove the folders whose lock nobody holds (their server is gone)."""
    for lock_path in parent.glob(f"*{LOCK_SUFFIX}"):
        try:
            lock = os.open(lock_path, os.O_RDWR)
        except FileNotFoundError:  # its server stopped meanwhile
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a live server's
            os.close(lock)
            continue
        try:
            shutil.rmtree(parent / lock_path.name.removesuffix(LOCK_SUFFIX), ignore_errors=True)
            lock_path.unlink(missing_ok=True)
        finally:
            os.close(lock)


__all__ = ["FOLDER", "MULTIPROCESS_ENV", "metrics_folder"]
