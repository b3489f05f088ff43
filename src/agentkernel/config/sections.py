"""The helper sections of kernel.yaml (`http`, `shell`, `files`, `state`, `duckdb`) and `llm`: one frozen
dataclass each, its JSON Schema beside it, and the checks no schema can state.

Each service is built from its own dataclass; nothing here imports a
service's library (httpx, DuckDB), so the whole file is checked when the
kernel loads, while each service is built when a script first needs it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agentkernel.config.hosts import HostList, check_allowed_networks, parse_host_list
from agentkernel.config.schema import Schema, StrictValidator, Where, expect, first_error, section, yaml_error
from agentkernel.util.yaml_source import NO_LINES, dotted

MAX_DUCK_TIMEOUT_SECS = 86_400.0  # a day; also keeps timers and lock waits within what threading accepts
LLM_PROVIDERS = ("openai_compat",)
ENV_NAME = "^[A-Za-z_][A-Za-z0-9_]*$"
SECRET_HINT = "the key never sits in YAML: put it in an environment variable and name it in `api_key_env`"

_SWITCH = expect("true or false", type="boolean")
_NON_EMPTY = expect("a non-empty string", type="string", pattern=r"\S")


def _at_least(minimum: int, wording: str = ">=") -> Schema:
    """An integer of at least `minimum`: `>= 1` in most sections, `of at least 1` in `http` and `duckdb`."""
    text = f"an integer >= {minimum}" if wording == ">=" else f"an integer of at least {minimum}"
    return expect(text, type="integer", minimum=minimum)


def _finite_positive(unit: str) -> Schema:
    return expect(f"a number of {unit} > 0", type="number", exclusiveMinimum=0, exclusiveMaximum=math.inf)


# -- http -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpConfig:
    """kernel.yaml's `http:` section, validated (S8.3 gives the default timeout).

    `allow_private` is off unless the section turns it on: scripts are
    untrusted, and the kernel's machine and LAN are what they must not reach
    by default.
    """

    max_response_bytes: int = 10 * 1024 * 1024
    default_timeout_secs: float = 30.0
    allow_hosts: HostList | None = None
    deny_hosts: HostList = field(default_factory=HostList)
    follow_redirects: bool = True
    max_redirects: int = 5
    allow_private: bool = False


HTTP_SCHEMA = section(
    {
        "max_response_bytes": _at_least(1, "of at least"),
        "default_timeout_secs": expect("a positive number", type="number", exclusiveMinimum=0),
        "allow_hosts": {},  # host lists: parse_host_list
        "deny_hosts": {},
        "follow_redirects": _SWITCH,
        "max_redirects": _at_least(0, "of at least"),
        "allow_private": _SWITCH,
    }
)


def http_config(values: Mapping[str, Any], where: Where) -> HttpConfig:
    allow = values.get("allow_hosts")
    allow_private = values.get("allow_private", False)
    allow_hosts = None if allow is None else parse_host_list(allow, "allow_hosts", where)
    if isinstance(allow, list):
        check_allowed_networks(allow, allow_private, where)
    scalars = {k: v for k, v in values.items() if k not in ("allow_hosts", "deny_hosts")}
    return HttpConfig(
        **{**scalars, "default_timeout_secs": float(values.get("default_timeout_secs", 30.0))},
        allow_hosts=allow_hosts,
        deny_hosts=parse_host_list(values.get("deny_hosts", []), "deny_hosts", where),
    )


# -- shell ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShellSettings:
    """The `shell:` section of kernel.yaml.

    `enabled` is off unless the section turns it on: a program a script
    starts runs with the kernel's own rights, which no script should get by
    a config that merely forgot the section. `env_allow` names (or globs)
    the variables a program gets beyond the few every program needs, and
    `non_dumpable` keeps the kernel's memory from its programs (see
    services/program_environment.py).
    """

    enabled: bool = False
    default_timeout_secs: float = 30.0
    max_output_bytes: int = 1 << 20
    max_concurrent: int = 8
    env_allow: tuple[str, ...] = ()
    non_dumpable: bool = True


SHELL_SCHEMA = section(
    {
        "enabled": _SWITCH,
        "default_timeout_secs": _finite_positive("seconds"),
        "max_output_bytes": _at_least(1),
        "max_concurrent": _at_least(1),
        "env_allow": expect("a list of names", type="array", items={"type": "string", "minLength": 1}),
        "non_dumpable": _SWITCH,
    }
)


def shell_settings(values: Mapping[str, Any], _: Where) -> ShellSettings:
    timeout = float(values.get("default_timeout_secs", ShellSettings.default_timeout_secs))
    return ShellSettings(
        **{**values, "default_timeout_secs": timeout, "env_allow": tuple(values.get("env_allow", ()))}
    )


# -- files ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilesSettings:
    """The `files:` section of kernel.yaml."""

    max_read_bytes: int = 16 << 20
    max_write_bytes: int = 16 << 20
    max_list_entries: int = 10_000
    read_roots: tuple[str, ...] | None = None  # None: the scripts folders and data/shared
    max_scratch_bytes: int = 256 << 20
    max_scratch_entries: int = 10_000
    scratch_ttl_hours: float = 24.0


FILES_SCHEMA = section(
    {
        "read_roots": expect(
            "a list of non-empty strings", type=["array", "null"], items={"type": "string", "pattern": r"\S"}
        ),
        "max_read_bytes": _at_least(1),
        "max_write_bytes": _at_least(1),
        "max_list_entries": _at_least(1),
        "max_scratch_bytes": _at_least(1),
        "max_scratch_entries": _at_least(1),
        "scratch_ttl_hours": _finite_positive("hours"),
    }
)


def files_settings(values: Mapping[str, Any], _: Where) -> FilesSettings:
    roots = values.get("read_roots")
    ttl = float(values.get("scratch_ttl_hours", FilesSettings.scratch_ttl_hours))
    return FilesSettings(
        **{**values, "read_roots": None if roots is None else tuple(roots), "scratch_ttl_hours": ttl}
    )


# -- state ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StateSettings:
    """The `state:` section of kernel.yaml; `db_path` (resolved) None means no store is attached (S11.3).

    The file may also be named by the manual's `logging.state_db_path`, not
    by both: two places for one setting is how two files come to exist.
    """

    db_path: Path | None = None
    max_value_bytes: int = 1024 * 1024
    max_result_bytes: int = 16 * 1024 * 1024
    max_user_bytes: int = 64 * 1024 * 1024


STATE_SCHEMA = section(
    {
        "db_path": expect("a non-empty string", type=["string", "null"], pattern=r"\S"),
        "max_value_bytes": _at_least(1),
        "max_result_bytes": _at_least(1),
        "max_user_bytes": _at_least(1),
    }
)


def state_settings(values: Mapping[str, Any], _: Where) -> StateSettings:
    """The limits; `db_path` is placed by the kernel's config, which knows `logging:` and the root."""
    return StateSettings(**{k: v for k, v in values.items() if k != "db_path"})


