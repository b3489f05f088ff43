"""Approval notices (S24.4): each approval asked is POSTed to kernel.yaml's `approvals.notify` webhooks.

The body is `{approval, approve_url, deny_url, expires_at}`: the approval
as the API shows it, and two decision URLs, `{approvals.public_url}/v1/
approval-links/{token}`, each with a single-use token of the store's
(`decision_token`) deciding that call one way, valid until the approval
expires. Whoever holds a URL can make that one decision: a receiver keeps
them as secrets.

The gate tells the notices from a worker thread inside the run, which must
not wait for a receiver: `__call__` only queues the notice; a few threads
of the notices' own deliver it, through the kernel's `http` service (so the
`http:` rules hold for the address each URL resolves to), after checking
each URL as a cron job's webhook is checked (`webhook_problem`). A failed
POST is retried with growing pauses while the receiver fails or cannot be
reached, `approvals.webhook_attempts` times at most; every attempt carries
the same `Idempotency-Key` (one per approval and sink), so a receiver can
drop repeats. Failures are logged, never raised.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentkernel.config.approvals import ApprovalSettings
from agentkernel.errors import AgentKernelError
from agentkernel.ports import Http
from agentkernel.util.lazy_log import LazyLogger

if TYPE_CHECKING:  # imported by the first approval asked: a tool run asks none
    from concurrent.futures import ThreadPoolExecutor

    from agentkernel.services.approval_values import Approval, ApprovalStore

log = LazyLogger("agentkernel.approvals")

LINKS_PATH = "/v1/approval-links/"
"""Where a decision URL points, under `approvals.public_url` (server/routes/approval_links.py)."""
FIRST_PAUSE_SECS = 1.0
"""The pause before a notice's second attempt; each next one doubles, up to `LONGEST_PAUSE_SECS`."""
LONGEST_PAUSE_SECS = 60.0
WEBHOOK_TIMEOUT_SECS = 10.0
DELIVERY_THREADS = 4
_RETRIED = {408, 425, 429}

WebhookProblem = Callable[[str], str | None]
"""Why a URL can never be a webhook (services/http.py `webhook_problem` with the `http:` rules), or None."""


class ApprovalNotices:
    """The gate's `notify`: posts each approval asked to every sink, off the caller's thread."""

    def __init__(
        self,
        store: Callable[[], ApprovalStore],
        settings: ApprovalSettings,
        http: Callable[[], Http],
        problem: WebhookProblem,
        first_pause_secs: float = FIRST_PAUSE_SECS,
    ) -> None:
        self._store = store
        self.settings = settings
        self._http = http
        self._problem = problem
        self._first_pause = first_pause_secs
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._threads: ThreadPoolExecutor | None = None  # started by the first notice

    def __call__(self, approval: Approval) -> None:
        """Queue `approval`'s notices and return at once; never raises."""
        if not self.settings.notify or self._closed.is_set():
            return
        try:
            self._executor().submit(self.deliver, approval)
        except RuntimeError:  # closed meanwhile
            log.warning(
                "approval %s/%s: not posted, the kernel is closing", approval.run_id, approval.call_id
            )

    def close(self) -> None:
        """Stop: notices still queued are dropped, retries end after the attempt under way."""
        self._closed.set()
        with self._lock:
            threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._threads is None:
                from concurrent.futures import ThreadPoolExecutor  # by the first notice: not a tool run

                self._threads = ThreadPoolExecutor(DELIVERY_THREADS, thread_name_prefix="approval-notices")
            return self._threads

    def deliver(self, approval: Approval) -> None:
        """Post `approval`'s notice to each sink, retried as the module says (blocking; never raises)."""
        where = f"approval of call {approval.call_id} in run {approval.run_id}"
        try:
            body = json.dumps(self.body(approval), ensure_ascii=False).encode()
        except AgentKernelError as exc:  # decided or expired before its notice went out
            log.info("%s: no notice posted: %s", where, exc)
            return
        for index, url in enumerate(self.settings.notify):
            try:
                self._post(where, index, url, body, _notice_key(approval, index))
            except Exception:
                log.exception("%s: posting to approvals.notify[%d] failed", where, index)

    def body(self, approval: Approval) -> dict[str, Any]:
        """The notice: the approval and its two decision URLs (tokens made now, in the store's secret)."""
        from agentkernel.services.approval_values import APPROVE, DENY

        store = self._store()
        base = f"{self.settings.public_url}{LINKS_PATH}"
        return {
            "approval": approval.to_json(),
            "approve_url": base + store.decision_token(approval.run_id, approval.call_id, APPROVE),
            "deny_url": base + store.decision_token(approval.run_id, approval.call_id, DENY),
            "expires_at": approval.expires_at,
        }

    def _post(self, where: str, index: int, url: str, body: bytes, key: str) -> None:
        problem = self._problem(url)
        if problem is not None:
            log.error("%s: approvals.notify[%d].url %s is refused: %s", where, index, url, problem)
            return
        headers = {"Content-Type": "application/json", "Idempotency-Key": key}
        attempts, pause = self.settings.webhook_attempts, self._first_pause
        for attempt in range(1, attempts + 1):
            result = self._http().request(
                "POST", url, content=body, headers=headers, timeout=WEBHOOK_TIMEOUT_SECS
            )
            if 200 <= result.status < 300:
                return
            final = attempt == attempts or not _worth_retrying(result.status)
            log.warning(
                "%s: approvals.notify[%d] attempt %d of %d failed: %s%s",
                where,
                index,
                attempt,
                attempts,
                result.error or f"HTTP {result.status}",
                " (giving up)" if final else "",
            )
            if final or self._closed.wait(pause):  # a backoff between deliveries; closing ends it
                return
            pause = min(pause * 2, LONGEST_PAUSE_SECS)


def _notice_key(approval: Approval, index: int) -> str:
    """The same for every attempt at one approval's notice to one sink: a receiver can drop repeats."""
    return f"approval/{approval.run_id}/{approval.call_id}/{index}"


def _worth_retrying(status: int) -> bool:
    """Not reached (0), a server error, or a "come back later": another attempt may succeed."""
    return status == 0 or status >= 500 or status in _RETRIED


__all__ = ["LINKS_PATH", "ApprovalNotices"]
