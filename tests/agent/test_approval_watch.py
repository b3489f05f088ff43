"""The calls waiting for a person in an event loop are looked for together (agent/approval_watch.py).

A real approvals store in a temporary file; two hundred calls waiting at
once; their decisions made from another thread, as the API would. Each
waiter gets its own decision, and each look reads every waiting call in
one read — not one read per call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from agentkernel.agent.approval_gate import decision_of
from agentkernel.agent.approval_watch import ApprovalWatch
from agentkernel.services.approval_values import Approval, PendingApproval
from agentkernel.services.approvals import Approvals


class CountedApprovals(Approvals):
    """The store, counting its `get_many` reads and the calls each named."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads: list[int] = []

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Approval]:
        self.reads.append(len(keys))
        return super().get_many(keys)


def pending(index: int, timeout: float = 3600.0) -> PendingApproval:
    return PendingApproval(
        run_id=f"run-{index}",
        call_id="c1",
        session_id=f"s{index}",
        user_id="alice",
        template="t",
        tool="send",
        args={"n": index},
        question="send?",
        origin="llm",
        timeout_secs=timeout,
    )


def test_two_hundred_waiting_calls_are_looked_for_in_one_read_each_time(tmp_path: Path) -> None:
    store = CountedApprovals(tmp_path / "messages.db")
    try:
        asked = [store.ask(pending(i)) for i in range(200)]
        watch = ApprovalWatch(lambda: store, decision_of)

        async def main() -> list[bool]:
            waiting = [asyncio.ensure_future(watch.decided(a)) for a in asked]
            await asyncio.sleep(0)  # every waiter registered before the decisions come

            def decide_all() -> None:
                for i, a in enumerate(asked):
                    store.decide(a.run_id, a.call_id, "alice", "approve" if i % 2 == 0 else "deny")

            await asyncio.to_thread(decide_all)
            decisions = await asyncio.wait_for(asyncio.gather(*waiting), 60)
            return [d.approved for d in decisions]

        approved = asyncio.run(main())
    finally:
        store.close()
    assert approved == [i % 2 == 0 for i in range(200)]
    assert store.reads and max(store.reads) == 200  # all of them in one read
    assert len(store.reads) < 20  # a read a look, not a read a call (200 a look)


def test_an_approval_past_its_timeout_is_a_denial_for_its_waiter(tmp_path: Path) -> None:
    with Approvals(tmp_path / "messages.db") as store:
        approval = store.ask(pending(1, timeout=0.2))
        watch = ApprovalWatch(lambda: store, decision_of)
        decision = asyncio.run(asyncio.wait_for(watch.decided(approval), 60))
    assert not decision.approved and "approvals.timeout_secs" in decision.reason
