"""Where visual blocks leave the server, what a script wrote for the server alone is sealed (S6.2, S6.3).

Two things in a block are the server's business, never a client's: a
table's `continuation.args` (continuations.py keeps them and runs them) and
a file's `path` (downloads.py keeps it and serves the file). Each becomes
an opaque id where the block leaves. This is the one place that knows the
exits and who owns what leaves by each:

- a streamed turn's `tool_result` event: the session's owner, the session
  and its template (`TurnSealer`, which turns.py calls for every event;
  the OpenAI-compatible endpoint's turns pass there too);
- a tool run (`POST /v1/tools/{name}/run`): the caller's identity
  (`seal_result`);
- a table's next page (`POST /v1/continuations`): the table's owner and
  session (`Sealing.seal_page`, run after continuations.py sealed the
  page's tables);
- the transcript: a `tool_result` record keeps its visual blocks in
  `meta.visual` (so a session opened again shows its tables, charts and
  files); a read seals them for the session's owner (`seal_records`), anew
  each time, so every id a reader gets is live for the whole TTL.

Sealing writes rows to SQLite and checks files, so it runs on a worker
thread, and only when a block needs it (most events carry none). A file
that may not be offered is not sealed: the block loses its path, with a
warning in the result's `warnings` (downloads.py). The stores are opened
at their first use (`LazyStore`), so a server whose message store cannot be
opened still starts, and says why on the request that needs it (a logged
500 with a request id, failures.py).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from agentkernel.identity import session_folder_name
from agentkernel.kernel import Kernel
from agentkernel.ports import Record
from agentkernel.server.continuations import Continuation, ContinuationRows, ContinuationStore, seal_visual
from agentkernel.server.downloads import DownloadRows, DownloadStore, has_file_block, seal_files
from agentkernel.server.events import StreamEvent, record_event
from agentkernel.server.sessions import SessionInfo
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONObject, JSONValue, VisualBlock

S = TypeVar("S", bound="Closable")
# (owner, session id) → that session's scratch folder (the one its tools write to), None without one
Scratch = Callable[[str, str], "Path | None"]


class Closable(Protocol):
    """A store: whatever it is, it closes."""

    def close(self) -> None: ...


class LazyStore(Generic[S]):
    """A store opened at its first use (from a worker thread: it is file I/O), closed once."""

    def __init__(self, opener: Callable[[], S]) -> None:
        self._opener = opener
        self._store: S | None = None
        self._lock = threading.Lock()

    def store(self) -> S:
        with self._lock:
            if self._store is None:
                self._store = self._opener()
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


class Continuations(LazyStore[ContinuationRows]):
    """The server's continuation store (continuations.py), opened by `opener`."""

    def __init__(self, opener: Callable[[], ContinuationRows], ttl_secs: float) -> None:
        super().__init__(opener)
        self.ttl_secs = ttl_secs


class Downloads(LazyStore[DownloadRows]):
    """The server's download store (downloads.py), opened by `opener`, and where each session's scratch
    folder is."""

    def __init__(self, opener: Callable[[], DownloadRows], ttl_secs: float, scratch: Scratch) -> None:
        super().__init__(opener)
        self.ttl_secs, self.scratch = ttl_secs, scratch

    def seal(
        self, visual: list[VisualBlock], *, owner: str, session_id: str | None
    ) -> tuple[list[VisualBlock], list[str]]:
        """`seal_files` for what `owner` made in `session_id` (on a worker thread)."""
        folder = self.scratch(owner, session_id) if session_id else None
        return seal_files(visual, self.store(), owner=owner, session_id=session_id, folder=folder)


def session_scratch(kernel: Kernel) -> Scratch:
    """The scratch folder the kernel gives a session's callers (S14.2), found without making it.

    The same folder `Kernel.caller` hands a tool (process.session_temp_dir),
    but neither created nor touched: a transcript read of a session whose
    folder was cleaned up must not bring it back, nor keep it alive.
    """

    def folder(owner: str, session_id: str) -> Path | None:
        return kernel.config.temp_root.resolve() / session_folder_name(owner, session_id)

    return folder


@dataclass(frozen=True)
class Sealing:
    """Both stores: what every exit needs."""

    continuations: Continuations
    downloads: Downloads

    @classmethod
    def for_kernel(cls, kernel: Kernel, ttl_secs: float) -> Sealing:
        """Beside the transcript, in the message store's file (continuations.py says why); in the store
        database with kernel.yaml `store.url` (S27.2), so what one replica sealed any other opens."""
        scratch = session_scratch(kernel)
        if kernel.config.store.url is not None:
            from agentkernel.server.sealed_ids_pg import (  # psycopg: only with a store.url
                PostgresContinuationStore,
                PostgresDownloadStore,
            )

            return cls(
                Continuations(
                    lambda: PostgresContinuationStore(kernel.store_pool(), ttl_secs=ttl_secs), ttl_secs
                ),
                Downloads(
                    lambda: PostgresDownloadStore(kernel.store_pool(), ttl_secs=ttl_secs), ttl_secs, scratch
                ),
            )
        path = kernel.config.messages_db
        return cls(
            Continuations(lambda: ContinuationStore(path, ttl_secs=ttl_secs), ttl_secs),
            Downloads(lambda: DownloadStore(path, ttl_secs=ttl_secs), ttl_secs, scratch),
        )

    def close(self) -> None:
        self.continuations.close()
        self.downloads.close()

    def seal_page(self, result: ToolResult, found: Continuation) -> ToolResult:
        """A continuation's page, its tables sealed already: its files too, as the table's owner."""
        if not has_file_block(result.visual):
            return result
        visual, warnings = self.downloads.seal(result.visual, owner=found.owner, session_id=found.session_id)
        return replace(result, visual=visual, warnings=[*result.warnings, *warnings])


