"""The Prometheus side of the metrics (S26.2): the metric objects, their recorder, and the page.

Imported when the server starts counting (metrics.py `start`), not before:
prometheus_client costs tens of milliseconds to import, which a `tool run`
should not pay. With `PROMETHEUS_MULTIPROC_DIR` set when it is imported
(`serve --workers N`: the parent sets it, metrics_folder.py), prometheus_client
writes each count to this process's memory-mapped files in that folder, and
`page` sums every process's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from agentkernel.telemetry.metrics_folder import MULTIPROCESS_ENV

TURN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
LLM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
SCRIPT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LATENESS_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 3600.0)

REGISTRY = CollectorRegistry()
TURNS = Counter(
    "agentkernel_turns",
    "Turns ended, by template and end reason.",
    ("template", "end_reason"),
    registry=REGISTRY,
)
TURN_SECONDS = Histogram(
    "agentkernel_turn_duration_seconds",
    "How long a turn took, from its message to its end.",
    ("template",),
    buckets=TURN_BUCKETS,
    registry=REGISTRY,
)
LLM_SECONDS = Histogram(
    "agentkernel_llm_call_duration_seconds",
    "How long an LLM call took (a stream: to its last piece), by template, model and outcome.",
    ("template", "model", "outcome"),
    buckets=LLM_BUCKETS,
    registry=REGISTRY,
)
LLM_TOKENS = Counter(
    "agentkernel_llm_tokens",
    "Tokens of LLM calls as the server reported them, by template, model and direction (input, output).",
    ("template", "model", "direction"),
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "agentkernel_tool_calls",
    "Tool calls, by tool and outcome (ok, failed).",
    ("tool", "outcome"),
    registry=REGISTRY,
)
HOOK_VERDICTS = Counter(
    "agentkernel_hook_verdicts",
    "Hook function calls, by event and verdict (the verdict's field, none, or error).",
    ("event", "verdict"),
    registry=REGISTRY,
)
CRON_RUNS = Counter(
    "agentkernel_cron_runs",
    "Cron due times handled, by outcome (ok, failed, timeout, skipped).",
    ("outcome",),
    registry=REGISTRY,
)
CRON_LATENESS = Histogram(
    "agentkernel_cron_lateness_seconds",
    "How long after its due time a cron run started.",
    buckets=LATENESS_BUCKETS,
    registry=REGISTRY,
)
RUNS_RESUMED = Counter(
    "agentkernel_runs_resumed",
    "Runs a stopped server left unfinished, resumed here (S25.3).",
    registry=REGISTRY,
)
CAP_REFUSALS = Counter(
    "agentkernel_cap_refusals",
    "Work refused by a per-user cap, by the setting that caps it.",
    ("cap",),
    registry=REGISTRY,
)
SCRIPT_SECONDS = Histogram(
    "agentkernel_script_duration_seconds",
    "Time spent in script calls (tools and hooks), by engine.",
    ("engine",),
    buckets=SCRIPT_BUCKETS,
    registry=REGISTRY,
)


class PrometheusRecorder:
    """Each event as one counter increment or histogram observation; labels already bounded (metrics.py)."""

    def turn_ended(self, template: str, end_reason: str, secs: float) -> None:
        TURNS.labels(template, end_reason).inc()
        TURN_SECONDS.labels(template).observe(secs)

    def llm_called(
        self, template: str, model: str, outcome: str, secs: float, tokens_in: int, tokens_out: int
    ) -> None:
        LLM_SECONDS.labels(template, model, outcome).observe(secs)
        if tokens_in:
            LLM_TOKENS.labels(template, model, "input").inc(tokens_in)
        if tokens_out:
            LLM_TOKENS.labels(template, model, "output").inc(tokens_out)

    def tool_called(self, tool: str, outcome: str) -> None:
        TOOL_CALLS.labels(tool, outcome).inc()

    def hook_called(self, event: str, verdict: str) -> None:
        HOOK_VERDICTS.labels(event, verdict).inc()

    def cron_ran(self, outcome: str, lateness_secs: float | None) -> None:
        CRON_RUNS.labels(outcome).inc()
        if lateness_secs is not None:
            CRON_LATENESS.observe(lateness_secs)

    def run_resumed(self) -> None:
        RUNS_RESUMED.inc()

    def cap_refused(self, setting: str) -> None:
        CAP_REFUSALS.labels(setting).inc()

    def script_ran(self, engine: str, secs: float) -> None:
        SCRIPT_SECONDS.labels(engine).observe(secs)


class _Own(Collector):
    """This process's metrics (one process: no folder), beside the page's other collectors."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


class _Pending(Collector):
    """The approvals waiting for a person, as the store counted them for this page."""

    def __init__(self, count: int) -> None:
        self.count = count

    def collect(self) -> Iterable[Metric]:
        return [
            GaugeMetricFamily(
                "agentkernel_approvals_pending",
                "Tool calls waiting for a person's decision (S24.4).",
                self.count,
            )
        ]


def page(approvals_pending: int, accept: str = "") -> tuple[bytes, str]:
    """The page and its content type: this process's figures, or in multiprocess mode every process's
    summed; with the pending approvals the store counted. In the format `accept` (a request's Accept
    header) asks for: OpenMetrics, or Prometheus text (0.0.4 unless a later version is asked for)."""
    registry = CollectorRegistry()
    folder = os.environ.get(MULTIPROCESS_ENV)
    if folder:
        MultiProcessCollector(registry, folder)  # type: ignore[no-untyped-call]
    else:
        registry.register(_Own())
    registry.register(_Pending(approvals_pending))
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type


__all__ = ["PrometheusRecorder", "page"]
