"""The transcript helpers (S18): `memory_history`, `memory_search`, `memory_count`.

A script reads its own session's transcript, never another's: the session
and the user come from the `Caller` the kernel built, never from script input
(DESIGN rule 3), and the store returns only the records written for that user
in that session (`Owner`), so user B who names user A's session id (the
command line lets a person choose both) reads B's records, not A's. The
helpers only read: scripts never write the transcript (the kernel and its
hooks do).

What one call returns is bounded, whatever the session holds: at most
`MAX_RECORDS` records (a larger `n` or `k` is capped, not refused, as
`llm`'s `max_tokens` is) and at most `MAX_RESULT_BYTES` of content and meta
(the newest, or the best, records that fit). A search ranks the latest
`SEARCH_WINDOW` records that hold a word of the query, not every one: bm25
costs about a microsecond per matching record, and a common word may match
most of a 100,000-record session (benchmarks/memory_search.py); a word in
fewer records than that is ranked over all of them. The store is the live service
`messages`; without it, or without a session, each call throws the manual's
`memory: no message store…` / `memory: no session id…`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from agentkernel.errors import HelperError
from agentkernel.helpers.table import HelperTable, ScriptCall
from agentkernel.ports import MESSAGES, MessageStore, Owner, Record
from agentkernel.services.sqlite_db import StoreBusy
from agentkernel.types import JSONValue
from agentkernel.util.short_text import shown_value

MAX_RECORDS = 1000
"""The most records one call returns: a larger `n` or `k` reads this many."""
MAX_RESULT_BYTES = 8 * 1024 * 1024
"""The most content and meta (UTF-8) one call returns; records past it are left out."""
MAX_QUERY_CHARS = 4096
SEARCH_WINDOW = 1000
"""`memory_search` ranks the latest this many records holding a word of the query (a bounded cost)."""
DEFAULT_K = 10

NO_SESSION = (
    "memory: no session id ({helper} reads the caller's own session, and this call runs outside "
    "any; `agentkernel tool run --session ID` gives it one)"
)


def _open(helper: str, call: ScriptCall) -> tuple[MessageStore, str, Owner]:
    """The store, the caller's session and the caller's `Owner`; the missing store is reported first."""
    store = call.caller.services.require(MESSAGES, "memory")
    session = call.caller.session_id
    if not session:
        raise HelperError(NO_SESSION.format(helper=helper))
    return store, session, Owner(call.caller.user_id)


def _count_arg(helper: str, name: str, value: JSONValue) -> int:
    """A count from 0 up, capped at MAX_RECORDS; a whole float (a JS number like 5.0) counts as one."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise HelperError(f"{helper}: {name} must be an integer of 0 or more, got {shown_value(value)}")
    return min(value, MAX_RECORDS)


def _query(value: JSONValue) -> str:
    """Search text with at least one word (letters or digits), at most MAX_QUERY_CHARS long."""
    if not isinstance(value, str):
        raise HelperError(f"memory_search: query must be a string, got {shown_value(value)}")
    if len(value) > MAX_QUERY_CHARS:
        raise HelperError(
            f"memory_search: query is {len(value):,} characters long, over the limit of {MAX_QUERY_CHARS:,}"
        )
    if not any(char.isalnum() for char in value):
        raise HelperError(f"memory_search: query must hold at least one word, got {shown_value(value)}")
    return value


def _records(records: list[Record]) -> JSONValue:
    return [record.to_json() for record in records]


@contextmanager
def _within_time(helper: str, call: ScriptCall) -> Iterator[float | None]:
    """The seconds the call has left, to bound the wait for the store; its being busy past them, named."""
    try:
        yield call.remaining_secs()
    except StoreBusy:
        raise HelperError(f"{helper}: the transcript store was busy past the script's time limit") from None


def memory_history(call: ScriptCall, n: JSONValue) -> JSONValue:
    """The last `n` records of the caller's session, oldest first."""
    count = _count_arg("memory_history", "n", n)
    store, session, owner = _open("memory_history", call)
    with _within_time("memory_history", call) as left:
        found = store.history(session, count, owner=owner, max_bytes=MAX_RESULT_BYTES, timeout=left)
    return _records(found)


def memory_search(call: ScriptCall, query: JSONValue, k: JSONValue = DEFAULT_K) -> JSONValue:
    """Up to `k` records of the caller's session matching the words of `query`, best first, `score` set."""
    text = _query(query)
    count = _count_arg("memory_search", "k", k)
    store, session, owner = _open("memory_search", call)
    with _within_time("memory_search", call) as left:
        found = store.search(
            session, text, count, owner=owner, max_bytes=MAX_RESULT_BYTES, window=SEARCH_WINDOW, timeout=left
        )
    return _records(found)


def memory_count(call: ScriptCall) -> JSONValue:
    """How many records the caller's session has."""
    store, session, owner = _open("memory_count", call)
    with _within_time("memory_count", call) as left:
        return store.count(session, owner=owner, timeout=left)


HELPERS: dict[str, Callable[..., JSONValue]] = {
    "memory_history": memory_history,
    "memory_search": memory_search,
    "memory_count": memory_count,
}


def register(table: HelperTable) -> None:
    """Add the three transcript helpers of S18 to `table`."""
    for name, function in HELPERS.items():
        table.register(name, function)


__all__ = [
    "DEFAULT_K",
    "HELPERS",
    "MAX_QUERY_CHARS",
    "MAX_RECORDS",
    "MAX_RESULT_BYTES",
    "SEARCH_WINDOW",
    "register",
]
