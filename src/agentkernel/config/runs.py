"""kernel.yaml's `runs:` section (S27.2): where runs are driven — in the server's processes, or on Temporal.

`runs: {engine: local}` (the default, also with no section) runs each turn
in the process that took its message. `runs: {engine: temporal, address,
namespace, task_queue}` makes each run a Temporal workflow (its id = the
run id) that `agentkernel worker` processes drive from the run's journal
(services/temporal_runs.py says how); `address` defaults to
`$AGENTKERNEL_TEMPORAL_ADDRESS`, then to Temporal's own `localhost:7233`.
`heartbeat_secs`: how long a worker may go without a sign of life before
its run is given to another worker (it signs every third of it).
The Temporal SDK is imported only with `engine: temporal`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentkernel.config.schema import Where, section

TEMPORAL_ADDRESS_ENV = "AGENTKERNEL_TEMPORAL_ADDRESS"
LOCAL, TEMPORAL = "local", "temporal"
DEFAULT_ADDRESS = "localhost:7233"


@dataclass(frozen=True)
class RunSettings:
    """The `runs:` section; `engine` LOCAL: the server's processes run the turns (the rest is unused)."""

    engine: str = LOCAL
    address: str = DEFAULT_ADDRESS  # host:port of the Temporal frontend
    namespace: str = "default"
    task_queue: str = "agentkernel"  # the queue `agentkernel worker` polls and runs are started on
    heartbeat_secs: float = 10.0  # a worker silent this long is taken for dead: its run goes to another

    @property
    def temporal(self) -> bool:
        return self.engine == TEMPORAL


_NAME = {"type": "string", "minLength": 1, "maxLength": 1000, "pattern": r"^\S+$"}

RUNS_SCHEMA = section(
    {
        "engine": {"enum": [LOCAL, TEMPORAL]},
        "address": {**_NAME, "pattern": r"^[^\s:/]+:[0-9]{1,5}$", "x-message": "expected host:port"},
        "namespace": _NAME,
        "task_queue": _NAME,
        "heartbeat_secs": {"type": "number", "minimum": 1, "maximum": 3600},
    }
)


def run_settings(
    values: Mapping[str, Any] | None, _: Where, environ: Mapping[str, str] | None = None
) -> RunSettings:
    """The section's settings; the address from `$AGENTKERNEL_TEMPORAL_ADDRESS` when the section has none."""
    given = dict(values or {})
    address = (os.environ if environ is None else environ).get(TEMPORAL_ADDRESS_ENV, "").strip()
    if "address" not in given and address:
        given["address"] = address
    defaults = RunSettings()
    return RunSettings(
        engine=str(given.get("engine", defaults.engine)),
        address=str(given.get("address", defaults.address)),
        namespace=str(given.get("namespace", defaults.namespace)),
        task_queue=str(given.get("task_queue", defaults.task_queue)),
        heartbeat_secs=float(given.get("heartbeat_secs", defaults.heartbeat_secs)),
    )


__all__ = [
    "LOCAL",
    "RUNS_SCHEMA",
    "TEMPORAL",
    "TEMPORAL_ADDRESS_ENV",
    "RunSettings",
    "run_settings",
]
