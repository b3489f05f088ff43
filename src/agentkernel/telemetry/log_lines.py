"""Log lines as JSON (`--log-format json`), each line of a run naming its run and trace (S26).

`RUN_ID` is the run the current code works for: set where a run is driven
(agent/session.py), it follows the run into its tasks and, through the
pools that carry the caller's context, into its scripts' threads. A JSON
line then says `run_id`, and `trace_id` / `span_id` when a span is
current, so a collector can put a run's lines beside its trace.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

RUN_ID: ContextVar[str | None] = ContextVar("agentkernel_run_id", default=None)

LOG_FORMATS = ("text", "json")


@contextmanager
def logged_as(run_id: str | None) -> Iterator[None]:
    """Lines logged meanwhile (in this context and the ones made from it) belong to `run_id`."""
    token = RUN_ID.set(run_id)
    try:
        yield
    finally:
        RUN_ID.reset(token)


class JsonLines(logging.Formatter):
    """One JSON object a record: time (UTC, ISO 8601), level, logger, message, run and trace, exception."""

    def __init__(self) -> None:
        super().__init__()
        from opentelemetry import trace  # the API only: a no-op span without telemetry

        self._current_span = trace.get_current_span

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        run_id = RUN_ID.get()
        if run_id is not None:
            line["run_id"] = run_id
        context = self._current_span().get_span_context()
        if context.is_valid:
            line["trace_id"] = format(context.trace_id, "032x")
            line["span_id"] = format(context.span_id, "016x")
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


__all__ = ["LOG_FORMATS", "RUN_ID", "JsonLines", "logged_as"]
