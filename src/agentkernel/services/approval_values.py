"""What an approval is (S24.4): the call asked about, its row, a standing rule, the errors of deciding,
and the store both approvals stores fit (`ApprovalStore`).

Apart from the stores (services/approvals.py, the SQLite one; approvals_pg.py)
so that what only passes approvals around (the approval gate, its notices,
the kernel's face) does not import a database, nor the signing of decision
URLs: a command that asks no person (`agentkernel tool run`) never loads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentkernel.errors import AgentKernelError

if TYPE_CHECKING:
    from agentkernel.services.approval_tokens import DecisionToken

DEFAULT_TIMEOUT_SECS = 86_400.0  # the default of approval_timeout_secs
PENDING, APPROVED, DENIED, EXPIRED = "pending", "approved", "denied", "expired"
APPROVE, DENY, EDIT = "approve", "deny", "edit"
LINK = "link"  # who decided, when a decision URL did


@dataclass(frozen=True)
class PendingApproval:
    """A call to ask a person about: which, whose, what it would do, and for how long to wait."""

    run_id: str
    call_id: str
    session_id: str
    user_id: str  # the session's owner
    template: str
    tool: str
    args: dict[str, Any]
    question: str
    origin: str  # where the call comes from: llm, call_tool, subagent, panel…
    timeout_secs: float = DEFAULT_TIMEOUT_SECS
    approvers: tuple[str, ...] | None = None  # the tool's `approvers:`, who may decide besides the owner

    def __post_init__(self) -> None:
        if not isinstance(self.args, dict):
            raise BadDecision(
                f"call {self.call_id}: args must be a JSON object, not {type(self.args).__name__}"
            )
        if not self.timeout_secs > 0:
            raise BadDecision(f"call {self.call_id}: timeout_secs must be positive, not {self.timeout_secs}")


@dataclass(frozen=True)
class Approval:
    """An approval's row: the call, who may decide it, until when, and what was decided."""

    run_id: str
    call_id: str
    session_id: str
    user_id: str
    template: str
    tool: str
    args: dict[str, Any]
    question: str
    origin: str
    approvers: tuple[str, ...] | None
    status: str  # PENDING, APPROVED, DENIED or EXPIRED
    decision: str | None  # APPROVE, DENY or EDIT once decided
    reason: str | None
    new_args: dict[str, Any] | None  # an EDIT's arguments
    decided_by: str | None  # a user id, or LINK
    remember: bool
    created_at: float
    expires_at: float
    decided_at: float | None  # for EXPIRED: when it was marked so

    @property
    def pending(self) -> bool:
        return self.status == PENDING

    @property
    def args_to_run(self) -> dict[str, Any]:
        """The arguments the call runs with once approved: an edit's, else those asked about."""
        return self.new_args if self.new_args is not None else self.args

    def may_decide(self, user_id: str) -> bool:
        """The session's owner, or a user named in `approvers`."""
        return user_id == self.user_id or user_id in (self.approvers or ())

    def to_json(self) -> dict[str, Any]:
        """The approval as the API shows it (an `approval_required` event's data, and what became of it)."""
        return {
            "run_id": self.run_id,
            "call": {"id": self.call_id, "tool": self.tool, "args": self.args, "origin": self.origin},
            "question": self.question,
            "expires_at": self.expires_at,
            "session_id": self.session_id,
            "template": self.template,
            "status": self.status,
            "decision": self.decision,
            "reason": self.reason,
            "new_args": self.new_args,
            "decided_by": self.decided_by,
            "remember": self.remember,
            "created_at": self.created_at,
            "decided_at": self.decided_at,
        }


@dataclass(frozen=True)
class ApprovalRule:
    """A standing yes: calls of `tool` in runs of `user_id` on `template` need no person."""

    id: int
    user_id: str
    tool: str
    template: str
    created_at: float
    created_by: str | None  # who remembered the decision (the owner, or an approver)
    run_id: str | None  # the approval it came from
    call_id: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool": self.tool,
            "template": self.template,
            "created_at": self.created_at,
            "created_by": self.created_by,
            "run_id": self.run_id,
            "call_id": self.call_id,
        }


