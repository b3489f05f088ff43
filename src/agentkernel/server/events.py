"""The agent loop's events as the API's server-sent events (docs/server.md, "The events").

The loop speaks `LoopEvent(kind, data)`; a client of the API reads
`event: TYPE` + `data: JSON`. The mapping is one table, so it is the same
everywhere and documented once:

| loop kind     | SSE type      | data                                                  |
|---------------|---------------|-------------------------------------------------------|
| `notice`      | `notice`      | `{text}`                                              |
| `token`       | `token`       | `{text}`                                              |
| `tool_call`   | `tool_call`   | `{id, tool, args}` (args parsed from the model's JSON |
|               |               | text; the raw text when it is not JSON)               |
| `tool_result` | `tool_result` | `{id, tool, content, success, error, visual, warnings}` |
| `visual`      | (none)        | its block is already in `tool_result.visual`          |
| `warning`     | `warning`     | `{tool, message}`                                     |
| `answer`      | `reply`       | `{content, streamed}`                                 |
| `error`       | `error`       | `{message, code}` (the server's own failure: no code) |
| `end`         | `done`        | `{reason}`: job_done, terminated, blocked, …          |

A turn's stream starts with `event: run`, data `{id, session_id}`: the run
it is (S25.1). Every event but a token carries `id:`, the id of its record
in the transcript: `GET /v1/runs/{id}/events` with `Last-Event-ID` (or
`?after=N`) gives what came after it, read from the store (`record_event`
makes the same events of the records), so a client whose stream broke, on
whichever process, reconnects and gets the rest exactly once. Tokens are
live only: the `reply` that follows holds the whole text.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Final

from agentkernel.agent.loop import LoopEvent
from agentkernel.ports import Record
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.valid_unicode import repair_text

EVENT_TYPES: Final = (
    "run",
    "notice",
    "token",
    "tool_call",
    "tool_result",
    "warning",
    "reply",
    "error",
    "done",
)
_RENAMED: Final = {"answer": "reply", "end": "done"}
_DROPPED: Final = frozenset({"visual"})


@dataclass(frozen=True)
class StreamEvent:
    """One server-sent event: its type (one of EVENT_TYPES) and its JSON data."""

    type: str
    data: JSONObject
    id: int | None = None  # its record's id: where a reconnecting client goes on from

    def frame(self) -> bytes:
        """`event: TYPE` (+ `id: N`) + `data: JSON` + a blank line; json.dumps escapes every newline."""
        return self._frame

    @functools.cached_property
    def _frame(self) -> bytes:
        """Made once: a turn counts its size (turns.py) and then sends it.

        The model's text or arguments may hold a lone surrogate (JSON can
        spell `"\\ud800"`), which has no UTF-8 form: it becomes U+FFFD, as
        everywhere text leaves the kernel (valid_unicode.py), rather than cut
        the stream short.
        """
        data = repair_text(json.dumps(self.data, ensure_ascii=False))
        said = "" if self.id is None else f"id: {self.id}\n"
        return f"event: {self.type}\n{said}data: {data}\n\n".encode()


def stream_event(event: LoopEvent) -> StreamEvent | None:
    """The SSE form of a loop event; None for a kind the stream leaves out (see the module docstring)."""
    if event.kind in _DROPPED:
        return None
    data = dict(event.data)
    if event.kind in ("tool_call", "tool_result"):  # `{id, tool, ...}`, in that order
        data = {"id": data.pop("id", None), "tool": data.pop("name", None), **data}
    if event.kind == "tool_call":
        data["args"] = _arguments(data.pop("arguments", None))
    return StreamEvent(_RENAMED.get(event.kind, event.kind), data, event.id)


def record_event(record: Record) -> StreamEvent | None:
    """The event a run's record was shown as when it was written; None for what is not shown
    (the user's message, the hooks' records)."""
    meta = record.meta
    if record.role == "hook" or record.kind == "user":
        return None
    kind = record.kind
    if kind == "tool_call" and not meta.get("client"):
        data: JSONObject = {
            "id": meta.get("id"),
            "tool": meta.get("tool"),
            "args": _arguments(record.content),
        }
    elif kind == "tool_result" and not meta.get("not_run"):
        data = {
            "id": meta.get("id"),
            "tool": meta.get("tool"),
            "content": record.content,
            "success": meta.get("success") is not False,
            "error": None if meta.get("success") is not False else record.content,
            "visual": meta.get("visual"),
            "warnings": [],
        }
    elif kind == "notice":
        data = {"text": record.content}
    elif kind == "warning":
        data = {"tool": meta.get("tool"), "message": record.content}
    elif kind == "agent":
        data, kind = {"content": record.content, "streamed": False}, "answer"
    elif kind == "error":
        data = {"message": record.content, **({"code": meta["code"]} if "code" in meta else {})}
    elif kind == "end":
        data = {"reason": record.content}
    elif kind == "approval":
        call = {"id": meta.get("id"), "tool": meta.get("tool"), "args": meta.get("args")}
        data = {"run_id": meta.get("run_id"), "call": call, "question": record.content}
        data["expires_at"] = meta.get("expires_at")
        kind = "approval_required"
    elif kind == "approval_decision":
        data = {"call_id": meta.get("id"), "approved": meta.get("approved") is True, "reason": record.content}
        kind = "approval_decided"
    else:
        return None
    return StreamEvent(_RENAMED.get(kind, kind), data, record.id)


def _arguments(raw: JSONValue) -> JSONValue:
    """The model's argument text as JSON when it parses; as the text it was otherwise."""
    if not isinstance(raw, str):
        return raw
    try:
        parsed: JSONValue = json.loads(raw)
    except ValueError:
        return raw
    return parsed


def failed_turn(message: str) -> list[StreamEvent]:
    """What a client sees when the server itself failed to run a turn: an error, then the end."""
    return [StreamEvent("error", {"message": message}), StreamEvent("done", {"reason": "error"})]


__all__ = ["EVENT_TYPES", "StreamEvent", "failed_turn", "record_event", "stream_event"]
