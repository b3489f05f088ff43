"""A cron job's definition (S10.1): its fields checked, and when it is next due.

`parse_job` turns what a script (or kernel.yaml's `cron.jobs`) gives into a
`JobSpec`, or raises `JobInvalid` naming the field at fault; nothing else
here touches the store or the clock but through its arguments, so the
rules are the same for a helper call, a static job and a test. A static
job's field names and types were checked already, with the rest of
kernel.yaml (config/cron.py's `JOB_SCHEMA`, errors at the file and line).

Times are UTC epoch seconds (floats) everywhere inside; a `schedule` is
read in its `timezone` (IANA, default UTC), so `"0 0 9 * * *"` in
`Europe/Moscow` fires at nine in Moscow, summer time or not.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from agentkernel.config.cron import JOB_SCHEMA, SINK_TYPES
from agentkernel.errors import AgentKernelError
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.short_text import shown_value

MAX_NAME_CHARS = 200
MAX_PROMPT_CHARS = 100_000
JOB_KEYS = tuple(JOB_SCHEMA["properties"])  # kernel.yaml's static jobs are checked by that schema first
TIMINGS = ("interval_secs", "schedule", "oneshot_at")
Misfire = Literal["run_once", "skip"]


class JobInvalid(AgentKernelError):
    """A job's field is wrong; `field` names it (`notify[1].url`), the text says why."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.reason = message
        super().__init__(f"{field}: {message}" if field else message)


@dataclass(frozen=True)
class Timing:
    """When a job is due: every `interval_secs`, on a `schedule` (in `timezone`), or once at `oneshot_at`."""

    kind: Literal["interval", "schedule", "oneshot"]
    interval_secs: float | None = None
    schedule: str | None = None
    timezone: str = "UTC"
    oneshot_at: float | None = None

    def first_due(self, now: float) -> float | None:
        """The first due time of a job set at `now`: an interval's one interval later."""
        return self.due_after(now)

    def due_after(self, moment: float) -> float | None:
        """The first due time strictly after `moment`; None when there is none (a oneshot passed)."""
        if self.kind == "interval":
            assert self.interval_secs is not None
            return moment + self.interval_secs
        if self.kind == "oneshot":
            assert self.oneshot_at is not None
            return self.oneshot_at if self.oneshot_at > moment else None
        return _cron_after(self.schedule or "", self.timezone, moment)

    def following(self, due: float, now: float) -> float | None:
        """The next due time after the run due at `due`, claimed at `now`: the first one after now.

        An interval keeps its grid (`due` plus whole intervals), so a late
        firing does not push every later one back; due times passed while
        no scheduler ran are skipped over, not queued (they ran once, as
        this one).
        """
        if self.kind == "interval":
            assert self.interval_secs is not None
            passed = max(0, math.floor((now - due) / self.interval_secs)) + 1
            return due + passed * self.interval_secs
        return self.due_after(max(now, due))

    def to_json(self) -> JSONObject:
        """The timing as `list_cron` shows it: the field the job was given, and its timezone."""
        if self.kind == "interval":
            return {"interval_secs": self.interval_secs}
        if self.kind == "oneshot":
            return {"oneshot_at": rfc3339(self.oneshot_at)}
        return {"schedule": self.schedule, "timezone": self.timezone}


@dataclass(frozen=True)
class Sink:
    """Where a run's answer goes: the kernel's log, a webhook's `url`, or a chat's `session_id`."""

    type: Literal["log", "webhook", "session"]
    url: str | None = None
    session_id: str | None = None

    def to_json(self) -> JSONObject:
        shown: JSONObject = {"type": self.type}
        if self.url is not None:
            shown["url"] = self.url
        if self.session_id is not None:
            shown["session_id"] = self.session_id
        return shown


@dataclass(frozen=True)
class JobSpec:
    """A job as given, checked: what runs (`template`, `prompt`), when (`timing`), where answers go."""

    name: str
    template: str
    timing: Timing
    prompt: str
    notify: tuple[Sink, ...] = field(default_factory=lambda: (Sink("log"),))
    misfire: Misfire = "run_once"

    def to_json(self) -> JSONObject:
        """The definition as stored: parsing it again gives the same job."""
        shown: JSONObject = {"name": self.name, "template": self.template, "prompt": self.prompt}
        shown.update(self.timing.to_json())
        shown["notify"] = [sink.to_json() for sink in self.notify]
        shown["misfire"] = self.misfire
        return shown


def parse_job(options: JSONValue, min_interval_secs: float, now: float) -> JobSpec:
    """`schedule_cron`'s argument as a JobSpec; JobInvalid naming the first field at fault.

    The template's name is checked for shape only: whether it exists is the
    service's to say, which knows the templates.
    """
    if not isinstance(options, dict):
        raise JobInvalid(
            "",
            f"expected an object {{name, template, interval_secs | schedule | oneshot_at, "
            f"prompt, notify?}}, got {shown_value(options)}",
        )
    unknown = [key for key in options if key not in JOB_KEYS]
    if unknown:
        raise JobInvalid(unknown[0], f"unknown field (expected: {', '.join(JOB_KEYS)})")
    name = _text(options, "name", MAX_NAME_CHARS)
    template = _text(options, "template", MAX_NAME_CHARS)
    timing = _timing(options, min_interval_secs, now)
    prompt = _text(options, "prompt", MAX_PROMPT_CHARS)
    notify = _sinks(options.get("notify"))
    misfire = options.get("misfire", "run_once")
    if misfire == "skip":
        return JobSpec(name, template, timing, prompt, notify, "skip")
    if misfire != "run_once":
        raise JobInvalid("misfire", f"must be 'run_once' or 'skip', got {shown_value(misfire)}")
    return JobSpec(name, template, timing, prompt, notify, "run_once")


