"""Where a tool call waits for a person's decision (S24.4): asked in the store, decided by anyone's.

A call the dispatcher vetted with a question (`Vetted.ask`: a hook's `ask`,
or its tool's `approval: always`) is asked here: a rule the user made with
`remember` lets it through at once; otherwise it becomes a pending approval
in the store (services/approvals.py), asked once per (run, call), so a run
resumed after a restart finds the same one, with its decision if one was
made meanwhile. The wait looks in the store every POLL_SECS (the agent
loop's calls of one event loop all in one read, approval_watch.py) until
the decision comes (from any process: the API, the page, a decision URL,
an MCP client), the timeout passes (denied), or the run is stopped.

Two kinds of waiter use it: the agent loop (async, its run journaled and
resumable; ToolSteps) and every other path (`ApprovalDesk.decide`, blocking
by the caller's deadline: a script's `call_tool`, the tools panel…).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from agentkernel.config.approvals import ApprovalSettings
from agentkernel.identity import Caller
from agentkernel.tools.dispatch import Decision, Vetted
from agentkernel.util.ids import new_uuid
from agentkernel.util.lazy_log import LazyLogger

if TYPE_CHECKING:  # the approvals' values: imported by the first call a person is asked about
    import asyncio

    from agentkernel.agent.approval_watch import ApprovalWatch
    from agentkernel.services.approval_values import Approval, ApprovalStore

log = LazyLogger("agentkernel.approvals")
POLL_SECS = 0.5
"""How often a waiting call looks in the store for its decision."""

Notify = Callable[["Approval"], None]
"""Tells the approval's sinks it was asked (services/approval_sinks.py); must not raise."""


@dataclass(frozen=True)
class Asked:
    """A call's approval as the wait begins: decided already (a rule, or before a restart), or pending."""

    approval: Approval | None  # None: a rule let it through
    decision: Decision | None  # set when no wait is needed

    @property
    def waits(self) -> bool:
        return self.decision is None


