"""Continuations (S6.3): a table's "next page" kept on the server, handed to the client as an opaque id.

A table block may carry `continuation: {args: {…}}`, the arguments that ask
its tool for the next page. Those arguments came from a script, and the
kernel never takes a tool name or arguments from a client (S6.3's decision),
so they never leave the server: wherever a block leaves the kernel (a
stream, a tool run, a transcript read) `seal_visual` stores `{owner user,
session, pid, template, tool, args}` and the block carries `continuation:
{id}` instead. `POST /v1/continuations {id}` then runs that tool through the
one dispatch path with the owner's identity and rights (`run_continuation`),
and the new page's tables are sealed the same way.

Decisions:

- **The id is a capability**: 192 random bits (`secrets.token_urlsafe`),
  never derived from the args, so it says nothing and cannot be guessed. The
  file keeps only its SHA-256, as the server keeps its tokens' (issue 11
  section 3): a copy of the file is no key to anyone's pages.
- **One answer for unknown, expired and another user's ids**: `get` returns
  None for all three, so the endpoint answers 404 alike and an id reveals
  nothing about whether it exists for someone else.
- **Rights are the owner's**: the record keeps the template of the process
  that made the table, and the rerun gets that template's tool list, so a
  script's `call_tool` can do on page 2 exactly what it could on page 1. A
  template that no longer loads ends the continuation (None): it cannot run
  with the rights it was given.
- **Beside the transcript**: the table lives in the message store's SQLite
  file (kernel.yaml's `logging.messages_db_path`), versioned in its own
  `continuations_schema` table, so it survives a restart, and the checks
  that keep scripts away from the transcript (config/stores.py) keep them
  away from it too. One connection per store, its lock serialising threads
  (services/sqlite_db.py).
- **Expiry**: a continuation lives `ttl_secs` from its creation; expired
  rows answer None at once and are deleted by the next `put` (an indexed
  range delete, nothing to do most of the time) or by `purge`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agentkernel.errors import AgentKernelError, ConfigError
from agentkernel.services.sqlite_db import Schema, SqliteStore
from agentkernel.types import JSONObject, VisualBlock

if TYPE_CHECKING:
    from agentkernel.kernel import Kernel
    from agentkernel.process import Caller
    from agentkernel.tools.results import ToolResult

DEFAULT_TTL_SECS = 24 * 3600.0
BUSY_TIMEOUT_SECS = 5.0
ID_BYTES = 24  # 192 bits; token_urlsafe makes 32 characters of [A-Za-z0-9_-]
MAX_ID_CHARS = 100  # anything longer is no id of ours: refused before hashing

_SCHEMA = Schema(
    version=1,
    upgrades={
        1: (
            "CREATE TABLE continuations ("
            " key TEXT PRIMARY KEY,"  # SHA-256 of the id, hex
            " owner TEXT NOT NULL,"
            " session_id TEXT,"
            " pid TEXT,"
            " template TEXT,"
            " tool TEXT NOT NULL,"
            " args TEXT NOT NULL,"  # a JSON object
            " created_at REAL NOT NULL"  # seconds since the epoch
            ") WITHOUT ROWID",
            "CREATE INDEX continuations_created ON continuations (created_at)",
        )
    },
    too_new=lambda found: AgentKernelError(
        f"continuation store schema version {found} is newer than this kernel's"
    ),
    version_table="continuations_schema",  # the file is the message store's, which uses user_version
)

_FIELDS = "owner, session_id, pid, template, tool, args, created_at"


@dataclass(frozen=True)
class Continuation:
    """One stored "next page": who may ask for it, and the tool call that answers."""

    owner: str  # the user id
    session_id: str | None
    pid: str | None
    template: str | None  # whose tool list bounds the rerun; None: the caller had no list
    tool: str
    args: JSONObject
    created_at: float


class ContinuationStore(SqliteStore):
    """Continuations in an SQLite file, safe across threads and processes; see the module docstring."""

    def __init__(
        self,
        path: Path | str,
        *,
        ttl_secs: float = DEFAULT_TTL_SECS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not ttl_secs > 0:
            raise ValueError(f"continuation ttl_secs must be positive, got {ttl_secs!r}")
        super().__init__(path, _SCHEMA, BUSY_TIMEOUT_SECS)
        self.ttl_secs = ttl_secs
        self._clock = clock

    def put(
        self,
        *,
        owner: str,
        tool: str,
        args: JSONObject,
        session_id: str | None = None,
        pid: str | None = None,
        template: str | None = None,
        now: float | None = None,
    ) -> str:
        """Keep a continuation; its new opaque id. Expired ones are deleted in the same transaction.

        ValueError names what is wrong when `args` is not a JSON object or
        `owner`/`tool` are empty.
        """
        if not isinstance(args, dict):
            raise ValueError(f"continuation args must be a JSON object, got {type(args).__name__}")
        for name, value in (("owner", owner), ("tool", tool)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"continuation {name} must be a non-empty string, got {value!r}")
        try:
            args_text = json.dumps(args, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"continuation args for tool {tool!r} are not plain JSON: {exc}") from exc
        at = self._clock() if now is None else now
        new_id = secrets.token_urlsafe(ID_BYTES)
        with self._write() as conn:
            self._delete_expired(conn, at)
            conn.execute(
                f"INSERT INTO continuations (key, {_FIELDS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (_key(new_id), owner, session_id, pid, template, tool, args_text, at),
            )
        return new_id

    def get(self, continuation_id: object, owner: str, now: float | None = None) -> Continuation | None:
        """The continuation `continuation_id` of `owner`; None when unknown, expired or another user's."""
        if not isinstance(continuation_id, str) or not 0 < len(continuation_id) <= MAX_ID_CHARS:
            return None
        rows = self._read(f"SELECT {_FIELDS} FROM continuations WHERE key = ?", (_key(continuation_id),))
        if not rows or rows[0][0] != owner:
            return None
        owner_id, session_id, pid, template, tool, args_text, created_at = rows[0]
        found = Continuation(owner_id, session_id, pid, template, tool, json.loads(args_text), created_at)
        at = self._clock() if now is None else now
        return found if found.created_at > at - self.ttl_secs else None

    def purge(self, now: float | None = None) -> int:
        """Delete the expired continuations; how many."""
        at = self._clock() if now is None else now
        with self._write() as conn:
            return self._delete_expired(conn, at)

    def _delete_expired(self, conn: sqlite3.Connection, now: float) -> int:
        return conn.execute(
            "DELETE FROM continuations WHERE created_at <= ?", (now - self.ttl_secs,)
        ).rowcount

    def count(self) -> int:
        """How many rows the file holds, expired ones included (for tests and the benchmark)."""
        return int(self._read("SELECT count(*) FROM continuations", ())[0][0])


