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

Decisions (the rules every sealed id follows, its randomness, its SHA-256
kept instead of it, one 404 for unknown, expired and another user's, the
expiry, are sealed_ids.py's):

- **Rights are the owner's**: the record keeps the template of the process
  that made the table, and the rerun gets that template's tool list, so a
  script's `call_tool` can do on page 2 exactly what it could on page 1. A
  template that no longer loads ends the continuation (None): it cannot run
  with the rights it was given.
- **Beside the transcript**: the table lives in the message store's SQLite
  file (kernel.yaml's `logging.messages_db_path`), versioned in its own
  `continuations_schema` table. One connection per store, its lock
  serialising threads (services/sqlite_db.py).
- **What else the page holds**: a rerun's result may carry blocks that must
  be sealed too (a `file` block's path, downloads.py); the caller passes
  that step as `seal_more`, so this module knows tables only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from agentkernel.errors import ConfigError
from agentkernel.identity import Caller
from agentkernel.kernel import Kernel
from agentkernel.server.sealed_ids import (
    DEFAULT_TTL_SECS,
    SealedIdStore,
    SealedMethods,
    SealedTable,
    sealed_schema,
)
from agentkernel.tools.results import ToolResult
from agentkernel.types import JSONObject, VisualBlock

_COLUMNS = (
    "session_id TEXT",
    "pid TEXT",
    "template TEXT",
    "tool TEXT NOT NULL",
    "args TEXT NOT NULL",  # a JSON object
)
_FIELDS = tuple(column.split()[0] for column in _COLUMNS)


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


# what else a rerun's blocks need before they leave (sealing.py: files), run on the same worker thread
SealMore = Callable[["ToolResult", Continuation], "ToolResult"]
# how a rerun's tool runs (the server's: as a budgeted process of its own, tool_runs.py): (tool, args,
# caller, origin), the origin `continuation`, as its hooks see it (S24.1)
RunTool = Callable[[str, JSONObject, "Caller", str], Awaitable["ToolResult"]]


class ContinuationRows(Protocol):
    """Where continuations are kept: an SQLite file (`ContinuationStore`) or the store database
    (sealed_ids_pg.py, kernel.yaml `store.url`)."""

    ttl_secs: float

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
    ) -> str: ...

    def get(self, continuation_id: object, owner: str, now: float | None = None) -> Continuation | None: ...

    def purge(self, now: float | None = None) -> int: ...

    def count(self) -> int: ...

    def close(self) -> None: ...


class ContinuationMethods(SealedMethods):
    """`put` and `get` of a continuation, for both databases (the rules are sealed_ids.py's)."""

    table = "continuations"
    what = "continuation"
    columns = _COLUMNS

    def put(
        self: SealedTable,
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
        row = dict(zip(_FIELDS, (session_id, pid, template, tool, args_text), strict=True))
        return self._insert(owner, row, now)

    def get(
        self: SealedTable, continuation_id: object, owner: str, now: float | None = None
    ) -> Continuation | None:
        """The continuation `continuation_id` of `owner`; None when unknown, expired or another user's."""
        found = self._lookup(continuation_id, owner, _FIELDS, now)
        if found is None:
            return None
        session_id, pid, template, tool, args_text, created_at = found
        return Continuation(owner, session_id, pid, template, tool, json.loads(args_text), created_at)


class ContinuationStore(ContinuationMethods, SealedIdStore):
    """Continuations in an SQLite file, safe across threads and processes; see the module docstring."""

    schema = sealed_schema(ContinuationMethods.table, ContinuationMethods.what, _COLUMNS)


def seal_visual(
    visual: Sequence[VisualBlock] | None,
    store: ContinuationRows,
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
    kernel: Kernel,
    store: ContinuationRows,
    continuation_id: object,
    user_id: str,
    seal_more: SealMore | None = None,
) -> ToolResult | None:
    """The next page: the stored tool call run as its owner, its tables sealed anew; None means 404.

    None when the id is unknown, expired or not `user_id`'s (`get`), or
    when the template it ran under no longer loads. Otherwise the tool's
    ToolResult, whatever it is (a failure included): the endpoint answers
    with its `visual`, and may pass on `error` and `warnings`. `seal_more`
    then seals what else its blocks hold (see the module docstring).
    """
    found = store.get(continuation_id, user_id)
    caller = None if found is None else _owner_caller(kernel, found)
    if found is None or caller is None:
        return None
    return _sealed(kernel.run_tool(found.tool, found.args, caller, "continuation"), store, found, seal_more)


async def arun_continuation(
    kernel: Kernel,
    store: ContinuationRows,
    continuation_id: object,
    user_id: str,
    seal_more: SealMore | None = None,
    run: RunTool | None = None,
) -> ToolResult | None:
    """`run_continuation` from an event loop: SQLite and the script run on worker threads.

    `run` runs the tool (`kernel.arun_tool` when None): the server's gives
    the rerun a process and a budget of its own (tool_runs.py).
    """
    found = await asyncio.to_thread(store.get, continuation_id, user_id)
    caller = None if found is None else await asyncio.to_thread(_owner_caller, kernel, found)
    if found is None or caller is None:
        return None
    result = await (run or kernel.arun_tool)(found.tool, found.args, caller, "continuation")
    return await asyncio.to_thread(_sealed, result, store, found, seal_more)


def _owner_caller(kernel: Kernel, found: Continuation) -> Caller | None:
    """The identity and rights the table was made with; None when its template no longer loads."""
    spec = None
    if found.template is not None:
        try:
            spec = kernel.template(found.template)
        except ConfigError:
            return None
    return kernel.caller(user_id=found.owner, session_id=found.session_id, pid=found.pid, spec=spec)


def _sealed(
    result: ToolResult, store: ContinuationRows, found: Continuation, seal_more: SealMore | None
) -> ToolResult:
    visual = seal_visual(
        result.visual,
        store,
        owner=found.owner,
        tool=found.tool,
        session_id=found.session_id,
        pid=found.pid,
        template=found.template,
    )
    sealed = replace(result, visual=visual)
    return sealed if seal_more is None else seal_more(sealed, found)


__all__ = [
    "DEFAULT_TTL_SECS",
    "Continuation",
    "ContinuationMethods",
    "ContinuationRows",
    "ContinuationStore",
    "RunTool",
    "SealMore",
    "arun_continuation",
    "run_continuation",
    "seal_visual",
]
