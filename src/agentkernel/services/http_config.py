"""kernel.yaml's `http:` section → `HttpConfig`, checked without importing httpx.

The kernel checks every section of kernel.yaml when it starts, so a typo is
refused at once; the HTTP service itself (and httpx, a tenth of a second to
import) is built only when a script first makes a request (issue 8).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from agentkernel.errors import ConfigError
from agentkernel.services.addresses import IPAddress, IPNetwork, class_of_network

_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


@dataclass(frozen=True)
class HostList:
    """Host names (`example.com`, `*.example.com` for its subdomains) and IP networks."""

    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    networks: tuple[IPNetwork, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.names or self.suffixes or self.networks)

    def has_name(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self.names or any(host.endswith(suffix) for suffix in self.suffixes)

    def has_address(self, address: IPAddress) -> bool:
        return any(address in network for network in self.networks if network.version == address.version)


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


_FIELDS = (
    "max_response_bytes",
    "default_timeout_secs",
    "allow_hosts",
    "deny_hosts",
    "follow_redirects",
    "max_redirects",
    "allow_private",
)


def parse_host_entry(entry: object) -> str | IPNetwork:
    """One allow/deny entry: a lower-cased host name (maybe `*.`-prefixed), or an IP network.

    Raises ValueError with the reason; the caller adds the field's name.
    """
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError(f"expected a host name, IP address or CIDR range, got {entry!r}")
    text = entry.strip().lower()
    try:
        return ipaddress.ip_network(text.strip("[]"), strict=False)
    except ValueError:
        pass
    name = text[2:] if text.startswith("*.") else text
    labels = name.rstrip(".").split(".")
    if "/" in text or not all(_HOST_LABEL.match(label) for label in labels):
        raise ValueError(f"{entry!r} is not a host name, IP address or CIDR range")
    return text.rstrip(".")


def parse_host_list(value: object, where: str, path: str | None) -> HostList:
    if not isinstance(value, list):
        raise ConfigError(path, f"{where}: expected a list of hosts, got {type(value).__name__}")
    names: set[str] = set()
    suffixes: list[str] = []
    networks: list[IPNetwork] = []
    for index, entry in enumerate(value):
        try:
            parsed = parse_host_entry(entry)
        except ValueError as exc:
            raise ConfigError(path, f"{where}[{index}]: {exc}") from None
        if not isinstance(parsed, str):
            networks.append(parsed)
        elif parsed.startswith("*."):
            suffixes.append(parsed[1:])  # ".example.com": subdomains only
        else:
            names.add(parsed)
    return HostList(frozenset(names), tuple(suffixes), tuple(networks))


def _number(section: Mapping[str, object], key: str, default: float, path: str | None) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(path, f"http.{key}: expected a positive number, got {value!r}")
    return float(value)


def _integer(section: Mapping[str, object], key: str, default: int, low: int, path: str | None) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(path, f"http.{key}: expected an integer of at least {low}, got {value!r}")
    return value


def _boolean(section: Mapping[str, object], key: str, default: bool, path: str | None) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(path, f"http.{key}: expected true or false, got {value!r}")
    return value


def check_allowed_networks(entries: list[object], allow_private: bool, path: str | None) -> None:
    """An allow_hosts range the address classes keep closed is a mistake: say so at load.

    The allow list only narrows what the classes let through; listing
    `169.254.169.254` or, without `allow_private`, `10.0.0.0/8` would look
    like it opens them while every request there is refused.
    """
    for index, entry in enumerate(entries):
        parsed = parse_host_entry(entry)
        if isinstance(parsed, str):
            continue
        address_class = class_of_network(parsed)
        if address_class is None:
            continue
        where = f"http.allow_hosts[{index}]: {entry} is {address_class.kind}"
        if address_class.always:
            raise ConfigError(path, f"{where}, never reachable from scripts; remove it")
        if not allow_private:
            raise ConfigError(path, f"{where}; set http.allow_private: true to let scripts reach it")


def parse_http_config(section: object, path: str | None = None) -> HttpConfig:
    """Validate kernel.yaml's `http:` mapping; every error names `http.<field>`."""
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise ConfigError(path, f"http: expected a mapping, got {type(section).__name__}")
    for key in section:
        if key not in _FIELDS:
            raise ConfigError(path, f"http.{key}: unknown field (known: {', '.join(_FIELDS)})")
    allow = section.get("allow_hosts")
    allow_private = _boolean(section, "allow_private", False, path)
    allow_hosts = None if allow is None else parse_host_list(allow, "http.allow_hosts", path)
    if isinstance(allow, list):
        check_allowed_networks(allow, allow_private, path)
    return HttpConfig(
        max_response_bytes=_integer(section, "max_response_bytes", 10 * 1024 * 1024, 1, path),
        default_timeout_secs=_number(section, "default_timeout_secs", 30.0, path),
        allow_hosts=allow_hosts,
        deny_hosts=parse_host_list(section.get("deny_hosts", []), "http.deny_hosts", path),
        follow_redirects=_boolean(section, "follow_redirects", True, path),
        max_redirects=_integer(section, "max_redirects", 5, 0, path),
        allow_private=allow_private,
    )


__all__ = [
    "HostList",
    "HttpConfig",
    "check_allowed_networks",
    "parse_host_entry",
    "parse_host_list",
    "parse_http_config",
]