def _text(options: JSONObject, key: str, most: int) -> str:
    value = options.get(key)
    if not isinstance(value, str) or not value.strip():
        raise JobInvalid(key, f"must be a non-empty string, got {shown_value(value)}")
    if len(value) > most:
        raise JobInvalid(key, f"is {len(value):,} characters long, over the limit of {most:,}")
    if any(ord(char) < 32 for char in value) and key != "prompt":
        raise JobInvalid(key, f"must not hold control characters, got {shown_value(value)}")
    return value


def _timing(options: JSONObject, min_interval_secs: float, now: float) -> Timing:
    given = [key for key in TIMINGS if options.get(key) is not None]
    if len(given) != 1:
        said = ", ".join(given) if given else "none"
        raise JobInvalid("", f"give exactly one of interval_secs, schedule, oneshot_at (got {said})")
    (key,) = given
    value = options[key]
    zone = options.get("timezone")
    if zone is not None and key != "schedule":
        raise JobInvalid("timezone", "applies to schedule only")
    if key == "interval_secs":
        return Timing("interval", interval_secs=_interval(value, min_interval_secs))
    if key == "oneshot_at":
        return Timing("oneshot", oneshot_at=_moment(value, now))
    return Timing("schedule", schedule=_schedule(value, now), timezone=_zone(zone))


def _interval(value: JSONValue, least: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise JobInvalid("interval_secs", f"must be a number of seconds, got {shown_value(value)}")
    if value < least:
        raise JobInvalid(
            "interval_secs", f"must be at least {least:g} (cron.min_interval_secs), got {value:g}"
        )
    return float(value)


def _moment(value: JSONValue, now: float) -> float:
    if not isinstance(value, str):
        raise JobInvalid("oneshot_at", f"must be an RFC 3339 date and time, got {shown_value(value)}")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise JobInvalid(
            "oneshot_at", f"must be an RFC 3339 date and time such as 2026-12-01T09:00:00Z, got {value!r}"
        ) from None
    if moment.tzinfo is None:
        raise JobInvalid("oneshot_at", f"needs a time zone offset (Z or +03:00), got {value!r}")
    stamp = moment.timestamp()
    if stamp <= now:
        raise JobInvalid("oneshot_at", f"is in the past ({value}; now is {rfc3339(now)})")
    return stamp


def _schedule(value: JSONValue, now: float) -> str:
    if not isinstance(value, str) or len(value.split()) != 6:
        raise JobInvalid(
            "schedule",
            'must be a cron expression of six fields, seconds first ("0 0 9 * * *": nine every morning), '
            f"got {shown_value(value)}",
        )
    from croniter import CroniterError, croniter

    try:
        croniter(value, now, second_at_beginning=True).get_next(float)
    except (CroniterError, ValueError, KeyError) as exc:
        raise JobInvalid("schedule", f"is not a valid cron expression ({exc}): {value!r}") from None
    return value


def _zone(value: JSONValue) -> str:
    if value is None:
        return "UTC"
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not isinstance(value, str):
        raise JobInvalid("timezone", f"must be an IANA time zone name, got {shown_value(value)}")
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise JobInvalid(
            "timezone", f"is not an IANA time zone name (such as Europe/Moscow): {value!r}"
        ) from None
    return value


def _sinks(value: JSONValue) -> tuple[Sink, ...]:
    if value is None:
        return (Sink("log"),)
    if not isinstance(value, list) or not value:
        raise JobInvalid(
            "notify", f'must be a non-empty list of sinks ({{type: "log"}}, …), got {shown_value(value)}'
        )
    return tuple(_sink(f"notify[{i}]", item) for i, item in enumerate(value))


def _sink(where: str, item: JSONValue) -> Sink:
    if not isinstance(item, dict):
        raise JobInvalid(where, f"must be an object {{type, …}}, got {shown_value(item)}")
    kind = item.get("type")
    allowed = {"log": {"type"}, "webhook": {"type", "url"}, "session": {"type", "session_id"}}
    if kind not in allowed:
        raise JobInvalid(f"{where}.type", f"must be one of {', '.join(SINK_TYPES)}, got {shown_value(kind)}")
    extra = sorted(set(item) - allowed[str(kind)])
    if extra:
        raise JobInvalid(f"{where}.{extra[0]}", f"is not a field of a {kind} sink")
    if kind == "webhook":
        url = item.get("url")
        if not isinstance(url, str) or not url:
            raise JobInvalid(f"{where}.url", f"must be an http:// or https:// URL, got {shown_value(url)}")
        return Sink("webhook", url=url)
    if kind == "session":
        session = item.get("session_id")
        if session is not None and (not isinstance(session, str) or not session):
            raise JobInvalid(f"{where}.session_id", f"must be a session id, got {shown_value(session)}")
        return Sink("session", session_id=session)
    return Sink("log")


def _cron_after(expression: str, zone: str, moment: float) -> float:
    from zoneinfo import ZoneInfo

    from croniter import croniter

    start = datetime.fromtimestamp(moment, ZoneInfo(zone))
    return float(croniter(expression, start, second_at_beginning=True).get_next(float))


def rfc3339(moment: float | None) -> str | None:
    """A UTC epoch second as `2026-12-01T09:00:00.000Z`; None stays None."""
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def spec_from_json(text: str) -> JobSpec:
    """A stored definition back as a JobSpec (checked when it was stored; a past oneshot is kept)."""
    data: Any = json.loads(text)
    return parse_job(data, 0.0, now=0.0)


__all__ = [
    "JOB_KEYS",
    "MAX_NAME_CHARS",
    "JobInvalid",
    "JobSpec",
    "Sink",
    "Timing",
    "parse_job",
    "rfc3339",
    "spec_from_json",
]
