"""One look in the store for every call waiting for a person in an event loop (S24.4).

A run waiting for a decision does not look for it itself: it registers its
approval here and waits on a future. One task per event loop reads the
decisions of all the calls waiting in it at once (`Approvals.get_many`),
every POLL_SECS, and settles each future whose approval was decided or
expired. A thousand calls waiting cost one read every half second, not
two thousand.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from agentkernel.services.approval_values import Approval, ApprovalStore
from agentkernel.tools.dispatch import Decision

log = logging.getLogger("agentkernel.approvals")
POLL_SECS = 0.5
"""How often the waiting calls' decisions are looked for."""

Key = tuple[str, str]  # (run id, call id)
Judge = Callable[[Approval], Decision | None]  # what was decided on an approval, None while pending


class ApprovalWatch:
    """The waiting calls of one event loop, and the task that looks for their decisions."""

    def __init__(self, store: Callable[[], ApprovalStore], judge: Judge) -> None:
        self._store = store
        self._judge = judge
        self._waiting: dict[Key, tuple[Approval, list[asyncio.Future[Decision]]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def decided(self, approval: Approval) -> Decision:
        """The decision on `approval`, once it is made or the approval expires."""
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        key = (approval.run_id, approval.call_id)
        self._waiting.setdefault(key, (approval, []))[1].append(future)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch(), name="approvals")
        try:
            return await future
        finally:
            self._forget(key, future)

    def _forget(self, key: Key, future: asyncio.Future[Decision]) -> None:
        entry = self._waiting.get(key)
        if entry is not None and future in entry[1]:
            entry[1].remove(future)
            if not entry[1]:
                del self._waiting[key]

    async def _watch(self) -> None:
        while self._waiting:
            await self._look()
            await asyncio.sleep(POLL_SECS)

    async def _look(self) -> None:
        """One read for every waiting call; each decided one's waiters are told."""
        keys = list(self._waiting)
        try:
            found = await asyncio.to_thread(self._store().get_many, keys)
        except Exception:  # a store busy past its wait: the next look tries again
            log.exception("could not look for the decisions of %d waiting calls", len(keys))
            return
        now = {(a.run_id, a.call_id): a for a in found}
        for key in keys:
            entry = self._waiting.get(key)
            if entry is None:
                continue
            decision = self._judge(now.get(key, entry[0]))
            if decision is None:
                continue
            for future in entry[1]:
                with contextlib.suppress(asyncio.InvalidStateError):
                    future.set_result(decision)


__all__ = ["POLL_SECS", "ApprovalWatch"]