# -- duckdb -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DuckSettings:
    """The `duckdb:` section of kernel.yaml."""

    dir: str = "duckdb"  # under paths.data_dir
    max_rows: int = 10_000  # the cap on db_query's limit
    max_result_bytes: int = 10_000_000  # the rows of one db_query as JSON text
    max_open_files: int = 64
    query_timeout_secs: float = 30.0
    memory_limit_mb: int = 256  # per open database
    threads: int = 2  # per open database
    max_file_bytes: int = 1 << 30  # what one database file may hold (services/duck_quota.py)


DUCK_SCHEMA = section(
    {
        "dir": expect("a non-empty folder name", type="string", pattern=r"\S"),
        "max_rows": _at_least(1, "of at least"),
        "max_result_bytes": _at_least(1, "of at least"),
        "max_open_files": _at_least(1, "of at least"),
        "query_timeout_secs": expect(
            "seconds, more than 0 and at most a day",
            type="number",
            exclusiveMinimum=0,
            maximum=MAX_DUCK_TIMEOUT_SECS,
        ),
        "memory_limit_mb": _at_least(1, "of at least"),
        "threads": _at_least(1, "of at least"),
        "max_file_bytes": _at_least(1, "of at least"),
    }
)


def duck_settings(values: Mapping[str, Any], _: Where) -> DuckSettings:
    return DuckSettings(**values)


# -- llm --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMConfig:
    """Where the LLM is and how to talk to it; no secrets, so safe to print.

    The API key never sits in YAML: the config names the environment
    variable that holds it (`api_key_env`), read only when the provider is
    built; errors never echo a value that might be a key.
    """

    base_url: str
    model: str
    provider: str = "openai_compat"
    name: str | None = None  # how templates and scripts name it (S26.4); None: by its `model`
    api_key_env: str | None = None
    timeout_secs: float = 60.0
    max_retries: int = 3
    max_concurrency: int = 16
    # S26.4: the providers asked in order when this one fails for a retryable cause (each with its own
    # base_url, model, key and limits; they share `max_concurrency`)
    fallback: tuple[LLMConfig, ...] = ()

    def named(self) -> str:
        """How logs and errors name this provider: its model at its server's address."""
        return f"{self.model} at {self.base_url}"

    @property
    def label(self) -> str:
        """The provider's name among the ones `llm:` lists: its `name`, else its model (S26.4)."""
        return self.name or self.model

    def chain(self) -> tuple[LLMConfig, ...]:
        """This provider, then its fallbacks: the order a call asks them in."""
        return (self, *self.fallback)

    def as_section(self) -> dict[str, Any]:
        """The fields as kernel.yaml's `llm:` writes them (to change one and read them again)."""
        values: dict[str, Any] = {
            "base_url": self.base_url,
            "model": self.model,
            "provider": self.provider,
            "api_key_env": self.api_key_env,
            "timeout_secs": self.timeout_secs,
            "max_retries": self.max_retries,
        }
        if self.name is not None:
            values["name"] = self.name
        if self.fallback:
            values["fallback"] = [f.as_section() for f in self.fallback]
        return values


_PROVIDER_FIELDS: dict[str, Any] = {
    "provider": {
        "enum": list(LLM_PROVIDERS),
        "x-message": "unknown provider {value!r} (known: " + ", ".join(LLM_PROVIDERS) + ")",
    },
    "base_url": _NON_EMPTY,
    "model": _NON_EMPTY,
    "name": expect(
        "a name: letters, digits, _, ., - (at most 64)", type="string", pattern=r"^[A-Za-z0-9_.-]{1,64}$"
    ),
    "api_key_env": {  # the value is never echoed: someone may have pasted the key itself here
        "type": ["string", "null"],
        "pattern": ENV_NAME,
        "x-message": "expected the NAME of an environment variable (letters, digits, _)",
    },
    "timeout_secs": expect("a number > 0", type="number", exclusiveMinimum=0),
    "max_retries": _at_least(0),
}

_FALLBACK = expect(
    "a provider: {base_url, model, name?, api_key_env?, timeout_secs?, max_retries?}",
    **section(
        _PROVIDER_FIELDS,
        required=["base_url", "model"],
        **{"x-refused": dict.fromkeys(("api_key", "key", "token"), SECRET_HINT)},
    ),
)

LLM_SCHEMA = section(
    {
        **_PROVIDER_FIELDS,
        "max_concurrency": _at_least(1),
        "fallback": expect("a list of providers, asked in order", type="array", items=_FALLBACK),
    },
    required=["base_url", "model"],
    **{"x-refused": dict.fromkeys(("api_key", "key", "token"), SECRET_HINT)},
)


def llm_config(values: Mapping[str, Any], where: Where, at: tuple[str | int, ...] = ("llm",)) -> LLMConfig:
    url = str(values["base_url"]).strip()
    if not url.startswith(("http://", "https://")):
        raise where.error((*at, "base_url"), f"expected an http:// or https:// URL, got {url!r}")
    fallback = tuple(
        llm_config(item, where, (*at, "fallback", index))
        for index, item in enumerate(values.get("fallback", ()))
    )
    config = LLMConfig(
        **{
            **values,
            "base_url": url.rstrip("/"),
            "model": str(values["model"]).strip(),
            "timeout_secs": float(values.get("timeout_secs", LLMConfig.timeout_secs)),
            "fallback": fallback,
        }
    )
    if at == ("llm",):
        _refuse_twice_named(config, where)
    return config


def _refuse_twice_named(config: LLMConfig, where: Where) -> None:
    """Each provider `llm:` lists has its own name: a template or a script names the one it means."""
    seen: dict[str, tuple[str | int, ...]] = {}
    for index, provider in enumerate(config.chain()):
        at: tuple[str | int, ...] = ("llm",) if index == 0 else ("llm", "fallback", index - 1)
        first = seen.setdefault(provider.label, at)
        if first != at:
            field = "name" if provider.name else "model"
            raise where.error(
                (*at, field),
                f"a provider named {provider.label!r} is listed already ({dotted(first)}); "
                "give one of them a `name:` of its own (templates and scripts ask for a provider by name)",
            )


# -- reading one section ----------------------------------------------------------------------------

S = TypeVar("S")
Builder = Callable[[Mapping[str, Any], Where], S]

SECTIONS: dict[str, Schema] = {
    "http": HTTP_SCHEMA,
    "shell": SHELL_SCHEMA,
    "files": FILES_SCHEMA,
    "state": STATE_SCHEMA,
    "duckdb": DUCK_SCHEMA,
    "llm": LLM_SCHEMA,
}


def read_section(name: str, build: Builder[S], raw: object, path: Path | str | None = None) -> S:
    """One section given alone (None: absent), checked as kernel.yaml's loading checks it."""
    document: dict[str, Any] = {name: {} if raw is None else raw}
    schema: Schema = {"type": "object", "properties": {name: SECTIONS[name]}}
    error = first_error(StrictValidator(schema), document)
    if error is not None:
        raise yaml_error(path, NO_LINES, error, schema, document)
    values: Mapping[str, Any] = document[name]  # a mapping: the schema said so
    return build(values, Where(path))


def parse_http_config(raw: object, path: Path | str | None = None) -> HttpConfig:
    """kernel.yaml's `http:` mapping given alone; every error names `http.<field>`."""
    return read_section("http", http_config, raw, path)


def parse_llm_config(raw: object, path: Path | str | None = None) -> LLMConfig:
    """kernel.yaml's `llm:` mapping given alone; a ConfigError names the field."""
    return read_section("llm", llm_config, raw, path)


def parse_duck_settings(raw: object, path: Path | str | None = None) -> DuckSettings:
    """kernel.yaml's `duckdb:` mapping given alone; every error names `duckdb.<field>`."""
    return read_section("duckdb", duck_settings, raw, path)


__all__ = [
    "LLM_PROVIDERS",
    "MAX_DUCK_TIMEOUT_SECS",
    "SECTIONS",
    "DuckSettings",
    "FilesSettings",
    "HttpConfig",
    "LLMConfig",
    "ShellSettings",
    "StateSettings",
    "duck_settings",
    "files_settings",
    "http_config",
    "llm_config",
    "parse_duck_settings",
    "parse_http_config",
    "parse_llm_config",
    "read_section",
    "shell_settings",
    "state_settings",
]
