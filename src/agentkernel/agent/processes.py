"""The process table (S23.2): one running agent per process, spawned from a template, ended with its children.

A process's `Caller` is the identity every helper receives (identity.py);
its budget group is shared with the children it spawns (budget.py, S17);
the `ProcessTable` spawns and terminates them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from agentkernel.budget import BudgetGroup, earlier
from agentkernel.bundle import Services
from agentkernel.config.templates import TemplateSpec
from agentkernel.errors import AgentKernelError
from agentkernel.identity import Caller, scratch_renewed, session_temp_path
from agentkernel.llm.token_bound import PromptTokens
from agentkernel.util.ids import new_uuid


class ProcessError(AgentKernelError):
    """A process operation that cannot be done, e.g. a child of a terminated parent."""


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
            llm_provider=self.template.model.provider,
            llm_providers=frozenset(self.template.model.providers),
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
            pid=new_uuid(),
            name=name or template.name,
            template=template,
            budget=_child_budget(template, parent),
            session_id=session_id,
            user_id=user_id,
            parent_pid=parent.pid if parent is not None else None,
            depth=parent.depth + 1 if parent is not None else 0,
            deadline=deadline,
            temp_dir=(
                session_temp_path(temp_root, user_id=user_id, session_id=session_id)
                if session_id is not None
                else None
            ),
        )
        if process.temp_dir is not None:  # made by the first helper that uses it (identity.scratch_made)
            scratch_renewed(process.temp_dir)
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


__all__ = ["Process", "ProcessError", "ProcessState", "ProcessTable"]
