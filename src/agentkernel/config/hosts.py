"""Host lists of kernel.yaml's `http:` section: names, `*.` suffixes, IP networks; no httpx needed."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentkernel.config.schema import Where

if TYPE_CHECKING:  # the address classes' tables: built when an allow list names a network, not before
    from agentkernel.util.addresses import IPAddress, IPNetwork

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


def parse_host_list(value: object, field: str, where: Where) -> HostList:
    """`http.<field>`: a list of host entries; a ConfigError names the entry at fault."""
    if not isinstance(value, list):
        raise where.error(("http", field), f"expected a list of hosts, got {type(value).__name__}")
    names: set[str] = set()
    suffixes: list[str] = []
    networks: list[IPNetwork] = []
    for index, entry in enumerate(value):
        try:
            parsed = parse_host_entry(entry)
        except ValueError as exc:
            raise where.error(("http", field, index), str(exc)) from None
        if not isinstance(parsed, str):
            networks.append(parsed)
        elif parsed.startswith("*."):
            suffixes.append(parsed[1:])  # ".example.com": subdomains only
        else:
            names.add(parsed)
    return HostList(frozenset(names), tuple(suffixes), tuple(networks))


def check_allowed_networks(entries: list[object], allow_private: bool, where: Where) -> None:
    """An allow_hosts range the address classes keep closed is a mistake: say so at load.

    The allow list only narrows what the classes let through; listing
    `169.254.169.254` or, without `allow_private`, `10.0.0.0/8` would look
    like it opens them while every request there is refused.
    """
    for index, entry in enumerate(entries):
        parsed = parse_host_entry(entry)
        if isinstance(parsed, str):
            continue
        from agentkernel.util.addresses import class_of_network

        address_class = class_of_network(parsed)
        if address_class is None:
            continue
        shown = f"{entry} is {address_class.kind}"
        if address_class.always:
            raise where.error(
                ("http", "allow_hosts", index), f"{shown}, never reachable from scripts; remove it"
            )
        if not allow_private:
            reason = f"{shown}; set http.allow_private: true to let scripts reach it"
            raise where.error(("http", "allow_hosts", index), reason)


__all__ = ["HostList", "check_allowed_networks", "parse_host_entry", "parse_host_list"]
