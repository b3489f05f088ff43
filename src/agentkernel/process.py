"""Processes (S23.2): who a script runs for, the budget it spends, and the table of them.

A process is one running agent made from a template. Its `Caller` is the
identity every helper receives (S15); its budget group is shared with the
children it spawns (S17); the `ProcessTable` spawns and terminates them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from agentkernel.errors import AgentKernelError, HelperError
from agentkernel.llm.token_bound import PromptTokens
from agentkernel.services import Services
from agentkernel.types import JSONObject

if TYPE_CHECKING:
    from aiologic import Event

    from agentkernel.templates import (
        TemplateSpec,  # annotations only: templates → catalog → scripting import us
    )

BUDGET_EXHAUSTED = "caller budget exhausted"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Caller:
    """The process a tool or hook runs for, and the services it may use.

    Identity travels explicitly (DESIGN rule 3): nothing about who is calling
    is ever taken from script input. `allowed_tools` None means every tool.
    `process` is the running process itself when the caller is one (an
    agent's tool call, or a tool run of the server's, server/tool_runs.py):
    what `llm()` charges its tokens to (S9.2); None for a bare caller
    (`agentkernel tool run`, `mcp serve` on stdio), which spends no budget.

    Two fields say where in a chain of calls the caller stands, not who it
    is: `call_depth` counts tool calls nested through `call_tool` (0 for the
    LLM's own call, S16), and `deadline` (a `time.monotonic()` value, or
    None) is the moment by which anything run for it must end: a nested
    call's is its calling script's, a sub-agent's is the deadline of the
    script that started it (S17).
    """

    pid: str | None = None
    agent: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    template: str | None = None
    temp_dir: Path | None = None
    allowed_tools: frozenset[str] | None = None
    services: Services = field(default_factory=Services)
    process: Process | None = field(default=None, repr=False)
    call_depth: int = 0
    deadline: float | None = None

    def one_deeper(self, deadline: float | None) -> Caller:
        """This caller for a call nested in one of its own: one deeper, never past `deadline`.

        Every other field is copied as it is (`replace`), whatever fields a
        Caller gains later: a nested call is the same caller.
        """
        return replace(self, call_depth=self.call_depth + 1, deadline=earlier(self.deadline, deadline))

    def identity(self) -> JSONObject:
        """The `caller()` object of S15; null where unknown."""
        return {
            "pid": self.pid,
            "session_id": self.session_id,
            "user_id": self.user_id,
            "template": self.template,
            "temp_dir": str(self.temp_dir) if self.temp_dir is not None else None,
        }


def safe_folder_name(identifier: str) -> str:
    """A folder name derived from any id that can never climb out or collide.

    Readable part for people, hash suffix for uniqueness: `../x` and `.._x`
    map to different folders, and neither contains a path separator.
    """
    return _named(identifier, identifier)


def session_key(user_id: str | None, session_id: str) -> str:
    """One text for one user's session, never the same for two (user, session) pairs.

    A session id is not a secret (a person may reuse or guess one), so what
    belongs to a session — its scratch folder, its `session` state keys, its
    `{session}` database — is keyed by the user too: user B naming user A's
    session id gets B's own. JSON, so no separator trick makes two pairs one.
    No user and an empty user id are the same: no user.
    """
    return json.dumps([user_id or None, session_id], ensure_ascii=True)


def session_folder_name(user_id: str | None, session_id: str) -> str:
    """The folder name of one user's session (`session_key`); the readable part shows the session id."""
    return _named(session_id, session_key(user_id, session_id))