class ApprovalGate:
    """Asks for and waits on decisions; see the module docstring."""

    def __init__(
        self, store: Callable[[], ApprovalStore], settings: ApprovalSettings, notify: Notify | None = None
    ) -> None:
        self._store = store
        self.settings = settings
        self._notify = notify
        # each event loop's waiting calls, and the task looking for their decisions (forgotten with it)
        self._watches: weakref.WeakKeyDictionary[object, ApprovalWatch] = weakref.WeakKeyDictionary()

    def ask(self, vetted: Vetted, caller: Caller, run_id: str) -> Asked:
        """The call's approval: a rule's pass, its decision if made, or pending (asked now, its sinks
        told, the first time) (blocking: the store)."""
        spec, call = vetted.spec, vetted.call
        template = caller.template or ""
        ruled = self.ruled(vetted, caller)
        if ruled is not None:
            return Asked(None, ruled)
        from agentkernel.services.approval_values import PendingApproval

        store = self._store()
        args = call.args if isinstance(call.args, dict) else {"value": call.args}
        pending = PendingApproval(
            run_id=run_id,
            call_id=call.id,
            session_id=caller.session_id or "",
            user_id=caller.user_id or "",
            template=template,
            tool=spec.name,
            args=args,
            question=vetted.ask or "",
            origin=call.origin,
            timeout_secs=self.settings.timeout_secs,
            approvers=spec.approvers or None,
        )
        before = time.time()
        approval = store.ask(pending)
        if approval.created_at >= before and self._notify is not None:  # asked now, not found again
            self._notify(approval)
        return Asked(approval, decision_of(approval))

    def ruled(self, vetted: Vetted, caller: Caller) -> Decision | None:
        """The approval a rule of the caller's user gives the call (`remember`), None when there is no
        such rule: asked before a person is, and by a caller that cannot ask one (blocking: the store)."""
        user, tool, template = caller.user_id, vetted.spec.name, caller.template or ""
        if user is not None and self._store().allowed_by_rule(user, tool, template):
            return Decision(True, vetted.call.args, "allowed by a rule the user made")
        return None

    def look(self, approval: Approval) -> Decision | None:
        """The decision on `approval` now, None while it is pending (blocking: the store)."""
        found = self._store().get(approval.run_id, approval.call_id)
        return decision_of(found if found is not None else approval)

    def settle(
        self, approval: Approval, by_user: str, approved: bool, reason: str, *, once: bool = False
    ) -> Decision:
        """`by_user`'s approve or deny of `approval`, made in the store, and the decision that holds: theirs,
        or the one made first elsewhere (the API, a decision URL) or its expiry (blocking: the store).
        `once`: a call that may come again with the same answer (a retry) runs only on the decision it
        made itself; one made already denies it, saying so."""
        from agentkernel.services.approval_values import APPROVE, DENY, ApprovalClosed, ApprovalNotFound

        decision = APPROVE if approved else DENY
        try:
            decided = self._store().decide(approval.run_id, approval.call_id, by_user, decision, reason)
        except ApprovalClosed as exc:
            if once:
                return Decision(False, reason=f"denied: {exc}; call the tool again to be asked anew")
            decided = exc.approval
        except ApprovalNotFound as exc:  # not theirs to decide: nothing is run on their word
            return Decision(False, reason=str(exc))
        found = decision_of(decided)
        assert found is not None  # decided, or expired
        return found

    async def wait(
        self, approval: Approval, stop: asyncio.Event, most_secs: float | None = None
    ) -> Decision | None:
        """The decision, once made or expired; None when `stop` is set first. With `most_secs`, a
        denial saying so once that long has passed without one (a request that cannot wait longer)."""
        import asyncio  # only the agent loop waits so: a tool run never imports asyncio

        from agentkernel.agent.approval_watch import ApprovalWatch  # asyncio's, as the line above

        loop = asyncio.get_running_loop()
        watch = self._watches.get(loop)
        if watch is None:
            watch = self._watches[loop] = ApprovalWatch(self._store, decision_of)
        decided: asyncio.Future[Decision] = asyncio.ensure_future(watch.decided(approval))
        stopped = asyncio.ensure_future(stop.wait())
        try:
            done, _ = await asyncio.wait(
                (decided, stopped), timeout=most_secs, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in (decided, stopped):
                task.cancel()
        if decided in done:
            return decided.result()
        if stopped in done:
            return None
        why = f"no decision within approvals.completion_wait_secs ({most_secs:g} s)"
        return Decision(False, reason=f"denied: {why}, as long as this request waits")

    def wait_blocking(self, approval: Approval, deadline: float | None, stopped: threading.Event) -> Decision:
        """The decision by `deadline` (time.monotonic()); a denial saying so when none came by then."""
        while True:
            decision = self.look(approval)
            if decision is not None:
                return decision
            if deadline is not None and time.monotonic() >= deadline:
                return Decision(
                    False, reason="denied: no decision came before the calling script's time ran out"
                )
            wait = POLL_SECS if deadline is None else min(POLL_SECS, max(deadline - time.monotonic(), 0.0))
            if stopped.wait(wait):
                return Decision(
                    False, reason="denied: the run was stopped while the call waited for a decision"
                )


class ApprovalDesk:
    """The dispatcher's desk (tools/dispatch.py `ApprovalDesk`): a call off the agent loop waits here,
    blocking its worker thread, by its caller's deadline; its approval is keyed by a run id of its own
    (`call-…`), listed by `GET /v1/approvals` and decided as any other."""

    def __init__(self, gate: ApprovalGate) -> None:
        self.gate = gate
        self._closed = threading.Event()

    def decide(self, vetted: Vetted, caller: Caller) -> Decision:
        if caller.user_id is None:
            return Decision(
                False, reason="denied: it needs a person's approval, and this caller has no user to ask"
            )
        call_id = vetted.call.id or f"call_{new_uuid().replace('-', '')[:12]}"
        asked = self.gate.ask(_with_id(vetted, call_id), caller, f"call-{new_uuid()}")
        if asked.decision is not None:
            return asked.decision
        assert asked.approval is not None
        return self.gate.wait_blocking(asked.approval, caller.deadline, self._closed)

    def close(self) -> None:
        """Calls still waiting are denied (the kernel is closing)."""
        self._closed.set()


def decision_of(approval: Approval) -> Decision | None:
    """What was decided on `approval`; None while pending and not past its expiry."""
    from agentkernel.services.approval_values import APPROVED, EXPIRED

    if approval.pending:
        if time.time() < approval.expires_at:
            return None
        return Decision(
            False, reason=f"denied: no decision within approvals.timeout_secs; {_expired(approval)}"
        )
    if approval.status == EXPIRED:
        return Decision(
            False, reason=f"denied: no decision within approvals.timeout_secs; {_expired(approval)}"
        )
    if approval.status == APPROVED:
        return Decision(True, approval.new_args, approval.reason or "")  # None: its own arguments
    who = f"denied by {approval.decided_by}" if approval.decided_by else "denied"
    return Decision(False, reason=who + (f": {approval.reason}" if approval.reason else ""))


def _expired(approval: Approval) -> str:
    return f"the call was denied at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(approval.expires_at))}"


def _with_id(vetted: Vetted, call_id: str) -> Vetted:
    return replace(vetted, call=replace(vetted.call, id=call_id))


__all__ = ["POLL_SECS", "ApprovalDesk", "ApprovalGate", "Asked", "decision_of"]
