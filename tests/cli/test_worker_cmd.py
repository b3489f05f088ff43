"""`agentkernel worker` (S27.2): without `runs.engine: temporal` it says there is nothing to do, and where."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import write_kernel_yaml

BIN = Path(sys.executable).parent


def worker(root: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
    return subprocess.run(
        [str(BIN / "agentkernel"), "worker"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_worker_of_a_project_whose_runs_are_local_refuses_to_start(tmp_path: Path) -> None:
    write_kernel_yaml(tmp_path)
    done = worker(tmp_path)
    assert done.returncode == 1, done.stderr
    assert "runs.engine is not `temporal`" in done.stderr and done.stdout == ""


def test_a_worker_whose_temporal_does_not_answer_says_where(tmp_path: Path) -> None:
    write_kernel_yaml(tmp_path, "runs: {engine: temporal, address: '127.0.0.1:1'}\n")
    done = worker(tmp_path)
    assert done.returncode == 1, done.stderr
    assert (
        "agentkernel worker: runs.address: Temporal at 127.0.0.1:1 (namespace default) does not answer"
        in (done.stderr)
    )
