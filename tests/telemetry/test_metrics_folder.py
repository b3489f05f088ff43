"""telemetry/metrics_folder.py: a server's metrics folder, held while it lives; the folders of servers gone.

A live server is stood for by a lock taken here on another open file
description (flock conflicts between two of them, even in one process).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from agentkernel.telemetry.metrics_folder import metrics_folder


def names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_a_gone_servers_folder_is_removed_a_live_ones_kept_and_its_own_removed_at_the_end(
    tmp_path: Path,
) -> None:
    parent = tmp_path / "metrics"
    for name in ("gone", "live"):
        (parent / name).mkdir(parents=True)
        (parent / name / "counter_4711.db").write_bytes(b"counts")
        (parent / f"{name}.lock").touch()
    held = os.open(parent / "live.lock", os.O_RDWR)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        with metrics_folder(tmp_path) as mine:
            assert mine.is_dir() and mine.parent == parent
            assert names(parent) == sorted(["live", "live.lock", mine.name, f"{mine.name}.lock"])
            with metrics_folder(tmp_path) as other:  # another server meanwhile: each keeps its own
                assert other != mine and mine.is_dir()
        assert names(parent) == ["live", "live.lock"]
    finally:
        os.close(held)
