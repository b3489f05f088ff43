"""The installed commands, run as a user runs them (the tests of `agentkernel dev` and `tool test` too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

BIN = Path(sys.executable).parent


def cli(
    *args: str, cwd: Path = REPO, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "AGENTKERNEL_CONFIG"}
    environment.update(env or {})
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )
