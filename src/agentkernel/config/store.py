"""kernel.yaml's `store:` section (S27.2): the PostgreSQL database the stores move to, or none.

`store: {url: postgresql://user:password@host:port/database}` puts the
stores that have a PostgreSQL form there (today the usage ledger; the rest
of issue 30 to come); without the section, `AGENTKERNEL_STORE_URL` does the
same, and with neither the stores stay SQLite files as before (psycopg is
never imported). The URL's password is never shown: not in errors, not in
the settings' repr (`shown` masks it), since kernel.yaml errors and logs
reach people who must not read it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agentkernel.config.schema import Where, section
from agentkernel.errors import ConfigError

STORE_URL_ENV = "AGENTKERNEL_STORE_URL"
URL_SCHEMES = ("postgresql", "postgres")
_URL_PATTERN = r"^postgres(ql)?://\S+$"
_URL_MESSAGE = (
    "expected a postgresql://user:password@host:port/database URL "
    "(the value is not shown: it may hold a password)"
)


def masked_url(url: str) -> str:
    """`url` with its password (if any) replaced by `***`: what errors and logs may show."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


@dataclass(frozen=True)
class StoreSettings:
    """The `store:` section (or `AGENTKERNEL_STORE_URL`); `url` None: the embedded SQLite stores."""

    url: str | None = field(default=None, repr=False)  # may hold a password: see `shown`
    from_env: bool = False  # the URL came from AGENTKERNEL_STORE_URL, not kernel.yaml

    @property
    def postgres(self) -> bool:
        """The stores with a PostgreSQL form live in the database at `url`."""
        return self.url is not None

    @property
    def shown(self) -> str | None:
        """The URL as errors and logs show it: its password masked."""
        return None if self.url is None else masked_url(self.url)

    @property
    def named(self) -> str:
        """Where the URL was set, for errors: the kernel.yaml field or the variable."""
        return f"${STORE_URL_ENV}" if self.from_env else "store.url"

    def __repr__(self) -> str:
        return f"StoreSettings(url={self.shown!r}, from_env={self.from_env})"


STORE_SCHEMA = section(
    {"url": {"type": "string", "pattern": _URL_PATTERN, "x-message": _URL_MESSAGE}},
    required=["url"],
)


def store_settings(
    values: Mapping[str, Any] | None, _: Where, environ: Mapping[str, str] | None = None
) -> StoreSettings:
    """The section's settings; `values` None (absent): `AGENTKERNEL_STORE_URL`, else the embedded stores."""
    if values is not None:
        return StoreSettings(url=str(values["url"]))
    url = (os.environ if environ is None else environ).get(STORE_URL_ENV, "").strip()
    if not url:
        return StoreSettings()
    if urlsplit(url).scheme not in URL_SCHEMES:
        raise ConfigError(None, f"${STORE_URL_ENV}: {_URL_MESSAGE}")
    return StoreSettings(url=url, from_env=True)


__all__ = ["STORE_SCHEMA", "STORE_URL_ENV", "StoreSettings", "masked_url", "store_settings"]
