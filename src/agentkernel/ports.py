"""The ports: what the layers below the kernel know of the services they reach, as Protocols and keys.

A helper, a hook or a python_tool reaches a service through the caller's
`Services` by the service's key (`call.caller.services.require(STATE,
"state_get")`), typed by its port: the Protocol here, never the class that
implements it. So nothing below the kernel names a class of a layer above it
(the dispatcher, the agent loop, sub-agents, cron), and an embedded store
can be replaced behind the same port (a shared state store, a Postgres
transcript). The values a port takes travel with it: `Namespace`, `Owner`,
`Record`, `SubagentRequest`.

Adding a service is one key here (its port, its "no … attached" text) and one
factory in the kernel's assembly (assembly.py `SERVICES`); docs/architecture.md
shows it step by step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol, runtime_checkable

from agentkernel.bundle import ServiceKey
from agentkernel.config import CallBudget, DuckSettings, FilesSettings, ShellSettings
from agentkernel.identity import Caller
from agentkernel.types import JSONObject, JSONValue

if TYPE_CHECKING:  # the LLM's values, dates: imported by the code that makes them, not by every port user
    from datetime import date, datetime

    from agentkernel.llm.base import Completion, CompletionRequest

Params = list[JSONValue] | dict[str, JSONValue] | None
"""A DuckDB statement's parameters: `?`/`$1` values, or `$name` ones."""


class ScriptResult(Protocol):
    """What a tool call or a sub-agent gave, as a script receives it (S16.1, S17)."""

    def for_script(self) -> JSONObject: ...


# -- the engine room's own services: they reach the kernel itself (live) ----------------------


class ToolCalls(Protocol):
    """`call_tool` and `list_tools` (S16): the one dispatch path, one call deeper."""

    def call(self, name: str, args: JSONValue, caller: Caller, budget: CallBudget | None) -> ScriptResult: ...

    def visible(self, caller: Caller) -> list[JSONObject]: ...


class ToolResults(Protocol):
    """`get_tool_result` (S16.4): a result a tool already gave in the caller's session; 0 is the latest."""

    def get(self, caller: Caller, tool: str, index: int = 0) -> ScriptResult | None: ...


@dataclass(frozen=True)
class SubagentRequest:
    """`run_subagent`'s argument, checked for shape by the helper (helpers/delegation.py)."""

    task: str
    template: str | None = None
    instructions: str | None = None
    name: str | None = None
    tools: tuple[str, ...] | None = None
    output_schema: JSONObject | None = None


class Subagents(Protocol):
    """`run_subagent` (S17): a child agent run once on a task and ended; waited for until `deadline`."""

    def run(self, caller: Caller, request: SubagentRequest, deadline: float | None) -> ScriptResult: ...


class CronJobs(Protocol):
    """`schedule_cron`, `cancel_cron`, `list_cron` (S10): the caller's user's jobs."""

    def schedule(self, caller: Caller, options: JSONValue) -> JSONObject: ...

    def cancel(self, caller: Caller, name: JSONValue) -> bool: ...

    def list(self, caller: Caller) -> list[JSONObject]: ...


class Inference(Protocol):
    """`llm()` and `llm_json()` (S9): the kernel's LLM, called from a script's worker thread."""

    def complete(self, request: CompletionRequest, timeout: float | None) -> Completion:
        """The answer; TimeoutError (the request cancelled) after `timeout` seconds."""
        ...


# -- the transcript (S18) ------------------------------------------------------------------------


class Entry(NamedTuple):
    """One record to write: who said it (`role`), what it is (`kind`), its text and its meta."""

    role: str
    kind: str
    content: str
    meta: dict[str, Any] | None = None


@dataclass(frozen=True)
class Record:
    """One event of a session's transcript, as the transcript helpers return it (S18).

    `score` is the search relevance (higher is better) and None outside `search`.
    """

    id: int
    role: str
    kind: str
    content: str
    meta: dict[str, Any]
    created_at: str
    score: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The record exactly as scripts see it: S18's seven keys, `meta` copied."""
        return {
            "id": self.id,
            "role": self.role,
            "kind": self.kind,
            "content": self.content,
            "meta": dict(self.meta),
            "created_at": self.created_at,
            "score": self.score,
        }


@dataclass(frozen=True)
class Owner:
    """Whose records of a session a read returns: one user's, not everything under the session id.

    A session id alone is not a boundary (see the module docstring), so the
    transcript helpers read with the caller's `Owner`. `user_id` None and ""
    are the same: no user (as identity.py's `session_key` has it). `unrecorded`
    adds the records written before the store recorded users (schema version
    1, user unknown): for the kernel's own reads of a session whose owner it
    has checked (resuming a server session), never for a script.
    """

    user_id: str | None
    unrecorded: bool = False


