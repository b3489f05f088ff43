"""Which network addresses scripts may reach over HTTP: the address classes and their disguises.

Scripts are untrusted, and the classic abuse of a server-side HTTP client is
to make it fetch what only the server can reach (SSRF): the cloud metadata
service that hands out credentials, the kernel's own machine, the LAN. So an
address is judged by its *class*, not by any list an operator must remember
to write:

- **always denied**: link-local addresses (169.254.0.0/16, fe80::/10), where
  every major cloud serves its metadata, and the other metadata addresses
  (AWS's fd00:ec2::254, Alibaba's 100.100.100.200, Azure's 168.63.129.16);
  also the metadata host names, before any lookup;
- **private**, denied unless `http.allow_private: true`: loopback, the
  private and shared (CGNAT) ranges, "this network" 0.0.0.0/8, multicast,
  and the other special-purpose ranges that are not on the public Internet.

The same IPv4 address can be written many ways; each is seen through here:
the numeric forms C's `inet_aton` accepts (`2852039166`, `0xa9fea9fe`,
`0251.0376.0251.0376`, `169.254.43518`), a trailing dot, and IPv6 forms that
carry an IPv4 address inside (IPv4-mapped `::ffff:a.b.c.d`, NAT64
`64:ff9b::/96`, 6to4, Teredo, IPv4-compatible, SIIT). The tables are written
out rather than taken from `ipaddress.is_global`, whose answers change between
Python versions; `is_global` is only the last net for anything they miss.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog"})
"""Host names of cloud metadata services, refused by name before any lookup."""


@dataclass(frozen=True)
class AddressClass:
    """A kind of address scripts may not reach: what it is, and whether any switch opens it."""

    kind: str  # "a loopback address", for messages
    always: bool  # True: denied even with http.allow_private: true


_LINK_LOCAL = AddressClass("a link-local address (where cloud metadata services listen)", always=True)
_METADATA = AddressClass("a cloud metadata address", always=True)


def _table(*rows: tuple[str, AddressClass]) -> tuple[tuple[IPNetwork, AddressClass], ...]:
    return tuple((ipaddress.ip_network(cidr), kind) for cidr, kind in rows)


def _private(kind: str) -> AddressClass:
    return AddressClass(kind, always=False)


_CLASSES = _table(
    # always denied: first, so a metadata address inside a private range is named as such
    ("169.254.0.0/16", _LINK_LOCAL),  # AWS, GCP, Azure, OpenStack, Oracle: 169.254.169.254
    ("fe80::/10", _LINK_LOCAL),
    ("fd00:ec2::254/128", _METADATA),  # AWS's IPv6 instance metadata service
    ("100.100.100.200/32", _METADATA),  # Alibaba Cloud
    ("168.63.129.16/32", _METADATA),  # Azure's WireServer
    # private: opened by http.allow_private
    ("0.0.0.0/8", _private("a 'this network' address, which reaches this machine")),
    ("10.0.0.0/8", _private("a private address")),
    ("100.64.0.0/10", _private("a shared (carrier-grade NAT) address")),
    ("127.0.0.0/8", _private("a loopback address")),
    ("172.16.0.0/12", _private("a private address")),
    ("192.0.0.0/24", _private("an IETF protocol address")),
    ("192.0.2.0/24", _private("a documentation address")),
    ("192.168.0.0/16", _private("a private address")),
    ("198.18.0.0/15", _private("a benchmarking address")),
    ("198.51.100.0/24", _private("a documentation address")),
    ("203.0.113.0/24", _private("a documentation address")),
    ("224.0.0.0/4", _private("a multicast address")),
    ("240.0.0.0/4", _private("a reserved or broadcast address")),
    ("::/128", _private("the unspecified address, which reaches this machine")),
    ("::1/128", _private("a loopback address")),
    ("64:ff9b:1::/48", _private("a local-use NAT64 address")),
    ("100::/64", _private("a discard address")),
    ("2001:db8::/32", _private("a documentation address")),
    ("fc00::/7", _private("a unique local (private) address")),
    ("fec0::/10", _private("a site-local address")),
    ("ff00::/8", _private("a multicast address")),
)
_NOT_PUBLIC = _private("not a public Internet address")

# IPv6 ranges whose last 32 bits are an IPv4 address the packet is meant for.
_IPV4_IN_LAST_32_BITS = tuple(
    ipaddress.IPv6Network(cidr)
    for cidr in (
        "::ffff:0:0/96",  # IPv4-mapped
        "::/96",  # IPv4-compatible (deprecated, still parsed)
        "::ffff:0:0:0/96",  # SIIT IPv4-translated
        "64:ff9b::/96",  # NAT64, well-known prefix
        "64:ff9b:1::/48",  # NAT64, local use
    )
)
# `::` and `::1` lie in the IPv4-compatible range but are IPv6's own unspecified and loopback
# addresses (RFC 4291 2.5.2, 2.5.3), never 0.0.0.0 and 0.0.0.1: an IPv4 network must not match them.
_IPV6_OWN = ipaddress.IPv6Network("::/127")

_INET_ATON_PART = re.compile(r"^(0x[0-9a-f]+|0[0-7]*|[1-9][0-9]*)$", re.IGNORECASE)


def _inet_aton_number(part: str) -> int:
    """One dotted part as C reads it: `0x` hexadecimal, a leading `0` octal, else decimal."""
    if part[:2].lower() == "0x":
        return int(part[2:], 16)
    return int(part, 8) if part.startswith("0") else int(part)


def parse_numeric_host(host: str) -> IPAddress | None:
    """The address a numeric host name means, in any form a resolver would accept; else None.

    `169.254.169.254.`, `2852039166`, `0xa9fea9fe`, `0251.0376.0251.0376` and
    `169.254.43518` are all 169.254.169.254 to `getaddrinfo`, so they are to
    the checks too. Brackets and an IPv6 zone (`%eth0`) are allowed.
    """
    text = host.strip().strip("[]")
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or not all(_INET_ATON_PART.match(part) for part in parts):
        return None
    *leading, last = (_inet_aton_number(part) for part in parts)
    if any(value > 0xFF for value in leading) or last >= 1 << (8 * (5 - len(parts))):
        return None
    number = last
    for index, value in enumerate(leading):
        number |= value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def comparable(address: str) -> IPAddress:
    """The address as lists and classes see it: `::ffff:169.254.169.254` is 169.254.169.254."""
    parsed = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped
    return parsed


def embedded_ipv4(address: IPAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address carries (NAT64, 6to4, Teredo, …), which it may reach.

    None for `::` and `::1`: `http.deny_hosts: [0.0.0.0/8]` does not deny IPv6 loopback.
    """
    if not isinstance(address, ipaddress.IPv6Address):
        return ()
    found: list[ipaddress.IPv4Address] = []
    if address not in _IPV6_OWN and any(address in network for network in _IPV4_IN_LAST_32_BITS):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return tuple(found)


