"""kernel.yaml's `approvals:` section: its fields, their defaults, and sinks refused without a public_url."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel.config import load_kernel_config
from agentkernel.config.approvals import ApprovalSettings
from agentkernel.errors import ConfigError
from tests.conftest import write_kernel_yaml


def test_the_section_loads_and_defaults(tmp_path: Path) -> None:
    assert load_kernel_config(write_kernel_yaml(tmp_path, "")).approvals == ApprovalSettings()
    text = (
        "approvals:\n  timeout_secs: 60\n  public_url: https://agents.example.com/\n"
        "  webhook_attempts: 3\n  notify:\n    - {type: webhook, url: 'https://hooks.example.com/a'}\n"
    )
    settings = load_kernel_config(write_kernel_yaml(tmp_path, text)).approvals
    assert settings == ApprovalSettings(
        timeout_secs=60.0,
        public_url="https://agents.example.com",  # the links append /v1/approval-links/…
        notify=("https://hooks.example.com/a",),
        webhook_attempts=3,
    )


def test_sinks_without_a_public_url_are_refused_at_load(tmp_path: Path) -> None:
    text = "approvals:\n  notify:\n    - {type: webhook, url: 'https://hooks.example.com/a'}\n"
    with pytest.raises(ConfigError) as caught:
        load_kernel_config(write_kernel_yaml(tmp_path, text))
    assert "kernel.yaml" in str(caught.value)
    assert "approvals.public_url: required when approvals.notify names a sink" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("approvals:\n  webhook_attempts: 0\n", "approvals.webhook_attempts"),
        ("approvals:\n  public_url: agents.example.com\n", "approvals.public_url"),
    ],
)
def test_bad_values_name_the_field(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        load_kernel_config(write_kernel_yaml(tmp_path, text))