@runtime_checkable
class MessageStore(Protocol):
    """What the kernel and the transcript helpers need of a message store (DESIGN rule 8).

    Small on purpose, so a shared store (Postgres, …) can replace the embedded one.
    Every read is scoped to one session id and, given an `owner`, to that
    user's records in it; without one, to every record of the session id
    (the kernel's own reads, after it has checked who owns the session).
    """

    def append(
        self,
        session_id: str,
        role: str,
        kind: str,
        content: str,
        meta: dict[str, Any] | None = None,
        *,
        user_id: str | None = None,
        lease: str | None = None,
    ) -> int:
        """Record one event of `user_id`'s session (None: no user); return its id (ids only increase).

        With `lease`, only while that turn lease is the session's (LeaseLost otherwise, nothing written).
        """
        ...

    def append_step(
        self,
        session_id: str,
        entries: Sequence[Entry],
        *,
        user_id: str | None = None,
        lease: str | None = None,
        run_id: str | None = None,
        run_update: Mapping[str, Any] | None = None,
        notes: Mapping[int, Mapping[str, Any]] | None = None,
    ) -> list[int]:
        """Record a run's step in one transaction: `entries` (their ids returned) and the run's new state.

        With `lease`, only while that turn lease is the session's (LeaseLost otherwise, nothing written).
        """
        ...

    def run_records(self, run_id: str, after: int = 0, most: int = 500) -> list[Record]:
        """A run's records after id `after`, oldest first, up to `most`."""
        ...

    def changes(self, session_id: str, after: int, *, owner: Owner | None = None) -> tuple[int, int]:
        """How many records the session (`owner`'s, when given) has after id `after`, and its last id."""
        ...

    def changes_at_once(
        self, session_id: str, after: int, *, owner: Owner | None = None
    ) -> tuple[int, int] | None:
        """`changes` if the store answers without waiting (a local file, free now), else None: for the
        event loop, which asks a worker thread when it is None."""
        ...

    def history(
        self,
        session_id: str,
        n: int,
        *,
        owner: Owner | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> list[Record]:
        """The last `n` records of the session (of `owner`'s, when given), oldest first.

        With `max_bytes`, the newest records whose content and meta fit in it (one at least).
        With `timeout`, StoreBusy when the store cannot be read within that many seconds.
        """
        ...

    def search(
        self,
        session_id: str,
        query: str,
        k: int,
        *,
        owner: Owner | None = None,
        max_bytes: int | None = None,
        window: int | None = None,
        timeout: float | None = None,
    ) -> list[Record]:
        """Up to `k` records matching `query`'s words, best first, `score` filled; `max_bytes` as above.

        With `window`, only the latest `window` matching records are ranked (a bounded cost).
        """
        ...

    def count(self, session_id: str, *, owner: Owner | None = None, timeout: float | None = None) -> int:
        """How many records the session has (of `owner`'s, when given)."""
        ...

    def delete_session(self, session_id: str) -> int:
        """Forget the session's records; return how many were deleted."""
        ...

    def close(self) -> None:
        """Release the store's resources; the store is unusable afterwards."""
        ...


# -- the embedded services: the machine's, not the kernel's ---------------------------------------


@dataclass(frozen=True)
class Namespace:
    """Where keys live: a scope name and its owner's id ("" for the global scope).

    Two namespaces never share a key: `user` "x" and `session` "x" differ.
    `user` is not part of where keys live: it is who is writing, whose
    quota (`max_user_bytes`) the bytes written count against ("" for a
    caller without a user).
    """

    scope: str
    owner: str
    user: str = ""

    def params(self, key: str) -> tuple[str, str, str]:
        return (self.scope, self.owner, key)


@runtime_checkable
class StateStore(Protocol):
    """What the `state_*` helpers need of a state store (DESIGN rule 8); Redis-shaped on purpose.

    `timeout` is how long the caller may wait for the store (None: the
    store's own bound); an operation that cannot start by then raises
    `StateBusyError`. Reads of missing keys give null / empty; reads and
    writes of a key holding another type raise `WrongTypeError`.
    """

    def get(self, ns: Namespace, key: str, *, timeout: float | None = None) -> JSONValue:
        """The value of `key`, or None when missing (GET)."""
        ...

    def set(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> None:
        """Store `value` under `key`, replacing whatever type the key held (SET)."""
        ...

    def delete(self, ns: Namespace, key: str, *, timeout: float | None = None) -> bool:
        """Remove the key of any type; True when it existed (DEL)."""
        ...

    def keys(self, ns: Namespace, *, timeout: float | None = None) -> list[str]:
        """Every key of the namespace, sorted (KEYS *)."""
        ...

    def push(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> int:
        """Append to the list at `key` (created when missing); its new length (RPUSH)."""
        ...

    def range(
        self, ns: Namespace, key: str, start: int, stop: int, *, timeout: float | None = None
    ) -> list[JSONValue]:
        """Items `start`..`stop` inclusive, negative counting from the end (LRANGE)."""
        ...

    def sadd(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> bool:
        """Add to the set at `key` (created when missing); True when it was not there (SADD)."""
        ...

    def smembers(self, ns: Namespace, key: str, *, timeout: float | None = None) -> list[JSONValue]:
        """The set's members in the order they were added (SMEMBERS)."""
        ...

    def srem(self, ns: Namespace, key: str, value: JSONValue, *, timeout: float | None = None) -> bool:
        """Remove from the set; True when it was there (SREM). An emptied set disappears."""
        ...

    def close(self) -> None:
        """Release the store's resources."""
        ...


class DuckDB(Protocol):
    """`db_execute`, `db_query`, `db_schema` (S12) on database files below one folder."""

    settings: DuckSettings

    def execute(
        self, relative: str, sql: str, params: Params = None, *, remaining: float | None = None
    ) -> int: ...

    def query(
        self,
        relative: str,
        sql: str,
        limit: int,
        params: Params = None,
        *,
        remaining: float | None = None,
        read_only: bool = False,
    ) -> JSONObject: ...

    def schema(self, relative: str, table: str | None = None, *, remaining: float | None = None) -> str: ...


class Files(Protocol):
    """`fs_read`, `fs_list`, `fs_write` (S14): files below the project and the caller's scratch folder."""

    root: Path
    settings: FilesSettings

    def read_file(self, path: str, temp_dir: Path | None = None) -> bytes: ...

    def list_folder(self, path: str, temp_dir: Path | None = None) -> list[str]: ...

    def write_file(self, temp_dir: Path, path: str, data: bytes) -> str: ...


class HttpAnswer(Protocol):
    """One exchange's outcome (S8.2): `status` 0 and a reason in `error` when there was no response."""

    @property
    def status(self) -> int: ...
    @property
    def error(self) -> str: ...

    def to_json(self) -> JSONObject: ...


class Http(Protocol):
    """The `http_*` helpers (S8): one exchange, bounded by `timeout` and the script's `time_left`."""

    def request(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        time_left: float | None = None,
    ) -> HttpAnswer: ...


class ProgramOutcome(Protocol):
    """What one program run gave: an exit code, or why there is none (`failure`, `timed_out`)."""

    @property
    def exit_code(self) -> int | None: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def failure(self) -> str | None: ...
    @property
    def timed_out(self) -> bool: ...


class Shell(Protocol):
    """`run_program` (S19): a program run with no shell, within `shell:`'s limits."""

    settings: ShellSettings

    def run(
        self, argv: Sequence[str], *, timeout: float, cwd: Path | None, env: Mapping[str, str]
    ) -> ProgramOutcome: ...


# -- usage (S26.3) --------------------------------------------------------------------------------


@dataclass(frozen=True)
class UsageTotals:
    """What a user (or a template of theirs) spent over some days: LLM calls and their tokens."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class UsageRow:
    """One row of the usage ledger: one user's calls to one model for one template on one UTC day.

    `user`, `template` and `provider` are None where the call had none (the
    kernel's own call; no template; a provider stack that does not say).
    `estimated_calls` of the `calls` were counted with the kernel's bound, the
    server having reported no usage.
    """

    day: date
    user: str | None
    template: str | None
    model: str
    provider: str | None
    calls: int
    input_tokens: int
    output_tokens: int
    estimated_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@runtime_checkable
class UsageStore(Protocol):
    """The usage ledger (S26.3): every LLM call counted per user, template, model, provider and UTC day.

    Embedded: a table of the message store's SQLite file (services/usage.py);
    a shared store (PostgreSQL) fits behind the same methods.
    """

    def record(
        self,
        *,
        user: str | None,
        template: str | None,
        model: str,
        provider: str | None,
        input_tokens: int,
        output_tokens: int,
        estimated: bool = False,
        at: datetime | None = None,
        at_once: bool = False,
    ) -> bool:
        """Count one LLM call (at `at`, default now) in its day's row: one atomic upsert; True.

        `at_once`: only if that needs no wait (no other writer, a local
        file); else nothing is written and False returned.
        """
        ...

    def totals(
        self, *, user: str | None, since: date, until: date | None = None, template: str | None = None
    ) -> UsageTotals:
        """`user`'s calls and tokens from `since` to `until` (inclusive; None: today, UTC)."""
        ...

    def rows(
        self,
        *,
        user: str | None = None,
        every_user: bool = False,
        since: date | None = None,
        until: date | None = None,
        template: str | None = None,
        model: str | None = None,
        limit: int | None = None,
    ) -> list[UsageRow]:
        """The ledger's rows of `user` (or of every user), oldest day first, filtered as asked; the
        first `limit` of them when given."""
        ...

    def close(self) -> None: ...


# -- quotas (S26.3) -------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuotaStanding:
    """Where a user stands against one limit of kernel.yaml's `quotas:` (`template` set: a template's)."""

    name: str  # tokens_per_day, calls_per_day, tokens_per_month, calls_per_month
    template: str | None
    limit: int
    used: int
    resets_at: str  # RFC 3339, UTC: when the period's use starts again from zero

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)


class Quotas(Protocol):
    """The quotas of kernel.yaml's `quotas:`, measured in the usage ledger (services/quotas.py)."""

    def standings(self, *, user: str | None, template: str | None) -> list[QuotaStanding]:
        """Each limit a call of `user` within `template` must fit, with its use now."""
        ...

    def check(self, *, user: str | None, template: str | None) -> None:
        """QuotaExhausted when `user` may not make one more LLM call within `template`."""
        ...


# -- the keys -----------------------------------------------------------------------------------

_LIVE_ONLY = "(hook_tool attaches it with --live)"

HTTP: Final = ServiceKey[Http]("http", "no http service attached to this kernel")  # S8.2
STATE: Final = ServiceKey[StateStore](
    "state",
    # S11.3; an empty kernel.yaml loads, with the store off
    "the state store is off: kernel.yaml sets no state.db_path (set it, e.g. data/state.db, to turn it on)",
)
DUCKDB: Final = ServiceKey[DuckDB]("duckdb", "no duckdb service attached to this kernel")
FILES: Final = ServiceKey[Files]("files", "no files service attached to this kernel")
SHELL: Final = ServiceKey[Shell]("shell", "no shell service attached to this kernel")
LLM: Final = ServiceKey[Inference](
    "llm", "no LLM attached to this kernel (set `llm:` in kernel.yaml; hook_tool needs --live)", live=True
)
MESSAGES: Final = ServiceKey[MessageStore](
    "messages",
    f"no message store attached to this kernel {_LIVE_ONLY}",
    live=True,  # S18: `memory: …`
)
TOOLS: Final = ServiceKey[ToolCalls](
    "tools", f"no tool-call service attached to this kernel {_LIVE_ONLY}", live=True
)
TOOL_RESULTS: Final = ServiceKey[ToolResults](
    "tool_results",
    f"no tool-result history attached to this kernel {_LIVE_ONLY}",
    live=True,  # S16.4
)
SUBAGENTS: Final = ServiceKey[Subagents](
    "subagents",
    f"no subagent service attached to this kernel {_LIVE_ONLY}",
    live=True,  # S17
)
CRON: Final = ServiceKey[CronJobs](
    "cron", f"no cron service attached to this kernel {_LIVE_ONLY}", live=True
)  # S10.3
USAGE: Final = ServiceKey[UsageStore](
    "usage", f"no usage ledger attached to this kernel {_LIVE_ONLY}", live=True
)  # S26.3
QUOTAS: Final = ServiceKey[Quotas](
    "quotas", f"no quotas attached to this kernel {_LIVE_ONLY}", live=True
)  # S26.3


__all__ = [
    "CRON",
    "DUCKDB",
    "FILES",
    "HTTP",
    "LLM",
    "MESSAGES",
    "QUOTAS",
    "SHELL",
    "STATE",
    "SUBAGENTS",
    "TOOLS",
    "TOOL_RESULTS",
    "USAGE",
    "CronJobs",
    "DuckDB",
    "Entry",
    "Files",
    "Http",
    "HttpAnswer",
    "Inference",
    "MessageStore",
    "Namespace",
    "Owner",
    "Params",
    "ProgramOutcome",
    "QuotaStanding",
    "Quotas",
    "Record",
    "ScriptResult",
    "Shell",
    "StateStore",
    "SubagentRequest",
    "Subagents",
    "ToolCalls",
    "ToolResults",
    "UsageRow",
    "UsageStore",
    "UsageTotals",
]