def _named(readable: str, unique: str) -> str:
    shown = _UNSAFE.sub("_", readable).strip(".")[:48] or "id"
    digest = hashlib.sha256(unique.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{shown}-{digest}"


def session_temp_dir(temp_root: Path, *, user_id: str | None, session_id: str) -> Path:
    """The scratch folder of `user_id`'s session, created on demand, private to the kernel user.

    Its time stamp is renewed on every use, so the scratch clean-up
    (services/scratch.py) never removes the folder of a session in use.
    """
    path = temp_root.resolve() / session_folder_name(user_id, session_id)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.utime(path)
    return path


# -- budgets ---------------------------------------------------------------------------


class BudgetExhausted(HelperError):
    """A process asked for inference on a spent budget; the text is exactly S9.2's.

    A HelperError, so a script calling `llm()` can catch it like any helper
    error; the agent loop turns it into the end reason `budget_exhausted`.
    """

    def __init__(self) -> None:
        super().__init__(BUDGET_EXHAUSTED)


class ProcessError(AgentKernelError):
    """A process operation that cannot be done, e.g. a child of a terminated parent."""


def earlier(a: float | None, b: float | None) -> float | None:
    """The earlier of two deadlines, where None means none."""
    if a is None:
        return b
    return a if b is None else min(a, b)


def _tighter(a: int | None, b: int | None) -> int | None:
    """The smaller of two limits, where None means unlimited."""
    if a is None:
        return b
    return a if b is None else min(a, b)


class BudgetGroup:
    """Tokens a process tree may spend: a limit (None = unlimited), what is used, what is held.

    Charging never refuses: the tokens of an answer already received are
    spent whatever the limit, and are always counted. Refusal happens before
    the next inference, in `reserve()`: every inference — the agent loop's,
    a sub-agent's, a script's `llm()` — holds an upper bound of what it can
    cost until its answer is charged (llm/token_bound.py), so any number of
    them in parallel never spend past the limit, unless a server reports
    more tokens than the bound allowed for.

    A group may sit inside an `outer` one (a child whose own template sets a
    budget): charges count in both, and it is exhausted when either is.
    """

    def __init__(self, limit: int | None = None, *, outer: BudgetGroup | None = None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"budget limit must be at least 1 token, got {limit}")
        self.id = str(uuid.uuid4())
        self.limit = limit
        self.outer = outer
        self._used = 0
        self._held = 0
        self._lock = threading.Lock()
        self._signal: Event | None = None  # the outermost group's: set by the next release in the tree

    @property
    def used(self) -> int:
        """Tokens charged to this group (including those of any group inside it)."""
        with self._lock:
            return self._used

    @property
    def held(self) -> int:
        """Tokens reserved by inferences under way and not yet charged (`reserve`)."""
        with self._lock:
            return self._held

    @property
    def remaining(self) -> int | None:
        """Tokens neither used nor held, here and in every enclosing group; None when nothing limits."""
        own = None if self.limit is None else max(self._free(), 0)
        return _tighter(own, self.outer.remaining if self.outer is not None else None)

    def _free(self) -> int:
        assert self.limit is not None
        with self._lock:
            return self.limit - self._used - self._held

    @property
    def exhausted(self) -> bool:
        """Whether the tokens are spent, here or in an enclosing group. Tokens merely held by
        calls in flight do not count: most come back when their answers are charged, so a
        new call (a sub-agent starting) waits its turn for them (`reserve` via token_bound.py)
        instead of being refused while the budget is only busy."""
        with self._lock:
            spent = self.limit is not None and self._used >= self.limit
        return spent or (self.outer is not None and self.outer.exhausted)

    def reserve(self, least: int, most: int) -> int:
        """Hold between `least` and `most` tokens for one inference; how many were held.

        As many as are free up to `most`, here and in every enclosing group,
        atomically per group; BudgetExhausted when fewer than `least` are.
        The caller must `release` exactly what it got, once the answer is
        charged (or the call failed).
        """
        if not 0 <= least <= most:
            raise ValueError(f"reserve needs 0 <= least <= most, got {least} and {most}")
        with self._lock:
            free = None if self.limit is None else self.limit - self._used - self._held
            if free is not None and free < least:
                raise BudgetExhausted()
            granted = most if free is None else min(most, free)
            self._held += granted
        if self.outer is None:
            return granted
        try:
            outer_granted = self.outer.reserve(least, granted)
        except BudgetExhausted:
            self._unhold(granted)
            raise
        self._unhold(granted - outer_granted)
        return outer_granted

    def release(self, tokens: int) -> None:
        """Give back tokens held by `reserve`, here and in every enclosing group."""
        self._unhold(tokens)
        if self.outer is not None:
            self.outer.release(tokens)

    def _unhold(self, tokens: int) -> None:
        with self._lock:
            self._held -= tokens
            signal, self._signal = self._signal, None
        if signal is not None:
            signal.set()

    @property
    def in_flight(self) -> bool:
        """Whether tokens are held anywhere in this group's tree: a release will come, freeing some."""
        return self._outermost().held > 0

    def release_signal(self) -> Event:
        """An event (sync `wait(timeout)` and `await`) set by the next release anywhere in the tree.

        Take it before trying to reserve: a release between a failed attempt
        and the wait then still wakes the waiter. Every release reaches the
        outermost group, which hands out the signal.
        """
        root = self._outermost()
        with root._lock:
            if root._signal is None:
                from aiologic import Event  # only a limited budget under contention pays for it

                root._signal = Event()
            return root._signal

    def _outermost(self) -> BudgetGroup:
        group = self
        while group.outer is not None:
            group = group.outer
        return group

    def charge(self, tokens: int) -> None:
        """Count tokens spent, here and in every enclosing group; safe from any thread."""
        if tokens < 0:
            raise ValueError(f"cannot charge a negative number of tokens: {tokens}")
        with self._lock:
            self._used += tokens
        if self.outer is not None:
            self.outer.charge(tokens)

    def __repr__(self) -> str:
        return (
            f"BudgetGroup(limit={self.limit}, used={self.used}, held={self.held}, "
            f"outer={self.outer is not None})"
        )


# -- processes -------------------------------------------------------------------------


class ProcessState(StrEnum):
    RUNNING = "running"
    TERMINATED = "terminated"


@dataclass(eq=False)
class Process:
    """One running agent. Made by `ProcessTable.spawn`, not by hand.

    Identity fields never change after spawn; only the state (through the
    table) and the token count do, both safely from any thread. A loop
    running on a worker thread polls `terminated` between steps.
    """

    pid: str
    name: str
    template: TemplateSpec
    budget: BudgetGroup
    session_id: str | None = None
    user_id: str | None = None
    parent_pid: str | None = None
    temp_dir: Path | None = None
    depth: int = 0  # 0 for an agent started by a person; a sub-agent is one deeper than its parent
    deadline: float | None = None  # a sub-agent's: its starting script's (time.monotonic()); inherited
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    _stopped: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _tokens: int = field(default=0, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    prompt_tokens: PromptTokens = field(default_factory=PromptTokens, init=False, repr=False, compare=False)
    """What the agent loop knows of its conversation's cost: the bound of its next prompt (S9.2)."""

    @property
    def template_name(self) -> str:
        return self.template.name

    @property
    def state(self) -> ProcessState:
        return ProcessState.TERMINATED if self._stopped.is_set() else ProcessState.RUNNING

    @property
    def terminated(self) -> bool:
        return self._stopped.is_set()

    @property
    def tokens_used(self) -> int:
        """Tokens this process itself spent (its group counts the whole tree)."""
        with self._lock:
            return self._tokens

    def charge(self, tokens: int) -> None:
        """Count tokens against this process and its budget group (S9.2)."""
        self.budget.charge(tokens)
        with self._lock:
            self._tokens += tokens

    def caller(self, services: Services) -> Caller:
        """The identity helpers receive; tools limited to the template's list."""
        return Caller(
            pid=self.pid,
            agent=self.name,
            session_id=self.session_id,
            user_id=self.user_id,
            template=self.template.name,
            temp_dir=self.temp_dir,
            allowed_tools=self.template.allowed_tools(),
            services=services,
            process=self,
            deadline=self.deadline,
        )

    def _mark_terminated(self) -> None:
        self._stopped.set()


def _child_budget(template: TemplateSpec, parent: Process | None) -> BudgetGroup:
    """A root gets its template's budget; a child spends its parent's group (S17).

    A child whose own template sets a budget gets a group inside the
    parent's, so it is held to the smaller of the two and still spends the
    parent's tokens.
    """
    if parent is None:
        return BudgetGroup(template.budget_tokens)
    if template.budget_tokens is None:
        return parent.budget
    return BudgetGroup(template.budget_tokens, outer=parent.budget)


class ProcessTable:
    """The live processes of a kernel: spawn, look up, terminate; safe from any thread.

    Terminated processes leave the table. Their session's scratch folder
    stays: it belongs to the session, which outlives any one process (the
    next message, a sibling sub-agent and a continuation all use it), so
    removing it is for whoever ends the session.
    """

    def __init__(self) -> None:
        self._processes: dict[str, Process] = {}
        self._lock = threading.Lock()

    def spawn(
        self,
        template: TemplateSpec,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        parent: Process | None = None,
        name: str | None = None,
        temp_root: Path,
        deadline: float | None = None,
    ) -> Process:
        """Start a process from `template`; a child inherits session, user and deadline unless given.

        `deadline` (a `time.monotonic()` value) is the moment the process
        must be over by: a sub-agent's is its script's. A child keeps the
        earlier of its own and its parent's.
        """
        if parent is not None:
            session_id = session_id if session_id is not None else parent.session_id
            user_id = user_id if user_id is not None else parent.user_id
            deadline = earlier(deadline, parent.deadline)
        process = Process(
            pid=str(uuid.uuid4()),
            name=name or template.name,
            template=template,
            budget=_child_budget(template, parent),
            session_id=session_id,
            user_id=user_id,
            parent_pid=parent.pid if parent is not None else None,
            depth=parent.depth + 1 if parent is not None else 0,
            deadline=deadline,
            temp_dir=(
                session_temp_dir(temp_root, user_id=user_id, session_id=session_id)
                if session_id is not None
                else None
            ),
        )
        with self._lock:
            if parent is not None and self._processes.get(parent.pid) is not parent:
                raise ProcessError(f"spawn: parent process {parent.pid} is not running")
            self._processes[process.pid] = process
        return process

    def get(self, pid: str) -> Process | None:
        with self._lock:
            return self._processes.get(pid)

    def all(self) -> list[Process]:
        with self._lock:
            return list(self._processes.values())

    def children(self, pid: str) -> list[Process]:
        """The running processes whose parent is `pid`, oldest first."""
        with self._lock:
            return [p for p in self._processes.values() if p.parent_pid == pid]

    def terminate(self, pid: str) -> list[Process]:
        """End a process and all its descendants; returns them, the process first.

        Unknown or already terminated pids give an empty list: a sub-agent's
        own cleanup and its parent's termination may race, and both are fine.
        """
        with self._lock:
            root = self._processes.pop(pid, None)
            if root is None:
                return []
            ended = [root]
            for process in ended:  # grows while iterated: breadth-first over descendants
                kids = [p for p in self._processes.values() if p.parent_pid == process.pid]
                for kid in kids:
                    del self._processes[kid.pid]
                ended += kids
        for process in ended:
            process._mark_terminated()
        return ended

    def __len__(self) -> int:
        with self._lock:
            return len(self._processes)


__all__ = [
    "BUDGET_EXHAUSTED",
    "BudgetExhausted",
    "BudgetGroup",
    "Caller",
    "Process",
    "ProcessError",
    "ProcessState",
    "ProcessTable",
    "earlier",
    "safe_folder_name",
    "session_folder_name",
    "session_key",
    "session_temp_dir",
]
