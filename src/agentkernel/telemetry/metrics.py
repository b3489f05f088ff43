"""The kernel's metrics (S26.2): one plain-value function per event, counted once the server starts.

The server, the agent loop, dispatch, the hooks, the script host, cron and
the LLM wrapper call the functions here with plain values. Until `start`
(the server app calls it) each is a no-op, so a `tool run` or a chat never
imports prometheus_client; after it, each is one counter increment or
histogram observation in memory (prometheus_metrics.py), no I/O. `page`
renders what `GET /metrics` serves.

No label names a user: per-user figures are the usage API's. Every label
has few values: end reasons, outcomes, events and verdicts come from fixed
sets; template, tool, model and engine names come from the project, and
each keeps at most a bound of distinct values a process (past it: `other`),
so a name an LLM made up, or a model a server reports, cannot grow the page.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Protocol

from agentkernel.types import JSONValue

OTHER = "other"  # a name past its label's bound
NONE = "none"  # no name: a call the kernel made for no template
MOST_TEMPLATES = 200
MOST_TOOLS = 500
MOST_MODELS = 32
MOST_ENGINES = 8
CRON_OUTCOMES = ("ok", "failed", "timeout", "skipped")
# a hook's verdict is the first of these fields its return holds (strongest first)
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


class Recorder(Protocol):
    """Where the events go, their labels bounded: nowhere until `start`, then Prometheus."""

    def turn_ended(self, template: str, end_reason: str, secs: float) -> None: ...
    def llm_called(
        self, template: str, model: str, outcome: str, secs: float, tokens_in: int, tokens_out: int
    ) -> None: ...
    def tool_called(self, tool: str, outcome: str) -> None: ...
    def hook_called(self, event: str, verdict: str) -> None: ...
    def cron_ran(self, outcome: str, lateness_secs: float | None) -> None: ...
    def run_resumed(self) -> None: ...
    def cap_refused(self, setting: str) -> None: ...
    def script_ran(self, engine: str, secs: float) -> None: ...


class _Off:
    """Before `start`: nothing is counted."""

    def turn_ended(self, template: str, end_reason: str, secs: float) -> None:
        pass

    def llm_called(
        self, template: str, model: str, outcome: str, secs: float, tokens_in: int, tokens_out: int
    ) -> None:
        pass

    def tool_called(self, tool: str, outcome: str) -> None:
        pass

    def hook_called(self, event: str, verdict: str) -> None:
        pass

    def cron_ran(self, outcome: str, lateness_secs: float | None) -> None:
        pass

    def run_resumed(self) -> None:
        pass

    def cap_refused(self, setting: str) -> None:
        pass

    def script_ran(self, engine: str, secs: float) -> None:
        pass


_recorder: Recorder = _Off()
_starting = threading.Lock()


def start() -> None:
    """Count from now on (the server does, as its app is made); once a process, later calls do nothing."""
    global _recorder
    with _starting:
        if isinstance(_recorder, _Off):
            from agentkernel.telemetry.prometheus_metrics import PrometheusRecorder  # paid by the server only

            _recorder = PrometheusRecorder()


def page(approvals_pending: int, accept: str = "") -> tuple[bytes, str]:
    """The metrics page and its content type, in the format `accept` asks for (prometheus_metrics.py);
    counting from now if not yet."""
    start()
    from agentkernel.telemetry.prometheus_metrics import page as rendered

    return rendered(approvals_pending, accept)


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
    _recorder.turn_ended(_templates(template), end_reason, secs)


def llm_called(
    template: str | None, model: str | None, secs: float, tokens_in: int, tokens_out: int, ok: bool = True
) -> None:
    """An LLM call took `secs`: answered (`ok`, with its tokens) or failed; `model` is the one asked for."""
    outcome = "ok" if ok else "error"
    _recorder.llm_called(_templates(template), _models(model), outcome, secs, tokens_in, tokens_out)


def tool_called(tool: str, ok: bool) -> None:
    """A tool call ended; `tool` is its name, or `unknown` for a name no tool has."""
    _recorder.tool_called(_tools(tool), "ok" if ok else "failed")


def hook_called(event: str, result: JSONValue, failed: bool) -> None:
    """A hook function ran on `event` and returned `result` (`failed`: it raised, or its return was bad)."""
    _recorder.hook_called(event, verdict_of(result, failed))


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
    _recorder.cron_ran(outcome, None if lateness_secs is None else max(lateness_secs, 0.0))


def run_resumed() -> None:
    _recorder.run_resumed()


def cap_refused(setting: str) -> None:
    """Work refused by the per-user cap `setting` (e.g. `server.max_running_turns_per_user`)."""
    _recorder.cap_refused(setting)


def script_ran(engine: str, secs: float) -> None:
    """A script call (a tool's `run`, a hook function) on `engine` (`javascript`, `rhai`) took `secs`."""
    _recorder.script_ran(_engines(engine), secs)


__all__ = [
    "CRON_OUTCOMES",
    "cap_refused",
    "cron_ran",
    "hook_called",
    "llm_called",
    "page",
    "run_resumed",
    "script_ran",
    "start",
    "tool_called",
    "turn_ended",
    "verdict_of",
]
