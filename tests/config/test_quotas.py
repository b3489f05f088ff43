"""kernel.yaml's `quotas:` (S26.3): the shape, the limits each call must fit, and errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel.config import load_kernel_config
from agentkernel.config.quotas import QuotaLimit
from agentkernel.errors import ConfigError
from tests.conftest import write_kernel_yaml


def test_the_section_gives_each_call_its_limits(tmp_path: Path) -> None:
    quotas = load_kernel_config(
        write_kernel_yaml(
            tmp_path,
            "quotas:\n"
            "  default: {tokens_per_day: 200000, calls_per_day: 1000, tokens_per_month: 3000000}\n"
            "  users: {alice: {tokens_per_day: 1000000}, ops: {calls_per_day: null}}\n"
            "  templates: {writer: {tokens_per_day: 50000}}\n",
        )
    ).quotas
    assert quotas.enabled
    assert quotas.limits_for("alice", "writer") == (
        QuotaLimit("tokens_per_day", 1_000_000),
        QuotaLimit("calls_per_day", 1000),
        QuotaLimit("tokens_per_month", 3_000_000),
        QuotaLimit("tokens_per_day", 50_000, "writer"),
    )
    assert quotas.limits_for("ops", None) == (
        QuotaLimit("tokens_per_day", 200_000),
        QuotaLimit("tokens_per_month", 3_000_000),
    )


def test_without_the_section_nothing_is_limited(tmp_path: Path) -> None:
    quotas = load_kernel_config(write_kernel_yaml(tmp_path)).quotas
    assert not quotas.enabled
    assert quotas.limits_for("alice", "writer") == ()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("quotas: 5", "quotas: expected a mapping of default, users and templates, got 5"),
        (
            "quotas: {default: {tokens_per_day: -1}}",
            "quotas.default.tokens_per_day: expected a whole number >= 0, got -1",
        ),
        (
            "quotas: {default: {tokens_per_day: 1.5}}",
            "quotas.default.tokens_per_day: expected a whole number >= 0, got 1.5",
        ),
        (
            "quotas: {default: {tokens_per_dya: 5}}",
            "quotas.default.tokens_per_dya: unknown field (known: tokens_per_day, calls_per_day, "
            "tokens_per_month, calls_per_month); did you mean 'tokens_per_day'?",
        ),
        (
            "quotas: {users: {alice: {tokens_per_day: lots}}}",
            "quotas.users.alice.tokens_per_day: expected a whole number >= 0, or null for no limit, "
            "got 'lots'",
        ),
        (
            "quotas: {users: {alice: 3}}",
            "quotas.users.alice: expected limits: a mapping such as {tokens_per_day: 200000}, got 3",
        ),
        ("quotas: {users: {'no spaces': {}}}", "quotas.users: expected a mapping of user id to limits"),
        (
            "quotas: {templates: {writer: {calls_per_month: null}}}",
            "quotas.templates.writer.calls_per_month: expected a whole number >= 0, got None",
        ),
        ("quotas: {dflt: {}}", "quotas.dflt: unknown field (known: default, users, templates)"),
    ],
)
def test_a_wrong_quota_names_the_field(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_kernel_config(write_kernel_yaml(tmp_path, text))
    assert reason in caught.value.reason
    assert caught.value.line is not None
