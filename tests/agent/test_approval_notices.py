"""Approval notices: each approval asked is POSTed to every `approvals.notify` sink with its two links.

A real store in a temporary folder, the kernel's real `http` service, a
real receiver on 127.0.0.1 (tests/fakes/webhook.py). The server-level
flow (links clicked, decisions made) is tests/server/test_approval_links.py;
here: the body, the retries and their bound, the URL rules, the caller
never waiting, and close. Nothing waits on time: on the receiver.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkernel.agent.approval_notices import ApprovalNotices
from agentkernel.config.approvals import ApprovalSettings
from agentkernel.config.sections import HttpConfig
from agentkernel.services.approval_values import Approval
from agentkernel.services.approvals import Approvals
from agentkernel.services.http import HttpService, webhook_problem
from tests.fakes.webhook import WebhookReceiver
from tests.services.test_approvals import pending

PUBLIC = "https://agents.example.com"
QUICK = 0.01  # the first pause between attempts: the tests wait on the receiver, never on the pause
LONG = 600.0  # a pause no test outlives: only close (or its absence) ends it


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as hook:
        yield hook


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Approvals]:
    with Approvals(tmp_path / "messages.db") as approvals:
        yield approvals


def notices_for(
    store: Approvals,
    urls: tuple[str, ...],
    *,
    attempts: int = 5,
    pause: float = QUICK,
    allow_private: bool = True,
) -> tuple[ApprovalNotices, HttpService]:
    settings = ApprovalSettings(public_url=PUBLIC, notify=urls, webhook_attempts=attempts)
    rules = HttpConfig(allow_private=allow_private)
    http = HttpService(rules)
    notices = ApprovalNotices(
        lambda: store, settings, lambda: http, lambda url: webhook_problem(url, rules), pause
    )
    return notices, http


def asked(store: Approvals) -> Approval:
    return store.ask(pending())


def test_the_notice_carries_the_approval_and_a_link_for_each_decision(
    store: Approvals, receiver: WebhookReceiver
) -> None:
    notices, http = notices_for(store, (receiver.url,))
    with http:
        approval = asked(store)
        notices.deliver(approval)
    (body,) = receiver.bodies
    assert body["approval"] == approval.to_json() and body["expires_at"] == approval.expires_at
    for decision in ("approve", "deny"):
        url = body[f"{decision}_url"]
        assert url.startswith(f"{PUBLIC}/v1/approval-links/")
        granted, _ = store.granted(url.rsplit("/", 1)[1])
        assert (granted.decision, granted.run_id, granted.call_id) == (decision, "r1", "c1")
    assert receiver.headers[0]["Idempotency-Key"] == "approval/r1/c1/0"
    assert receiver.headers[0]["Content-Type"] == "application/json"


def test_a_failing_sink_is_tried_again_and_the_others_still_get_theirs(
    store: Approvals, receiver: WebhookReceiver
) -> None:
    with WebhookReceiver() as second:
        receiver.script = [500, 503]
        second.script = [429]
        notices, http = notices_for(store, (receiver.url, second.url))
        with http:
            notices.deliver(asked(store))
        assert (len(receiver.attempts), len(receiver.bodies)) == (3, 1)
        assert (len(second.attempts), len(second.bodies)) == (2, 1)
        assert {h["Idempotency-Key"] for h in receiver.headers} == {"approval/r1/c1/0"}
        assert {h["Idempotency-Key"] for h in second.headers} == {"approval/r1/c1/1"}


def test_attempts_are_bounded_and_a_refusal_is_not_retried(
    store: Approvals, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.status = 500
    notices, http = notices_for(store, (receiver.url,), attempts=3)
    with http, caplog.at_level(logging.WARNING, "agentkernel.approvals"):
        notices.deliver(asked(store))
        assert len(receiver.attempts) == 3
        assert "attempt 3 of 3 failed: HTTP 500 (giving up)" in caplog.text
        receiver.status = 400  # the receiver refuses the notice itself: asking again changes nothing
        notices.deliver(store.ask(pending(call_id="c2")))
    assert len(receiver.attempts) == 4


def test_a_sink_the_http_rules_refuse_gets_nothing_and_the_log_says_why(
    store: Approvals, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    notices, http = notices_for(store, (receiver.url,), allow_private=False)
    with http, caplog.at_level(logging.ERROR, "agentkernel.approvals"):
        notices.deliver(asked(store))
    assert receiver.attempts == []
    assert f"approvals.notify[0].url {receiver.url} is refused" in caplog.text
    assert "allow_private" in caplog.text


def test_an_approval_decided_before_its_notice_goes_out_is_not_posted(
    store: Approvals, receiver: WebhookReceiver
) -> None:
    notices, http = notices_for(store, (receiver.url,))
    approval = asked(store)
    store.decide("r1", "c1", "alice", "approve")
    with http:
        notices.deliver(approval)  # its links would decide nothing
    assert receiver.attempts == []


def test_the_caller_never_waits_for_the_receiver_and_close_ends_the_retries(
    store: Approvals, receiver: WebhookReceiver
) -> None:
    receiver.hold = threading.Event()  # the receiver answers nothing until the test lets it
    receiver.status = 500
    notices, http = notices_for(store, (receiver.url,), pause=LONG)
    returned = threading.Event()
    with http:

        def ask() -> None:
            notices(asked(store))
            returned.set()

        threading.Thread(target=ask, daemon=True).start()
        receiver.wait_for(1, attempts=True)
        assert returned.wait(30), "the notice held its caller until the receiver answered"
        worker = next(t for t in threading.enumerate() if t.name.startswith("approval-notices"))
        receiver.hold.set()  # answered 500: the next attempt would come after a LONG pause
        notices.close()
        worker.join(30)
        assert not worker.is_alive(), "close left a notice's retries waiting"
    assert len(receiver.attempts) == 1
    notices(store.ask(pending(call_id="c2")))  # closed: nothing more is posted
    assert len(receiver.attempts) == 1