def _own_class(address: IPAddress) -> AddressClass | None:
    for network, kind in _CLASSES:
        if network.version == address.version and address in network:
            return kind
    return None


@dataclass(frozen=True)
class Refusal:
    """Why an address is out of a script's reach: its class, and the IPv4 address it hides if any."""

    address_class: AddressClass
    inner: ipaddress.IPv4Address | None = None

    @property
    def always(self) -> bool:
        return self.address_class.always

    def describe(self) -> str:
        """`a loopback address` or `IPv6 for 127.0.0.1, a loopback address`."""
        kind = self.address_class.kind
        return kind if self.inner is None else f"IPv6 for {self.inner}, {kind}"


def classify(address: IPAddress) -> Refusal | None:
    """Why a script may not reach `address`, or None for a public Internet address.

    An always-denied class wins over a private one, for the address itself
    and for any IPv4 address carried inside it.
    """
    refusals: list[Refusal] = []
    own = _own_class(address)
    if own is not None:
        refusals.append(Refusal(own))
    for inner in embedded_ipv4(address):
        inner_class = _own_class(inner) or (None if inner.is_global else _NOT_PUBLIC)
        if inner_class is not None:
            refusals.append(Refusal(inner_class, inner))
    if not refusals and not embedded_ipv4(address) and not address.is_global:
        refusals.append(Refusal(_NOT_PUBLIC))
    return next((r for r in refusals if r.always), refusals[0] if refusals else None)


def class_of_network(network: IPNetwork) -> AddressClass | None:
    """The class a whole network lies in (`10.1.0.0/16` is private), or None when it spans more."""
    for candidate, kind in _CLASSES:
        if candidate.version == network.version and network.subnet_of(candidate):  # type: ignore[arg-type]
            return kind
    return None


def is_metadata_name(host: str) -> bool:
    return host.lower().rstrip(".") in METADATA_NAMES


__all__ = [
    "METADATA_NAMES",
    "AddressClass",
    "IPAddress",
    "IPNetwork",
    "Refusal",
    "class_of_network",
    "classify",
    "comparable",
    "embedded_ipv4",
    "is_metadata_name",
    "parse_numeric_host",
]
