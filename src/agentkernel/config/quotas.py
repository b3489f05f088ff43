"""kernel.yaml's `quotas:` section (S26.3): how many LLM tokens and calls a user may spend a UTC day or month.

```yaml
quotas:
  default: {tokens_per_day: 200000, calls_per_day: 1000, tokens_per_month: 3000000}
  users: {alice: {tokens_per_day: 1000000}, ops: {tokens_per_month: null}}
  templates: {writer: {tokens_per_day: 50000}}
```

Four limits, each optional: `tokens_per_day`, `calls_per_day`,
`tokens_per_month`, `calls_per_month` (tokens: input and output together).
`default` holds for every user; an entry of `users` (by user id) replaces
the default's fields it names, `null` lifting that limit for the user. A
limit of `templates` holds for each user's own use within that template,
besides the user's. Days and months are UTC. Without the section nothing is
limited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from agentkernel.config.schema import Where, expect, section
from agentkernel.config.server import USER_ID

PERIODS = ("day", "month")
MEASURES = ("tokens", "calls")
LIMIT_NAMES = tuple(f"{measure}_per_{period}" for period in PERIODS for measure in MEASURES)
TEMPLATE_NAME = r"^[A-Za-z0-9_.-]{1,128}$"


@dataclass(frozen=True)
class QuotaLimit:
    """One limit that applies to a call: `tokens_per_day` of `limit`, for the user or within a template."""

    name: str  # one of LIMIT_NAMES
    limit: int
    template: str | None = None  # None: the user's use in every template together

    @property
    def measure(self) -> str:
        return self.name.split("_per_")[0]

    @property
    def period(self) -> str:
        return self.name.split("_per_")[1]


@dataclass(frozen=True)
class QuotaSettings:
    """The `quotas:` section, validated; each mapping holds limit name -> limit (None: no limit)."""

    default: Mapping[str, int] = field(default_factory=dict)
    users: Mapping[str, Mapping[str, int | None]] = field(default_factory=dict)
    templates: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @cached_property
    def enabled(self) -> bool:
        """Whether any limit is set at all (else no call need read the ledger); asked before every call."""
        overrides = (value for limits in self.users.values() for value in limits.values())
        return bool(self.default or self.templates or any(value is not None for value in overrides))

    def limits_for(self, user: str | None, template: str | None) -> tuple[QuotaLimit, ...]:
        """The limits a call of `user` within `template` must fit, the user's first, in LIMIT_NAMES order."""
        own: dict[str, int | None] = {**self.default, **self.users.get(user or "", {})}
        found = [QuotaLimit(name, limit) for name in LIMIT_NAMES if (limit := own.get(name)) is not None]
        within = self.templates.get(template or "", {}) if template is not None else {}
        found += [QuotaLimit(name, within[name], template) for name in LIMIT_NAMES if name in within]
        return tuple(found)


def _limits(nullable: bool) -> dict[str, Any]:
    wording = "a whole number >= 0" + (", or null for no limit" if nullable else "")
    kinds = ["integer", "null"] if nullable else "integer"
    fields = {name: expect(wording, type=kinds, minimum=0) for name in LIMIT_NAMES}
    return section(fields, **{"x-expected": "limits: a mapping such as {tokens_per_day: 200000}"})


QUOTAS_SCHEMA = section(
    {
        "default": _limits(nullable=False),
        "users": expect(
            "a mapping of user id to limits ({tokens_per_day: N, …})",
            type="object",
            propertyNames={"pattern": USER_ID},
            additionalProperties=_limits(nullable=True),
        ),
        "templates": expect(
            "a mapping of template name to limits ({tokens_per_day: N, …})",
            type="object",
            propertyNames={"pattern": TEMPLATE_NAME},
            additionalProperties=_limits(nullable=False),
        ),
    },
    **{"x-expected": "a mapping of default, users and templates"},
)


def quota_settings(values: Mapping[str, Any], _: Where) -> QuotaSettings:
    """The section's settings; an absent section (`{}`) limits nothing."""
    return QuotaSettings(
        default=dict(values.get("default", {})),
        users={user: dict(limits) for user, limits in values.get("users", {}).items()},
        templates={name: dict(limits) for name, limits in values.get("templates", {}).items()},
    )


__all__ = ["LIMIT_NAMES", "QUOTAS_SCHEMA", "QuotaLimit", "QuotaSettings", "quota_settings"]