def has_continuation(visual: JSONValue | Sequence[VisualBlock]) -> bool:
    """True when some table block in `visual` carries a `continuation` (to seal, or to drop)."""
    return isinstance(visual, list) and any(
        isinstance(block, dict) and block.get("type") == "table" and "continuation" in block
        for block in visual
    )


def seal_blocks(
    sealing: Sealing,
    blocks: list[VisualBlock],
    *,
    owner: str,
    tool: str,
    session_id: str | None,
    pid: str | None,
    template: str | None,
) -> tuple[list[VisualBlock], list[str]]:
    """`blocks` with their tables and files sealed for `owner`, and the warnings (blocking: SQLite, files)."""
    sealed = blocks
    if has_continuation(blocks):
        store = sealing.continuations.store()
        sealed = seal_visual(
            sealed, store, owner=owner, tool=tool, session_id=session_id, pid=pid, template=template
        )
    if not has_file_block(sealed):
        return sealed, []
    return sealing.downloads.seal(sealed, owner=owner, session_id=session_id)


async def seal_result(
    sealing: Sealing,
    result: JSONObject,
    *,
    owner: str,
    tool: str,
    session_id: str | None,
    pid: str | None,
    template: str | None,
) -> JSONObject:
    """A tool result's JSON (`ToolResult.to_json()` shape) with its tables and files sealed for `owner`."""
    visual = result.get("visual")
    if not has_continuation(visual) and not has_file_block(visual):
        return result
    assert isinstance(visual, list)
    blocks = [block for block in visual if isinstance(block, dict)]
    seal = functools.partial(
        seal_blocks,
        sealing,
        blocks,
        owner=owner,
        tool=tool,
        session_id=session_id,
        pid=pid,
        template=template,
    )
    sealed, warnings = await asyncio.to_thread(seal)
    shown: JSONObject = {**result, "visual": list[JSONValue](sealed) if sealed else None}
    if warnings:
        before = result.get("warnings")
        shown["warnings"] = [*(before if isinstance(before, list) else []), *warnings]
    return shown


def seal_records(sealing: Sealing, records: list[JSONObject], session: SessionInfo) -> list[JSONObject]:
    """Transcript records (`Record.to_json()` shape) with their tool results' blocks sealed for the owner.

    Blocking (SQLite, files): call it from a worker thread. A file that can
    no longer be offered (its scratch folder cleaned up, say) is dropped
    from the record's `meta.visual`, and the warning saying so is in its
    `meta.visual_warnings`.
    """
    sealed = []
    for record in records:
        meta = record.get("meta")
        visual = meta.get("visual") if isinstance(meta, dict) else None
        tool = meta.get("tool") if isinstance(meta, dict) else None
        needs = has_continuation(visual) or has_file_block(visual)
        if record.get("kind") != "tool_result" or not needs or not isinstance(tool, str):
            sealed.append(record)
            continue
        assert isinstance(meta, dict) and isinstance(visual, list)
        blocks = [block for block in visual if isinstance(block, dict)]
        shown, warnings = seal_blocks(
            sealing,
            blocks,
            owner=session.user_id,
            tool=tool,
            session_id=session.id,
            pid=None,
            template=session.template,
        )
        new_meta: JSONObject = {**meta, "visual": list[JSONValue](shown)}
        if warnings:
            new_meta["visual_warnings"] = list[JSONValue](warnings)
        sealed.append({**record, "meta": new_meta})
    return sealed


def sealed_events(sealing: Sealing, records: list[Record], info: SessionInfo) -> list[StreamEvent]:
    """The events `records` were shown as (events.py `record_event`), their tool results' tables and
    files sealed for the session's owner as a live stream's are (blocking: SQLite, files)."""
    sealed = seal_records(sealing, [r.to_json() for r in records], info)
    events = []
    for record, shown in zip(records, sealed, strict=True):
        event = record_event(record)
        if event is None:
            continue
        if event.type == "tool_result":
            meta = shown.get("meta")
            visual = meta.get("visual") if isinstance(meta, dict) else None
            event = StreamEvent(event.type, {**event.data, "visual": visual}, event.id)
        events.append(event)
    return events


@dataclass(frozen=True)
class TurnSealer:
    """Seals the blocks of a streamed turn's `tool_result` events, as the session's owner."""

    sealing: Sealing

    async def __call__(self, session: SessionInfo, event: StreamEvent) -> StreamEvent:
        tool = event.data.get("tool")
        if event.type != "tool_result" or not isinstance(tool, str):
            return event
        data = await seal_result(
            self.sealing,
            event.data,
            owner=session.user_id,
            tool=tool,
            session_id=session.id,
            pid=None,  # the loop's events do not carry it; the rerun gets a pid of its own
            template=session.template,
        )
        return event if data is event.data else replace(event, data=data)


__all__ = [
    "Closable",
    "Continuations",
    "Downloads",
    "LazyStore",
    "Sealing",
    "TurnSealer",
    "has_continuation",
    "seal_blocks",
    "seal_records",
    "seal_result",
    "session_scratch",
]
