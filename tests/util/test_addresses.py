"""The address classes behind the HTTP helpers' refusals (util/addresses.py), one case per row."""

from __future__ import annotations

import ipaddress

import pytest

from agentkernel.util.addresses import (
    class_of_network,
    classify,
    embedded_ipv4,
    is_metadata_name,
    parse_numeric_host,
)


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("169.254.169.254", "169.254.169.254"),
        ("169.254.169.254.", "169.254.169.254"),
        ("2852039166", "169.254.169.254"),
        ("0xa9fea9fe", "169.254.169.254"),
        ("0XA9FEA9FE", "169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        ("169.254.43518", "169.254.169.254"),
        ("169.16689662", "169.254.169.254"),
        ("127.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("[::1]", "::1"),
        ("::ffff:169.254.169.254", "::ffff:a9fe:a9fe"),
        ("fe80::1%eth0", "fe80::1%eth0"),
    ],
)
def test_numeric_hosts_in_every_spelling_a_resolver_accepts(host: str, address: str) -> None:
    assert parse_numeric_host(host) == ipaddress.ip_address(address)


@pytest.mark.parametrize(
    "host",
    [
        "example.com",
        "1.2.3.4.5",
        "256.1.1.1",
        "1.256.1.1",
        "1.2.65536",
        "4294967296",
        "08.1.1.1",
        "0x",
        "1.2.3.4 x",
        "169.254.169.254..",
        "",
        "0x1g",
    ],
)
def test_names_and_out_of_range_numbers_are_not_numeric(host: str) -> None:
    assert parse_numeric_host(host) is None


@pytest.mark.parametrize(
    ("address", "always", "described"),
    [
        ("169.254.169.254", True, "a link-local address (where cloud metadata services listen)"),
        ("fe80::abcd", True, "a link-local address (where cloud metadata services listen)"),
        ("fd00:ec2::254", True, "a cloud metadata address"),
        ("168.63.129.16", True, "a cloud metadata address"),
        (
            "::ffff:169.254.169.254",
            True,
            "IPv6 for 169.254.169.254, a link-local address (where cloud metadata services listen)",
        ),
        (
            "::a9fe:a9fe",
            True,
            "IPv6 for 169.254.169.254, a link-local address (where cloud metadata services listen)",
        ),
        (
            "2001:0:4136:e378:8000:63bf:5601:5601",
            True,
            "IPv6 for 169.254.169.254, a link-local address (where cloud metadata services listen)",
        ),  # Teredo: the client's address is stored inverted
        ("127.0.0.53", False, "a loopback address"),
        ("::1", False, "a loopback address"),
        ("10.255.255.255", False, "a private address"),
        ("100.127.255.255", False, "a shared (carrier-grade NAT) address"),
        ("198.18.0.1", False, "a benchmarking address"),
        ("2001:db8::1", False, "a documentation address"),
        ("64:ff9b:1::1", False, "a local-use NAT64 address"),
        ("::ffff:192.168.0.1", False, "IPv6 for 192.168.0.1, a private address"),
    ],
)
def test_classes(address: str, always: bool, described: str) -> None:
    refusal = classify(ipaddress.ip_address(address))
    assert refusal is not None
    assert (refusal.always, refusal.describe()) == (always, described)


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "64:ff9b::808:808", "2002:808:808::1"]
)
def test_public_addresses_pass(address: str) -> None:
    assert classify(ipaddress.ip_address(address)) is None


def test_a_network_is_in_a_class_only_when_wholly_inside_it() -> None:
    assert class_of_network(ipaddress.ip_network("10.1.0.0/16")) is not None
    assert class_of_network(ipaddress.ip_network("0.0.0.0/0")) is None
    assert class_of_network(ipaddress.ip_network("203.0.112.0/23")) is None


@pytest.mark.parametrize(
    ("host", "metadata"),
    [("metadata.google.internal", True), ("Metadata.Goog.", True), ("metadata.example.com", False)],
)
def test_metadata_names(host: str, metadata: bool) -> None:
    assert is_metadata_name(host) is metadata


@pytest.mark.parametrize(
    ("address", "carried"),
    [
        ("::1", []),  # IPv6 loopback, not 0.0.0.1
        ("::", []),  # the unspecified address, not 0.0.0.0
        ("::2", ["0.0.0.2"]),  # past them, the IPv4-compatible reading holds
        ("::a9fe:a9fe", ["169.254.169.254"]),
        ("64:ff9b::a00:1", ["10.0.0.1"]),
    ],
)
def test_ipv6_loopback_and_unspecified_carry_no_ipv4_address(address: str, carried: list[str]) -> None:
    assert [str(inner) for inner in embedded_ipv4(ipaddress.IPv6Address(address))] == carried


def test_the_unspecified_ipv6_address_is_named_as_such() -> None:
    refusal = classify(ipaddress.ip_address("::"))
    assert refusal is not None and refusal.describe() == "the unspecified address, which reaches this machine"
