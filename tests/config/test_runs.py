"""kernel.yaml's `runs:` (S27.2): the runs' engine, local by default, Temporal's address from the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel.config import load_kernel_config
from agentkernel.config.runs import TEMPORAL_ADDRESS_ENV, RunSettings
from agentkernel.errors import ConfigError
from tests.conftest import write_kernel_yaml


def test_without_the_section_runs_are_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TEMPORAL_ADDRESS_ENV, raising=False)
    runs = load_kernel_config(write_kernel_yaml(tmp_path)).runs
    assert runs == RunSettings() and not runs.temporal


def test_the_section_names_the_temporal_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TEMPORAL_ADDRESS_ENV, raising=False)
    extra = (
        "runs:\n  engine: temporal\n  address: temporal.internal:7233\n  namespace: agents\n"
        "  task_queue: team-a\n  heartbeat_secs: 3\n"
    )
    runs = load_kernel_config(write_kernel_yaml(tmp_path, extra)).runs
    assert runs == RunSettings("temporal", "temporal.internal:7233", "agents", "team-a", 3.0)
    assert runs.temporal


def test_the_variable_gives_the_address_the_section_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEMPORAL_ADDRESS_ENV, "from-env:7000")
    runs = load_kernel_config(write_kernel_yaml(tmp_path, "runs: {engine: temporal}\n")).runs
    assert runs.address == "from-env:7000"
    written = "runs: {engine: temporal, address: 'written:7233'}\n"
    assert load_kernel_config(write_kernel_yaml(tmp_path, written)).runs.address == "written:7233"


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("runs: {engine: cluster}\n", "runs.engine: 'cluster' is not one of ['local', 'temporal']"),
        ("runs: {address: 'http://x:1'}\n", "runs.address: expected host:port"),
        ("runs: {task_queue: ''}\n", "runs.task_queue"),
        ("runs: {workers: 2}\n", "workers"),
    ],
)
def test_a_wrong_field_is_named(tmp_path: Path, extra: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_kernel_config(write_kernel_yaml(tmp_path, extra))
    assert said in str(caught.value)
