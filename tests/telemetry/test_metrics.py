"""telemetry/metrics.py: the label bounds, the verdict labels, and the page it renders (S26.2).

The figures are this test process's own (single-process mode), so each test
reads what its calls added: the value after, less the value before.
"""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentkernel.services.user_work import Cap, TooMuchWork
from agentkernel.telemetry import metrics


@pytest.fixture(autouse=True)
def counting() -> None:
    metrics.start()  # as the server does


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    """The value of sample `name` with exactly `labels` on the page now; 0 when absent."""
    text = metrics.page(0)[0].decode()
    for family in text_string_to_metric_families(text):
        for got in family.samples:
            if got.name == name and got.labels == (labels or {}):
                return got.value
    return 0.0


def test_a_name_past_its_bound_is_other() -> None:
    bounded = metrics._Bounded(2)
    assert [bounded(n) for n in ("a", "b", "c", "a", None, "")] == ["a", "b", "other", "a", "none", "none"]


def test_verdict_labels_come_from_a_fixed_set() -> None:
    assert metrics.verdict_of({"deny": "no", "notice": "x"}) == "deny"
    assert metrics.verdict_of({"replace_args": {}}) == "replace_args"
    assert metrics.verdict_of("a plain notice") == "notice"
    assert metrics.verdict_of(None) == "none"
    assert metrics.verdict_of({"made_up": 1}) == "other"
    assert metrics.verdict_of([1, 2]) == "other"
    assert metrics.verdict_of({"deny": "no"}, failed=True) == "error"


def test_a_cap_refusal_is_counted_by_its_setting_not_its_user() -> None:
    labels = {"cap": "server.max_running_turns_per_user"}
    before = sample("agentkernel_cap_refusals_total", labels)
    TooMuchWork("alice", Cap("turns", "server.max_running_turns_per_user", 1, "wait"), 1)
    assert sample("agentkernel_cap_refusals_total", labels) == before + 1
    assert "alice" not in metrics.page(0)[0].decode()


def test_cron_runs_and_their_lateness() -> None:
    before = sample("agentkernel_cron_runs_total", {"outcome": "ok"})
    late = sample("agentkernel_cron_lateness_seconds_count")
    metrics.cron_ran("ok", 2.0)
    metrics.cron_ran("skipped")
    assert sample("agentkernel_cron_runs_total", {"outcome": "ok"}) == before + 1
    assert sample("agentkernel_cron_lateness_seconds_count") == late + 1  # a skipped one never started


def test_the_page_carries_the_pending_approvals_it_is_given() -> None:
    body, content_type = metrics.page(3)
    assert content_type.startswith("text/plain; version=")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    assert families["agentkernel_approvals_pending"].samples[0].value == 3