def _key(continuation_id: str) -> str:
    return hashlib.sha256(continuation_id.encode("utf-8")).hexdigest()


def seal_visual(
    visual: Sequence[VisualBlock] | None,
    store: ContinuationStore,
    *,
    owner: str,
    tool: str,
    session_id: str | None = None,
    pid: str | None = None,
    template: str | None = None,
) -> list[VisualBlock]:
    """A copy of `visual` fit to leave the kernel: each table's `continuation: {args}` becomes `{id}`.

    The args are kept in `store` for `owner` (with the session, pid and
    template the call ran under) and never appear in the copy. A table whose
    `continuation` has no object `args` loses it (nothing to page with, and
    nothing of it may leak); every other block is passed on as it is. Blocks
    are copied one level deep: the caller's list and blocks are not changed.
    """
    sealed: list[VisualBlock] = []
    for block in visual or ():
        if block.get("type") != "table" or "continuation" not in block:
            sealed.append(block)
            continue
        copy = {k: v for k, v in block.items() if k != "continuation"}
        continuation = block["continuation"]
        args = continuation.get("args") if isinstance(continuation, dict) else None
        if isinstance(args, dict):
            new_id = store.put(
                owner=owner, tool=tool, args=args, session_id=session_id, pid=pid, template=template
            )
            copy["continuation"] = {"id": new_id}
        sealed.append(copy)
    return sealed


def run_continuation(
    kernel: Kernel, store: ContinuationStore, continuation_id: object, user_id: str
) -> ToolResult | None:
    """The next page: the stored tool call run as its owner, its tables sealed anew; None means 404.

    None when the id is unknown, expired or not `user_id`'s (`get`), or
    when the template it ran under no longer loads. Otherwise the tool's
    ToolResult, whatever it is (a failure included): the endpoint answers
    with its `visual`, and may pass on `error` and `warnings`.
    """
    found = store.get(continuation_id, user_id)
    caller = None if found is None else _owner_caller(kernel, found)
    if found is None or caller is None:
        return None
    return _sealed(kernel.run_tool(found.tool, found.args, caller), store, found)


async def arun_continuation(
    kernel: Kernel, store: ContinuationStore, continuation_id: object, user_id: str
) -> ToolResult | None:
    """`run_continuation` from an event loop: SQLite and the script run on worker threads."""
    found = await asyncio.to_thread(store.get, continuation_id, user_id)
    caller = None if found is None else await asyncio.to_thread(_owner_caller, kernel, found)
    if found is None or caller is None:
        return None
    result = await kernel.arun_tool(found.tool, found.args, caller)
    return await asyncio.to_thread(_sealed, result, store, found)


def _owner_caller(kernel: Kernel, found: Continuation) -> Caller | None:
    """The identity and rights the table was made with; None when its template no longer loads."""
    allowed = None
    if found.template is not None:
        try:
            allowed = frozenset(kernel.template(found.template).tools)
        except ConfigError:
            return None
    return kernel.caller(
        user_id=found.owner,
        session_id=found.session_id,
        pid=found.pid,
        template=found.template,
        allowed_tools=allowed,
    )


def _sealed(result: ToolResult, store: ContinuationStore, found: Continuation) -> ToolResult:
    visual = seal_visual(
        result.visual,
        store,
        owner=found.owner,
        tool=found.tool,
        session_id=found.session_id,
        pid=found.pid,
        template=found.template,
    )
    return replace(result, visual=visual)


__all__ = [
    "DEFAULT_TTL_SECS",
    "Continuation",
    "ContinuationStore",
    "arun_continuation",
    "run_continuation",
    "seal_visual",
]
