"""kernel.yaml's `approvals:` section (S24.4): how long a call waits for a person, and who is told.

A tool whose YAML says `approval: always`, or a hook's `ask`, pauses its
run until a person decides; undecided after `timeout_secs` it is denied.
Each approval asked is posted to the `notify` sinks (webhooks) with
single-use decision URLs; `public_url` is the server's address as the
people who click them reach it. `completion_wait_secs` bounds how long a
non-streamed `POST /v1/chat/completions` holds its request open for a
decision (then the call is denied, saying so). A sink's POST is retried
with growing pauses, `webhook_attempts` times at most. Sinks without a
`public_url` are refused at load: their links would lead nowhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentkernel.config.schema import Where, expect, section


@dataclass(frozen=True)
class ApprovalSettings:
    """The `approvals:` section, validated; every field has a default, so the section may be absent."""

    timeout_secs: float = 86400.0
    completion_wait_secs: float = 300.0
    public_url: str | None = None  # where decision URLs point (the server's address as people reach it)
    notify: tuple[str, ...] = ()  # webhook URLs an approval asked is posted to
    webhook_attempts: int = 5  # deliveries of one notice to one sink, with backoff between them


_WEBHOOK = expect(
    "a sink: {type: webhook, url: URL}",
    **section(
        {
            "type": expect("webhook", enum=["webhook"]),
            "url": expect("an http:// or https:// URL", type="string", pattern=r"^https?://\S+$"),
        },
        required=["type", "url"],
    ),
)

APPROVALS_SCHEMA = section(
    {
        "timeout_secs": expect("a number of seconds > 0", type="number", exclusiveMinimum=0),
        "completion_wait_secs": expect("a number of seconds > 0", type="number", exclusiveMinimum=0),
        "public_url": expect("an http:// or https:// URL", type="string", pattern=r"^https?://\S+$"),
        "notify": expect("a list of sinks ({type: webhook, url: URL})", type="array", items=_WEBHOOK),
        "webhook_attempts": expect("an integer >= 1", type="integer", minimum=1, maximum=20),
    }
)


def approval_settings(values: Mapping[str, Any], where: Where) -> ApprovalSettings:
    notify = tuple(sink["url"] for sink in values.get("notify", ()))
    public_url = values.get("public_url")
    if notify and public_url is None:
        raise where.error(
            ("approvals", "public_url"),
            "required when approvals.notify names a sink: the decision URLs each notice carries are "
            "this address followed by /v1/approval-links/… (the server as the people who decide reach it)",
        )
    return ApprovalSettings(
        timeout_secs=float(values.get("timeout_secs", ApprovalSettings.timeout_secs)),
        completion_wait_secs=float(values.get("completion_wait_secs", ApprovalSettings.completion_wait_secs)),
        public_url=None if public_url is None else public_url.rstrip("/"),
        notify=notify,
        webhook_attempts=int(values.get("webhook_attempts", ApprovalSettings.webhook_attempts)),
    )


__all__ = ["APPROVALS_SCHEMA", "ApprovalSettings", "approval_settings"]
