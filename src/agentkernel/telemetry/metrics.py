"""The kernel's Prometheus metrics (S26.2): the metric objects, one plain-value function per event, the page.

The server, the agent loop, dispatch, the hooks, the script host, cron and
the LLM wrapper call the functions here with plain values; each is one
counter increment or histogram observation, no I/O (in multiprocess mode,
a write into this process's memory-mapped file). `exposition` renders the
page `GET /metrics` serves.

No label names a user: per-user figures are the usage API's. Every label
has few values: end reasons, outcomes, events and verdicts come from fixed
sets; template, tool, model and engine names come from the project, and
each keeps at most a bound of distinct values a process (past it: `other`),
so a name an LLM made up, or a model a server reports, cannot grow the page.

`serve --workers N` runs N processes: with `PROMETHEUS_MULTIPROC_DIR` set
(the parent sets it, metrics_folder.py) before this module is first
imported, every process writes its figures to its own files there, and
`exposition` sums every process's, so whichever process answers shows the
whole server's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from agentkernel.telemetry.metrics_folder import MULTIPROCESS_ENV
from agentkernel.types import JSONValue

OTHER = "other"  # a name past its label's bound
NONE = "none"  # no name: a call the kernel made for itself, an unnamed model

MOST_TEMPLATES = 200
MOST_TOOLS = 500
MOST_MODELS = 32
MOST_ENGINES = 8

TURN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
LLM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
SCRIPT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LATENESS_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 3600.0)

CRON_OUTCOMES = ("ok", "failed", "timeout", "skipped")
# a hook's verdict by the first of these fields its return holds (strongest first)
VERDICT_FIELDS = (
    "deny",
    "suppress",
    "reply",
    "ask",
    "replace_message",
    "replace_args",
    "replace_result",
    "replace_messages",
    "inject",
    "notice",
)

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


class _Bounded:
    """The values one label has taken in this process, at most `most`; later new ones are `other`."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str | None) -> str:
        if not value:
            return NONE
        if value in self.seen:
            return value
        with self._lock:
            if len(self.seen) >= self.most:
                return OTHER
            self.seen.add(value)
        return value


_templates = _Bounded(MOST_TEMPLATES)
_tools = _Bounded(MOST_TOOLS)
_models = _Bounded(MOST_MODELS)
_engines = _Bounded(MOST_ENGINES)


def turn_ended(template: str, end_reason: str, secs: float) -> None:
    """A turn (or a resumed run) ended with `end_reason` (the loop's EndReason) after `secs`."""
    name = _templates(template)
    TURNS.labels(name, end_reason).inc()
    TURN_SECONDS.labels(name).observe(secs)


def llm_called(
    template: str | None, model: str | None, secs: float, tokens_in: int, tokens_out: int, ok: bool = True
) -> None:
    """An LLM call took `secs`: answered (`ok`, with its tokens) or failed."""
    name, asked = _templates(template), _models(model)
    LLM_SECONDS.labels(name, asked, "ok" if ok else "error").observe(secs)
    if tokens_in:
        LLM_TOKENS.labels(name, asked, "input").inc(tokens_in)
    if tokens_out:
        LLM_TOKENS.labels(name, asked, "output").inc(tokens_out)


def tool_called(tool: str, ok: bool) -> None:
    """A tool call ended; `tool` is its name, or `unknown` for a name no tool has."""
    TOOL_CALLS.labels(_tools(tool), "ok" if ok else "failed").inc()


def hook_called(event: str, result: JSONValue, failed: bool) -> None:
    """A hook function ran on `event` and returned `result` (`failed`: it raised, or its return was bad)."""
    HOOK_VERDICTS.labels(event, verdict_of(result, failed)).inc()


def verdict_of(result: JSONValue, failed: bool = False) -> str:
    """The verdict label of a hook's return: `error`, `none`, its strongest field, `notice` for a plain
    text (after_turn's), or `other`."""
    if failed:
        return "error"
    if result is None or result == {}:
        return NONE
    if isinstance(result, str):
        return "notice"
    if isinstance(result, Mapping):
        return next((field for field in VERDICT_FIELDS if field in result), OTHER)
    return OTHER


def cron_ran(outcome: str, lateness_secs: float | None = None) -> None:
    """A cron due time was handled (one of CRON_OUTCOMES); a run that started, `lateness_secs` late."""
    CRON_RUNS.labels(outcome).inc()
    if lateness_secs is not None:
        CRON_LATENESS.observe(max(lateness_secs, 0.0))


def run_resumed() -> None:
    RUNS_RESUMED.inc()


def cap_refused(setting: str) -> None:
    """Work refused by the per-user cap `setting` (e.g. `server.max_running_turns_per_user`)."""
    CAP_REFUSALS.labels(setting).inc()


def script_ran(engine: str, secs: float) -> None:
    """A script call (a tool's `run`, a hook function) on `engine` (`javascript`, `rhai`) took `secs`."""
    SCRIPT_SECONDS.labels(_engines(engine)).observe(secs)


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


def exposition(approvals_pending: int) -> tuple[bytes, str]:
    """The metrics page (Prometheus text format) and its content type: this process's figures, or, in
    multiprocess mode, every process's summed; with the pending approvals the store counted."""
    folder = os.environ.get(MULTIPROCESS_ENV)
    if folder:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, folder)  # type: ignore[no-untyped-call]
    else:
        registry = CollectorRegistry()
        registry.register(_Own())
    registry.register(_Pending(approvals_pending))
    return generate_latest(registry), CONTENT_TYPE_LATEST


class _Own(Collector):
    """This process's metrics (single-process mode), beside the page's other collectors."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


__all__ = [
    "CRON_OUTCOMES",
    "MULTIPROCESS_ENV",
    "cap_refused",
    "cron_ran",
    "exposition",
    "hook_called",
    "llm_called",
    "run_resumed",
    "script_ran",
    "tool_called",
    "turn_ended",
    "verdict_of",
]
