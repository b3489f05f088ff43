"""kernel.yaml's `approvals:` section (S24.4): how long a call waits for a person, and who is told.

A tool whose YAML says `approval: always`, or a hook's `ask`, pauses its
run until a person decides; undecided after `timeout_secs` it is denied.
Each approval asked is posted to the `notify` sinks (webhooks) with
single-use decision URLs; `public_url` is the server's address as the
people who click them reach it. `completion_wait_secs` bounds how long a
non-streamed `POST /v1/chat/completions` holds its request open for a
decision (then the call is denied, saying so).
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
    }
)


def approval_settings(values: Mapping[str, Any], _: Where) -> ApprovalSettings:
    return ApprovalSettings(
        timeout_secs=float(values.get("timeout_secs", ApprovalSettings.timeout_secs)),
        completion_wait_secs=float(values.get("completion_wait_secs", ApprovalSettings.completion_wait_secs)),
        public_url=values.get("public_url"),
        notify=tuple(sink["url"] for sink in values.get("notify", ())),
    )


__all__ = ["APPROVALS_SCHEMA", "ApprovalSettings", "approval_settings"]
