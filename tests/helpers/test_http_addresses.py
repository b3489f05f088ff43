"""Which addresses a script's HTTP request may reach (issue 8 §4), from real JS and Rhai tools.

With no `http:` section, link-local and cloud metadata addresses are refused
always, and loopback and private ones unless `http.allow_private: true` —
in every spelling an address can take, and on the address a host name
resolves to (the service's resolver seam stands in for DNS, so no test
depends on /etc/hosts or the network). Every refusal happens before a
socket is opened, so none of these tests sends a packet anywhere but
127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from agentkernel.config import load_kernel_config
from agentkernel.errors import ConfigError
from agentkernel.services.http import HttpConfig, parse_http_config, system_resolver
from tests.conftest import ToolFactory, write_kernel_yaml
from tests.helpers.http_kernels import Kernels, echoed, probe
from tests.helpers.http_server import LocalHTTPServer

NEVER = "never reachable from scripts"
UNLESS = "denied unless http.allow_private: true"
LINK_LOCAL = "a link-local address (where cloud metadata services listen)"

FAKE_DNS = {
    "metadata.test": ["169.254.169.254"],
    "v6metadata.test": ["fd00:ec2::254"],
    "lan.test": ["192.168.0.10"],
    "half-public.test": ["93.184.216.34", "10.0.0.7"],
    "nat64-metadata.test": ["64:ff9b::a9fe:a9fe"],
}


def fake_dns(host: str, port: int) -> Sequence[str]:
    """The resolver seam: the names above without DNS; anything else as the system resolves it."""
    return FAKE_DNS.get(host) or system_resolver(host, port)


ALWAYS_DENIED = [
    # (URL, the reason after "http_get: GET <url>: ")
    ("http://169.254.169.254/latest/meta-data/", f"address 169.254.169.254 is {LINK_LOCAL}, {NEVER}"),
    ("http://169.254.0.1/", f"address 169.254.0.1 is {LINK_LOCAL}, {NEVER}"),
    ("http://[fe80::1]/", f"address fe80::1 is {LINK_LOCAL}, {NEVER}"),
    ("http://[fd00:ec2::254]/", f"address fd00:ec2::254 is a cloud metadata address, {NEVER}"),
    ("http://100.100.100.200/", f"address 100.100.100.200 is a cloud metadata address, {NEVER}"),
    # the encodings of 169.254.169.254 that a resolver would accept
    ("http://2852039166/", f"host '2852039166' resolves to 169.254.169.254, {LINK_LOCAL}, {NEVER}"),
    ("http://0xa9fea9fe/", f"host '0xa9fea9fe' resolves to 169.254.169.254, {LINK_LOCAL}, {NEVER}"),
    ("http://169.254.43518/", f"host '169.254.43518' resolves to 169.254.169.254, {LINK_LOCAL}, {NEVER}"),
    (
        "http://0251.0376.0251.0376./",
        f"host '0251.0376.0251.0376.' resolves to 169.254.169.254, {LINK_LOCAL}, {NEVER}",
    ),
    (
        "http://0xa9.0xfe.0xa9.0xfe/",
        f"host '0xa9.0xfe.0xa9.0xfe' resolves to 169.254.169.254, {LINK_LOCAL}, {NEVER}",
    ),
    (
        "http://0251.0xfe.169.254/",
        f"host '0251.0xfe.169.254' resolves to 169.254.169.254, {LINK_LOCAL}, {NEVER}",
    ),
    (
        "http://169.254.169.254./",
        f"host '169.254.169.254.' resolves to 169.254.169.254, {LINK_LOCAL}, {NEVER}",
    ),
    (
        "http://[::ffff:169.254.169.254]/",
        f"address ::ffff:169.254.169.254 is {LINK_LOCAL}, {NEVER}",
    ),
    ("http://[::ffff:a9fe:a9fe]/", f"address ::ffff:a9fe:a9fe is {LINK_LOCAL}, {NEVER}"),
    (
        "http://[64:ff9b::a9fe:a9fe]/",
        f"address 64:ff9b::a9fe:a9fe is IPv6 for 169.254.169.254, {LINK_LOCAL}, {NEVER}",
    ),
    (
        "http://[2002:a9fe:a9fe::1]/",
        f"address 2002:a9fe:a9fe::1 is IPv6 for 169.254.169.254, {LINK_LOCAL}, {NEVER}",
    ),
    ("http://x@169.254.169.254/", f"address 169.254.169.254 is {LINK_LOCAL}, {NEVER}"),
    ("http://user:pw@169.254.169.254:80/", f"address 169.254.169.254 is {LINK_LOCAL}, {NEVER}"),
    # metadata host names, refused by name before any lookup
    (
        "http://metadata.google.internal/computeMetadata/v1/",
        f"host 'metadata.google.internal' is a cloud metadata service, {NEVER}",
    ),
    ("http://metadata.goog/", f"host 'metadata.goog' is a cloud metadata service, {NEVER}"),
    (
        "http://METADATA.Google.Internal./",
        f"host 'metadata.google.internal.' is a cloud metadata service, {NEVER}",
    ),
    # names that resolve there
    ("http://metadata.test/", f"host 'metadata.test' resolves to 169.254.169.254, {LINK_LOCAL}, {NEVER}"),
    (
        "http://v6metadata.test/",
        f"host 'v6metadata.test' resolves to fd00:ec2::254, a cloud metadata address, {NEVER}",
    ),
    (
        "http://nat64-metadata.test/",
        f"host 'nat64-metadata.test' resolves to 64:ff9b::a9fe:a9fe, IPv6 for 169.254.169.254, "
        f"{LINK_LOCAL}, {NEVER}",
    ),
]

PRIVATE = [
    ("http://127.0.0.1:1/", f"address 127.0.0.1 is a loopback address, {UNLESS}"),
    ("http://127.1:1/", f"host '127.1' resolves to 127.0.0.1, a loopback address, {UNLESS}"),
    ("http://0x7f.1:1/", f"host '0x7f.1' resolves to 127.0.0.1, a loopback address, {UNLESS}"),
    ("http://017700000001:1/", f"host '017700000001' resolves to 127.0.0.1, a loopback address, {UNLESS}"),
    ("http://[::1]:1/", f"address ::1 is a loopback address, {UNLESS}"),
    ("http://[::ffff:127.0.0.1]:1/", f"address ::ffff:127.0.0.1 is a loopback address, {UNLESS}"),
    ("http://10.1.2.3/", f"address 10.1.2.3 is a private address, {UNLESS}"),
    ("http://172.16.0.1/", f"address 172.16.0.1 is a private address, {UNLESS}"),
    ("http://172.31.255.254/", f"address 172.31.255.254 is a private address, {UNLESS}"),
    ("http://192.168.1.1/", f"address 192.168.1.1 is a private address, {UNLESS}"),
    ("http://100.64.0.1/", f"address 100.64.0.1 is a shared (carrier-grade NAT) address, {UNLESS}"),
    ("http://[fc00::1]/", f"address fc00::1 is a unique local (private) address, {UNLESS}"),
    ("http://[fd12:3456::1]/", f"address fd12:3456::1 is a unique local (private) address, {UNLESS}"),
    (
        "http://0.0.0.0:1/",
        f"address 0.0.0.0 is a 'this network' address, which reaches this machine, {UNLESS}",
    ),
    ("http://[::]:1/", f"address :: is the unspecified address, which reaches this machine, {UNLESS}"),
    ("http://224.0.0.1/", f"address 224.0.0.1 is a multicast address, {UNLESS}"),
    ("http://[ff02::1]/", f"address ff02::1 is a multicast address, {UNLESS}"),
    ("http://255.255.255.255/", f"address 255.255.255.255 is a reserved or broadcast address, {UNLESS}"),
    ("http://240.0.0.1/", f"address 240.0.0.1 is a reserved or broadcast address, {UNLESS}"),
    (
        "http://[64:ff9b::a00:1]/",
        f"address 64:ff9b::a00:1 is IPv6 for 10.0.0.1, a private address, {UNLESS}",
    ),
    ("http://lan.test/", f"host 'lan.test' resolves to 192.168.0.10, a private address, {UNLESS}"),
    (
        "http://half-public.test/",
        f"host 'half-public.test' resolves to 10.0.0.7, a private address, {UNLESS}",
    ),
]


def refusal(kernel_yaml: str, url: str, kernels: Kernels, make_tool: ToolFactory, engine: str) -> str:
    """The error of `http_get(url)` on a kernel built from exactly `kernel_yaml`."""
    kernel = kernels.load(write_kernel_yaml(kernels.project, kernel_yaml), resolver=fake_dns)
    result = probe(kernel, make_tool, engine, "http_get(u, 2)", url)
    assert result["status"] == 0 and result["body"] == "", result
    return str(result["error"])


def assert_refused(error: str, reason: str) -> None:
    """`http_get: GET <the URL, without any password>: <reason>`."""
    assert error.startswith("http_get: GET http://") and error.endswith(f": {reason}"), error
    assert "pw@" not in error and "x@" not in error, error


@pytest.mark.parametrize(("url", "reason"), ALWAYS_DENIED + PRIVATE)
def test_defaults_deny_link_local_metadata_loopback_and_private(
    kernels: Kernels, make_tool: ToolFactory, engine: str, url: str, reason: str
) -> None:
    """No `http:` section at all: every class is refused, whatever the spelling."""
    assert_refused(refusal("", url, kernels, make_tool, engine), reason)


@pytest.mark.parametrize(("url", "reason"), ALWAYS_DENIED)
def test_metadata_and_link_local_stay_denied_with_allow_private(
    kernels: Kernels, make_tool: ToolFactory, engine: str, url: str, reason: str
) -> None:
    assert_refused(refusal("http:\n  allow_private: true\n", url, kernels, make_tool, engine), reason)


def test_an_octal_address_httpx_cannot_parse_is_refused_as_a_url(
    kernels: Kernels, make_tool: ToolFactory, engine: str
) -> None:
    """`0251.0376.0251.0376` (169.254.169.254 in octal) never gets as far as a connection."""
    url = "http://0251.0376.0251.0376/"
    error = refusal("http:\n  allow_private: true\n", url, kernels, make_tool, engine)
    assert error.startswith(f"http_get: url {url!r} is not a valid URL"), error


def test_localhost_is_loopback_by_default(kernels: Kernels, make_tool: ToolFactory, engine: str) -> None:
    """A real name, resolved by the system: localhost is 127.0.0.1 or ::1, both loopback."""
    error = refusal("", "http://localhost:1/", kernels, make_tool, engine)
    assert error in (
        f"http_get: GET http://localhost:1/: host 'localhost' resolves to {address}, "
        f"a loopback address, {UNLESS}"
        for address in ("127.0.0.1", "::1")
    ), error


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "0x7f000001", "localhost", "[::ffff:127.0.0.1]"])
def test_allow_private_reaches_loopback_in_any_spelling(
    kernels: Kernels, make_tool: ToolFactory, engine: str, server: LocalHTTPServer, host: str
) -> None:
    kernel = kernels.load(write_kernel_yaml(kernels.project, "http:\n  allow_private: true\n"))
    seen = echoed(probe(kernel, make_tool, engine, 'http_get(u + "/echo")', f"http://{host}:{server.port}"))
    assert seen["path"] == "/echo"


def test_a_redirect_to_metadata_is_refused_at_that_hop(
    kernels: Kernels, make_tool: ToolFactory, engine: str, server: LocalHTTPServer
) -> None:
    """The first hop (loopback, allowed) is fine; the hop to the metadata address is checked again."""
    kernel = kernels.load(
        write_kernel_yaml(kernels.project, "http:\n  allow_private: true\n"), resolver=fake_dns
    )
    for target, reason in [
        ("http://169.254.169.254/", f"address 169.254.169.254 is {LINK_LOCAL}, {NEVER}"),
        ("http://2852039166/", f"host '2852039166' resolves to 169.254.169.254, {LINK_LOCAL}, {NEVER}"),
        ("http://metadata.test/", f"host 'metadata.test' resolves to 169.254.169.254, {LINK_LOCAL}, {NEVER}"),
        (
            "http://metadata.google.internal/",
            f"host 'metadata.google.internal' is a cloud metadata service, {NEVER}",
        ),
    ]:
        result = probe(kernel, make_tool, engine, f'http_get(u + "/redirect?to={target}")', server.base)
        assert result["status"] == 0, result
        assert str(result["error"]).endswith(f": redirect to {target}: {reason}"), result


def test_the_deny_list_sees_the_ipv4_inside_an_ipv6_address(
    kernels: Kernels, make_tool: ToolFactory, engine: str
) -> None:
    kernel_yaml = "http:\n  allow_private: true\n  deny_hosts: [10.0.0.0/8]\n"
    error = refusal(kernel_yaml, "http://[64:ff9b::a00:1]/", kernels, make_tool, engine)
    url = "http://[64:ff9b::a00:1]/"
    assert error == f"http_get: GET {url}: address 64:ff9b::a00:1 is denied by http.deny_hosts"


def test_an_ipv4_deny_range_leaves_ipv6_loopback_to_the_allow_list(
    kernels: Kernels, make_tool: ToolFactory, engine: str
) -> None:
    """`::1` is not 0.0.0.1: `deny_hosts: [0.0.0.0/8]` beside `allow_hosts: ["::1"]` reaches a server on ::1,
    while the mapped `::ffff:0.0.0.1` (really 0.0.0.1) stays denied and 127.0.0.1 is not in the allow list."""
    kernel_yaml = 'http:\n  allow_private: true\n  deny_hosts: [0.0.0.0/8]\n  allow_hosts: ["::1"]\n'
    kernel = kernels.load(write_kernel_yaml(kernels.project, kernel_yaml))
    with LocalHTTPServer("::1") as on_ipv6:
        seen = echoed(probe(kernel, make_tool, engine, 'http_get(u + "/echo")', on_ipv6.base))
        assert seen["path"] == "/echo" and on_ipv6.requests == {"/echo": 1}
    for url, reason in [
        ("http://[::ffff:0.0.0.1]:1/", "address ::ffff:0.0.0.1 is denied by http.deny_hosts"),
        ("http://127.0.0.1:1/", "address 127.0.0.1 is not in http.allow_hosts"),
    ]:
        result = probe(kernel, make_tool, engine, "http_get(u, 2)", url)
        assert result["status"] == 0 and result["error"] == f"http_get: GET {url}: {reason}", result


# -- the `http:` section -------------------------------------------------------------------------------


def test_allow_private_is_off_by_default_and_a_boolean() -> None:
    assert HttpConfig().allow_private is False
    assert parse_http_config(None).allow_private is False
    assert parse_http_config({"allow_private": True}).allow_private is True
    with pytest.raises(ConfigError, match=r"http\.allow_private: expected true or false, got 'yes'"):
        parse_http_config({"allow_private": "yes"})


@pytest.mark.parametrize(
    ("section", "error"),
    [
        (
            "allow_hosts: [169.254.169.254]",
            f"http.allow_hosts[0]: 169.254.169.254 is {LINK_LOCAL}, {NEVER}; remove it",
        ),
        (
            "allow_private: true\n  allow_hosts: [example.com, 'fe80::/64']",
            f"http.allow_hosts[1]: fe80::/64 is {LINK_LOCAL}, {NEVER}; remove it",
        ),
        (
            "allow_hosts: [10.0.0.0/16]",
            "http.allow_hosts[0]: 10.0.0.0/16 is a private address; "
            "set http.allow_private: true to let scripts reach it",
        ),
        (
            "allow_hosts: [127.0.0.1]",
            "http.allow_hosts[0]: 127.0.0.1 is a loopback address; "
            "set http.allow_private: true to let scripts reach it",
        ),
    ],
)
def test_an_allow_list_cannot_seem_to_open_a_closed_class(project: Path, section: str, error: str) -> None:
    """Listing an address the classes keep closed would look like it opens it: an error at load."""
    path = write_kernel_yaml(project, f"http:\n  {section}\n")
    with pytest.raises(ConfigError) as caught:
        load_kernel_config(path)
    assert str(caught.value) == f"{path}:{caught.value.line}: {error}" and caught.value.line is not None


def test_an_allow_list_with_allow_private_opens_a_private_range() -> None:
    config = parse_http_config({"allow_private": True, "allow_hosts": ["10.0.0.0/16", "0.0.0.0/0"]})
    assert config.allow_hosts is not None and len(config.allow_hosts.networks) == 2
