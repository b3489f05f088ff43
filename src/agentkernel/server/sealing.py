"""Where visual blocks leave the server, their tables' continuation args are swapped for opaque ids (S6.3).

continuations.py keeps the args and runs them; this is the one place that
knows the exits and who owns what leaves by each:

- a streamed turn's `tool_result` event: the session's owner, the session
  and its template (`TurnSealer`, which turns.py calls for every event);
- a tool run (`POST /v1/tools/{name}/run`): the caller's identity
  (`seal_result`);
- the transcript: a `tool_result` record keeps its visual blocks in
  `meta.visual` (so a session opened again shows its tables and charts);
  a read seals them for the session's owner (`seal_records`).

Sealing writes a row to SQLite, so it runs on a worker thread, and only
when a block actually carries a continuation (most events carry none). The
store is opened at its first use (`Continuations`), so a server whose
message store cannot be opened still starts, and says why on the request
that needs it (a logged 500 with a request id, failures.py).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from pathlib import Path

from agentkernel.server.continuations import ContinuationStore, seal_visual
from agentkernel.server.events import StreamEvent
from agentkernel.server.sessions import SessionInfo
from agentkernel.types import JSONObject, JSONValue


@dataclass
class Continuations:
    """The server's continuation store, opened at first use (from a worker thread: it is file I/O)."""

    path: Path
    ttl_secs: float
    _store: ContinuationStore | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def store(self) -> ContinuationStore:
        with self._lock:
            if self._store is None:
                self._store = ContinuationStore(self.path, ttl_secs=self.ttl_secs)
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def has_continuation(visual: JSONValue) -> bool:
    """True when some table block in `visual` carries a `continuation` (to seal, or to drop)."""
    return isinstance(visual, list) and any(
        isinstance(block, dict) and block.get("type") == "table" and "continuation" in block
        for block in visual
    )


async def seal_result(
    continuations: Continuations,
    result: JSONObject,
    *,
    owner: str,
    tool: str,
    session_id: str | None,
    pid: str | None,
    template: str | None,
) -> JSONObject:
    """A tool result's JSON (`ToolResult.to_json()` shape) with its tables sealed for `owner`."""
    visual = result.get("visual")
    if not has_continuation(visual):
        return result
    assert isinstance(visual, list)
    blocks = [block for block in visual if isinstance(block, dict)]

    def seal() -> list[JSONValue]:
        store = continuations.store()
        return list(
            seal_visual(
                blocks, store, owner=owner, tool=tool, session_id=session_id, pid=pid, template=template
            )
        )

    return {**result, "visual": await asyncio.to_thread(seal)}


def seal_records(
    continuations: Continuations, records: list[JSONObject], session: SessionInfo
) -> list[JSONObject]:
    """Transcript records (`Record.to_json()` shape) with their tool results' tables sealed for the owner.

    Blocking (SQLite): call it from a worker thread. Each read seals afresh,
    so every id a reader gets is live for the whole TTL.
    """
    sealed = []
    for record in records:
        meta = record.get("meta")
        visual = meta.get("visual") if isinstance(meta, dict) else None
        tool = meta.get("tool") if isinstance(meta, dict) else None
        if record.get("kind") != "tool_result" or not has_continuation(visual) or not isinstance(tool, str):
            sealed.append(record)
            continue
        assert isinstance(meta, dict) and isinstance(visual, list)
        blocks = [block for block in visual if isinstance(block, dict)]
        shown = seal_visual(
            blocks,
            continuations.store(),
            owner=session.user_id,
            tool=tool,
            session_id=session.id,
            pid=None,
            template=session.template,
        )
        sealed.append({**record, "meta": {**meta, "visual": list(shown)}})
    return sealed


@dataclass(frozen=True)
class TurnSealer:
    """Seals the tables of a streamed turn's `tool_result` events, as the session's owner."""

    continuations: Continuations

    async def __call__(self, session: SessionInfo, event: StreamEvent) -> StreamEvent:
        tool = event.data.get("tool")
        if event.type != "tool_result" or not isinstance(tool, str):
            return event
        data = await seal_result(
            self.continuations,
            event.data,
            owner=session.user_id,
            tool=tool,
            session_id=session.id,
            pid=None,  # the loop's events do not carry it; the rerun gets a pid of its own
            template=session.template,
        )
        return event if data is event.data else StreamEvent(event.type, data)


__all__ = ["Continuations", "TurnSealer", "has_continuation", "seal_records", "seal_result"]
