"""kernel.yaml's `cron:` section (S10): where jobs are kept, their limits, and jobs declared here.

Jobs that scripts schedule live in the cron store (`db_path`, SQLite; with
kernel.yaml `store.url` the table `cron_jobs` in PostgreSQL instead); the
`jobs` listed here are *static*: written into the same store at start-up,
owned by `user`, and replaced or removed when this file changes. Each job
has the fields of `schedule_cron` (docs/scripts.md 8.14): their names and
types are checked with the rest of kernel.yaml (`JOB_SCHEMA`), what they
mean (a template that exists, a valid schedule) when a scheduler starts or
`agentkernel check` runs (services/cron_jobs.py, services/cron.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkernel.config.schema import Where, expect, section
from agentkernel.config.server import USER_ID
from agentkernel.types import JSONObject


@dataclass(frozen=True)
class CronSettings:
    """The `cron:` section, validated; every field has a default, so the section may be absent."""

    db_path: Path = Path("logs/cron.db")  # resolved against the project's root by the loader
    min_interval_secs: float = 1.0  # the shortest `interval_secs` a job may ask for
    max_jobs_per_user: int = 100
    max_running_per_user: int = 2  # one user's runs at once, every kernel on the store; more due ones wait
    run_timeout_secs: float = 300.0  # one run of a job's agent, end to end; then it is stopped
    misfire_grace_secs: float = 60.0  # a due time later than this when noticed is a misfire
    webhook_attempts: int = 5  # deliveries of one webhook, with backoff between them
    user: str = "cron"  # the owner of the static jobs below
    jobs: tuple[JSONObject, ...] = ()

    @property
    def lease_secs(self) -> float:
        """How long a claim on a due time holds: no run takes longer, so an older claim is a dead kernel's."""
        return self.run_timeout_secs + 60.0


SINK_TYPES = ("log", "webhook", "session")
_TEXT = expect("a non-empty string", type="string", pattern=r"\S")

SINK_SCHEMA = expect(
    "a sink: {type: log}, {type: webhook, url: URL} or {type: session, session_id: ID}",
    **section(
        {
            "type": expect("one of " + ", ".join(SINK_TYPES), enum=list(SINK_TYPES)),
            "url": expect("an http:// or https:// URL", type="string", minLength=1),
            "session_id": expect("a session id", type="string", minLength=1),
        },
        required=["type"],
    ),
)
"""One `notify:` sink of a job; which fields go with which type, parse_job says."""

JOB_SCHEMA = expect(
    "a job: a mapping with the fields of schedule_cron",
    **section(
        {
            "name": _TEXT,
            "template": _TEXT,
            "interval_secs": expect("a number of seconds", type=["number", "null"]),
            "schedule": expect(
                'a cron expression of six fields, seconds first ("0 0 9 * * *")', type=["string", "null"]
            ),
            "oneshot_at": expect(
                'an RFC 3339 date and time in quotes ("2026-12-01T09:00:00Z")', type=["string", "null"]
            ),
            "timezone": expect("an IANA time zone name (such as Europe/Moscow)", type=["string", "null"]),
            "prompt": _TEXT,
            "notify": expect(
                "a non-empty list of sinks ({type: log}, …)",
                type=["array", "null"],
                minItems=1,
                items=SINK_SCHEMA,
            ),
            "misfire": expect("run_once or skip", enum=["run_once", "skip"]),
        },
        required=["name", "template", "prompt"],
    ),
)
"""One static job of `cron.jobs`: the fields of `schedule_cron` and their types (null: not given)."""

CRON_SCHEMA = section(
    {
        "db_path": expect("a file path", type="string", minLength=1),
        "min_interval_secs": expect("a number of seconds > 0", type="number", exclusiveMinimum=0),
        "max_jobs_per_user": expect("an integer >= 1", type="integer", minimum=1),
        "max_running_per_user": expect("an integer >= 1", type="integer", minimum=1),
        "run_timeout_secs": expect("a number of seconds > 0", type="number", exclusiveMinimum=0),
        "misfire_grace_secs": expect("a number of seconds >= 0", type="number", minimum=0),
        "webhook_attempts": expect("an integer >= 1", type="integer", minimum=1, maximum=20),
        "user": expect("a user id (1-128 of letters, digits, _ . @ -)", type="string", pattern=USER_ID),
        "jobs": expect(
            "a list of jobs (mappings with the fields of schedule_cron)", type="array", items=JOB_SCHEMA
        ),
    }
)


def cron_settings(values: Mapping[str, Any], root: Path, _: Where) -> CronSettings:
    """The section's values, `db_path` resolved against the project's root."""
    seconds = {
        key: float(values[key])
        for key in ("min_interval_secs", "run_timeout_secs", "misfire_grace_secs")
        if key in values
    }
    given = {key: value for key, value in values.items() if key not in ("db_path", "jobs")}
    return CronSettings(
        **{**given, **seconds},
        db_path=root / values.get("db_path", str(CronSettings.db_path)),
        jobs=tuple(values.get("jobs", ())),
    )


__all__ = ["CRON_SCHEMA", "JOB_SCHEMA", "SINK_SCHEMA", "SINK_TYPES", "CronSettings", "cron_settings"]