class BadDecision(AgentKernelError):
    """A decision (or an approval asked) that is wrong in itself: what, and which field."""


class ApprovalNotFound(AgentKernelError):
    """No such approval, or one the user may not decide (the same words for both: nothing leaks)."""

    def __init__(self, run_id: str, call_id: str) -> None:
        super().__init__(f"run {run_id} has no approval of call {call_id} that you may decide")
        self.run_id = run_id
        self.call_id = call_id


class ApprovalClosed(AgentKernelError):
    """The approval was decided or expired already; `approval` is its row as found."""

    def __init__(self, approval: Approval) -> None:
        where = f"the approval of call {approval.call_id} in run {approval.run_id}"
        if approval.status in (APPROVED, DENIED):
            by = approval.decided_by
            when = iso_seconds(approval.decided_at or 0.0)
            text = f"{where} was decided already: {approval.decision} by {by} at {when}"
        else:
            text = f"{where} expired at {iso_seconds(approval.expires_at)} (undecided: the call is denied)"
        super().__init__(text)
        self.approval = approval


@runtime_checkable
class ApprovalStore(Protocol):
    """What the kernel, the server and the gate use of an approvals store: the SQLite one
    (services/approvals.py `Approvals`) or the PostgreSQL one (approvals_pg.py, kernel.yaml `store.url`)."""

    def ask(self, pending: PendingApproval) -> Approval: ...

    def decide(
        self,
        run_id: str,
        call_id: str,
        by_user: str,
        decision: str,
        reason: str | None = None,
        args: dict[str, Any] | None = None,
        remember: bool = False,
    ) -> Approval: ...

    def expire_due(self, now: float | None = None, most: int = 100) -> list[Approval]: ...

    def get(self, run_id: str, call_id: str) -> Approval | None: ...

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Approval]: ...

    def pending_for(self, user_id: str, most: int = 50) -> list[Approval]: ...

    def count_pending(self) -> int: ...

    def pending_of_run(self, run_id: str) -> list[Approval]: ...

    def add_rule(
        self,
        user_id: str,
        tool: str,
        template: str,
        created_by: str | None = None,
        run_id: str | None = None,
        call_id: str | None = None,
    ) -> ApprovalRule: ...

    def rules_of(self, user_id: str, most: int = 500) -> list[ApprovalRule]: ...

    def delete_rule(self, user_id: str, rule_id: int) -> bool: ...

    def allowed_by_rule(self, user_id: str, tool: str, template: str) -> bool: ...

    def decision_token(self, run_id: str, call_id: str, decision: str) -> str: ...

    def redeem(
        self, token: str, run_id: str | None = None, call_id: str | None = None, reason: str | None = None
    ) -> Approval: ...

    def granted(self, token: str) -> tuple[DecisionToken, Approval]: ...

    def sweep(self, older_than: float, most: int = 1000) -> int: ...

    def close(self) -> None: ...


def iso_seconds(secs: float) -> str:
    """A time (`time.time()` seconds) as the messages show it: ISO 8601 in UTC, to the second."""
    from datetime import UTC, datetime  # by the first message that shows a time

    return datetime.fromtimestamp(secs, UTC).isoformat(timespec="seconds")


__all__ = [
    "APPROVE",
    "APPROVED",
    "DEFAULT_TIMEOUT_SECS",
    "DENIED",
    "DENY",
    "EDIT",
    "EXPIRED",
    "LINK",
    "PENDING",
    "Approval",
    "ApprovalClosed",
    "ApprovalNotFound",
    "ApprovalRule",
    "ApprovalStore",
    "BadDecision",
    "PendingApproval",
    "iso_seconds",
]
